"""The run-wide rates split between xdist workers (engine/pacing.py ``worker_share``)."""

from __future__ import annotations

import math

import pytest

from pytest_llmbench.engine.pacing import worker_share


@pytest.mark.parametrize(
    ("per_run", "workers", "shares"),
    [
        (3, 2, [2, 1]),  # target_rpm 3 with -n 2 ran at 2 a minute: 1.5 each admitted 1
        (10, 3, [4, 3, 3]),
        (120, 2, [60, 60]),
        (1000, 3, [334, 333, 333]),  # tokens per minute alike
        (7.5, 2, [4, 3]),  # the whole part is dealt out: a window counts whole requests
    ],
)
def test_a_run_wide_rate_is_used_in_full_and_never_more(
    per_run: float, workers: int, shares: list[int]
) -> None:
    got = [worker_share(per_run, workers, index) for index in range(workers)]
    assert got == shares
    assert sum(got) == math.floor(per_run)  # type: ignore[arg-type]


def test_below_one_per_worker_stays_a_fraction() -> None:
    # A share of 0 would stop a worker for good: each gets one start per longer window.
    assert [worker_share(1, 2, index) for index in range(2)] == [0.5, 0.5]
    assert worker_share(3, 4, 3) == 0.75


def test_one_process_keeps_the_rate_as_given() -> None:
    assert worker_share(2.5, 1, 0) == 2.5
    assert worker_share(None, 4, 0) is None
