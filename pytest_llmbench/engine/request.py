"""The values of one item's model call: what is asked (:class:`Request`), what comes back
(:class:`Answer`, with a conversation's :class:`ConversationRun`), and the helpers that turn a plan into the messages sent or a run into a
completion.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..models import Completion, ItemError, add_known, total_usage
from .plan import DEFAULT_OUTPUT_TOKENS

if TYPE_CHECKING:
    from ..agent import AgentRun, Sandbox
    from ..judging import GradedAssertion
    from ..models import CallTarget
    from ..spec import Turn
    from .optimizer import Rewrite
    from .plan import CallPlan
    from .ratelimit import ModelLane, ProcessSlot


@dataclass(frozen=True)
class Reply:
    """The model's reply to one turn."""

    turn: int  #: the 0-based index of the answered turn in the case's ``turns``
    sent: tuple[dict[str, Any], ...]  #: the messages it answered: the history up to the turn
    completion: Completion


@dataclass(frozen=True)
class ConversationRun:
    """What a conversation said: the model's replies, in order."""

    replies: tuple[Reply, ...]
    #: the 0-based index of the last turn reached: the last one, or the turn whose call failed
    reached: int
    #: the turns said, in order: the case's scripted ones, or those a simulated user wrote
    turns: tuple[Turn, ...] = ()
    #: how a simulated user's or an agent's conversation ended (the record's
    #: ``conversation_stopped``: ``goal``, ``max_turns``, ``failed``, ``agent_done``, and an
    #: agent's ``last_turn``, ``max_steps``, ``seconds``, ``tokens``); None for a model's
    #: scripted conversation
    stopped: str | None = None
    #: the simulated user's calls (their tokens and cost are not the model's)
    user_calls: tuple[Completion, ...] = ()

    def said(self, turn: int) -> tuple[str, ...]:
        """What the model said to the user up to its reply to ``turn`` (0-based): each reply's
        text, in order (an agent's reply's text is its answer: its tool calls and their
        results are not said to the user); verbatim assistant turns are not the model's."""
        return tuple(reply.completion.text for reply in self.replies if reply.turn <= turn)

    def completion(self, model_id: str) -> Completion | None:
        """The conversation as one completion: the last reply's text and thinking, the first
        call's TTFT, latency, tokens (reasoning and cached ones too), cost, retries and
        rate-limit waits summed; None without a reply."""
        calls = [reply.completion for reply in self.replies]
        if not calls:
            return None
        usage = total_usage(call.usage for call in calls)
        return Completion(
            text=calls[-1].text,
            model_id=model_id,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            tokens_estimated=any(call.tokens_estimated for call in calls),
            ttft_s=calls[0].ttft_s,
            latency_s=usage.latency_s or 0.0,
            cost_usd=usage.cost_usd,
            retries=sum(call.retries for call in calls),
            streamed=calls[0].streamed,
            finish_reason=calls[-1].finish_reason,
            cached=all(call.cached for call in calls),
            rate_limit_wait_s=sum(call.rate_limit_wait_s for call in calls),
            # every reply's tool calls in turn order: the record's tool_calls and tool_call_count
            tool_calls=tuple(tool_call for call in calls for tool_call in call.tool_calls),
            reasoning=calls[-1].reasoning,
            reasoning_tokens=_summed_known(call.reasoning_tokens for call in calls),
            cached_input_tokens=_summed_known(call.cached_input_tokens for call in calls),
            cache_write_tokens=_summed_known(call.cache_write_tokens for call in calls),
            reasoning_tokens_estimated=any(call.reasoning_tokens_estimated for call in calls),
            unfinished=calls[-1].unfinished,
            response_model=calls[-1].response_model,
        )


def _summed_known(counts: Iterable[int | None]) -> int | None:
    """The sum of the counts reported (None when none was)."""
    total: int | None = None
    for count in counts:
        total = add_known(total, count)
    return total


@dataclass(frozen=True)
class Answer:
    """What an item's setup gets: the model's completion and its model-graded verdicts."""

    completion: Completion
    graded: tuple[GradedAssertion, ...] = ()
    agent: AgentRun | None = None  #: an agent item's loop
    sandbox: Sandbox | None = None  #: the agent's sandbox, reused by its ``command`` checks
    #: an optimized variant's rewrite: ``{"status", "reason"}``
    optimization: dict[str, Any] | None = None
    #: the messages sent, when they are not the case's own (a rewritten prompt, images)
    messages: tuple[dict[str, Any], ...] | None = None
    #: a self-judging solver's verdict on its answer (NEAR AI's bool)
    solver_verdict: bool | None = None
    #: a log-likelihood item's option scores (the record's ``loglikelihood``)
    loglikelihood: dict[str, Any] | None = None
    #: a scripted conversation's replies (``completion`` is then the whole conversation's)
    conversation: ConversationRun | None = None
    #: the context a solver retrieved (its dict's ``"context"``); None: the case's is used
    retrieved_context: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Request:
    """One model call as the scheduler paces it (the evaluated model's or a judge's)."""

    target: CallTarget
    messages: Sequence[dict[str, Any]]
    params: dict[str, Any]  #: sent on top of the profile's own
    key_params: dict[str, Any]  #: every parameter that shapes the answer, for the cache key
    repeat: int
    stream: bool
    lane: ModelLane
    slots: tuple[ProcessSlot, ...]
    estimate: int  #: tokens, for tokens-per-minute pacing before the real count is known
    model_name: str
    nodeid: str  #: who asked, for a replay miss
    embed: bool = False  #: embed the messages' texts instead of completing them
    #: score the second message's text after the first's (log-likelihood), not complete them
    loglikelihood: bool = False
    #: the cache key the calling thread already looked up and missed (not looked up again)
    missed_key: str | None = None
    #: an independent single-shot call (an item's answer, a judge's or grader's verdict, a RAG
    #: metric's): under ``--batch`` it may go to the provider's batch API instead of live
    batchable: bool = False
    #: who asks, for the run's trace: ``chat`` (the model under test), ``interpreter`` (a tool
    #: shim's), ``judge`` (a judge, grader or RAG metric), ``optimizer`` or ``user_sim``
    role: str = "chat"


def with_images(plan: CallPlan, messages: Sequence[dict[str, Any]]) -> Sequence[dict[str, Any]]:
    """``messages`` with the case's images on the last user message (read on this thread).

    A model known not to take images is this item's error; no call is made.
    """
    if not plan.case.images:
        return messages
    from ..spec import ImageError, attach_images, unsupported_message, vision_support

    if vision_support(plan.model) is False:
        raise ItemError(unsupported_message(plan.model), "unsupported")
    try:
        return attach_images(messages, plan.case.images)
    except ImageError as exc:  # the file went away since collection
        raise ItemError(f"{plan.model.name}: {exc}", "config") from None


def optimized_messages(plan: CallPlan, rewrite: Rewrite) -> tuple[dict[str, Any], ...]:
    """The rewritten template rendered with the case's vars (the optimizer accepted it only
    with the original's placeholders, and the original rendered at collection)."""
    return tuple(with_images(plan, plan.case.render(rewrite.messages)))


def agent_completion(run: AgentRun, model_id: str) -> Completion:
    """An agent loop as one completion: its final answer, with usage summed over the turns."""
    return Completion(
        text=run.answer,
        model_id=model_id,
        input_tokens=run.usage.input_tokens,
        output_tokens=run.usage.output_tokens,
        tokens_estimated=False,
        ttft_s=None,
        latency_s=run.usage.latency_s or 0.0,
        cost_usd=run.usage.cost_usd,
        retries=run.retries,
        streamed=False,
        finish_reason=None,  # many calls: why the loop ended is the record's agent_stopped
        cached=run.cached,
        reasoning=run.reasoning,
        reasoning_tokens=run.reasoning_tokens,
        cached_input_tokens=run.cached_input_tokens,
        cache_write_tokens=run.cache_write_tokens,
        reasoning_tokens_estimated=run.reasoning_tokens_estimated,
        response_model=run.response_model,
    )


def estimate_tokens(
    messages: Sequence[dict[str, Any]], answer_tokens: int = DEFAULT_OUTPUT_TOKENS
) -> int:
    """Tokens a call will use, for tokens-per-minute pacing before the real count is known: a
    token per four characters of the prompt, plus what the answer may take."""
    from ..spec import message_text

    prompt_chars = sum(len(message_text(message)) for message in messages)
    return prompt_chars // 4 + answer_tokens
