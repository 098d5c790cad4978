"""Values of options that a run and the ``llmbench`` command both read: ages (``--cache-ttl``,
``llmbench cache prune --older-than``), the repeat policy (``--repeat-policy``) and the judge
gate (``--judge-gate``, an eval file's ``judge_gate:``).

Here, in the config stage, so that the run's config reads them without importing the engine or
the results stage that use them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

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


#: The judge gate's defaults: the settings a ``--judge-gate`` or ``judge_gate:`` leaves out.
DEFAULT_MIN_KAPPA = 0.6
DEFAULT_MIN_LABELS = 50
JUDGE_GATE_MODES = ("demote", "fail")


@dataclass(frozen=True)
class JudgeGate:
    """The gate on judges against people's labels: a judge group with at least ``min_labels``
    labels and a Cohen's kappa below ``min_kappa`` has its verdicts demoted to unchecked, or
    (``fail``) fails the run."""

    min_kappa: float = DEFAULT_MIN_KAPPA
    min_labels: int = DEFAULT_MIN_LABELS
    fail: bool = False

    @property
    def mode(self) -> str:
        """``demote`` or ``fail``."""
        return "fail" if self.fail else "demote"

    def to_dict(self) -> dict[str, Any]:
        return {"min_kappa": self.min_kappa, "min_labels": self.min_labels, "on_fail": self.mode}

    def overridden(self, keys: Mapping[str, Any]) -> JudgeGate:
        """This gate with ``keys`` (an eval file's ``judge_gate:``, checked) in place of its
        own: ``min_kappa``, ``min_labels``, ``on_fail``; keys given as None are left."""
        changes: dict[str, Any] = {}
        if keys.get("min_kappa") is not None:
            changes["min_kappa"] = float(keys["min_kappa"])
        if keys.get("min_labels") is not None:
            changes["min_labels"] = int(keys["min_labels"])
        if keys.get("on_fail") is not None:
            changes["fail"] = keys["on_fail"] == "fail"
        return replace(self, **changes)


def parse_judge_gate(raw: str, fail: bool = False) -> JudgeGate:
    """``min_kappa=0.6,min_labels=50[,on_fail=fail]`` as a :class:`JudgeGate` (keys left out
    take the defaults; ``fail`` is ``--judge-gate-fail``); ValueError naming the bad part."""
    keys: dict[str, Any] = {}
    for part in (piece.strip() for piece in raw.split(",")):
        if not part:
            continue
        name, equals, value = (text.strip() for text in part.partition("="))
        if not equals or name not in ("min_kappa", "min_labels", "on_fail"):
            raise ValueError(
                f"--judge-gate takes min_kappa=K,min_labels=N[,on_fail=demote|fail], got {part!r}"
            )
        keys[name] = _gate_value(name, value)
    if not keys:
        raise ValueError("--judge-gate takes min_kappa=K,min_labels=N, got nothing")
    gate = JudgeGate(fail=fail).overridden(keys)
    return gate if not fail else replace(gate, fail=True)


def _gate_value(name: str, value: str) -> Any:
    """One ``--judge-gate`` key's value, checked as an eval file's ``judge_gate:`` is."""
    if name == "on_fail":
        if value.lower() not in JUDGE_GATE_MODES:
            raise ValueError(f"--judge-gate on_fail must be demote or fail, got {value!r}")
        return value.lower()
    if name == "min_labels":
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"--judge-gate min_labels must be a whole number >= 1, got {value!r}")
        return int(value)
    try:
        kappa = float(value)
    except ValueError:
        kappa = float("nan")
    if not -1.0 <= kappa <= 1.0:
        raise ValueError(f"--judge-gate min_kappa must be between -1 and 1, got {value!r}")
    return kappa
