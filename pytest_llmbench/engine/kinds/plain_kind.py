"""The plain kind: one call of the model, its reply the answer (a shimmed reply read as a
native one), then the judges of its model-graded assertions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .case_kind import CaseKind, Engine, KindCall, sent_messages

if TYPE_CHECKING:
    from ..request import Answer


class PlainKind(CaseKind):
    """One prompt, one reply."""

    name = "plain"
    one_call = True

    async def answer(self, engine: Engine, call: KindCall) -> Answer:
        from ..request import Answer

        plan, request = call.plan, call.request
        completion = self.read(plan, await engine.pacer.paced(request))
        graded = await engine.grade(plan, completion, call.targets)
        return Answer(completion, graded, messages=sent_messages(plan, request))
