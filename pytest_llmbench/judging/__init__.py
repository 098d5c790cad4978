"""Judging: what a judge model is asked, how its reply is read, how a panel's verdicts combine.

:mod:`.kinds` is the table of judge kinds: each judged assertion type registered once, with
how an answer is graded and its panel's form (prompt, parser, aggregation); the engine looks
a kind up there and hands it an :class:`~.answer_view.AnswerView`. Each kind's own wording,
reply schema and strict reading live in its module (:mod:`.jury`, :mod:`.rubric`,
:mod:`.rag_metrics` and :mod:`.relevance`, :mod:`.grader`, :mod:`.pairwise`,
:mod:`.select_best`, :mod:`.embedding`); :mod:`.prompts` assembles the judge's messages and
:mod:`.verdicts` reads a reply by its kind, with :mod:`.tagging` and :mod:`.replies`;
:mod:`.panel` grades one answer with a panel (calls given by the engine, a failed judge
excluded, scores aggregated). Imports ``models`` and ``scoring``.

This is the stage's face: the names below are what other stages use. Each is imported from its
module when first asked for, so that importing the stage imports none of its modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .answer_view import AnswerView, JudgedEntry
    from .jury import CONVERSATION_DIMENSIONS, JURY_DIMENSIONS
    from .kinds import JUDGE_KINDS, JudgeKind, judge_kind
    from .panel import CompleteFn, GradedAssertion, JudgeCall, PanelForm, unchecked
    from .replies import ParsedVerdict, VerdictError, load_object
    from .select_best import ContestResult, judge_contest

#: Each name of the face, by the module (of this package) that defines it.
_FACE: dict[str, str] = {
    **dict.fromkeys(("AnswerView", "JudgedEntry"), "answer_view"),
    **dict.fromkeys(("CONVERSATION_DIMENSIONS", "JURY_DIMENSIONS"), "jury"),
    **dict.fromkeys(("JUDGE_KINDS", "JudgeKind", "judge_kind"), "kinds"),
    **dict.fromkeys(
        ("CompleteFn", "GradedAssertion", "JudgeCall", "PanelForm", "unchecked"), "panel"
    ),
    **dict.fromkeys(("ParsedVerdict", "VerdictError", "load_object"), "replies"),
    **dict.fromkeys(("ContestResult", "judge_contest"), "select_best"),
}

__all__ = [
    "CONVERSATION_DIMENSIONS",
    "JUDGE_KINDS",
    "JURY_DIMENSIONS",
    "AnswerView",
    "CompleteFn",
    "ContestResult",
    "GradedAssertion",
    "JudgeCall",
    "JudgeKind",
    "JudgedEntry",
    "PanelForm",
    "ParsedVerdict",
    "VerdictError",
    "judge_contest",
    "judge_kind",
    "load_object",
    "unchecked",
]


def __getattr__(name: str) -> Any:
    """A name of the face, imported from its module on first use."""
    module = _FACE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # asked once: later lookups are plain attribute reads
    return value
