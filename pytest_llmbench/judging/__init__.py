"""Judging: what a judge model is asked, how its reply is read, how a panel's verdicts combine.

:mod:`.judge_kinds` is the table of judge kinds: each judged assertion type registered once, with
how an answer is graded and its panel's form (prompt, parser, aggregation); the engine looks
a kind up there and hands it an :class:`~.answer_view.AnswerView`. Each kind's own wording,
reply schema and strict reading live in its module (:mod:`.jury`, :mod:`.rubric`,
:mod:`.rag_metrics` and :mod:`.relevance`, :mod:`.grader`, :mod:`.pairwise_judge`,
:mod:`.select_best_judge`, :mod:`.embedding`); :mod:`.prompts` assembles the judge's messages and
:mod:`.verdicts` reads a reply by its kind, with :mod:`.tagging` and :mod:`.replies`;
:mod:`.panel` grades one answer with a panel (calls given by the engine, a failed judge
excluded, scores aggregated); :mod:`.trajectory_judge` renders what a ``scope: trajectory`` judge
reads, and holds the built-in trajectory rubrics. Imports ``models`` and ``scoring``.

This is the stage's face: the names below are what other stages and the pytest shell import from
it (tests/test_layout.py checks that they import nothing else of it). Each is imported from its
module when first asked for, so that importing the stage loads nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import face_attribute

if TYPE_CHECKING:
    from .answer_view import AnswerView, JudgedEntry
    from .judge_kinds import JUDGE_KINDS, JudgeKind, judge_kind
    from .jury import CONVERSATION_DIMENSIONS, JURY_DIMENSIONS
    from .panel import CompleteFn, GradedAssertion, JudgeCall, PanelForm, unchecked
    from .replies import ParsedVerdict, VerdictError, load_object
    from .select_best_judge import ContestResult, judge_contest
    from .trajectory_judge import Trajectory, TrajectoryStep, render_trajectory

#: Each name of the face, by the module of the stage that defines it.
_FACE: dict[str, str] = {
    "AnswerView": "answer_view",
    "JudgedEntry": "answer_view",
    "CONVERSATION_DIMENSIONS": "jury",
    "JURY_DIMENSIONS": "jury",
    "JUDGE_KINDS": "judge_kinds",
    "JudgeKind": "judge_kinds",
    "judge_kind": "judge_kinds",
    "CompleteFn": "panel",
    "GradedAssertion": "panel",
    "JudgeCall": "panel",
    "PanelForm": "panel",
    "unchecked": "panel",
    "ParsedVerdict": "replies",
    "VerdictError": "replies",
    "load_object": "replies",
    "ContestResult": "select_best_judge",
    "judge_contest": "select_best_judge",
    "Trajectory": "trajectory_judge",
    "TrajectoryStep": "trajectory_judge",
    "render_trajectory": "trajectory_judge",
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
    "Trajectory",
    "TrajectoryStep",
    "VerdictError",
    "judge_contest",
    "judge_kind",
    "load_object",
    "render_trajectory",
    "unchecked",
]


def __getattr__(name: str) -> Any:
    """A name of the face, imported from its module on first use."""
    return face_attribute(globals(), _FACE, name)
