"""``llmbench validate``: eval and profile files checked as a run would load them, without a run.

Profile files are loaded together, as a run loads them, and each gets its own verdict; eval files
are loaded as collection loads them and the judges and models they name resolved against those
profiles. Every problem is one ``path:line: message`` line, as collection shows it. Nothing here
calls a model or imports litellm: spec and profiles are imported when a command runs.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..models import ProfileRegistry
    from .resolved import LoadedEval


# Raised by every llmbench command; defined here, not in cli, so that the two modules do not
# import each other (cli imports validate).
class UsageFailure(Exception):
    """Bad arguments that argparse cannot see (a model not in both runs, a folder twice)."""


#: Folders a search below PATH never enters (pytest's default ``norecursedirs``), besides
#: virtual environments.
_SKIPPED_DIRS = ("*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}")
#: In a folder search, the files of folders of this name are checked as profiles.
_PROFILES_DIR = "profiles"


@dataclass(frozen=True)
class FileCheck:
    """The verdict on one checked file."""

    #: the file (None for a problem of the profiles as a whole)
    path: Path | None
    #: what a valid file holds: ``12 cases``, ``3 profiles, 1 set``
    summary: str = ""
    #: ``path:line: message`` as collection shows it, or None when the file is valid
    problem: str | None = None

    def text(self) -> str:
        """The file's output line: the problem, or ``ok   path (summary)``."""
        if self.problem is not None:
            return self.problem
        summary = f" ({self.summary})" if self.summary else ""
        return f"ok   {_shown(self.path)}{summary}" if self.path else f"ok{summary}"


def validate_command(args: argparse.Namespace) -> int:
    """Run ``llmbench validate``: check the files that ``args`` name and print the verdicts."""
    from .resolved import EVAL_SUFFIX

    evals, profiles = _validation_targets(args.paths)
    if not evals and not profiles:
        shown = ", ".join(str(path) for path in args.paths)
        raise UsageFailure(f"no eval file (*{EVAL_SUFFIX}) or profile file found in {shown}")
    roots = (Path.cwd(), *_allowed_paths(args.allow_path))
    checks, registry = check_profiles(_unique([*_profile_context(args.profiles), *profiles]))
    checks += [check_eval_file(path, registry, roots) for path in evals]
    for check in checks:
        if check.problem is not None or not args.quiet:
            print(check.text())
    invalid = sum(check.problem is not None for check in checks)
    if not args.quiet:
        files = _plural(len(checks), "file")
        print(f"llmbench: {invalid} of {files} invalid" if invalid else f"llmbench: {files} valid")
    return 1 if invalid else 0


def _validation_targets(paths: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """The eval files and the profile files that ``paths`` name, each once, in order."""
    from ..models import PROFILE_SUFFIXES
    from .resolved import EVAL_SUFFIX

    evals: list[Path] = []
    profiles: list[Path] = []
    for path in paths:
        if path.is_dir():
            for found in _files_below(path):
                (evals if found.name.endswith(EVAL_SUFFIX) else profiles).append(found)
        elif not path.exists():
            raise UsageFailure(f"{path}: no such file or folder")
        elif path.name.endswith(EVAL_SUFFIX):
            evals.append(path)
        elif path.suffix in PROFILE_SUFFIXES:
            profiles.append(path)
        else:
            suffixes = ", ".join(PROFILE_SUFFIXES)
            raise UsageFailure(
                f"{path}: not an eval file (*{EVAL_SUFFIX}) or a profile file ({suffixes})"
            )
    return _unique(evals), _unique(profiles)


def _files_below(folder: Path) -> Iterator[Path]:
    """Eval files below ``folder`` and the files of its ``profiles`` folders, sorted."""
    from ..models import PROFILE_SUFFIXES
    from .resolved import EVAL_SUFFIX

    for root, dirs, files in os.walk(folder):
        here = Path(root)
        dirs[:] = sorted(name for name in dirs if not _skipped_dir(here / name))
        in_profiles = here.resolve().name == _PROFILES_DIR
        for name in sorted(files):
            if name.endswith(EVAL_SUFFIX) or (
                in_profiles and Path(name).suffix in PROFILE_SUFFIXES
            ):
                yield here / name


def _skipped_dir(folder: Path) -> bool:
    if any(fnmatch.fnmatch(folder.name, pattern) for pattern in _SKIPPED_DIRS):
        return True
    return (folder / "pyvenv.cfg").is_file()


def _allowed_paths(given: Sequence[Path] | None) -> list[Path]:
    """``--allow-path`` folders, resolved; one that is not a folder is a usage error."""
    missing = [str(path) for path in given or () if not path.is_dir()]
    if missing:
        raise UsageFailure(f"--allow-path: not a folder: {', '.join(missing)}")
    return [path.resolve() for path in given or ()]


def _profile_context(given: Sequence[Path] | None) -> list[Path]:
    """The profile files of ``--profiles`` (default ``profiles/``), folders expanded as a run
    expands them: their .yaml, .yml and .jsonl files by name."""
    from ..models import PROFILE_SUFFIXES

    if given:
        missing = [str(path) for path in given if not path.exists()]
        if missing:
            raise UsageFailure(f"--profiles: no such file or folder: {', '.join(missing)}")
        paths = list(given)
    else:
        paths = [Path(_PROFILES_DIR)] if Path(_PROFILES_DIR).is_dir() else []
    files: list[Path] = []
    for path in paths:
        if not path.is_dir():
            files.append(path)
            continue
        found = (file for file in path.iterdir() if file.suffix in PROFILE_SUFFIXES)
        files.extend(sorted((file for file in found if file.is_file()), key=lambda f: f.name))
    return files


def check_profiles(files: Sequence[Path]) -> tuple[list[FileCheck], ProfileRegistry]:
    """Check profile files loaded together, as a run loads them (a set may use another file's).

    A file with a problem is left out and the others loaded again, so that each file gets its
    own verdict. Returns the verdicts in ``files`` order and the registry of the valid files.
    """
    from ..models import ProfileError, load_profiles

    problems: dict[Path, str] = {}
    valid = list(files)
    while True:
        try:
            registry = load_profiles(valid)
            break
        except ProfileError as exc:
            if exc.path not in valid:  # no file of ours is at fault
                return [FileCheck(None, problem=f"llmbench: profiles: {exc}")], load_profiles([])
            problems[exc.path] = _located(exc.path, exc.line, exc.message)
            valid.remove(exc.path)
    builtin = load_profiles([])
    checks = [
        FileCheck(file, problem=problems[file])
        if file in problems
        else FileCheck(file, _profile_summary(file, builtin))
        for file in files
    ]
    return checks, registry


def _profile_summary(file: Path, builtin: ProfileRegistry) -> str:
    """``3 profiles, 1 set``: what ``file`` defines ('' when it needs another file's sets)."""
    from ..models import ProfileError, load_profiles

    try:
        alone = load_profiles([file])
    except ProfileError:
        return ""
    profiles = [name for name, profile in alone.models.items() if builtin.get(name) != profile]
    sets = [name for name, members in alone.sets.items() if builtin.sets.get(name) != members]
    return f"{_plural(len(profiles), 'profile')}, {_plural(len(sets), 'set')}"


def check_eval_file(path: Path, registry: ProfileRegistry, roots: Sequence[Path] = ()) -> FileCheck:
    """Load ``path`` as collection does and resolve the models it names; never raises.

    ``roots``: the folders besides the file's own that the paths it names may lead into (the
    project and the ``--allow-path`` folders)."""
    from .load import load_spec
    from .resolved import EvalFileError

    try:
        loaded = load_spec(path.absolute(), roots)  # messages name files as collection's do
        _check_model_names(loaded, registry)
    except EvalFileError as exc:
        lines = [_located(each.path, each.line, each.message) for each in exc.problems()]
        return FileCheck(path, problem="\n".join(lines))
    except OSError as exc:
        return FileCheck(path, problem=f"{_shown(path)}: cannot read: {exc.strerror or exc}")
    except Exception as exc:  # user code that the file names (a dataset factory) failed
        return FileCheck(path, problem=f"{_shown(path)}: {type(exc).__name__}: {exc}")
    return FileCheck(path, _eval_summary(loaded))


def _eval_summary(loaded: LoadedEval) -> str:
    """``12 cases``, or ``12 cases x 2 prompts`` when the file lists prompt variants."""
    cases = _plural(len({case.id for case in loaded.cases}), "case")
    prompts = {case.prompt_variant for case in loaded.cases} - {None}
    return f"{cases} x {_plural(len(prompts), 'prompt')}" if prompts else cases


def _check_model_names(loaded: LoadedEval, registry: ProfileRegistry) -> None:
    """Resolve the judges, embedding models and ``tool_shim_model`` that ``loaded`` names, as
    collection does: an unknown ``@set`` is an :class:`EvalFileError`."""
    from .helper_models import assertion_panel, shim_model

    shim_model(loaded, registry)
    for case in loaded.cases:
        for assertion in case.assertions:
            assertion_panel(loaded, case, assertion, registry, default=())


def _located(path: Path, line: int | None, message: str) -> str:
    """``path:line: message`` with ``path`` as :func:`_shown` writes it."""
    where = _shown(path) if line is None else f"{_shown(path)}:{line}"
    return f"{where}: {message}"


def _shown(path: Path) -> str:
    """``path`` relative to the working folder when inside it (as collection errors name files)."""
    try:
        return path.absolute().relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)


def _unique(paths: Sequence[Path]) -> list[Path]:
    """``paths`` without repeats of one file, first mention kept."""
    seen: dict[Path, Path] = {}
    for path in paths:
        seen.setdefault(path.resolve(), path)
    return list(seen.values())


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")
