"""``--shard K/N``: one of N deterministic parts of a run, for N CI runners.

The selected items (after ``-k``, ``-m``, ``--lf`` and the like) are dealt out in collection
order, the first to shard 1, the second to shard 2, ...: every machine and every xdist worker
collects the same items in the same order, so they agree on the split, and the shards differ
by one item at most. Repeats of a case are items of their own and may land on different shards;
the contestants of a ``select-best`` contest (a case and repeat, every model and variant) are
dealt as one, since their answers are judged together (shards then differ by a contest).
The run-wide budgets (``--rpm``, ``--tpm``, ``--max-cost``, ``--concurrency``) are divided by N
so that N shards together keep to them; a profile's own limits stay as written. ``run.json``
says which shard a run was and how its budgets were split; ``llmbench merge`` puts the shards
back together.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

#: The run's config (:class:`~pytest_llmbench.config.RunConfig`, which imports this module).
Run = TypeVar("Run", bound="DataclassInstance")

_SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")
#: The run-wide budgets a shard gets its share of.
SPLIT_BUDGETS = ("rpm", "tpm", "max_cost", "concurrency")


def parse_shard(raw: str | None) -> tuple[int, int] | None:
    """``"2/3"`` -> ``(2, 3)``; None for none; a ``UsageError`` for anything else."""
    if raw is None:
        return None
    found = _SHARD.fullmatch(str(raw))
    if found is None:
        raise pytest.UsageError(
            f"llmbench: --shard takes K/N (shard K of N, e.g. 2/3), got {raw!r}"
        )
    index, count = int(found.group(1)), int(found.group(2))
    if not 1 <= index <= count:
        raise pytest.UsageError(f"llmbench: --shard {raw}: K must be from 1 to N ({count})")
    return index, count


def split_budgets(run: Run, shard: tuple[int, int] | None) -> Run:
    """``run`` with its run-wide budgets divided between ``shard``'s N shards, and run.json's
    account of it (``shard_split``: each budget for the whole run and for this shard)."""
    if shard is None:
        return run
    count = shard[1]
    changes: dict[str, Any] = {"shard": shard}
    split: dict[str, Any] = {}
    for name in SPLIT_BUDGETS:
        value = getattr(run, name)
        if value is None:
            continue
        share = max(1, value // count) if name == "concurrency" else value / count
        changes[name] = share
        split[name] = {"run": value, "shard": share}
    return dataclasses.replace(run, **changes, shard_split=split)


def select(
    config: pytest.Config,
    items: list[pytest.Item],
    shard: tuple[int, int],
    together: Callable[[pytest.Item], str | None] = lambda item: None,
) -> None:
    """Keep this shard's items (``items`` in place); the others are deselected. Items for which
    ``together`` gives the same key are dealt as one (a select-best contest's contestants)."""
    index, count = shard
    units = _units(items, together)
    kept = [item for item, unit in zip(items, units, strict=True) if unit % count == index - 1]
    dropped = [item for item, unit in zip(items, units, strict=True) if unit % count != index - 1]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


def _units(items: list[pytest.Item], together: Callable[[pytest.Item], str | None]) -> list[int]:
    """The number of the unit each item is dealt with, in order of first appearance."""
    numbers: dict[object, int] = {}
    units = []
    for position, item in enumerate(items):
        key: object = together(item)
        if key is None:
            key = position  # an item of its own
        units.append(numbers.setdefault(key, len(numbers)))
    return units
