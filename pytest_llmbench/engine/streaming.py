"""Which items stream their answer under ``--stream=sample``.

A streamed call measures time to first token but costs CPU per chunk, so by default only a
sample streams: each contestant's (model and variant) ``STREAM_SAMPLE_MIN`` items of lowest hash, plus about
``STREAM_SAMPLE_PERCENT`` percent of the rest. The choice hashes node ids only, so it is the
same on every xdist worker and in every run.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .plan import CallPlan

#: Share of calls streamed under ``--stream=sample`` (besides one per model), in percent.
STREAM_SAMPLE_PERCENT = 2
#: Items per model always streamed under ``--stream=sample`` (all of them when fewer).
STREAM_SAMPLE_MIN = 20


def digest(text: str) -> int:
    """A 64-bit hash of ``text``, the same in every process (unlike ``hash``)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


@dataclass
class StreamSample:
    """Which items stream under ``--stream=sample``: deterministic, the same on every worker."""

    always: set[str] = field(default_factory=set)

    @classmethod
    def for_plans(cls, plans: Iterable[CallPlan]) -> StreamSample:
        """Always stream each contestant's ``STREAM_SAMPLE_MIN`` items of lowest hash, so every
        model, and every prompt or temperature variant of it, gets TTFT percentiles from a real
        sample however few items it has."""
        by_model: dict[str, list[tuple[int, str]]] = {}
        for plan in plans:
            by_model.setdefault(plan.label, []).append((digest(plan.nodeid), plan.nodeid))
        chosen: set[str] = set()
        for candidates in by_model.values():
            chosen.update(nodeid for _, nodeid in heapq.nsmallest(STREAM_SAMPLE_MIN, candidates))
        return cls(chosen)

    def streams(self, nodeid: str) -> bool:
        """Whether the item ``nodeid`` is in the sample."""
        return nodeid in self.always or digest(nodeid) % 100 < STREAM_SAMPLE_PERCENT
