"""Values of options that a run and the ``llmbench`` command both read: ages (``--cache-ttl``,
``llmbench cache prune --older-than``) and the repeat policy (``--repeat-policy``).

Here, in the config stage, so that the run's config reads them without importing the engine or
the results stage that use them.
"""

from __future__ import annotations

import re

#: Seconds per unit of an age written as ``90s``, ``30m``, ``12h`` or ``14d``.
_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])")


def parse_age(text: str) -> float:
    """Seconds in an age such as ``90s``, ``30m``, ``12h`` or ``14d`` (more than 0);
    anything else is a ValueError saying what is expected."""
    match = _AGE.fullmatch(text.strip().lower())
    seconds = float(match[1]) * _AGE_UNITS[match[2]] if match else 0.0
    if seconds <= 0:
        raise ValueError(
            f"{text!r} is not an age: write a positive number and a unit, s, m, h or d "
            "(90s, 30m, 12h, 14d)"
        )
    return seconds


def format_age(seconds: float) -> str:
    """``seconds`` in the largest unit it is a whole number of, or that it holds at least twice
    (rounded down): 90s, 30m, 36h, 14d; ``14d`` reads back as the same age."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size or (seconds >= size and seconds % size == 0):
            return f"{seconds // size:.0f}{unit}"
    return f"{max(0.0, seconds):.0f}s"


def parse_repeat_policy(raw: str) -> str:
    """``raw`` as a ``--repeat-policy`` (all, majority, any, at-least:K with K >= 1), lower-cased;
    ValueError naming it otherwise."""
    policy = raw.lower()
    if policy in ("all", "majority", "any"):
        return policy
    count = policy.removeprefix("at-least:")
    if policy.startswith("at-least:") and count.isdigit() and int(count) >= 1:
        return policy
    raise ValueError(
        f"--repeat-policy must be all, majority, any or at-least:K (K >= 1), got {raw!r}"
    )
