"""The supply chain: pyproject.toml gives lower bounds and exclusions, the lock pins them.

Users install us beside their own pins, so no dependency has an upper cap; the known-bad litellm
releases stay excluded; every requirement (extras included) is pinned in requirements.lock, with
a hash, at a version the requirement admits.
"""

from __future__ import annotations

import re

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
