"""The scripted-turns kind (a case's ``turns:``): each answered turn is a paced, cached,
budgeted call of the model, its cache entry keyed by the turn and the whole history it
answers (:func:`..conversation_calls.converse`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .case_kind import Engine, KindCall
from .talk import ConversationKind

if TYPE_CHECKING:
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
