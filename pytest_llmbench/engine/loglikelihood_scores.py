"""A multiple choice item scored by log-likelihood: one call per option, then lm-eval's metrics.

Each option's continuation is scored after its context (:mod:`..models.providers.loglikelihood`)
through the pacer, so the calls are paced, cached and budgeted like any. ``acc`` picks the
option with the highest log-probability, ``acc_norm`` the highest per character of the option
(lm-eval's length normalisation); ties go to the first option, as ``numpy.argmax`` does. The
item's answer is the letter of the option its ``verdict`` metric picks, so the case's
``choice`` assertion, the record's ``choice`` and ``mc_accuracy`` read it like a generated one.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..models import Completion, add_known, batch_fields

if TYPE_CHECKING:
    from ..spec import ScoredOptions
    from .request import Request

__all__ = ["OptionScores", "score_options"]

Paced = Callable[["Request"], Awaitable[Completion]]


@dataclass(frozen=True)
class OptionScores:
    """Every option's log-probability, and what ``acc`` and ``acc_norm`` chose."""

    logprobs: tuple[float, ...]
    tokens: tuple[int, ...]  #: tokens of each scored continuation
    lengths: tuple[int, ...]  #: characters ``acc_norm`` divides by
    answer: int  #: the right option (0-based)

    @property
    def chosen(self) -> int:
        """The option ``acc`` picks: the highest log-probability."""
        return _first_max(self.logprobs)

    @property
    def chosen_norm(self) -> int:
        """The option ``acc_norm`` picks: the highest log-probability per character."""
        return _first_max(
            [lp / max(1, n) for lp, n in zip(self.logprobs, self.lengths, strict=True)]
        )

    def metrics(self) -> dict[str, float]:
        """``acc`` and ``acc_norm``: 1.0 when their pick is the answer."""
        return {
            "acc": float(self.chosen == self.answer),
            "acc_norm": float(self.chosen_norm == self.answer),
        }

    def to_record(self) -> dict[str, Any]:
        """The record's ``loglikelihood`` field (options by letter)."""
        from ..scoring import LETTERS

        return {
            "logprobs": list(self.logprobs),
            "tokens": list(self.tokens),
            "lengths": list(self.lengths),
            "chosen": LETTERS[self.chosen],
            "chosen_norm": LETTERS[self.chosen_norm],
            "answer": LETTERS[self.answer],
            **self.metrics(),
        }


async def score_options(
    paced: Paced, request: Request, options: ScoredOptions, answer: int
) -> tuple[Completion, OptionScores]:
    """Score every option of an item, one call after another (a server keeps the shared
    context's cache between them); the answer is the letter of the ``verdict`` metric's pick."""
    from ..scoring import LETTERS

    calls = [await paced(_option_request(request, pair)) for pair in options.pairs]
    values = [json.loads(call.text) for call in calls]
    scores = OptionScores(
        logprobs=tuple(float(value["logprob"]) for value in values),
        tokens=tuple(int(value["tokens"]) for value in values),
        lengths=options.lengths,
        answer=answer,
    )
    pick = scores.chosen_norm if options.verdict == "acc_norm" else scores.chosen
    return _summed(calls, LETTERS[pick]), scores


def _option_request(request: Request, pair: tuple[str, str]) -> Request:
    context, continuation = pair
    return dataclasses.replace(
        request,
        messages=(
            {"role": "user", "content": context},
            {"role": "assistant", "content": continuation},
        ),
        params={},
        # Nothing but the model and the text shapes a log-probability: no sampling parameter.
        key_params={"llmbench_loglikelihood": 1},
        stream=False,
        loglikelihood=True,
        estimate=(len(context) + len(continuation)) // 4 + 1,
    )


def _summed(calls: Sequence[Completion], text: str) -> Completion:
    """The item's calls as one completion: its answer ``text``, usage and time summed."""
    first = calls[0]
    total: dict[str, Any] = {"input_tokens": None, "output_tokens": None, "cost_usd": None}
    for call in calls:
        for name in total:
            total[name] = add_known(total[name], getattr(call, name))
    return dataclasses.replace(
        first,
        text=text,
        **total,
        tokens_estimated=any(call.tokens_estimated for call in calls),
        latency_s=sum(call.latency_s for call in calls),
        retries=sum(call.retries for call in calls),
        cached=all(call.cached for call in calls),
        **batch_fields(calls),
        rate_limit_wait_s=sum(call.rate_limit_wait_s for call in calls),
        finish_reason=None,  # options scored, nothing generated
    )


def _first_max(values: Sequence[float]) -> int:
    best = 0
    for index, value in enumerate(values):
        if value > values[best]:
            best = index
    return best
