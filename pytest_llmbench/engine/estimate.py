"""``--estimate-cost``: what the collected items would cost, before any model is called.

Input tokens are counted from the rendered prompts as litellm counts them (without importing it:
:mod:`..models.providers.tokens`); output tokens are
the case's ``expected_output_tokens``, else its ``max_tokens``, else a default. What calls an
item makes is its case kind's to say (:meth:`~.kinds.CaseKind.estimated_tokens`: a
conversation's per turn, a log-likelihood item's per option). Prices come
from the profile, else litellm's price map; a model with neither shows no estimate.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from .plan import PLANS_KEY, CallPlan


@dataclass(frozen=True)
class ModelEstimate:
    """The estimated usage and cost of one model's items."""

    model: str
    items: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


def estimate_plans(plans: Iterable[CallPlan]) -> list[ModelEstimate]:
    """One estimate per model, in the order models first appear."""
    from ..models import CallTarget, prompt_tokens
    from ..models import cost_usd as price
    from .kinds import kind_of

    def count_prompt_tokens(model_id: str, messages: Any) -> int:
        return prompt_tokens(model_id, messages) or 0

    totals: dict[str, list[Any]] = {}
    for plan in plans:
        model = plan.model
        tokens_in, tokens_out = kind_of(plan).estimated_tokens(plan, count_prompt_tokens)
        cost = model.cost_per_1k
        target = CallTarget(name=model.name, model_id=model.model)
        target = cost.priced(target) if cost else target
        entry = totals.setdefault(model.name, [0, 0, 0, 0.0])
        call_cost = price(target, tokens_in, tokens_out)
        entry[0] += 1
        entry[1] += tokens_in
        entry[2] += tokens_out
        entry[3] = None if call_cost is None or entry[3] is None else entry[3] + call_cost
    return [ModelEstimate(name, *values) for name, values in totals.items()]


def format_estimates(estimates: Sequence[ModelEstimate]) -> list[str]:
    """A fixed-width table for the terminal, with a total line."""
    width = max([5, *(len(row.model) for row in estimates)])
    header = f"{'model':{width}}  {'items':>6}  {'input tok':>10}  {'output tok':>10}  {'est. cost $':>12}"
    lines = [header]
    for row in estimates:
        cost = "unknown" if row.cost_usd is None else f"{row.cost_usd:.4f}"
        lines.append(
            f"{row.model:{width}}  {row.items:>6}  {row.input_tokens:>10}  {row.output_tokens:>10}  {cost:>12}"
        )
    known = [row.cost_usd for row in estimates if row.cost_usd is not None]
    if len(estimates) > 1 and known:
        partial = "" if len(known) == len(estimates) else " (models with a known price)"
        lines.append(f"total: {sum(known):.4f} USD{partial}")
    return lines


class CostEstimator:
    """Prints the estimate at the end of a ``--collect-only --estimate-cost`` run."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Estimate from the plans of the collected (and selected) items."""
        collected = session.config.stash.get(PLANS_KEY, None)
        self.lines = format_estimates(estimate_plans(collected.plans if collected else ()))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Print the table."""
        if self.lines:
            terminalreporter.write_sep("=", "llmbench cost estimate")
            for line in self.lines:
                terminalreporter.write_line(line)
