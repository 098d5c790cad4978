"""What the two conversation kinds (scripted turns, simulated user) share: each turn's call,
the judges and verdicts turn by turn, the failure that names its turn, the transcript a
failure shows and the record's ``conversation``."""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .case_kind import (
    CaseKind,
    Checking,
    Engine,
    KindCall,
    KindResult,
    call_measures,
    sent_messages,
)

if TYPE_CHECKING:
    from ...models import Completion
    from ...scoring import AssertionContext, Verdict
    from ..conversation_calls import CompleteTurn
    from ..plan import CallPlan
    from ..request import Answer, ConversationRun, Reply, Request


class ConversationKind(CaseKind):
    """A kind whose item is a conversation: many calls of the model, each turn checked on its
    own reply."""

    @abc.abstractmethod
    async def converse(self, engine: Engine, call: KindCall) -> ConversationRun:
        """The whole conversation (it has a reply: its last turn is answered)."""

    async def answer(self, engine: Engine, call: KindCall) -> Answer:
        from ..request import Answer

        run = await self.converse(engine, call)
        completion = run.completion(call.request.target.model_id)
        assert completion is not None
        graded = await engine.grade_turns(call.plan, run, call.targets)
        sent = dataclasses.replace(call.request, messages=run.replies[-1].sent)
        return Answer(completion, graded, messages=sent_messages(call.plan, sent), conversation=run)

    def turn_call(self, engine: Engine, plan: CallPlan, request: Request) -> CompleteTurn:
        """The call of one turn of ``plan``'s conversation: ``request`` sent with the history it
        answers, paced, cached, budgeted; its cache entry keyed by the turn and that history."""
        from ..request import estimate_tokens

        async def complete(messages: tuple[dict[str, Any], ...], turn: int) -> Completion:
            call = dataclasses.replace(
                request,
                messages=messages,
                key_params={**request.key_params, "llmbench_turn": turn},
                estimate=estimate_tokens(messages, plan.answer_token_budget),
                missed_key=None,
            )
            return self.read(plan, await engine.pacer.paced(call))

        return complete

    def keep_partial(self, result: KindResult, error: BaseException) -> None:
        from ..request import ConversationRun

        partial = getattr(error, "partial", None)
        if isinstance(partial, ConversationRun):
            result.conversation = partial

    def verdicts(self, checking: Checking) -> list[Verdict]:
        """Each assertion on the reply to its turn (and that turn's prompt and measures),
        weighted by the turn's weight (:mod:`...scoring.conversation`), in turn order; unchecked
        on a reply whose thinking never finished (no answer: neither right nor wrong). A check
        an agent's conversation made on its whole run (``agent_verdicts``: a workdir or
        tool-call check) stands in its turn's place."""
        from ...scoring import Verdict, on_turn

        result = checking.result
        run = result.conversation
        assert run is not None
        made = result.agent_verdicts
        verdicts = []
        for reply in run.replies:
            turn = run.turns[reply.turn]
            own = turn_context(checking, run, reply)
            unfinished = reply.completion.unfinished
            for index in turn.checks:
                assertion = result.plan.case.assertions[index]
                if index in made:
                    verdict = made[index]
                elif unfinished is not None:
                    reason = f"unchecked: {unfinished}"
                    verdict = Verdict(
                        assertion.type, False, 0.0, assertion.weight, reason, unchecked=True
                    )
                else:
                    verdict = checking.verdict(index, assertion, reply.completion.text, own)
                verdicts.append(on_turn(verdict, reply.turn + 1, turn.weight))
        return verdicts

    def failure(self, result: KindResult, checked: Sequence[Verdict]) -> str | None:
        """The first turn that fails, named."""
        from ...scoring import failed_turn, failure_headline

        found = failed_turn(result.verdicts, result.plan.case.threshold)
        if found is None:
            return None
        turns = result.conversation.turns if result.conversation else ()
        return failure_headline(*found, len(turns))

    def shown(self, result: KindResult, width: int) -> list[str] | None:
        """The conversation up to the turn that failed (all of it when none did)."""
        from ...scoring import failed_turn, transcript_lines

        found = failed_turn(result.verdicts, result.plan.case.threshold)
        run = result.conversation
        if run is None:
            return None
        last = found[0] if found is not None else len(run.turns)
        return transcript_lines(conversation_entries(result, result.verdicts), last, width)

    def record_fields(self, result: KindResult) -> dict[str, Any]:
        entries = conversation_entries(result, result.verdicts)
        return {**super().record_fields(result), "conversation": entries}

    def spent(self, result: KindResult) -> Completion | None:
        run = result.conversation
        return run.completion(result.plan.model.model) if run is not None else None


def turn_context(checking: Checking, run: ConversationRun, reply: Reply) -> AssertionContext:
    """What a turn's checks read besides its reply: the turn's prompt, the reply's measures and
    tool calls, and every reply so far (``communicated``)."""
    return dataclasses.replace(
        checking.context,
        prompt=run.turns[reply.turn].content,
        measures=call_measures(checking.result, reply.completion),
        tool_calls=reply.completion.tool_calls,  # a turn's checks see its reply's calls
        said=run.said(reply.turn),
    )


def conversation_entries(result: KindResult, verdicts: Sequence[Verdict]) -> list[dict[str, Any]]:
    """The record's ``conversation``: every turn reached, in order, each model reply after the
    turn it answers with its verdicts and measures (empty when no call was made)."""
    run = result.conversation
    if run is None:
        return []
    from ...spec import message_text

    turns = run.turns
    replies = {reply.turn: reply.completion for reply in run.replies}
    # The opening as sent (an optimized variant's rewrite), the later turns as written.
    sent = [m for m in run.replies[0].sent if m["role"] != "system"] if run.replies else []
    entries = []
    for index, turn in enumerate(turns[: run.reached + 1]):
        content = message_text(sent[index]) if index < len(sent) else turn.content
        entries.append(conversation_entry(index + 1, turn.role, content, None))
        reply = replies.get(index)
        if reply is not None:
            entry = conversation_entry(index + 1, "assistant", reply.text, reply)
            entry["assertions"] = [v.to_dict() for v in verdicts if v.turn == index + 1]
            entries.append(entry)
    return entries


def conversation_entry(
    turn: int, role: str, content: str, reply: Completion | None
) -> dict[str, Any]:
    """One message of a conversation: a reply of the model (``generated``) with its measures."""
    return {
        "turn": turn,
        "role": role,
        "content": content,
        "generated": reply is not None,
        "assertions": [],
        "latency_s": reply.latency_s if reply else None,
        "ttft_s": reply.ttft_s if reply else None,
        "input_tokens": reply.input_tokens if reply else None,
        "output_tokens": reply.output_tokens if reply else None,
        "cost_usd": reply.cost_usd if reply else None,
        "cached": reply.cached if reply else False,
        # a reply's tool calls ({id, name, arguments}), recorded and never run
        "tool_calls": [dict(call) for call in reply.tool_calls] if reply else [],
    }
