"""``llmbench trend [RUNS_DIR ...]``: pass rate and score over many runs, flips and drift.

The runs folder(s) are indexed into ``trend.jsonl`` (:mod:`...results.trend_index`: only runs
it lacks are appended), then the trend is computed from the index alone, so that CI keeps the
index instead of every run. ``--index PATH`` without a runs folder reads the index only.
Printed: per model and eval file a table of runs (date, commit, items counted, pass rate and
score with their 95% intervals, items left out because their case changed, what changed since
the previous run) and the drift test's line; then the cases failing or flaky now and since
when; then the folders passed over and why. ``--json`` prints the whole trend as JSON.
Exit status from :func:`...results.gates.trend_status`: 1 with ``--fail-on-drift`` when a
series' pass rate drifted down, else 0; 2 for bad usage or a broken index line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..results import DEFAULT_PARAMS
from ..results_folder import TREND_FILE
from ..spec import UsageFailure
from .merge_command import add_review_options

if TYPE_CHECKING:
    from ..results import CaseHistory, RunPoint, Series, SkippedFolder, TrendReport

_COLUMNS = ("run", "date", "commit", "n", "pass rate [95% CI]", "score [95% CI]", "left out",
            "marks")  # fmt: skip


def add_trend_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    trend = commands.add_parser(
        "trend", help="Pass rate and score over many runs, per-case flips and drift"
    )
    trend.add_argument("runs_dirs", nargs="*", type=Path, metavar="RUNS_DIR",
                       help="Folders holding runs (searched 3 levels deep)")  # fmt: skip
    trend.add_argument("--index", type=Path, metavar="PATH",
                       help=f"The index to update and read (default: the first RUNS_DIR's {TREND_FILE}); "
                       "alone, without RUNS_DIR, it is only read")  # fmt: skip
    trend.add_argument("--fail-on-drift", action="store_true",
                       help="Exit 1 when a series' pass rate drifted down")  # fmt: skip
    trend.add_argument("--drift-delta", type=float, default=DEFAULT_PARAMS.delta, metavar="D",
                       help="The drift test's tolerance, in pass-rate units (default: "
                       f"{DEFAULT_PARAMS.delta})")  # fmt: skip
    trend.add_argument("--drift-threshold", type=float, default=DEFAULT_PARAMS.threshold,
                       metavar="LAMBDA", help="The drift test's threshold (default: "
                       f"{DEFAULT_PARAMS.threshold})")  # fmt: skip
    trend.add_argument("--drift-min-runs", type=int, default=DEFAULT_PARAMS.min_runs, metavar="N",
                       help="No drift before this many runs (default: "
                       f"{DEFAULT_PARAMS.min_runs})")  # fmt: skip
    trend.add_argument("--model", metavar="M", help="Only this model's series and cases")
    trend.add_argument("--eval-file", metavar="F", help="Only this eval file's series and cases")
    trend.add_argument("--json", action="store_true", help="Print the trend as JSON")
    add_review_options(trend)
    trend.set_defaults(command=_trend_command)


def _trend_command(args: argparse.Namespace) -> int:
    from ..results import DriftParams, build_trend, read_index, trend_status, update_index

    try:
        params = DriftParams(args.drift_delta, args.drift_threshold, args.drift_min_runs)
    except ValueError as exc:
        raise UsageFailure(f"trend: {exc}") from None

    roots: list[Path] = args.runs_dirs
    if not roots and args.index is None:
        raise UsageFailure("trend: give a runs folder (RUNS_DIR), or --index PATH to read")
    for root in roots:
        if not root.is_dir():
            raise UsageFailure(f"{root}: no such runs folder")
    index = args.index if args.index is not None else roots[0] / TREND_FILE
    if roots:
        update = update_index(roots, index, args.reviews_dir, args.ignore_reviews)
        entries, skipped = list(update.entries), list(update.skipped)
    else:
        if not index.is_file():
            raise UsageFailure(f"--index {index}: no such index")
        skipped = []  # an append cut short at the index's end is said, as on update
        entries = read_index(index, skipped)
    _check_filters(entries, args.model, args.eval_file)
    report = build_trend(
        entries, model=args.model, eval_file=args.eval_file, skipped=skipped, params=params
    )
    if args.json:
        sys.stdout.write(json.dumps(asdict(report), indent=2) + "\n")
    else:
        sys.stdout.write(format_trend(report, index))
    status, why = trend_status(report, args.fail_on_drift)
    for line in why:
        print(f"llmbench: --fail-on-drift: {line}", file=sys.stderr)
    return status


def _check_filters(
    entries: Sequence[dict[str, Any]], model: str | None, eval_file: str | None
) -> None:
    """``--model`` and ``--eval-file`` name something the index holds."""
    for flag, value, field in (
        ("--model", model, "model"),
        ("--eval-file", eval_file, "eval_file"),
    ):
        if value is None:
            continue
        known = {str(item.get(field)) for entry in entries for item in entry["items"]}
        if value not in known:
            names = ", ".join(sorted(known)) or "none"
            raise UsageFailure(f"{flag} {value}: not in the indexed runs (known: {names})")


def format_trend(report: TrendReport, index: Path) -> str:
    """The trend as the terminal shows it."""
    lines = [f"trend of {len(report.runs)} run{'s' if len(report.runs) != 1 else ''} ({index})"]
    if not report.series:
        lines.append("no runs indexed yet")
    for series in report.series:
        lines += ["", *_series_lines(series)]
    troubled = [case for case in report.cases if case.state in ("failing", "flaky", "error")]
    if troubled:
        lines += ["", "cases failing or flaky now:"]
        lines += [_case_line(case) for case in troubled]
    if report.skipped:
        lines += ["", "folders passed over:"]
        lines += [_skipped_line(folder) for folder in report.skipped]
    return "\n".join(lines) + "\n"


def _series_lines(series: Series) -> list[str]:
    rows = [list(_COLUMNS)] + [_point_row(point) for point in series.points]
    widths = [max(len(row[column]) for row in rows) for column in range(len(_COLUMNS))]
    lines = [f"{series.model} on {series.eval_file}"]
    lines += ["  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
              .rstrip() for row in rows]  # fmt: skip
    left_out = sum(point.left_out for point in series.points)
    if left_out:
        lines.append(f"  {left_out} item{'s' if left_out != 1 else ''} left out: their case "
                     "changed since (a case is compared only where its hash is the latest run's)")  # fmt: skip
    lines.append("  " + _drift_line(series))
    return lines


def _point_row(point: RunPoint) -> list[str]:
    rate = "-" if point.pass_rate is None else f"{point.pass_rate:.1%}"
    if point.pass_low is not None and point.pass_high is not None:
        rate += f" [{point.pass_low:.1%}, {point.pass_high:.1%}]"
    score = "-" if point.score is None else f"{point.score:.3f}"
    if point.score_low is not None and point.score_high is not None:
        score += f" [{point.score_low:.3f}, {point.score_high:.3f}]"
    n = str(point.n) + (f" (+{point.errors} err)" if point.errors else "")
    return [
        point.run_id,
        (point.started_at or "-")[:10],
        (point.commit or "-")[:8],
        n,
        rate,
        score,
        str(point.left_out),
        ", ".join(point.marks) or "-",
    ]


def _drift_line(series: Series) -> str:
    drift = series.drift
    test = f"Page-Hinkley statistic {drift.statistic:.3f}, threshold {drift.threshold:g}"
    if not drift.detected:
        return f"drift: none ({test})"
    since = drift.since_run or "the first run"
    return f"drift: {drift.direction} at {drift.at_run}, after {since} ({test})"


def _case_line(case: CaseHistory) -> str:
    flips = f", {case.flips} flip{'s' if case.flips != 1 else ''}" if case.flips else ""
    return (
        f"  {case.model} {case.eval_file}::{case.case_id}: {case.state} since {case.since}{flips}"
    )


def _skipped_line(folder: SkippedFolder) -> str:
    return f"  {folder.path}: {folder.reason}"
