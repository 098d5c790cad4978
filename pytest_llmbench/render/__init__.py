"""Render: the run's summary as text for people and CI (after ``results``).

:mod:`.terminal_summary` prints the leaderboard, judges, flaky cases and gate lines at session
end, in the tables of :mod:`.terminal`; :mod:`.markup` draws a leaderboard as Markdown or HTML cells; :mod:`.ci` writes the GitHub step
summary and the Prometheus textfile ``metrics.prom``.

This is the stage's face: the names below are what other stages and the pytest shell import from
it (tests/test_layout.py checks that they import nothing else of it). Each is imported from its
module when first asked for, so that importing the stage loads nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import face_attribute

if TYPE_CHECKING:
    from .ci import CIOutputs
    from .github_comment import SavedRun, pull_request_comment
    from .markup import (
        INCOMPLETE_NOTE,
        board_html,
        board_markdown,
        coverage_cell,
        has_incomplete,
        stopped_note,
    )
    from .progress import RunProgress, progress_every_s
    from .terminal_summary import TerminalSummary

#: Each name of the face, by the module of the stage that defines it.
_FACE: dict[str, str] = {
    "CIOutputs": "ci",
    "SavedRun": "github_comment",
    "pull_request_comment": "github_comment",
    "INCOMPLETE_NOTE": "markup",
    "board_html": "markup",
    "board_markdown": "markup",
    "coverage_cell": "markup",
    "has_incomplete": "markup",
    "stopped_note": "markup",
    "RunProgress": "progress",
    "progress_every_s": "progress",
    "TerminalSummary": "terminal_summary",
}

__all__ = [
    "INCOMPLETE_NOTE",
    "CIOutputs",
    "RunProgress",
    "SavedRun",
    "TerminalSummary",
    "board_html",
    "board_markdown",
    "coverage_cell",
    "has_incomplete",
    "progress_every_s",
    "pull_request_comment",
    "stopped_note",
]


def __getattr__(name: str) -> Any:
    """A name of the face, imported from its module on first use."""
    return face_attribute(globals(), _FACE, name)
