"""The scripted-turns kind (a case's ``turns:``): each answered turn is a paced, cached,
budgeted call of the model, its cache entry keyed by the turn and the whole history it
answers (:func:`..conversation_calls.converse`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .case_kind import Engine, KindCall, TokenCounter
from .talk import ConversationKind

if TYPE_CHECKING:
    from ..plan import CallPlan
    from ..request import ConversationRun


class TurnsKind(ConversationKind):
    """A scripted conversation."""

    name = "turns"

    async def converse(self, engine: Engine, call: KindCall) -> ConversationRun:
        from ..conversation_calls import converse, reply_messages, shim_reply_messages

        plan, request = call.plan, call.request
        complete = self.turn_call(engine, plan, request)
        said = shim_reply_messages if self.shimmed(plan) else reply_messages
        with engine.talking(plan.nodeid) as progress:
            return await converse(complete, request.messages, plan.case.turns, progress, said)

    def estimated_tokens(self, plan: CallPlan, count: TokenCounter) -> tuple[int, int]:
        """Each answered turn's call reads the history so far (the model's earlier replies
        taken at the answer budget) and answers within the budget."""
        turns, budget = plan.case.turns, plan.answer_token_budget
        first = next(index for index, turn in enumerate(turns) if turn.answered)
        history = list(plan.case.messages)
        tokens_in = replies = 0
        for index in range(first, len(turns)):
            if index > first:
                history.append({"role": turns[index].role, "content": turns[index].content})
            if turns[index].answered:
                tokens_in += count(plan.model.model, history) + replies * budget
                replies += 1
        return tokens_in, replies * budget
