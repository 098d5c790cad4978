"""``llmbench view [DIR...]``: the local dashboard that browses, compares, launches and watches
runs (the ``view`` extra: starlette and uvicorn)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..results_folder import DEFAULT_ROOT, REVIEWS_FILE
from ..spec import UsageFailure


def add_view_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    view.add_argument(
        "--reviews-dir", type=Path, default=None, metavar="DIR",
        help=f"A shared folder of people's labels (its {REVIEWS_FILE}, e.g. committed to the "
        "repository): read after each run's labels, and where labels given here are written "
        "(default: each run's own folder)",
    )  # fmt: skip
    view.set_defaults(command=_view_command)


def _view_command(args: argparse.Namespace) -> int:
    import importlib.util

    if importlib.util.find_spec("starlette") is None or importlib.util.find_spec("uvicorn") is None:
        raise UsageFailure(
            "llmbench view needs the view extra: pip install 'pytest-llmbench[view]'"
        )
    from ..view import ViewSettings, serve

    roots = list(args.dirs) or [Path(DEFAULT_ROOT)]
    for root in roots:
        root.mkdir(parents=True, exist_ok=True)
    if not args.project.is_dir():
        raise UsageFailure(f"--project {args.project}: not a folder")
    reviews_dir = args.reviews_dir.resolve() if args.reviews_dir is not None else None
    if reviews_dir is not None and reviews_dir.exists() and not reviews_dir.is_dir():
        raise UsageFailure(f"--reviews-dir {args.reviews_dir}: not a folder")
    settings = ViewSettings(roots=roots, project=args.project.resolve(), reviews_dir=reviews_dir)
    try:
        serve(settings, args.host, args.port)
    except KeyboardInterrupt:
        return 0
    except OSError as exc:  # the port is taken, say
        raise UsageFailure(f"cannot listen on {args.host}:{args.port}: {exc}") from None
    return 0
