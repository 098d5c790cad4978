"""Scoring: the assertion vocabulary and every check made without a model call.

:mod:`.assertions` parses an ``assert:`` item into an :class:`~.base.Assertion` (at collection)
and evaluates it into a :class:`~.base.Verdict`; the checks live in :mod:`.text`,
:mod:`.structured`, :mod:`.python` (user functions, multiple choice), :mod:`.agent` (files,
commands and tool calls an agent left) and :mod:`.similarity` (ROUGE-L, cosine). The settings of
model-graded assertions are parsed here too (:mod:`.judged`); their calls are made by the engine
and graded by :mod:`pytest_llmbench.judging`. Imports only ``models`` and ``agent``.

This is the stage's face: the names below are what other stages and the pytest shell import from
it (tests/test_layout.py checks that they import nothing else of it). Each is imported from its
module when first asked for, so that importing the stage loads nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import face_attribute

if TYPE_CHECKING:
    from .agent import AgentOutcome, SandboxFailure, evaluate_agent
    from .assertions import case_failure, evaluate, parse_assertion, score_verdicts
    from .base import (
        Assertion,
        AssertionContext,
        AssertionSpecError,
        CallMeasures,
        Verdict,
        clip,
        one_line,
        quoted,
    )
    from .bfcl import allowed_value_problem
    from .choices import LETTERS, answer_index, choice_outcome, choice_prompt, format_choices
    from .conversation import (
        call_line,
        call_name,
        failed_turn,
        failure_headline,
        on_turn,
        reply_text,
        result_line,
        transcript_lines,
    )
    from .judged import CONTEXT_TYPES, EmbeddingSpec, JudgeSpec, RelevanceSpec, dimension_key
    from .model_graded import (
        GRADER_SCORE_KEY,
        TRAJECTORY_VAR,
        ModelGradedSpec,
        votes_text,
        with_prompt_text,
    )
    from .pairwise import (
        ORDERS,
        OUTCOME_SCORES,
        PAIRWISE_SCORE_KEY,
        PAIRWISE_TYPE,
        BaselineAnswer,
        baseline_answer,
        model_label,
        order_grader,
        outcome,
        pair_prompt,
        preference,
    )
    from .rag import (
        ChunkVerdict,
        ClaimVerdict,
        GeneratedQuestion,
        RagScore,
        Undetermined,
        chunks_score,
        claims_score,
        questions_score,
    )
    from .select_best import (
        LABELS,
        SELECT_BEST_SCORE_KEY,
        SELECT_BEST_TYPE,
        Contestant,
        SelectBestSpec,
        check_contestants,
        chooser,
        contest_prompt,
        contest_seed,
        plurality,
        rotations,
        shuffled,
        votes,
    )
    from .similarity import cosine
    from .tool_calls import TOOL_CALL_TYPES, expected_names, expected_steps
    from .trajectory import ExpectedStep

#: Each name of the face, by the module of the stage that defines it.
_FACE: dict[str, str] = {
    "AgentOutcome": "agent",
    "SandboxFailure": "agent",
    "evaluate_agent": "agent",
    "case_failure": "assertions",
    "evaluate": "assertions",
    "parse_assertion": "assertions",
    "score_verdicts": "assertions",
    "Assertion": "base",
    "AssertionContext": "base",
    "AssertionSpecError": "base",
    "CallMeasures": "base",
    "Verdict": "base",
    "clip": "base",
    "one_line": "base",
    "quoted": "base",
    "allowed_value_problem": "bfcl",
    "LETTERS": "choices",
    "answer_index": "choices",
    "choice_outcome": "choices",
    "choice_prompt": "choices",
    "format_choices": "choices",
    "call_line": "conversation",
    "call_name": "conversation",
    "failed_turn": "conversation",
    "failure_headline": "conversation",
    "on_turn": "conversation",
    "reply_text": "conversation",
    "result_line": "conversation",
    "transcript_lines": "conversation",
    "CONTEXT_TYPES": "judged",
    "EmbeddingSpec": "judged",
    "JudgeSpec": "judged",
    "RelevanceSpec": "judged",
    "dimension_key": "judged",
    "GRADER_SCORE_KEY": "model_graded",
    "TRAJECTORY_VAR": "model_graded",
    "ModelGradedSpec": "model_graded",
    "votes_text": "model_graded",
    "with_prompt_text": "model_graded",
    "BaselineAnswer": "pairwise",
    "ORDERS": "pairwise",
    "OUTCOME_SCORES": "pairwise",
    "PAIRWISE_SCORE_KEY": "pairwise",
    "PAIRWISE_TYPE": "pairwise",
    "baseline_answer": "pairwise",
    "model_label": "pairwise",
    "order_grader": "pairwise",
    "outcome": "pairwise",
    "pair_prompt": "pairwise",
    "preference": "pairwise",
    "ChunkVerdict": "rag",
    "ClaimVerdict": "rag",
    "GeneratedQuestion": "rag",
    "RagScore": "rag",
    "Undetermined": "rag",
    "chunks_score": "rag",
    "claims_score": "rag",
    "questions_score": "rag",
    "Contestant": "select_best",
    "LABELS": "select_best",
    "SELECT_BEST_SCORE_KEY": "select_best",
    "SELECT_BEST_TYPE": "select_best",
    "SelectBestSpec": "select_best",
    "check_contestants": "select_best",
    "chooser": "select_best",
    "contest_prompt": "select_best",
    "contest_seed": "select_best",
    "plurality": "select_best",
    "rotations": "select_best",
    "shuffled": "select_best",
    "votes": "select_best",
    "cosine": "similarity",
    "TOOL_CALL_TYPES": "tool_calls",
    "expected_names": "tool_calls",
    "expected_steps": "tool_calls",
    "ExpectedStep": "trajectory",
}

__all__ = [
    "CONTEXT_TYPES",
    "GRADER_SCORE_KEY",
    "LABELS",
    "LETTERS",
    "ORDERS",
    "OUTCOME_SCORES",
    "PAIRWISE_SCORE_KEY",
    "PAIRWISE_TYPE",
    "SELECT_BEST_SCORE_KEY",
    "SELECT_BEST_TYPE",
    "TOOL_CALL_TYPES",
    "TRAJECTORY_VAR",
    "AgentOutcome",
    "Assertion",
    "AssertionContext",
    "AssertionSpecError",
    "BaselineAnswer",
    "CallMeasures",
    "ChunkVerdict",
    "ClaimVerdict",
    "Contestant",
    "EmbeddingSpec",
    "ExpectedStep",
    "GeneratedQuestion",
    "JudgeSpec",
    "ModelGradedSpec",
    "RagScore",
    "RelevanceSpec",
    "SandboxFailure",
    "SelectBestSpec",
    "Undetermined",
    "Verdict",
    "allowed_value_problem",
    "answer_index",
    "baseline_answer",
    "call_line",
    "call_name",
    "case_failure",
    "check_contestants",
    "choice_outcome",
    "choice_prompt",
    "chooser",
    "chunks_score",
    "claims_score",
    "clip",
    "contest_prompt",
    "contest_seed",
    "cosine",
    "dimension_key",
    "evaluate",
    "evaluate_agent",
    "expected_names",
    "expected_steps",
    "failed_turn",
    "failure_headline",
    "format_choices",
    "model_label",
    "on_turn",
    "one_line",
    "order_grader",
    "outcome",
    "pair_prompt",
    "parse_assertion",
    "plurality",
    "preference",
    "questions_score",
    "quoted",
    "reply_text",
    "result_line",
    "rotations",
    "score_verdicts",
    "shuffled",
    "transcript_lines",
    "votes",
    "votes_text",
    "with_prompt_text",
]


def __getattr__(name: str) -> Any:
    """A name of the face, imported from its module on first use."""
    return face_attribute(globals(), _FACE, name)
