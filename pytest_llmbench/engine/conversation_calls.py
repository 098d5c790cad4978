"""A scripted conversation (a case's ``turns:``) as one item with many calls.

:func:`converse` walks the turns: each user turn the model answers is one call of the model under
test with the whole history so far (the system prompt, the earlier user turns, the model's own
earlier replies and the verbatim assistant turns; a reply's tool calls with a result each
saying they were not run, :func:`reply_messages`), made through the ``complete`` function the
:class:`~.answer.Answerer` gives it (paced, rate-limited, budgeted, cached and counted like every
call). :func:`grade_turns` runs the judges of each turn's judged assertions on that turn's reply.
A provider error or the budget running out ends the conversation: what was said before is kept.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..models import Completion, ItemError
from .grading import grade
from .pacing import BudgetExceeded
from .request import ConversationRun, Reply

if TYPE_CHECKING:
    from ..agent import AgentRun
    from ..judging import GradedAssertion
    from ..spec import Turn
    from .grading import HelperCalls, HelperTargets
    from .plan import CallPlan

#: One call of a conversation: the messages to answer and the 0-based turn they answer.
CompleteTurn = Callable[[tuple[dict[str, Any], ...], int], Awaitable[Completion]]
#: What a reply of the 0-based turn adds to the history the next turn answers.
ReplyMessages = Callable[[Completion, int], list[dict[str, Any]]]


class Progress:
    """A conversation while it runs: its replies so far and the turn it has reached. Written on
    the engine's thread; read on the item's when pytest-timeout ends the item mid-way."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.reached = 0
        self.turns: list[Turn] = []  #: the turns said (a simulated user's as they are written)
        self.user_calls: list[Completion] = []  #: a simulated user's calls

    def so_far(self) -> ConversationRun:
        """What was said up to now."""
        turns, calls = tuple(self.turns), tuple(self.user_calls)
        return ConversationRun(tuple(self.replies), self.reached, turns, user_calls=calls)


class ConversationCut(BudgetExceeded):
    """``--max-cost`` was reached in the middle of a conversation: ``partial`` is what was
    said before."""

    def __init__(self, message: str, partial: ConversationRun) -> None:
        super().__init__(message)
        self.partial = partial


async def converse(
    complete: CompleteTurn,
    opening: Sequence[dict[str, Any]],
    turns: Sequence[Turn],
    progress: Progress | None = None,
    said: ReplyMessages | None = None,
) -> ConversationRun:
    """Answer every turn that the model answers, each from the whole history so far.

    ``opening`` is the first call's messages (the case's ``messages``, with images or an
    optimizer's rewrite when the item has them); the turns after it are appended in order,
    each reply as ``said`` puts it in the history (:func:`reply_messages` when not given;
    :func:`shim_reply_messages` when the tools go through the tool shim).
    An item error carries the conversation so far as ``partial``; the budget running
    out is a :class:`ConversationCut`. ``progress`` follows the conversation as it runs.
    """
    first = next(index for index, turn in enumerate(turns) if turn.answered)
    history = list(opening)
    progress = progress or Progress()
    progress.turns = list(turns)
    replies = progress.replies
    index = first
    try:
        for index in range(first, len(turns)):
            progress.reached = index
            turn = turns[index]
            if index > first:
                history.append({"role": turn.role, "content": turn.content})
            if not turn.answered:
                continue
            sent = tuple(history)
            completion = await complete(sent, index)
            replies.append(Reply(index, sent, completion))
            history.extend((said or reply_messages)(completion, index))
    except ItemError as exc:
        progress.reached = index
        raise cut_short(exc, progress) from None
    except BudgetExceeded as exc:
        progress.reached = index
        raise cut_short(exc, progress) from None
    return ConversationRun(tuple(replies), len(turns) - 1, tuple(turns))


#: The result a conversation's history gives each tool call: nothing runs the tools of a plain
#: file, but OpenAI's protocol wants a result for every call before the next user message.
NOT_RUN_RESULT = "(not run: this eval records tool calls without running them)"


def reply_messages(completion: Completion, turn: int) -> list[dict[str, Any]]:
    """What a reply adds to the history: the assistant's message, and when it called tools,
    its calls as sent back (OpenAI's shape, content null beside them) and a result per call
    saying the call was recorded and not run (:data:`NOT_RUN_RESULT`)."""
    if not completion.tool_calls:
        return [{"role": "assistant", "content": completion.text}]
    wired = [
        {
            "id": str(call.get("id") or f"call_{turn + 1}_{number}"),
            "type": "function",
            "function": {"name": str(call.get("name", "")), "arguments": call.get("arguments")},
        }
        for number, call in enumerate(completion.tool_calls, 1)
    ]
    said: dict[str, Any] = {"role": "assistant", "content": completion.text or None}
    results = [
        {"role": "tool", "tool_call_id": call["id"], "content": NOT_RUN_RESULT} for call in wired
    ]
    return [{**said, "tool_calls": wired}, *results]


def shim_reply_messages(completion: Completion, turn: int) -> list[dict[str, Any]]:
    """What a reply read through the tool shim adds to the history: the assistant's message as
    the shim's protocol JSON (the calls the reply made, or its answer), and a user message per
    call saying it was not run, as the shim gives a tool's result (a model without tool calling
    knows no ``tool`` role nor ``tool_calls``)."""
    from ..agent import calls_reply_text, shim_tool_result

    text = calls_reply_text(completion.tool_calls, completion.text)
    results = [
        shim_tool_result(str(call.get("name", "")), NOT_RUN_RESULT)
        for call in completion.tool_calls
    ]
    return [{"role": "assistant", "content": text}, *results]


def cut_short(error: ItemError | BudgetExceeded, progress: Progress) -> Exception:
    """The error that ends a conversation, carrying what was said before it: a provider error
    with its ``partial`` (and the retries of every call), or a :class:`ConversationCut`."""
    partial = progress.so_far()
    if isinstance(error, BudgetExceeded):
        return ConversationCut(str(error), partial)
    error.partial = partial
    calls = [reply.completion for reply in partial.replies] + list(partial.user_calls)
    error.retries += sum(call.retries for call in calls)
    return error


async def grade_turns(
    helpers: HelperCalls,
    plan: CallPlan,
    run: ConversationRun,
    targets: HelperTargets,
    judge_metrics: Sequence[str],
    paths: Mapping[int, AgentRun] | None = None,
) -> tuple[GradedAssertion, ...]:
    """The judged assertions of every turn, each on that turn's reply and the history it
    answered (a ``scope: conversation`` judge sees both as its transcript, up to that reply),
    all turns' judges concurrently. An agent's conversation gives ``paths`` (each reply's turn
    -> the agent's run up to its end): a ``scope: trajectory`` judge reads that run's steps,
    each tool call with its result and error, and the reply's answer as the final one."""
    paths = paths or {}
    jobs = []
    for reply in run.replies:
        checks = set(run.turns[reply.turn].checks)
        graded = tuple(entry for entry in plan.graded if entry.index in checks)
        if not graded:
            continue
        case = dataclasses.replace(plan.case, messages=reply.sent)
        view = dataclasses.replace(plan, case=case, graded=graded)
        path = paths.get(reply.turn)
        jobs.append(grade(helpers, view, reply.completion, targets, judge_metrics, path=path))
    batches = await asyncio.gather(*jobs)
    return tuple(graded for batch in batches for graded in batch)
