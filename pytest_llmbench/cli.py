"""The ``llmbench`` console command: leaderboards, comparisons and reports from saved runs.

Every sub-command reads results folders (``results.jsonl``, ``run.json``) that a pytest run
wrote; none calls a model. Exit codes: 0 fine, 1 a significant regression (``compare``), 2 bad
usage or input, with a one-line ``llmbench: ...`` message on stderr and no traceback.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
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
from .tables import board_html, board_markdown

if TYPE_CHECKING:
    import pandas as pd

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
        prog="llmbench", description="Leaderboards, comparisons and reports from saved runs"
    )
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")
    board = commands.add_parser("leaderboard", help="Merge runs into one leaderboard")
    board.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="Results folders")
    board.add_argument("--format", choices=FORMATS, default="markdown", help="Output format")
    board.add_argument("--output", type=Path, metavar="FILE", help="Write here, not to stdout")
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
    return parser


# -- leaderboard ---------------------------------------------------------------------------------


def _leaderboard_command(args: argparse.Namespace) -> int:
    from .leaderboard import leaderboard, records_frame

    runs = [(folder, load_results(folder)) for folder in args.dirs]
    board = leaderboard(records_frame(merge_runs(runs)))
    text = {"csv": board_csv, "markdown": board_markdown, "html": board_html}[args.format](board)
    _emit(text, args.output)
    return 0


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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
