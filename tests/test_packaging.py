"""The supply chain and the package: pyproject.toml gives lower bounds and exclusions, the lock
pins them, and the package builds and installs from its wheel.

Users install us beside their own pins, so no dependency has an upper cap; the known-bad litellm
releases stay excluded; every requirement (extras included) is pinned in requirements.lock, with
a hash, at a version the requirement admits. The metadata is what an index needs, and the wheel
that ``python -m build`` makes (without a warning) runs a new project in a fresh venv.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import tomllib
from conftest import REPO_ROOT
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
LOCK = (REPO_ROOT / "requirements.lock").read_text(encoding="utf-8")
#: Withdrawn or compromised releases that no range may admit.
KNOWN_BAD = {"litellm": ("1.82.7", "1.82.8", "1.107.0", "1.107.3")}


def _requirements() -> list[Requirement]:
    project = PYPROJECT["project"]
    found = [Requirement(text) for text in project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        found += [Requirement(text) for text in extra if not text.startswith("pytest-llmbench")]
    return found


def _pins() -> dict[str, tuple[Version, bool]]:
    """Each locked package: its version, and whether a hash follows its pin."""
    pins = {}
    for match in re.finditer(r"^([A-Za-z0-9_.\-]+)==([^\s\\]+)(.*?)(?=^\S|\Z)", LOCK, re.M | re.S):
        pins[canonicalize_name(match[1])] = (Version(match[2]), "--hash=sha256:" in match[3])
    return pins


@pytest.mark.parametrize("requirement", _requirements(), ids=str)
def test_no_requirement_has_an_upper_cap(requirement: Requirement) -> None:
    caps = [spec for spec in requirement.specifier if spec.operator in ("<", "<=", "~=", "==")]
    assert not caps, f"{requirement}: an upper cap stops users installing us beside their pins"


@pytest.mark.parametrize("requirement", _requirements(), ids=str)
def test_the_lock_pins_every_requirement_with_a_hash(requirement: Requirement) -> None:
    version, hashed = _pins()[canonicalize_name(requirement.name)]
    assert hashed, f"{requirement.name} is pinned without a hash"
    assert requirement.specifier.contains(version, prereleases=True), (requirement, version)


def test_known_bad_releases_are_excluded() -> None:
    by_name = {canonicalize_name(r.name): r for r in _requirements()}
    for name, versions in KNOWN_BAD.items():
        specifier = by_name[name].specifier
        assert not [v for v in versions if specifier.contains(v, prereleases=True)], name
        assert specifier.contains("1.108.0") and specifier.contains("1.106.2")


def test_the_metadata_is_publishable() -> None:
    """An SPDX license (PEP 639: a table is deprecated, and setuptools refuses License ::
    classifiers beside an expression), the classifiers an index shows, and project URLs."""
    project = PYPROJECT["project"]
    assert project["license"] == "Apache-2.0"
    assert (REPO_ROOT / "LICENSE").is_file()
    classifiers = project["classifiers"]
    assert {"Framework :: Pytest", "Typing :: Typed"} <= set(classifiers)
    assert not [c for c in classifiers if c.startswith("License ::")]
    floor = Version(project["requires-python"].removeprefix(">="))
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    versions = {
        c.rsplit(" :: ", 1)[1] for c in classifiers if c.count("::") == 2 and "Python :: 3." in c
    }
    assert {f"{floor.major}.{floor.minor}", here} <= versions
    assert {"Homepage", "Documentation", "Source", "Issues"} <= set(project["urls"])
    requires = [Requirement(text) for text in PYPROJECT["build-system"]["requires"]]
    setuptools = next(r for r in requires if r.name == "setuptools")
    assert not setuptools.specifier.contains("76.1") and setuptools.specifier.contains("77.0")


def _build_env() -> dict[str, str]:
    """The environment a user builds in: bytecode allowed (the sandbox's
    PYTHONDONTWRITEBYTECODE makes setuptools warn that it skips byte-compiling)."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")
    }
    return {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )


def _built(tmp_path: Path) -> tuple[Path, str]:
    """The wheel ``python -m build`` makes (sdist first, the wheel from the sdist) of a copy of
    the package's sources, and what the build printed."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO_ROOT / name, source)
    shutil.copytree(
        REPO_ROOT / "pytest_llmbench", source / "pytest_llmbench",
        ignore=shutil.ignore_patterns("__pycache__"),
    )  # fmt: skip
    dist = tmp_path / "dist"
    # No build isolation: the locked setuptools builds it, with no index to reach.
    argv = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(source)]
    done = _run(argv, tmp_path, _build_env())
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert len(list(dist.glob("*.tar.gz"))) == 1
    (wheel,) = dist.glob("*.whl")
    return wheel, output


def _fresh_venv(tmp_path: Path) -> Path:
    """A new venv whose dependencies are this environment's (the installed lock), seen through
    a folder of links that leaves out the checkout's own pytest-llmbench."""
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, _build_env())
    locked = tmp_path / "locked"
    locked.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        if (
            not entry.name.startswith(("pytest_llmbench", "__editable__"))
            and entry.suffix != ".pth"
        ):
            (locked / entry.name).symlink_to(entry)
    (venv_site,) = venv.glob("lib/python*/site-packages")
    (venv_site / "locked.pth").write_text(f"{locked}\n", encoding="utf-8")
    return venv


@pytest.mark.slow
def test_the_built_wheel_installs_and_runs_a_new_project(tmp_path: Path) -> None:
    """From the wheel, not the checkout: build it, install it in a fresh venv (no index: pip
    checks its requirements against the installed lock), then `llmbench init && pytest`."""
    wheel, output = _built(tmp_path)
    warnings = [line for line in output.splitlines() if re.search(r"warn|deprecat", line, re.I)]
    assert warnings == [], output
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read("pytest_llmbench-0.1.0.dist-info/METADATA").decode()
        entry_points = archive.read("pytest_llmbench-0.1.0.dist-info/entry_points.txt").decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    assert "Classifier: Framework :: Pytest" in metadata.splitlines()
    assert "llmbench = pytest_llmbench.plugin" in entry_points
    for data in ("py.typed", "models/builtin.yaml", "scaffold/evals/example.eval.yaml"):
        assert f"pytest_llmbench/{data}" in names
    venv = _fresh_venv(tmp_path)
    env = {k: v for k, v in _build_env().items() if not k.endswith("_API_KEY")}
    install = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install"]
    done = _run([*install, "--no-index", f"{wheel}[local]"], tmp_path, env)
    assert done.returncode == 0, done.stdout + done.stderr
    project = tmp_path / "project"
    project.mkdir()
    done = _run([str(venv / "bin" / "llmbench"), "init"], project, env)
    assert done.returncode == 0, done.stdout + done.stderr
    where = _run(
        [str(venv / "bin" / "python"), "-c", "import pytest_llmbench as p; print(p.__file__)"],
        project,
        env,
    )
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout + where.stderr
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    argv = [
        str(venv / "bin" / "python"),
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "--results-dir=out",
    ]
    done = _run(argv, project, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout
    records = [json.loads(line) for line in (project / "out" / "results.jsonl").open()]
    assert sorted(record["outcome"] for record in records) == ["passed"] * 4
