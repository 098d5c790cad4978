"""Report: the self-contained ``report.html`` and the pytest-html columns (the last stage).

:mod:`.standalone` writes the report from the run's summary, with the plotly charts of
:mod:`.charts` and the tables of :mod:`.html_tables`; :mod:`.html_columns` adds model, score,
tokens, latency and cost to a pytest-html report.

This is the stage's face: the names below are what other stages and the pytest shell import from
it (tests/test_layout.py checks that they import nothing else of it). Each is imported from its
module when first asked for, so that importing the stage loads nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import face_attribute

if TYPE_CHECKING:
    from .conversation_html import CONVERSATION_STYLE
    from .html_columns import HtmlColumns, batch_note
    from .html_tables import leaderboard_table, text, transcript
    from .matrix import (
        Cells,
        case_flags,
        cell_status,
        first_failing_turn,
        group_cases,
        searched_text,
        shown_answer,
    )
    from .session_end import ReportWriter, SessionEndWarmUp
    from .standalone import write_report

#: Each name of the face, by the module of the stage that defines it.
_FACE: dict[str, str] = {
    "CONVERSATION_STYLE": "conversation_html",
    "HtmlColumns": "html_columns",
    "batch_note": "html_columns",
    "leaderboard_table": "html_tables",
    "text": "html_tables",
    "transcript": "html_tables",
    "Cells": "matrix",
    "case_flags": "matrix",
    "cell_status": "matrix",
    "first_failing_turn": "matrix",
    "group_cases": "matrix",
    "searched_text": "matrix",
    "shown_answer": "matrix",
    "ReportWriter": "session_end",
    "SessionEndWarmUp": "session_end",
    "write_report": "standalone",
}

__all__ = [
    "CONVERSATION_STYLE",
    "Cells",
    "HtmlColumns",
    "ReportWriter",
    "SessionEndWarmUp",
    "batch_note",
    "case_flags",
    "cell_status",
    "first_failing_turn",
    "group_cases",
    "leaderboard_table",
    "searched_text",
    "shown_answer",
    "text",
    "transcript",
    "write_report",
]


def __getattr__(name: str) -> Any:
    """A name of the face, imported from its module on first use."""
    return face_attribute(globals(), _FACE, name)
