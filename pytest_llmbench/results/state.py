"""What an item did, as its record is built from it: kept in the item's stash.

:class:`EvalResult` is an eval item's result (its setup fetches the answer, its call phase
scores it); :class:`PlainTestState` is what a plain test did through the ``llm`` and
``record_score`` fixtures. The ``makereport`` wrapper (:mod:`.attach`) reads them from the
stash and builds the record, without knowing the item's class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..agent import AgentRun, Sandbox, StateSnapshot
    from ..engine import CallPlan, ConversationRun, Reply
    from ..judging import GradedAssertion
    from ..models import Completion, ItemError, ModelProfile
    from ..scoring import Verdict


class EvalFailure(Exception):
    """A case scored below its threshold."""


@dataclass
class EvalResult:
    """An eval item's result: filled in by its setup (the answer) and call phase (the score)."""

    plan: CallPlan  #: what was asked
    completion: Completion | None = None
    #: the model-graded verdicts, by assertion index
    graded: dict[int, GradedAssertion] = field(default_factory=dict)
    verdicts: list[Verdict] = field(default_factory=list)  #: every assertion's verdict
    score: float | None = None
    agent_run: AgentRun | None = None  #: an agent item's loop
    sandbox: Sandbox | None = None  #: the agent's sandbox, reused by its ``command`` checks
    workdir: Path | None = None  #: the item's workdir, when it has one
    post_metrics: dict[str, float] = field(default_factory=dict)  #: ``post_process`` metrics
    started_at: str | None = None
    #: why there is no answer or verdict (provider, judge, post_process): an error outcome
    item_error: ItemError | None = None
    #: the rewrite of an optimized variant's prompt: status and reason (record field)
    optimization: dict[str, Any] | None = None
    #: the messages actually sent (an optimized variant's differ from the case's)
    sent_messages: tuple[dict[str, Any], ...] | None = None
    #: a self-judging solver's verdict on its answer (NEAR AI's bool)
    solver_verdict: bool | None = None
    #: a log-likelihood item's option scores (the record's ``loglikelihood``)
    loglikelihood: dict[str, Any] | None = None
    #: the context a solver retrieved, read by RAG judges in place of the case's
    retrieved_context: tuple[str, ...] | None = None
    #: answered, but with nothing to check: skipped, never a pass (``error_kind: unchecked``)
    unchecked: bool = False
    #: an agent item's workdir checks, by assertion index: made at the end of its setup, where
    #: a sandbox that cannot run a check's command is the item's error, not a verdict
    agent_verdicts: dict[int, Verdict] = field(default_factory=dict)
    #: a scripted conversation's replies: all of them, or those before an error or the budget
    #: cut it short
    conversation: ConversationRun | None = None
    #: an agent environment's states: seeded, left by the agent, expected (the record's
    #: ``state``; the state assertions' input)
    state_snapshot: StateSnapshot | None = None


EVAL_RESULT_KEY = pytest.StashKey[EvalResult]()


@dataclass
class ChatLog:
    """One ``llm.chat`` conversation of a plain test: its system prompt and the model's
    replies so far, each with the history it answered."""

    system: str | None
    replies: list[Reply] = field(default_factory=list)


@dataclass
class PlainTestState:
    """What a plain test did through our fixtures; becomes its results row."""

    model: ModelProfile | None = None
    repeat: int = 0
    completions: list[Completion] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    score: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    error: ItemError | None = None
    started_at: str | None = None
    #: the ``llm.chat`` conversations, in the order they were opened (the record's
    #: ``conversation``)
    chats: list[ChatLog] = field(default_factory=list)


PLAIN_STATE_KEY = pytest.StashKey[PlainTestState]()


def plain_state(item: pytest.Item) -> PlainTestState:
    """The plain-test state of ``item``, created on first use."""
    state = item.stash.get(PLAIN_STATE_KEY, None)
    if state is None:
        state = PlainTestState()
        item.stash[PLAIN_STATE_KEY] = state
    return state
