"""Dataset factories for the example evals: functions that yield cases (see additions.eval.yaml)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any


def additions(n: int = 5, seed: int = 0, digits: int = 3) -> Iterator[dict[str, Any]]:
    """``n`` additions of two ``digits``-digit numbers, the same ones for a given seed.

    Generated data, as in the NEAR AI benchmark docs' 3-digit addition example: every xdist
    worker calls the factory while collecting, so it must be deterministic.
    """
    rng = random.Random(seed)
    low, high = 10 ** (digits - 1), 10**digits - 1
    for index in range(n):
        a, b = rng.randint(low, high), rng.randint(low, high)
        yield {
            "id": f"add-{index + 1}-{a}-{b}",
            "prompt": f"What is {a} + {b}? Reply with the number only.",
            "expected": str(a + b),
            "vars": {"a": a, "b": b},
        }
