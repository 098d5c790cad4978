"""RateLimiter on a fake clock (instant, exact) and once in real time; AdaptiveConcurrency."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from pytest_llmbench.engine.event_loop import Engine
from pytest_llmbench.engine.ratelimit import AdaptiveConcurrency, RateLimiter

T = TypeVar("T")


class FakeClock:
    """A clock that only moves when someone sleeps on it (or a test sets ``now``)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        wake_at = self.now + seconds
        await asyncio.sleep(0)  # tasks that are ready run first, at the time they were ready
        self.now = max(self.now, wake_at)


def run(main: Callable[[], Awaitable[T]]) -> T:
    async def wrapper() -> T:
        return await main()

    return asyncio.run(wrapper())


def limiter(clock: FakeClock, rpm: float | None = None, tpm: float | None = None) -> RateLimiter:
    return RateLimiter(rpm, tpm, clock=clock, sleep=clock.sleep)


# --- RateLimiter ---------------------------------------------------------------------------------


def test_61st_request_waits_until_the_first_leaves_the_window() -> None:
    clock = FakeClock()
    rl = limiter(clock, rpm=60)

    async def main() -> list[float]:
        waits = [await rl.acquire()]
        clock.now = 10.0
        waits += [await rl.acquire() for _ in range(59)]
        waits.append(await rl.acquire())  # the first start (t=0) leaves at t=60
        waits.append(await rl.acquire())  # the 59 starts at t=10 leave at t=70
        return waits

    waits = run(main)
    assert waits[:60] == [0.0] * 60
    assert waits[60:] == [50.0, 10.0]
    assert clock.now == 70.0


def test_waiting_counts_the_requests_held_back_now() -> None:
    """What the progress line shows as 'waiting on a rate limit'."""
    clock = FakeClock()
    rl = limiter(clock, rpm=2)
    seen: list[int] = []

    async def main() -> None:
        await rl.acquire()
        await rl.acquire()
        third = asyncio.ensure_future(rl.acquire())
        fourth = asyncio.ensure_future(rl.acquire())
        await asyncio.sleep(0)
        seen.append(rl.waiting)  # both wait for the window to move
        await third
        await fourth
        seen.append(rl.waiting)

    assert rl.waiting == 0
    run(main)
    assert seen == [2, 0]


def test_tpm_limits_by_tokens() -> None:
    clock = FakeClock()
    rl = limiter(clock, tpm=1000)

    async def main() -> list[float]:
        waits = [await rl.acquire(600)]
        clock.now = 5.0
        waits.append(await rl.acquire(300))  # 900 <= 1000
        waits.append(await rl.acquire(200))  # 1100 > 1000: wait until the 600 leave at t=60
        waits.append(await rl.acquire(0))  # 500 in the window: a call without an estimate goes
        return waits

    assert run(main) == [0.0, 0.0, 55.0, 0.0]


def test_record_tokens_counts_against_the_window() -> None:
    clock = FakeClock()
    rl = limiter(clock, tpm=1000)

    async def main() -> float:
        await rl.acquire(100)
        clock.now = 10.0
        rl.record_tokens(850)  # the call used more than estimated: 950 in the window
        return await rl.acquire(100)  # fits once the 100 of t=0 leave at t=60

    assert run(main) == 50.0
    with pytest.raises(ValueError, match="tokens"):
        rl.record_tokens(-1)


def test_over_budget_window_holds_back_calls_without_estimate() -> None:
    clock = FakeClock()
    rl = limiter(clock, tpm=100)

    async def main() -> float:
        await rl.acquire(10)
        rl.record_tokens(200)  # 210 > 100 until t=60
        return await rl.acquire()

    assert run(main) == 60.0


def test_waiters_are_served_in_arrival_order() -> None:
    clock = FakeClock()
    rl = limiter(clock, rpm=1)
    order: list[int] = []

    async def call(index: int) -> float:
        waited = await rl.acquire()
        order.append(index)
        return waited

    async def main() -> list[float]:
        return list(await asyncio.gather(*(call(i) for i in range(5))))

    waits = run(main)
    assert order == [0, 1, 2, 3, 4]
    assert waits == [0.0, 60.0, 120.0, 180.0, 240.0]


def test_small_request_does_not_overtake_a_waiting_large_one() -> None:
    clock = FakeClock()
    rl = limiter(clock, tpm=100)
    order: list[str] = []

    async def call(name: str, tokens: int) -> float:
        waited = await rl.acquire(tokens)
        order.append(name)
        return waited

    async def main() -> list[float]:
        await rl.acquire(50)
        # "small" would fit at once (50 + 10 <= 100), but "large" came first and needs an empty
        # window (t=60); then its 100 tokens hold "small" back until t=120.
        return list(await asyncio.gather(call("large", 100), call("small", 10)))

    assert run(main) == [60.0, 120.0]
    assert order == ["large", "small"]


def test_oversized_request_passes_on_an_empty_window() -> None:
    clock = FakeClock()
    rl = limiter(clock, tpm=100)

    async def main() -> list[float]:
        waits = [await rl.acquire(500)]  # empty window: allowed although 500 > 100
        waits.append(await rl.acquire(1))  # waits until the 500 leave
        waits.append(await rl.acquire(500))  # waits until the window is empty again
        return waits

    assert run(main) == [0.0, 60.0, 60.0]


def test_no_limits_never_wait() -> None:
    clock = FakeClock()
    rl = limiter(clock)

    async def main() -> list[float]:
        rl.record_tokens(10**9)
        return [await rl.acquire(10**6) for _ in range(1000)]

    assert run(main) == [0.0] * 1000
    assert clock.sleeps == []


def test_tpm_only_does_not_count_requests() -> None:
    clock = FakeClock()
    rl = limiter(clock, tpm=1000)

    async def main() -> list[float]:
        return [await rl.acquire(1) for _ in range(1000)]

    assert run(main) == [0.0] * 1000
    assert clock.sleeps == []


def test_fractional_rpm() -> None:
    below_one, above_one = FakeClock(), FakeClock()
    slow, rounded = limiter(below_one, rpm=0.5), limiter(above_one, rpm=2.5)

    async def main() -> tuple[list[float], list[float]]:
        slow_waits = [await slow.acquire() for _ in range(3)]
        rounded_waits = [await rounded.acquire() for _ in range(3)]
        return slow_waits, rounded_waits

    slow_waits, rounded_waits = run(main)
    assert slow_waits == [0.0, 120.0, 120.0]  # one start per 120 s, never a deadlock
    assert rounded_waits == [0.0, 0.0, 60.0]  # 2.5 per minute: at most 2 in any 60 s


def test_cancelled_waiter_records_nothing_and_frees_the_queue() -> None:
    clock = FakeClock()
    rl = limiter(clock, rpm=1)

    async def main() -> float:
        await rl.acquire()
        blocked = asyncio.create_task(rl.acquire())
        await asyncio.sleep(0)  # "blocked" holds the lock and sleeps
        blocked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await blocked
        clock.now = 60.0
        return await rl.acquire()

    assert run(main) == 0.0


@pytest.mark.parametrize(
    ("rpm", "tpm", "window_s", "message"),
    [(0, None, 60.0, "rpm"), (None, -5, 60.0, "tpm"), (1, None, 0.0, "window_s")],
)
def test_invalid_limits(
    rpm: float | None, tpm: float | None, window_s: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        RateLimiter(rpm, tpm, window_s=window_s)


def test_negative_token_estimate_is_refused() -> None:
    rl = RateLimiter(rpm=1)
    with pytest.raises(ValueError, match="tokens"):
        run(lambda: rl.acquire(-1))


@pytest.mark.slow
def test_real_time_sliding_window_is_never_exceeded() -> None:
    window, rpm, tasks = 0.5, 10, 25
    readings: list[float] = []

    def clock() -> float:
        readings.append(time.monotonic())
        return readings[-1]

    rl = RateLimiter(rpm=rpm, window_s=window, clock=clock)
    starts: list[float] = []

    async def call() -> None:
        await rl.acquire()
        # acquire reads the clock to record the start, then once more for its return value,
        # with no await between: the start is the limiter's own reading, free of any jitter.
        starts.append(readings[-2])

    async def main() -> None:
        await asyncio.gather(*(call() for _ in range(tasks)))

    began = time.monotonic()
    run(main)
    assert len(starts) == tasks
    busiest = max(sum(t <= s < t + window for s in starts) for t in starts)
    assert busiest == rpm
    assert starts[-1] - began >= 2 * window  # 25 starts need three windows


# --- AdaptiveConcurrency -------------------------------------------------------------------------


def test_never_more_than_current_in_flight() -> None:
    gate = AdaptiveConcurrency(5)
    inside = 0
    most = 0

    async def call() -> None:
        nonlocal inside, most
        async with gate:
            inside += 1
            most = max(most, inside)
            assert gate.in_flight <= gate.current
            for _ in range(3):
                await asyncio.sleep(0)
            inside -= 1

    async def main() -> None:
        await asyncio.gather(*(call() for _ in range(50)))

    run(main)
    assert most == 5
    assert gate.in_flight == 0


def test_rate_limited_halves_while_in_flight_calls_finish() -> None:
    gate = AdaptiveConcurrency(16, minimum=3)
    finished: list[int] = []

    async def main() -> None:
        go = asyncio.Event()

        async def call(index: int) -> None:
            async with gate:
                await go.wait()
                finished.append(index)

        holders = [asyncio.create_task(call(i)) for i in range(16)]
        await asyncio.sleep(0)
        assert gate.in_flight == 16
        currents = []
        for _ in range(4):
            gate.on_rate_limited()
            currents.append(gate.current)
        assert currents == [8, 4, 3, 3]  # halves, floored at minimum
        assert gate.in_flight == 16  # nobody was stopped
        late = asyncio.create_task(call(99))
        await asyncio.sleep(0)
        assert not late.done() and gate.in_flight == 16
        go.set()
        await asyncio.gather(*holders, late)

    run(main)
    assert sorted(finished) == [*range(16), 99]
    assert gate.in_flight == 0


def test_over_limit_newcomers_wait_until_in_flight_drops_below_current() -> None:
    gate = AdaptiveConcurrency(4)

    async def main() -> None:
        stops = [asyncio.Event() for _ in range(4)]

        async def call(stop: asyncio.Event) -> None:
            async with gate:
                await stop.wait()

        holders = [asyncio.create_task(call(stop)) for stop in stops]
        await asyncio.sleep(0)
        gate.on_rate_limited()  # current 2, in flight 4
        newcomer = asyncio.create_task(call(asyncio.Event()))
        for stop, expected in zip(stops[:3], [3, 2, 2], strict=True):
            stop.set()
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            assert gate.in_flight == expected  # the newcomer enters only once 1 < 2
        assert not newcomer.done()
        stops[3].set()
        await asyncio.gather(*holders)
        newcomer.cancel()  # cancelled inside the context: its slot is released
        with pytest.raises(asyncio.CancelledError):
            await newcomer

    run(main)
    assert gate.in_flight == 0


def test_recovers_by_one_per_recover_after_successes_up_to_limit() -> None:
    gate = AdaptiveConcurrency(4, recover_after=3)
    gate.on_rate_limited()
    assert gate.current == 2
    seen = []
    for _ in range(9):
        gate.on_success()
        seen.append(gate.current)
    assert seen == [2, 2, 3, 3, 3, 4, 4, 4, 4]


def test_rate_limit_restarts_the_success_count() -> None:
    gate = AdaptiveConcurrency(8, recover_after=3)
    gate.on_success()
    gate.on_success()
    gate.on_rate_limited()
    gate.on_success()
    gate.on_success()
    assert gate.current == 4
    gate.on_success()
    assert gate.current == 5


def test_waiters_wake_when_current_grows() -> None:
    gate = AdaptiveConcurrency(2, recover_after=2)

    async def main() -> None:
        stop = asyncio.Event()

        async def hold() -> None:
            async with gate:
                await stop.wait()

        gate.on_rate_limited()  # current 1
        holder, waiter = asyncio.create_task(hold()), asyncio.create_task(hold())
        await asyncio.sleep(0)
        assert gate.in_flight == 1
        gate.on_success()
        gate.on_success()  # current 2: the waiter enters while the holder still holds
        await asyncio.sleep(0)
        assert gate.current == 2 and gate.in_flight == 2
        stop.set()
        await asyncio.gather(holder, waiter)

    run(main)
    assert gate.in_flight == 0


def test_waiters_enter_in_arrival_order_and_cancelled_ones_leave_no_trace() -> None:
    gate = AdaptiveConcurrency(1)
    order: list[int] = []

    async def call(index: int) -> None:
        async with gate:
            order.append(index)
            await asyncio.sleep(0)

    async def main() -> None:
        async with gate:
            tasks = [asyncio.create_task(call(i)) for i in range(5)]
            await asyncio.sleep(0)
            tasks[0].cancel()  # cancelled while queued; its task has not run since
        # leaving handed the slot past the cancelled waiter to the next one in line
        assert gate.in_flight == 1
        await asyncio.gather(*tasks, return_exceptions=True)
        assert tasks[0].cancelled()

    run(main)
    assert order == [1, 2, 3, 4]
    assert gate.in_flight == 0


def test_cancel_after_the_slot_was_handed_over_passes_it_on() -> None:
    gate = AdaptiveConcurrency(1)

    async def main() -> None:
        stop = asyncio.Event()

        async def hold() -> None:
            async with gate:
                await stop.wait()

        holder = asyncio.create_task(hold())
        await asyncio.sleep(0)
        unlucky = asyncio.create_task(hold())
        await asyncio.sleep(0)
        stop.set()
        await asyncio.sleep(0)  # the holder leaves and hands its slot to "unlucky" ...
        assert holder.done() and gate.in_flight == 1
        unlucky.cancel()  # ... which is cancelled before it could run
        with pytest.raises(asyncio.CancelledError):
            await unlucky
        assert gate.in_flight == 0
        async with gate:
            assert gate.in_flight == 1

    run(main)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limit": 0}, "minimum"),
        ({"limit": 2, "minimum": 3}, "minimum"),
        ({"limit": 2, "recover_after": 0}, "recover_after"),
    ],
)
def test_invalid_concurrency(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AdaptiveConcurrency(**kwargs)


def test_limiters_built_on_the_main_thread_work_on_the_engine_loop() -> None:
    clock = FakeClock()
    rl, gate = limiter(clock, rpm=1), AdaptiveConcurrency(1)
    engine = Engine()

    async def call() -> float:
        async with gate:
            return await rl.acquire()

    try:
        futures = [engine.submit(call()) for _ in range(3)]
        waits = [future.result(timeout=5) for future in futures]
    finally:
        engine.close()
    # one call at a time: each starts waiting for the limiter when the one before is done
    assert waits == [0.0, 60.0, 60.0]
    assert clock.now == 120.0


def test_a_held_request_counts_until_its_answer_and_is_stamped_then() -> None:
    """A slow first call (stuck before it leaves, or slow to answer) may reach the provider at
    any time until its answer is back: the next request in a window of one waits a full window
    after that answer, not after the moment the first was admitted."""
    clock = FakeClock()
    rl = limiter(clock, rpm=1)
    admitted: list[float] = []

    async def first() -> None:
        async with rl.holding() as held:
            assert held.waited == 0.0
            admitted.append(clock.now)
            await clock.sleep(45.0)  # the request leaves late and is answered at t=45

    async def second() -> None:
        await asyncio.sleep(0)  # after the first is admitted
        async with rl.holding():
            admitted.append(clock.now)

    async def main() -> None:
        await asyncio.gather(first(), second())

    run(main)
    assert admitted == [0.0, 45.0 + 60.0]


def test_a_retry_settles_the_attempt_before_it_and_is_held_in_turn() -> None:
    clock = FakeClock()
    rl = limiter(clock, rpm=1)

    async def main() -> list[float]:
        async with rl.holding() as held:
            clock.now = 10.0  # the first attempt's error is back at t=10
            waits = [await held.next_attempt()]  # a window after it, never a deadlock
            clock.now += 5.0  # the retry answered at t=75
        waits.append(await rl.acquire())
        return waits

    assert run(main) == [60.0, 60.0]
    assert clock.now == 135.0
