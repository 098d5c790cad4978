"""How identical requests of one run share one answer, so that every item continues from the
one the response cache keeps and a replay of the run finds every history.

:class:`SingleFlight` makes identical requests in flight at once one call. :class:`Takers`
tells a rerun from another item: under ``--cache=refresh`` an item run again (pytest-
rerunfailures) samples the model anew where it alone took the answer, while another item asking
the same takes the answer the run stored.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..models import Completion

__all__ = ["Settled", "SingleFlight", "Takers", "as_hit"]


def as_hit(stored: Completion) -> Completion:
    """A stored answer as a call answered from the cache reports it: no retries, no wait."""
    return dataclasses.replace(stored, cached=True, retries=0, rate_limit_wait_s=0.0)


@dataclass(frozen=True)
class Settled:
    """A call that stored its answer: what its caller gets, and what the cache holds."""

    returned: Completion  #: the call's own answer, or the one the cache kept instead (a hit)
    held: Completion  #: the answer stored under the key, which identical requests share


class SingleFlight:
    """Identical cacheable requests at once on the engine loop: the first calls, the others
    wait for it and take the answer it stored, as a cache hit.

    A waiter never shares a failure (errors are not cached): when the first call fails or is
    cancelled (the scheduler cancels look-ahead work), one waiter calls in its place and the
    others wait for that one. A waiter's own cancellation leaves the call it waits for alone.
    """

    def __init__(self) -> None:
        #: the call in flight per key: its future holds the stored answer, or None on failure
        self._flights: dict[str, asyncio.Future[Completion | None]] = {}

    async def once(self, key: str, call: Callable[[], Awaitable[Settled]]) -> Completion:
        """``call()``'s answer, or, while an identical one is in flight, that one's."""
        loop = asyncio.get_running_loop()
        while (flight := self._flights.get(key)) is not None and flight.get_loop() is loop:
            held = await asyncio.shield(flight)
            if held is not None:
                return as_hit(held)
        flight = loop.create_future()
        self._flights[key] = flight
        held = None
        try:
            settled = await call()
            held = settled.held
            return settled.returned
        finally:
            if self._flights.get(key) is flight:
                del self._flights[key]
            flight.set_result(held)


class Takers:
    """Which item of this process took each answer the run stored (refreshed runs only).

    An item asking again for an answer it alone took is a rerun; once another item of the
    process took the same answer, it is shared and a rerun keeps it too. (Items in other
    xdist workers are not seen: one that took the answer there is not protected from a rerun.)
    """

    def __init__(self) -> None:
        #: the one item that took each key's answer; None once several did
        self._takers: dict[str, str | None] = {}
        self._lock = threading.Lock()  # the engine's thread and the main one both ask

    def took(self, key: str, nodeid: str) -> None:
        """Item ``nodeid`` continues from the answer stored under ``key``."""
        with self._lock:
            known = self._takers.get(key, nodeid)
            self._takers[key] = nodeid if known == nodeid else None

    def asks_again(self, key: str, nodeid: str) -> bool:
        """Whether item ``nodeid`` alone took ``key``'s answer before: it runs again."""
        with self._lock:
            return self._takers.get(key) == nodeid
