"""The agent-conversation kind (``kind: agent`` with a case's ``turns:`` or ``simulated_user:``):
the agent loop answers each user turn in steps, its tools between the turns, its transcript
going on across them (:mod:`..agent_talk` is the user's side, :func:`~...agent.run_agent` the
loop). The agent's set-up, ``post_process`` and workdir checks are :class:`.AgentKind`'s; the
turn-by-turn verdicts, the failure naming its turn and the record's ``conversation`` are the
conversation kinds' (:mod:`.talk`).

Verdicts: each turn's own assertions (a turn's ``assert``, ``simulated_user.assert`` on every
reply, ``stop_on_fail``) on that reply; the case's and the file's after the conversation: on
the final answer (the last reply), the workdir, the whole run's tool calls and, for a judge,
the whole trajectory. A workdir or tool-call check among a turn's own is made once, on the
whole run. A scripted turn the conversation never reached (the agent stopped, or hit a budget)
fails its assertions.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ...models import ItemError
from .agent_kind import AgentKind, _loop
from .case_kind import Checking, Engine, KindCall, KindResult, TokenCounter, sent_messages
from .simulated_user_kind import user_sim_fields
from .talk import ConversationKind, conversation_entries

if TYPE_CHECKING:
    from ...judging import GradedAssertion
    from ...models import Completion
    from ...scoring import Verdict
    from ..agent_talk import AgentTalk, TalkSide
    from ..conversation_calls import Progress
    from ..plan import CallPlan
    from ..request import Answer, ConversationRun


class AgentConversationKind(AgentKind, ConversationKind):
    """An agent answering a simulated user or scripted turns."""

    name = "agent_conversation"

    async def answer(self, engine: Engine, call: KindCall) -> Answer:
        from ..request import Answer, agent_completion

        talk = await self._talk(engine, call)
        completion = agent_completion(talk.agent, call.request.target.model_id)
        graded = await _grade(engine, call, talk, completion)
        return Answer(
            completion,
            graded,
            talk.agent,
            call.prepared.sandbox,
            messages=sent_messages(call.plan, call.request),
            conversation=talk.conversation,
        )

    async def converse(self, engine: Engine, call: KindCall) -> ConversationRun:
        """The conversation alone (:meth:`answer` keeps the agent's run beside it)."""
        return (await self._talk(engine, call)).conversation

    async def _talk(self, engine: Engine, call: KindCall) -> AgentTalk:
        from ..agent_talk import AgentTalk
        from ..conversation_calls import ConversationCut
        from ..pacing import BudgetExceeded

        with engine.talking(call.plan.nodeid) as progress:
            side = _side(engine, call, progress)
            request = dataclasses.replace(call.request, messages=side.opening)
            try:
                run = await _loop(engine, dataclasses.replace(call, request=request), side.talk)
            except ItemError as exc:
                raise side.cut(exc) from None
            except BudgetExceeded as exc:  # --max-cost: what was said is kept
                raise ConversationCut(str(exc), side.finished()) from None
        return AgentTalk(run, side.finished(), side.paths)

    def keep_partial(self, result: KindResult, error: BaseException) -> None:
        from ..agent_talk import AgentTalk
        from ..request import ConversationRun
        from .agent_state import partial_snapshot

        partial = getattr(error, "partial", None)
        if isinstance(partial, AgentTalk):
            result.agent_run, result.conversation = partial.agent, partial.conversation
        elif isinstance(partial, ConversationRun):  # --max-cost, or pytest-timeout's expiry
            result.conversation = partial
        result.state_snapshot = partial_snapshot(result)

    def verdicts(self, checking: Checking) -> list[Verdict]:
        """Each turn's assertions on its reply (a workdir or tool-call check: the one made on
        the whole run), then those of scripted turns never reached, failed."""
        from ...scoring import Verdict, on_turn

        verdicts = ConversationKind.verdicts(self, checking)
        run = checking.result.conversation
        assert run is not None
        assertions = checking.result.plan.case.assertions
        for number, turn in enumerate(run.turns[run.reached + 1 :], run.reached + 2):
            why = f"turn {number} not reached: the conversation ended ({run.stopped})"
            for index in turn.checks:
                assertion = assertions[index]
                missed = Verdict(assertion.type, False, 0.0, assertion.weight, why)
                verdicts.append(on_turn(missed, number, turn.weight))
        return verdicts

    def record_fields(self, result: KindResult) -> dict[str, Any]:
        """The agent's fields (steps summed over the replies, tool calls, transcript, timeline),
        the conversation's entries, how it ended, and the simulated user's own spend."""
        run = result.conversation
        fields = {**super().record_fields(result)}
        if result.agent_run is not None:
            fields["conversation"] = conversation_entries(result, result.verdicts)
        if run is None:
            return fields
        fields["conversation_stopped"] = run.stopped
        if result.plan.case.simulated_user is not None:
            fields.update(user_sim_fields(run))
        return fields

    def spent(self, result: KindResult) -> Completion | None:
        if result.agent_run is not None:
            return AgentKind.spent(self, result)
        return ConversationKind.spent(self, result)

    def estimated_tokens(self, plan: CallPlan, count: TokenCounter) -> tuple[int, int]:
        """The conversation at its longest: every reply takes ``max_steps`` steps, each reading
        the system prompt and the history so far (every message not yet written, the user's,
        the agent's and its tools' results, taken at the answer budget)."""
        user, agent, budget = plan.case.simulated_user, plan.agent, plan.answer_token_budget
        assert agent is not None
        replies = user.max_turns if user else sum(turn.answered for turn in plan.case.turns)
        base = count(plan.model.model, plan.case.messages) if plan.case.messages else 0
        tokens_in = 0
        for reply in range(replies):
            for step in range(agent.max_turns):  # each step reads its user turns and all before
                tokens_in += base + (reply + 1) * budget + (reply * agent.max_turns + step) * budget
        return tokens_in, replies * agent.max_turns * budget


def _side(engine: Engine, call: KindCall, progress: Progress) -> TalkSide:
    """The user's side of ``call``'s conversation: its simulated user, or its scripted turns."""
    from ..agent_talk import ScriptedSide, SimulatedSide
    from ..simulated import stop_check
    from .simulated_user_kind import user_calls

    plan, opening = call.plan, call.request.messages
    if plan.case.simulated_user is None:
        return ScriptedSide(plan, progress, opening)
    ask = user_calls(engine, plan, call.targets)
    return SimulatedSide(plan, progress, opening, ask, stop_check(plan))


async def _grade(
    engine: Engine, call: KindCall, talk: AgentTalk, completion: Completion
) -> tuple[GradedAssertion, ...]:
    """Each turn's judges on its reply (a trajectory's: the run up to that reply); the judges
    of the case's assertions (those after the conversation) on the final answer with the whole
    run, its trajectory."""
    plan, run = call.plan, talk.conversation
    final = _final_checks(plan)
    turns = tuple(
        dataclasses.replace(turn, checks=tuple(i for i in turn.checks if i not in final))
        for turn in run.turns
    )
    own = dataclasses.replace(run, turns=turns)
    per_turn = await engine.grade_turns(plan, own, call.targets, paths=talk.paths)
    graded = tuple(entry for entry in plan.graded if entry.index in final)
    if not graded or not run.replies:
        return per_turn
    case = dataclasses.replace(plan.case, messages=run.replies[-1].sent)
    view = dataclasses.replace(plan, case=case, graded=graded)
    return per_turn + await engine.grade(view, completion, call.targets, run=talk.agent)


def _final_checks(plan: CallPlan) -> frozenset[int]:
    """The assertions checked after the conversation: the case's and the file's (with a
    scripted conversation's last turn's own, which check the same final answer)."""
    case, user = plan.case, plan.case.simulated_user
    if user is not None:
        return frozenset(range(len(case.assertions))) - frozenset(user.checks)
    return frozenset(case.turns[-1].checks)
