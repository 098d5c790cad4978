"""``llmbench report DIR``: the HTML report of a results folder, built again, with the CSVs and
run.json's ``reviews`` block: people's labels given since the run (its folder's
``reviews.jsonl``, ``--reviews-dir``'s) decide the verdicts they hold for."""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from ..results import load_results, load_run_info, read_labels
from ..results_folder import REPORT_FILE, RUN_FILE, ResultsFolder
from .merge_command import add_review_options


def add_report_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    report = commands.add_parser(
        "report", help="Rebuild the HTML report and the CSVs of a results folder"
    )
    report.add_argument("dir", type=Path, metavar="DIR", help="Results folder")
    report.add_argument("--output", type=Path, metavar="FILE",
                        help=f"Write the report there alone (default: DIR/{REPORT_FILE}, with "
                        f"the CSVs and {RUN_FILE}'s reviews block)")  # fmt: skip
    add_review_options(report)
    report.set_defaults(command=_report_command)


def _report_command(args: argparse.Namespace) -> int:
    from ..report import write_report
    from ..results import summarize, write_aggregates

    records, run_info = load_results(args.dir), load_run_info(args.dir)
    labelled = read_labels([args.dir], args.reviews_dir, args.ignore_reviews).apply(records)
    errors_count_as = str(((run_info or {}).get("config") or {}).get("errors_count_as") or "fail")
    summary = summarize(labelled.records, errors_count_as)
    ordered = list(summary.records)
    if args.output is None:
        write_aggregates(ordered, args.dir, summary)
        if run_info is not None:
            run_info["reviews"] = labelled.block()
            ResultsFolder(args.dir).write_run_info(run_info)
        path = write_report(ordered, args.dir, run_info=run_info, summary=summary)
    else:
        # write_report names its file report.html; build it aside so nothing else is replaced.
        with tempfile.TemporaryDirectory() as scratch:
            built = write_report(ordered, Path(scratch), run_info=run_info, summary=summary)
            path = Path(shutil.move(built, args.output))
    print(f"llmbench: report {path}")
    return 0
