"""The simulated-user kind (a case's ``simulated_user:``): the model's turns are called as a
scripted conversation's; the simulated user's are a helper model's calls (its own lane), each
keyed by the history it reads (:func:`..simulated.simulate`). Its errors are the item's,
never the model's failure. The record adds how the conversation ended and the simulated
user's own tokens and cost (never in the model's ``cost_usd``)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ...models import Completion, ItemError, total_usage
from .case_kind import Engine, KindCall, KindResult, TokenCounter
from .talk import ConversationKind

if TYPE_CHECKING:
    from ..grading import HelperTargets
    from ..plan import CallPlan
    from ..request import ConversationRun
    from ..simulated import AskUser


class SimulatedUserKind(ConversationKind):
    """A conversation with a helper model playing the user."""

    name = "simulated_user"
    shimmable = False  # its conversation offers the function definitions natively

    async def converse(self, engine: Engine, call: KindCall) -> ConversationRun:
        from ...spec import with_case_checks
        from ..simulated import simulate, stop_check

        plan, request = call.plan, call.request
        user, profile = plan.case.simulated_user, plan.user_sim
        assert user is not None and profile is not None
        complete = self.turn_call(engine, plan, request)
        ask = user_calls(engine, plan, call.targets)
        failed = stop_check(plan)
        with engine.talking(plan.nodeid) as progress:
            run = await simulate(
                complete, ask, request.messages, user, profile.name, failed, progress
            )
        turns = with_case_checks(run.turns, len(user.checks), len(plan.case.assertions))
        return dataclasses.replace(run, turns=turns)

    def record_fields(self, result: KindResult) -> dict[str, Any]:
        run = result.conversation
        if run is None:
            return super().record_fields(result)
        return {
            **super().record_fields(result),
            "conversation_stopped": run.stopped,
            **user_sim_fields(run),
        }

    def estimated_tokens(self, plan: CallPlan, count: TokenCounter) -> tuple[int, int]:
        """The conversation at its longest: ``max_turns`` calls, each reading the system prompt
        and the history so far, every message not yet written (the simulated user's and the
        model's) taken at the answer budget, a ``first_message`` as written."""
        user, budget = plan.case.simulated_user, plan.answer_token_budget
        assert user is not None
        base = count(plan.model.model, plan.case.messages) if plan.case.messages else 0
        first = user.first_message
        opening = count(plan.model.model, [{"role": "user", "content": first}]) if first else budget
        tokens_in = 0
        for calls in range(user.max_turns):  # call k reads k replies and k + 1 user messages
            tokens_in += base + opening + calls * budget * 2
        return tokens_in, user.max_turns * budget


def user_calls(engine: Engine, plan: CallPlan, targets: HelperTargets) -> AskUser:
    """The calls of ``plan``'s simulated user: a helper model's, in its own lane, paced, cached
    (the history it reads in the key) and budgeted like the model's; its thinking left out."""
    from ...models import merged_rule, read_reply

    profile = plan.user_sim
    assert profile is not None

    async def ask(messages: list[dict[str, str]], turn: int) -> Completion:
        asked = engine.helpers.request(plan, profile, targets, messages, {}, role="user_sim")
        if isinstance(asked, ItemError):
            raise asked
        nodeid = f"{plan.nodeid} (simulated user {profile.name})"
        said = await engine.pacer.paced(dataclasses.replace(asked, nodeid=nodeid))
        # A reasoning model playing the user: its thinking is not what the user says.
        return read_reply(said, merged_rule(profile.thinking, None))

    return ask


def user_sim_fields(run: ConversationRun) -> dict[str, Any]:
    """The record's spend of a simulated user (its tokens and cost are not the model's)."""
    usage = total_usage(call.usage for call in run.user_calls)
    return {"user_sim_tokens": usage.tokens, "user_sim_cost_usd": usage.cost_usd}
