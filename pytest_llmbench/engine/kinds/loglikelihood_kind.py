"""The log-likelihood kind (a case's ``loglikelihood:``): each option's log-probability
(:mod:`..loglikelihood_scores`), its pick the answer; ``acc`` and ``acc_norm`` as the record's
metrics. A model's first item asks alone: when the model cannot score, its other items fail
without a call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...models import ItemError
from .case_kind import CaseKind, Engine, KindCall, KindResult, TokenCounter, sent_messages

if TYPE_CHECKING:
    import asyncio

    from ..plan import CallPlan
    from ..request import Answer


@dataclass
class Probes:
    """What an engine learnt of its models' scoring, by model name."""

    #: set once a model's first item is done
    done: dict[str, asyncio.Event] = field(default_factory=dict)
    #: the models found unable to score log-likelihoods: their next items fail without a call
    cannot_score: dict[str, ItemError] = field(default_factory=dict)


class LoglikelihoodKind(CaseKind):
    """A multiple choice item scored by its options' log-probabilities."""

    name = "loglikelihood"
    scores_options = True

    async def answer(self, engine: Engine, call: KindCall) -> Answer:
        from ..loglikelihood_scores import score_options
        from ..request import Answer

        plan, request = call.plan, call.request
        options, answer = plan.case.loglikelihood, plan.case.answer_index
        assert options is not None and answer is not None
        probes, name = engine.kind_state(self.name, Probes), plan.model.name
        probe = probes.done.get(name)
        import asyncio  # the engine loop's: imported by then

        if probe is not None:
            await probe.wait()
        else:
            probe = probes.done[name] = asyncio.Event()
        known = probes.cannot_score.get(name)
        if known is not None:
            raise type(known)(known.message, known.kind)
        try:
            completion, scores = await score_options(engine.pacer.paced, request, options, answer)
        except ItemError as error:
            if error.kind == "unsupported":
                probes.cannot_score[name] = error
            raise
        finally:
            probe.set()
        graded = await engine.grade(plan, completion, call.targets)
        messages = sent_messages(plan, request)
        return Answer(completion, graded, messages=messages, loglikelihood=scores.to_record())

    def estimated_tokens(self, plan: CallPlan, count: TokenCounter) -> tuple[int, int]:
        """One call per option: its context and option in, one token out."""
        scored = plan.case.loglikelihood
        assert scored is not None
        texts = [
            [{"role": "user", "content": context + option}] for context, option in scored.pairs
        ]
        return sum(count(plan.model.model, text) for text in texts), len(scored.pairs)

    def metrics(self, result: KindResult) -> dict[str, float]:
        """``acc`` and ``acc_norm``, as named metrics (aggregated per model like
        ``post_process`` metrics)."""
        scores = result.loglikelihood
        if scores is None or result.plan.latency_only:
            return {}
        return {name: float(scores[name]) for name in ("acc", "acc_norm")}
