"""The drift test of a trend: a two-sided Page-Hinkley test over a series' per-run pass rates.

Page-Hinkley watches a sequence ``x_1, x_2, ...`` (here the pass rate of each run, oldest
first) for a lasting change of its mean. After each value it updates the running mean
``mean_t`` of the values so far and two cumulative sums::

    down_t = down_(t-1) + (x_t - mean_t + delta)    # falls while values sit below the mean
    up_t   = up_(t-1)   + (x_t - mean_t - delta)    # rises while values sit above it

A drop is declared when ``max(down_1..down_t) - down_t > lambda`` (the sum fell by more than
``lambda`` since its highest point), a rise when ``up_t - min(up_1..up_t) > lambda``. The
run at which the sum was at its highest (lowest) is the last run before the change: the
mean most likely changed after it (``since_run``). After an alarm both sums start again from
the next run, so a later change is found too; the finding reported is the latest alarm (a
series that rose, then fell, reports the fall).

The parameters (:class:`DriftParams`), in pass-rate units (0..1):

- ``delta`` (0.05): the tolerance. Each run adds ``delta`` back to the sum, so a change of
  the mean much smaller than it is never declared, however long it lasts; each run's own noise
  is absorbed by it too.
- ``threshold`` (``lambda``, 0.4): how much evidence a change needs.
- ``min_runs`` (5): no alarm before this many runs: a short series says nothing.

What the defaults find (steady 90% before the drop; simulated, ``docs/trends.md`` has the
table): a sudden drop of 20 points is declared 4 runs after it (6 after only 5 steady runs),
30 points after 2, 50 points at once; a drop of 10 points is not declared (``delta`` 0.02 with
``lambda`` 0.5 finds it after about 12 runs). A steady 80% over 30 runs raises no alarm at 50
items a run and a false one in about 1 series of 50 at 20 items a run.

Pure and deterministic: no clock, no randomness, nothing imported beyond the standard library.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..trend import Drift

#: The method's name in :attr:`Drift.method`.
PAGE_HINKLEY = "page-hinkley"


@dataclass(frozen=True)
class DriftParams:
    """The Page-Hinkley test's parameters (see the module's docstring)."""

    delta: float = 0.05  #: the tolerance: a smaller change of the mean is never declared
    threshold: float = 0.4  #: ``lambda``: the fall (or rise) of the sum that declares a change
    min_runs: int = 5  #: no alarm before this many runs

    def __post_init__(self) -> None:
        if self.delta < 0 or self.threshold <= 0 or self.min_runs < 1:
            raise ValueError(
                "drift parameters need delta >= 0, threshold > 0 and min_runs >= 1, got "
                f"delta={self.delta}, threshold={self.threshold}, min_runs={self.min_runs}"
            )


#: The parameters ``llmbench trend`` uses.
DEFAULT_PARAMS = DriftParams()


def page_hinkley(
    values: Sequence[float], runs: Sequence[str], params: DriftParams | None = None
) -> Drift:
    """The two-sided Page-Hinkley test over ``values`` (one per run of ``runs``, oldest
    first): whether, where and which way the mean changed. ``statistic`` is the largest the
    test's statistic (either side) reached; ``params`` default to :data:`DEFAULT_PARAMS`."""
    params = params or DEFAULT_PARAMS
    if len(values) != len(runs):
        raise ValueError(f"{len(values)} values for {len(runs)} runs")
    found: tuple[str, str, str | None] | None = None  # (direction, at run, since run)
    largest = 0.0
    start = 0
    count = 0
    mean = down = up = 0.0
    high = low = 0.0  # the sums' extremes, and where they were (None: before the first run)
    high_at: int | None = None
    low_at: int | None = None
    for index, value in enumerate(values):
        count += 1
        mean += (value - mean) / count
        down += value - mean + params.delta
        up += value - mean - params.delta
        if down >= high:
            high, high_at = down, index
        if up <= low:
            low, low_at = up, index
        fall, rise = high - down, up - low
        largest = max(largest, fall, rise)
        if index - start + 1 < params.min_runs or max(fall, rise) <= params.threshold:
            continue
        direction, at = ("down", high_at) if fall >= rise else ("up", low_at)
        found = (direction, runs[index], runs[at] if at is not None else None)
        start, count = index + 1, 0
        mean = down = up = high = low = 0.0
        high_at = low_at = None
    return Drift(
        method=PAGE_HINKLEY,
        detected=found is not None,
        direction=found[0] if found else None,
        at_run=found[1] if found else None,
        since_run=found[2] if found else None,
        statistic=largest,
        threshold=params.threshold,
    )
