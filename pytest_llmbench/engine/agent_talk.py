"""The user's side of an agent's conversation (``kind: agent`` with ``turns:`` or a
``simulated_user:``): the turns the agent loop answers (:data:`~..agent.Talk`), each reply
recorded as a conversation's, and why the conversation ended.

The agent loop (:func:`~..agent.run_agent`) asks a side for the next user turn after each reply.
A :class:`ScriptedSide` gives the case's turns in order; a :class:`SimulatedSide` has the
simulated user write them (:func:`.simulated.user_line`, reading :func:`.simulated.user_view`
of what the agent said to it: its replies' answers, never its tool calls nor their results, as
tau-bench's user sees an agent). Each reply is kept as a :class:`~.request.Reply` (its model
calls summed, its tool calls with it, its history with every earlier reply's calls and results
as text: :func:`said_reply`), so that the conversation kinds' verdicts, judges and record read
it as they read a model's reply; and the agent's run up to it, which a judge of that reply's
trajectory reads.

Why a conversation ends (the record's ``conversation_stopped``): ``goal`` (the simulated user
said its stop marker), ``max_turns`` (the agent replied ``max_turns`` times), ``last_turn`` (the
last scripted turn was answered), ``failed`` (a ``stop_on_fail`` assertion failed on a reply),
``agent_done`` (a reply held ``simulated_user.agent_stop``), or the agent's budget inside a
reply: ``max_steps`` (``max_steps`` model calls without an answer), ``seconds`` or ``tokens``
(``limits``, over the whole conversation).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..models import Completion, ItemError, total_usage
from ..spec import Turn, with_case_checks
from .request import ConversationRun, Reply

if TYPE_CHECKING:
    from ..agent import AgentReply, AgentRun, UserTurn
    from ..spec import SimulatedUser
    from .conversation_calls import Progress
    from .plan import CallPlan
    from .simulated import AskUser, StopCheck


@dataclass(frozen=True)
class AgentTalk:
    """An agent's conversation: its loop's run and the conversation's turns and replies."""

    agent: AgentRun
    conversation: ConversationRun
    #: each reply's turn (0-based, as its :class:`~.request.Reply`'s) -> the run up to its end
    paths: Mapping[int, AgentRun] = field(default_factory=dict)


class TalkSide(abc.ABC):
    """The user's side of one agent conversation; its :meth:`talk` is the loop's ``talk``."""

    def __init__(self, plan: CallPlan, progress: Progress, opening: Sequence[dict[str, Any]]):
        self.plan = plan
        self.progress = progress
        #: the messages of the agent's first call before the user's first message
        self.opening = tuple(opening)
        #: the conversation as said: user messages, each reply as text with its tool calls
        self.history: list[dict[str, Any]] = list(opening)
        #: the conversation as the user heard it: its messages and each reply's answer
        self.heard: list[dict[str, Any]] = list(opening)
        #: each reply's turn -> the agent's run up to its end
        self.paths: dict[int, AgentRun] = {}
        self.stopped: str | None = None
        self._sent: tuple[dict[str, Any], ...] = ()

    async def talk(self, reply: AgentReply | None) -> UserTurn | None:
        """Record ``reply`` (None before the first); the next turn, or None: it ended."""
        from ..agent import UserTurn

        if reply is not None:
            completion = reply_completion(reply, self.plan.model.model)
            self.progress.replies.append(Reply(self.progress.reached, self._sent, completion))
            self.paths[self.progress.reached] = reply.so_far
            self.history.append({"role": "assistant", "content": said_reply(reply)})
            self.heard.append({"role": "assistant", "content": reply.answer})
            ended = reply.stopped if reply.stopped != "answer" else self.ended(completion)
            if ended is not None:
                self.stopped = ended
                return None
        said = await self.next_turn()
        if said is None:
            return None
        self.history.extend(said)
        self.heard.extend(said)
        self._sent = tuple(self.history)
        return UserTurn(self.progress.reached + 1, said)

    @abc.abstractmethod
    async def next_turn(self) -> tuple[dict[str, Any], ...] | None:
        """The messages of the next user turn (its index in ``progress.reached``), or None with
        :attr:`stopped` set."""

    def ended(self, completion: Completion) -> str | None:
        """Why the conversation ends on this answered reply, or None: it goes on."""
        return None

    @abc.abstractmethod
    def turns(self) -> tuple[Turn, ...]:
        """The turns said, each with the assertions checked on its reply."""

    def finished(self) -> ConversationRun:
        """The conversation as it ended (``stopped`` None when an error cut it short)."""
        progress = self.progress
        return ConversationRun(
            tuple(progress.replies),
            progress.reached,
            self.turns(),
            self.stopped,
            tuple(progress.user_calls),
        )

    def cut(self, error: ItemError) -> ItemError:
        """``error`` carrying the conversation so far and the agent's run (its ``partial``),
        and the simulated user's retries beside the agent's."""
        if error.partial is not None:  # the loop's run up to the error
            error.partial = AgentTalk(error.partial, self.finished())
        error.retries += sum(call.retries for call in self.progress.user_calls)
        return error


class ScriptedSide(TalkSide):
    """The case's ``turns:``: each answered turn, with the verbatim turns before it."""

    def __init__(self, plan: CallPlan, progress: Progress, opening: Sequence[dict[str, Any]]):
        # The opening ends on the first answered turn's message: it is the first turn said.
        super().__init__(plan, progress, opening[:-1])
        self._first: dict[str, Any] | None = dict(opening[-1])
        self._turns = plan.case.turns
        progress.turns = list(self._turns)
        progress.reached = next(n for n, turn in enumerate(self._turns) if turn.answered)

    async def next_turn(self) -> tuple[dict[str, Any], ...] | None:
        if self._first is not None:
            first, self._first = self._first, None
            return (first,)
        start = self.progress.reached + 1
        later = [n for n in range(start, len(self._turns)) if self._turns[n].answered]
        if not later:
            self.stopped = "last_turn"
            return None
        self.progress.reached = later[0]
        turns = self._turns[start : later[0] + 1]
        return tuple({"role": turn.role, "content": turn.content} for turn in turns)

    def turns(self) -> tuple[Turn, ...]:
        """The case's turns; when the conversation ended before the last, the last turn's
        assertions (the case's among them) check the last reply."""
        turns, reached = self._turns, self.progress.reached
        last = len(turns) - 1
        if reached >= last:
            return turns
        moved = (*turns[reached].checks, *turns[last].checks)
        changed = {
            reached: replace(turns[reached], checks=moved),
            last: replace(turns[last], checks=()),
        }
        return tuple(changed.get(n, turn) for n, turn in enumerate(turns))


class SimulatedSide(TalkSide):
    """A simulated user writing each turn from the conversation so far."""

    def __init__(
        self,
        plan: CallPlan,
        progress: Progress,
        opening: Sequence[dict[str, Any]],
        ask: AskUser,
        failed: StopCheck | None,
    ):
        super().__init__(plan, progress, opening)
        user, profile = plan.case.simulated_user, plan.user_sim
        assert user is not None and profile is not None
        self.user: SimulatedUser = user
        self._ask, self._failed, self._name = ask, failed, profile.name

    async def next_turn(self) -> tuple[dict[str, Any], ...] | None:
        from .simulated import user_error, user_line

        index = len(self.progress.turns)
        if index >= self.user.max_turns:
            self.stopped = "max_turns"
            return None
        try:
            text = await user_line(self._ask, self.user, self.heard, index, self.progress)
        except ItemError as exc:
            raise user_error(exc, self._name) from None
        if text is None:
            self.stopped = "goal"
            return None
        self.progress.turns.append(Turn("user", text, answered=True, checks=self.user.checks))
        self.progress.reached = index
        return ({"role": "user", "content": text},)

    def ended(self, completion: Completion) -> str | None:
        from .simulated import said_agent_stop

        prompt, so_far = self.progress.turns[-1].content, self.progress.so_far()
        said = so_far.said(so_far.reached)
        if self._failed is not None and self._failed(prompt, completion, said):
            return "failed"
        return "agent_done" if said_agent_stop(self.user, completion.text) else None

    def turns(self) -> tuple[Turn, ...]:
        """The turns the simulated user wrote; the case's assertions check the last reply."""
        turns = tuple(self.progress.turns)
        if not turns:
            return turns
        return with_case_checks(turns, len(self.user.checks), len(self.plan.case.assertions))


def reply_completion(reply: AgentReply, model_id: str) -> Completion:
    """An agent's reply as one completion: its answer, its model calls' usage summed, the tool
    calls it made (``{id, name, arguments}``, as a reply's are)."""
    calls = reply.calls
    usage = total_usage(call.usage for call in calls)
    return Completion(
        text=reply.answer,
        model_id=model_id,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        tokens_estimated=any(call.tokens_estimated for call in calls),
        ttft_s=None,  # many calls, read whole: as an agent's
        latency_s=usage.latency_s or 0.0,
        cost_usd=usage.cost_usd,
        retries=sum(call.retries for call in calls),
        streamed=False,
        finish_reason=None,  # why it ended is the conversation's (or the agent's) stop
        cached=bool(calls) and all(call.cached for call in calls),
        rate_limit_wait_s=sum(call.rate_limit_wait_s for call in calls),
        tool_calls=tuple(
            {"id": f"step_{tool.turn}_{n}", "name": tool.name, "arguments": tool.arguments}
            for n, tool in enumerate(reply.tool_calls, 1)
        ),
    )


def said_reply(reply: AgentReply) -> str:
    """A reply as the conversation's history says it: a line per tool call and its result,
    then its answer (as the judges read tool calls; the simulated user reads the answer
    alone)."""
    from .grading import run_text

    return run_text(reply.tool_calls, reply.answer)
