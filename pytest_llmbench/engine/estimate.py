"""``--estimate-cost``: what the collected items would cost, before any model is called.

Input tokens are counted from the rendered prompts as litellm counts them (without importing it:
:mod:`..models.providers.tokens`); output tokens are
the case's ``expected_output_tokens``, else its ``max_tokens``, else a default. What calls an
item makes is its case kind's to say (:meth:`~.kinds.CaseKind.estimated_tokens`: a
conversation's per turn, a log-likelihood item's per option). Prices come
from the profile, else litellm's price map; a model with neither shows no estimate.

Each model's cost is shown live and under ``--batch``: a plain item's call at the batch price
(:func:`~..models.rates` with ``batched``), every other kind's calls live (a conversation's,
an agent's or a solver's turns depend on the last; log-likelihood items are counted live too).
A batch price that is litellm's rule (half the live price, for want of a batch price in the
profile or the map) is marked ``≈`` and its models named under the table.
"""

from __future__ import annotations

import dataclasses
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
    #: the same items' cost under ``--batch`` (None: unknown)
    batch_cost_usd: float | None = None
    #: the batch price is litellm's rule, half the live price (no batch price is known)
    batch_estimated: bool = False
    #: of ``items``, those whose calls stay live under ``--batch`` (not of :data:`BATCHED_KINDS`)
    live_items: int = 0


#: the kinds whose item's call may go to a batch API (the others' calls stay live)
BATCHED_KINDS = frozenset({"plain"})


def estimate_plans(plans: Iterable[CallPlan]) -> list[ModelEstimate]:
    """One estimate per model, in the order models first appear."""
    from ..models import CallTarget, batch_price_estimated, prompt_tokens
    from ..models import cost_usd as price
    from .kinds import kind_of

    def count_prompt_tokens(model_id: str, messages: Any) -> int:
        return prompt_tokens(model_id, messages) or 0

    totals: dict[str, ModelEstimate] = {}
    for plan in plans:
        model = plan.model
        kind = kind_of(plan)
        tokens_in, tokens_out = kind.estimated_tokens(plan, count_prompt_tokens)
        target = model.priced(CallTarget(name=model.name, model_id=model.model))
        so_far = totals.get(model.name) or ModelEstimate(model.name, 0, 0, 0, 0.0, 0.0)
        live = price(target, tokens_in, tokens_out)
        batched = kind.name in BATCHED_KINDS
        totals[model.name] = dataclasses.replace(
            so_far,
            items=so_far.items + 1,
            input_tokens=so_far.input_tokens + tokens_in,
            output_tokens=so_far.output_tokens + tokens_out,
            cost_usd=_plus(so_far.cost_usd, live),
            batch_cost_usd=_plus(
                so_far.batch_cost_usd,
                price(target, tokens_in, tokens_out, batched=True) if batched else live,
            ),
            batch_estimated=so_far.batch_estimated or (batched and batch_price_estimated(target)),
            live_items=so_far.live_items + (0 if batched else 1),
        )
    return list(totals.values())


def _plus(total: float | None, cost: float | None) -> float | None:
    return None if total is None or cost is None else total + cost


def _cost(cost: float | None, estimated: bool = False) -> str:
    if cost is None:
        return "unknown"
    return f"{'≈' if estimated else ''}{cost:.4f}"


def format_estimates(estimates: Sequence[ModelEstimate]) -> list[str]:
    """A fixed-width table for the terminal: each model's cost live and under ``--batch``,
    the totals, and the models whose batch price is litellm's rule (half the live price)."""
    width = max([5, *(len(row.model) for row in estimates)])
    header = (
        f"{'model':{width}}  {'items':>6}  {'input tok':>10}  {'output tok':>10}"
        f"  {'live $':>10}  {'batch $':>10}"
    )
    lines = [header]
    for row in estimates:
        live, batch = _cost(row.cost_usd), _cost(row.batch_cost_usd, row.batch_estimated)
        lines.append(
            f"{row.model:{width}}  {row.items:>6}  {row.input_tokens:>10}"
            f"  {row.output_tokens:>10}  {live:>10}  {batch:>10}"
        )
    known = [row for row in estimates if row.cost_usd is not None]
    if len(estimates) > 1 and known:
        partial = "" if len(known) == len(estimates) else " (models with a known price)"
        live_total = sum(row.cost_usd or 0.0 for row in known)
        batch_total = sum(row.batch_cost_usd or 0.0 for row in known)
        lines.append(f"total: {live_total:.4f} USD live, {batch_total:.4f} USD batch{partial}")
    halved = [row.model for row in known if row.batch_estimated]
    if halved:
        lines.append(f"≈ half (litellm's rule: no batch price known): {', '.join(halved)}")
    unbatched = sum(row.live_items for row in estimates)
    if unbatched:
        lines.append(
            f"batch $: {unbatched} items priced live (conversations, agents, solvers and "
            "log-likelihood items are not batched)"
        )
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
