"""``llmbench validate PATH...``: eval and profile files checked without running anything (the
check itself is the spec stage's :func:`~pytest_llmbench.spec.validate.validate_command`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..spec import validate_command


def add_validate_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
