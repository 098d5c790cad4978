"""``llmbench report DIR``: the HTML report of a results folder, built again."""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from ..results import load_results, load_run_info
from ..results_folder import REPORT_FILE


def add_report_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    report = commands.add_parser("report", help="Rebuild the HTML report of a results folder")
    report.add_argument("dir", type=Path, metavar="DIR", help="Results folder")
    report.add_argument("--output", type=Path, metavar="FILE", help=f"Default: DIR/{REPORT_FILE}")
    report.set_defaults(command=_report_command)


def _report_command(args: argparse.Namespace) -> int:
    from ..report import write_report

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
