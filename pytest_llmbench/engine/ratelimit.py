"""Per-model pacing of model calls on one process's event loop.

``RateLimiter`` keeps request starts and tokens inside a sliding window (requests and tokens per
minute); ``AdaptiveConcurrency`` bounds the calls in flight and backs off when the provider says
we are too fast (AIMD). Under pytest-xdist each worker has its own loop and its own limiters; the
caller splits a run-wide budget between workers (``rpm / n_workers``), so neither crosses
processes. Both must be used from a single event loop (the engine's). ``ProcessSlot`` is the one
exception: a budget of one call cannot be split, so it is an exclusive lock on a shared file.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class _Use:
    at: float  # clock time the use was recorded
    amount: int  # requests (1) or tokens


@dataclass
class _Window:
    """Uses of one budget over the last ``span`` seconds."""

    capacity: float
    span: float
    _uses: deque[_Use] = field(default_factory=deque)
    _total: int = 0
    #: Uses counted with no time yet: requests whose arrival at the provider is not known.
    pending: int = 0

    def add(self, at: float, amount: int) -> None:
        if amount > 0:
            self._uses.append(_Use(at, amount))
            self._total += amount

    def wait(self, now: float, amount: int) -> float:
        """Seconds until ``amount`` more fits; anything fits a window that holds nothing;
        ``inf`` while only a pending use settling can make room."""
        while self._uses and self._uses[0].at + self.span <= now:
            self._total -= self._uses.popleft().amount
        total, free_at = self._total + self.pending, now
        for use in self._uses:
            if total + amount <= self.capacity:
                break
            total -= use.amount
            free_at = use.at + self.span
        if total + amount > self.capacity and self.pending and total > 0:
            return math.inf
        return free_at - now


class RateLimiter:
    """Sliding-window limiter: at most `rpm` request starts and `tpm` tokens in any 60 s window.

    A fractional ``rpm`` admits its whole part, except below 1, where it becomes one start per
    ``window_s / rpm`` seconds, so that a budget split between many workers never deadlocks.
    ``clock`` and ``sleep`` are injectable so that tests need not wait in real time.
    """

    def __init__(
        self,
        rpm: float | None = None,
        tpm: float | None = None,
        *,
        window_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        for name, value in (("rpm", rpm), ("tpm", tpm), ("window_s", window_s)):
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive, got {value!r}")
        self._unlimited = rpm is None and tpm is None
        self._starts = _request_window(rpm, window_s)
        self._tokens = _Window(math.inf if tpm is None else tpm, window_s)
        self._clock, self._sleep = clock, sleep
        self._lock = asyncio.Lock()  # FIFO: the first caller to wait is the first served
        self._settled = asyncio.Event()
        self._waiting = 0

    @property
    def waiting(self) -> int:
        """Requests waiting now for room in the window (the run's progress line shows them)."""
        return self._waiting

    async def acquire(self, tokens: int = 0) -> float:
        """Wait until one more request and ``tokens`` more tokens fit, record them.

        Returns the seconds waited. A request larger than ``tpm`` goes once the window holds no
        tokens. Cancelling a waiting call records nothing.
        """
        if tokens < 0:
            raise ValueError(f"tokens must be >= 0, got {tokens}")
        if self._unlimited:
            return 0.0
        return await self._admit(tokens, held=False)

    @contextlib.asynccontextmanager
    async def holding(self, tokens: int = 0) -> AsyncIterator[HeldRequest]:
        """Like :meth:`acquire`, but the request counts in the window from now until the block
        ends (its answer is back) or its next attempt starts, and is stamped at that time. The
        provider sees the request arrive in between, so however late it leaves this process (a
        slow first call, a loaded loop) no provider window holds more than ``rpm``.
        """
        if tokens < 0:
            raise ValueError(f"tokens must be >= 0, got {tokens}")
        waited = 0.0 if self._unlimited else await self._admit(tokens, held=True)
        held = HeldRequest(self, waited)
        try:
            yield held
        finally:
            held.settle()

    def _settle(self) -> None:
        self._starts.pending -= 1
        self._starts.add(self._clock(), 1)
        self._settled.set()

    async def _admit(self, tokens: int, *, held: bool) -> float:
        self._waiting += 1
        try:
            return await self._admitted(tokens, held=held)
        finally:
            self._waiting -= 1

    async def _admitted(self, tokens: int, *, held: bool) -> float:
        started = self._clock()
        async with self._lock:
            while (delay := self._delay(tokens)) > 0:
                if math.isinf(delay):  # only a held request settling makes room
                    self._settled.clear()
                    await self._settled.wait()
                else:
                    await self._sleep(delay)
            now = self._clock()
            if held:
                self._starts.pending += 1
            else:
                self._starts.add(now, 1)
            self._tokens.add(now, tokens)
        return self._clock() - started

    def record_tokens(self, tokens: int) -> None:
        """Count ``tokens`` used now beyond those passed to ``acquire`` (the estimate was low)."""
        if tokens < 0:
            raise ValueError(f"tokens must be >= 0, got {tokens}")
        if not self._unlimited:
            self._tokens.add(self._clock(), tokens)

    def _delay(self, tokens: int) -> float:
        now = self._clock()
        return max(self._starts.wait(now, 1), self._tokens.wait(now, tokens))


class HeldRequest:
    """One request counted in a :class:`RateLimiter`'s window until it settles."""

    def __init__(self, limiter: RateLimiter, waited: float) -> None:
        self._limiter = limiter
        self._held = not limiter._unlimited
        #: Seconds the first attempt waited for its turn.
        self.waited = waited

    async def next_attempt(self) -> float:
        """Settle the attempt now (its answer is back) and wait for a retry's turn, held the
        same way; returns the seconds waited."""
        self.settle()
        if self._limiter._unlimited:
            return 0.0
        waited = await self._limiter._admit(0, held=True)
        self._held = True
        return waited

    def settle(self) -> None:
        """Stamp the held attempt at the current time (once)."""
        if self._held:
            self._held = False
            self._limiter._settle()


def _request_window(rpm: float | None, window_s: float) -> _Window:
    if rpm is None:
        return _Window(math.inf, window_s)
    if rpm < 1:
        return _Window(1, window_s / rpm)
    return _Window(rpm, window_s)  # counts are whole: 2.5 per window admits 2


class AdaptiveConcurrency:
    """At most `limit` calls in flight; halves the allowed number on a rate-limit signal, and raises
    it by one after every `recover_after` successful calls, back up to `limit`.

    Use as ``async with concurrency: ...``; waiters enter in arrival order.
    """

    def __init__(self, limit: int, *, minimum: int = 1, recover_after: int = 10) -> None:
        if not 1 <= minimum <= limit:
            raise ValueError(f"need 1 <= minimum <= limit, got minimum={minimum}, limit={limit}")
        if recover_after < 1:
            raise ValueError(f"recover_after must be >= 1, got {recover_after}")
        self._limit, self._minimum, self._recover_after = limit, minimum, recover_after
        self._current = limit
        self._in_flight = 0
        self._successes = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def current(self) -> int:
        """The number of calls allowed in flight now."""
        return self._current

    @property
    def in_flight(self) -> int:
        """The number of calls in flight now (may exceed ``current`` just after a back-off)."""
        return self._in_flight

    async def __aenter__(self) -> None:
        if not self._waiters and self._in_flight < self._current:
            self._in_flight += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            # A cancelled waiter stays queued until _wake skips it; one that was handed the slot
            # just before the cancel passes it on.
            if not waiter.cancelled():
                self._release()
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._release()

    def on_rate_limited(self) -> None:
        """Halve the allowed number (not below ``minimum``); calls in flight keep running."""
        self._current = max(self._minimum, self._current // 2)
        self._successes = 0

    def on_success(self) -> None:
        """Count a successful call; every ``recover_after`` of them allow one more in flight."""
        self._successes += 1
        if self._successes >= self._recover_after:
            self._successes = 0
            self._current = min(self._limit, self._current + 1)
            self._wake()

    def _release(self) -> None:
        self._in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        # Hand slots over directly, so a newcomer cannot take the place of a woken waiter.
        while self._waiters and self._in_flight < self._current:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self._in_flight += 1


@dataclass
class ModelLane:
    """The pacing state of one model in this process."""

    concurrency: AdaptiveConcurrency
    limiter: RateLimiter
    last_backoff: float = -math.inf

    def on_retry(self, status: int | None) -> None:
        """A 429 halves how many calls may be in flight, once per burst (a second apart)."""
        now = time.monotonic()
        if status == 429 and now - self.last_backoff >= _BACKOFF_SPACING_S:
            self.last_backoff = now
            self.concurrency.on_rate_limited()


#: 429s closer together than this are one burst: concurrency is halved once for them.
_BACKOFF_SPACING_S = 1.0


class ProcessSlot:
    """One holder at a time across every process of a run: an exclusive ``flock`` on ``path``.

    Use as ``async with slot: ...``. Waiting polls a non-blocking lock every ``poll_s`` seconds,
    so a cancelled waiter leaves no thread blocked in ``flock``; the lock of a process that dies
    is released with its file descriptor. Two slots on one path exclude each other in a single
    process too.
    """

    def __init__(self, path: Path, *, poll_s: float = 0.01) -> None:
        self.path = Path(path)
        self._poll_s = poll_s
        self._fd: int | None = None

    async def __aenter__(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            while not _try_lock(fd):
                await asyncio.sleep(self._poll_s)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    async def __aexit__(self, *exc: object) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the lock


def _try_lock(fd: int) -> bool:
    import fcntl  # POSIX only: imported when a serial model or file meets xdist, not at load

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
