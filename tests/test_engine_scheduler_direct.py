"""CallScheduler in-process (engine/scheduler.py): look-ahead, take, cancel, order, errors.

No pytest session runs here. The scheduler drives a real :class:`Engine` (its loop on its own
thread) and a stand-in answerer whose answers wait until the test opens their gate, so what is
started, taken and cancelled is known exactly, with no clock to race.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

from pytest_llmbench.config import RunConfig
from pytest_llmbench.engine.answer import Answerer
from pytest_llmbench.engine.event_loop import Engine
from pytest_llmbench.engine.plan import CallPlan
from pytest_llmbench.engine.request import Answer
from pytest_llmbench.engine.scheduler import CallScheduler
from pytest_llmbench.models.item_errors import ProviderError, SandboxError
from pytest_llmbench.models.profiles import ModelProfile, ProfileRegistry
from pytest_llmbench.models.providers.completion import Completion

#: Long enough for the engine's thread to take any step, short of hanging a broken test.
PATIENCE_S = 10.0


def answer_of(nodeid: str) -> Answer:
    completion = Completion(f"answer of {nodeid}", "openai/fake", 1, 1, False, None, 0.0, 0.0, 0, False, "stop")  # fmt: skip
    return Answer(completion)


@dataclass(frozen=True)
class Plan:
    """What the scheduler reads of a :class:`CallPlan`."""

    nodeid: str
    model: ModelProfile
    agent: object | None = None

    @property
    def label(self) -> str:
        return self.model.name


@dataclass
class Gated:
    """A stand-in :class:`Answerer`: each answer waits for its gate; what happens is logged."""

    cached: set[str] = field(default_factory=set)  #: answered at once, from the "cache"
    broken: dict[str, Exception] = field(default_factory=dict)  #: answer() raises this
    failing: dict[str, Exception] = field(default_factory=dict)  #: the answer raises this
    contests: dict[str, tuple[str, ...]] = field(default_factory=dict)
    started: list[tuple[str, Path | None, bool]] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    claimed: list[str] = field(default_factory=list)
    withdrawn: list[tuple[str, str]] = field(default_factory=list)
    plain: list[tuple[str, int]] = field(default_factory=list)
    closed: bool = False
    gates: dict[str, threading.Event] = field(default_factory=dict)

    def gate(self, nodeid: str) -> threading.Event:
        return self.gates.setdefault(nodeid, threading.Event())

    def answer(
        self, plan: Plan, workdir: Path | None, *, stream: bool
    ) -> Answer | Coroutine[Any, Any, Answer]:
        if plan.nodeid in self.broken:
            raise self.broken[plan.nodeid]
        if plan.nodeid in self.cached:
            return answer_of(plan.nodeid)
        return self._answer(plan.nodeid, workdir, stream)

    async def _answer(self, nodeid: str, workdir: Path | None, stream: bool) -> Answer:
        self.started.append((nodeid, workdir, stream))
        try:
            while not self.gate(nodeid).is_set():
                await asyncio.sleep(0.002)
        except asyncio.CancelledError:
            self.cancelled.append(nodeid)
            raise
        self.finished.append(nodeid)
        if nodeid in self.failing:
            raise self.failing[nodeid]
        return answer_of(nodeid)

    def claim(self, plan: Plan, answer: Answer) -> Answer:
        self.claimed.append(plan.nodeid)
        return answer

    def contestants(self, nodeid: str) -> tuple[str, ...]:
        return self.contests.get(nodeid, ())

    async def withdraw(self, nodeid: str, why: str) -> None:
        self.withdrawn.append((nodeid, why))

    async def complete(self, model: ModelProfile, *args: Any, call: int, nodeid: str, **kw: Any) -> Completion:  # fmt: skip
        self.plain.append((nodeid, call))
        return answer_of(f"{nodeid} call {call}").completion

    def activity(self) -> tuple[int, int]:
        return (len(self.started) - len(self.cancelled), 0)

    def close(self) -> None:
        self.closed = True


FAKE = ModelProfile(name="fake", model="openai/fake-model")


def plans(count: int, model: ModelProfile = FAKE, **fields: Any) -> list[CallPlan]:
    made = [Plan(f"quiz.eval.yaml::c{i:02d}[{model.name}-r0]", model, **fields) for i in range(count)]  # fmt: skip
    return cast(list[CallPlan], made)


def run_config(concurrency: int = 1, stream: str = "off") -> RunConfig:
    """One model at ``concurrency``: a look-ahead of twice that, refilled ``concurrency`` at a
    time."""
    return RunConfig(
        models=(FAKE,),
        repeat=1,
        results_dir=None,
        min_pass_rate=None,
        request_timeout_s=30.0,
        max_retries=0,
        profiles=ProfileRegistry(models={"fake": FAKE}, sets={}),
        env_file=None,
        concurrency=concurrency,
        stream=stream,
    )


@pytest.fixture
def engine() -> Iterator[Engine]:
    engine = Engine()
    yield engine
    engine.close()


def scheduler(
    engine: Engine,
    answerer: Gated,
    all_plans: Sequence[CallPlan] = (),
    run: RunConfig | None = None,
    **options: Any,
) -> CallScheduler:
    return CallScheduler(
        engine, cast(Answerer, answerer), run or run_config(), 1, all_plans, **options
    )


def eventually(check: Any) -> None:
    """Wait for the engine's thread to make ``check()`` true."""
    done = threading.Event()
    for _ in range(int(PATIENCE_S / 0.002)):
        if check():
            return
        done.wait(0.002)
    raise AssertionError("the engine never got there")


def ids(items: Sequence[CallPlan]) -> list[str]:
    return [plan.nodeid for plan in items]


# -- look-ahead ------------------------------------------------------------------------------


def test_prefetch_starts_plans_in_order_until_the_look_ahead_is_full(engine: Engine) -> None:
    answerer, items = Gated(), plans(5)
    calls = scheduler(engine, answerer, items, run_config(concurrency=2))
    assert (calls.lookahead, calls.refill, calls.room()) == (4, 2, 4)
    calls.prefetch(items[:1])
    calls.prefetch(items)  # the first is started already: the next three fill the room
    assert list(calls.started()) == ids(items[:4]) and calls.room() == 0
    eventually(lambda: len(answerer.started) == 4)
    assert [nodeid for nodeid, _, _ in answerer.started] == ids(items[:4])
    calls.prefetch(items)
    assert len(answerer.started) == 4  # full: nothing more, nothing twice


def test_take_hands_over_the_prefetched_answer_and_frees_its_room(engine: Engine) -> None:
    answerer, items = Gated(), plans(3)
    calls = scheduler(engine, answerer, items)
    calls.prefetch(items)
    answerer.gate(items[0].nodeid).set()
    assert calls.take(items[0]) == answer_of(items[0].nodeid)
    assert answerer.claimed == [items[0].nodeid]
    assert list(calls.started()) == ids(items[1:2]) and calls.room() == 1
    calls.prefetch(items[2:])
    eventually(lambda: len(answerer.started) == 3)
    assert [nodeid for nodeid, _, _ in answerer.started] == ids(items)  # each started once


def test_an_item_not_prefetched_is_started_when_taken(engine: Engine, tmp_path: Path) -> None:
    answerer, (item,) = Gated(), plans(1)
    answerer.gate(item.nodeid).set()
    calls = scheduler(engine, answerer, [item])
    assert calls.take(item, tmp_path) == answer_of(item.nodeid)
    assert answerer.started == [(item.nodeid, tmp_path, False)]
    assert list(calls.started()) == []


def test_answers_are_taken_in_the_items_order_whichever_finishes_first(engine: Engine) -> None:
    answerer, items = Gated(), plans(2)
    calls = scheduler(engine, answerer, items)
    calls.prefetch(items)
    later = answerer.gate(items[1].nodeid)
    later.set()  # the second answer is ready first
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        first = pool.submit(calls.take, items[0])
        eventually(lambda: len(answerer.started) == 2)
        assert not first.done()  # its item waits for its own answer only
        answerer.gate(items[0].nodeid).set()
        assert first.result(timeout=PATIENCE_S) == answer_of(items[0].nodeid)
    assert calls.take(items[1]) == answer_of(items[1].nodeid)


def test_a_cached_answer_never_wakes_the_engine(engine: Engine) -> None:
    woke: list[str] = []
    engine.when_calling(lambda: woke.append("calling"))
    items = plans(3)
    answerer = Gated(cached={plan.nodeid for plan in items})
    calls = scheduler(engine, answerer, items)
    calls.prefetch(items)
    assert [calls.take(plan) for plan in items] == [answer_of(n) for n in ids(items)]
    assert woke == [] and answerer.started == []


# -- errors ----------------------------------------------------------------------------------


def test_an_answers_error_is_raised_by_its_take_only(engine: Engine) -> None:
    items = plans(2)
    error = ProviderError("fake: HTTP 503 from the provider", "provider")
    answerer = Gated(failing={items[0].nodeid: error})
    calls = scheduler(engine, answerer, items)
    calls.prefetch(items)
    answerer.gate(items[0].nodeid).set()
    answerer.gate(items[1].nodeid).set()
    with pytest.raises(ProviderError) as raised:
        calls.take(items[0])
    assert raised.value is error
    assert calls.take(items[1]) == answer_of(items[1].nodeid)


def test_an_answer_that_cannot_start_is_its_items_error_not_the_runs(engine: Engine) -> None:
    items = plans(2)
    missing = ProviderError("fake: FAKE_API_KEY is not set", "config")
    answerer = Gated(broken={items[0].nodeid: missing})
    calls = scheduler(engine, answerer, items)
    calls.prefetch(items)  # raises nothing: the item's setup will
    assert list(calls.started()) == ids(items)
    with pytest.raises(ProviderError, match="FAKE_API_KEY is not set"):
        calls.take(items[0])
    answerer.gate(items[1].nodeid).set()
    assert calls.take(items[1]) == answer_of(items[1].nodeid)


AGENT = object()  # an agent's settings: the scheduler only asks whether there are any


def test_an_agents_workdir_is_made_ahead_and_a_failure_is_its_error(engine: Engine, tmp_path: Path) -> None:  # fmt: skip
    items = plans(2, agent=AGENT) + plans(1, ModelProfile(name="plain", model="openai/plain"))
    made: list[str] = []

    def prepare(plan: CallPlan) -> Path:
        made.append(plan.nodeid)
        if plan is items[1]:
            raise OSError(28, "No space left on device")
        return tmp_path / plan.nodeid.rsplit("::", 1)[1]

    answerer = Gated()
    calls = scheduler(engine, answerer, items, run_config(concurrency=2), prepare_workdir=prepare)
    calls.prefetch(items)
    assert made == ids(items[:2])  # the plain item has no workdir
    eventually(lambda: len(answerer.started) == 2)
    assert [(n, w) for n, w, _ in answerer.started] == [
        (items[0].nodeid, tmp_path / "c00[fake-r0]"),
        (items[2].nodeid, None),
    ]
    with pytest.raises(SandboxError) as raised:
        calls.take(items[1])
    assert raised.value.kind == "sandbox"
    assert raised.value.message == "fake: its workdir cannot be made: [Errno 28] No space left on device"  # fmt: skip


# -- cancelling ------------------------------------------------------------------------------


def test_forget_cancels_the_calls_of_items_that_will_not_run(engine: Engine) -> None:
    answerer, items = Gated(), plans(4)
    calls = scheduler(engine, answerer, items, run_config(concurrency=2))
    calls.prefetch(items)
    eventually(lambda: len(answerer.started) == 4)
    calls.forget([items[1].nodeid, items[3].nodeid, "never.eval.yaml::started"])
    assert list(calls.started()) == [items[0].nodeid, items[2].nodeid]
    assert calls.room() == 2
    eventually(lambda: len(answerer.cancelled) == 2)
    assert sorted(answerer.cancelled) == [items[1].nodeid, items[3].nodeid]
    calls.cancel_pending()  # -x, --maxfail, Ctrl-C: whatever is left goes
    assert list(calls.started()) == []
    eventually(lambda: len(answerer.cancelled) == 4)


def test_close_cancels_pending_calls_and_closes_the_answerer(engine: Engine) -> None:
    answerer, items = Gated(), plans(2)
    calls = scheduler(engine, answerer, items)
    calls.prefetch(items)
    eventually(lambda: len(answerer.started) == 2)
    calls.close()
    eventually(lambda: len(answerer.cancelled) == 2)
    assert answerer.closed and list(calls.started()) == []


def contest(count: int) -> tuple[list[CallPlan], Gated]:
    items = plans(count)
    members = tuple(ids(items))
    return items, Gated(contests={nodeid: members for nodeid in members})


def test_a_contestant_starts_its_contests_others_once(engine: Engine) -> None:
    items, answerer = contest(3)
    calls = scheduler(engine, answerer, items, run_config(concurrency=1))
    calls.prefetch(items[:1])
    assert sorted(calls.started()) == ids(items)  # its verdict waits for theirs
    for plan in items:
        answerer.gate(plan.nodeid).set()
    assert calls.take(items[1]) == answer_of(items[1].nodeid)
    assert calls.take(items[0]) == answer_of(items[0].nodeid)
    calls.take(items[0])  # a rerun of one contestant starts the others no more
    eventually(lambda: len(answerer.started) == 4)
    assert sorted(n for n, _, _ in answerer.started) == sorted([*ids(items), items[0].nodeid])


def test_a_contestants_call_is_kept_until_its_item_is_past_and_done(engine: Engine) -> None:
    items, answerer = contest(2)
    calls = scheduler(engine, answerer, items)
    calls.prefetch(items[:1])
    other = items[1].nodeid
    calls.forget([other])  # skipped or sent elsewhere: the other contestant waits for it
    calls.forget([other], past=True)  # it will not run, but its answer is not in yet
    assert sorted(calls.started()) == ids(items)
    answerer.gate(other).set()
    eventually(lambda: other in answerer.finished)
    calls.forget([other], past=True)
    assert list(calls.started()) == ids(items[:1]) and calls.room() == 1
    assert answerer.cancelled == []


def test_a_contestant_that_cannot_start_leaves_its_contest(engine: Engine) -> None:
    items, answerer = contest(2)
    answerer.broken[items[1].nodeid] = ProviderError("fake: FAKE_API_KEY is not set", "config")
    calls = scheduler(engine, answerer, items)
    calls.prefetch(items[:1])
    eventually(lambda: answerer.withdrawn != [])
    assert answerer.withdrawn == [(items[1].nodeid, "fake: FAKE_API_KEY is not set")]
    with pytest.raises(ProviderError, match="FAKE_API_KEY"):
        calls.take(items[1])


# -- the rest of the scheduler's work --------------------------------------------------------


@pytest.mark.parametrize(("mode", "streamed"), [("all", 3), ("off", 0), ("sample", 3)])
def test_the_stream_policy_picks_the_streamed_items(
    engine: Engine, mode: str, streamed: int
) -> None:
    answerer, items = Gated(), plans(3)
    calls = scheduler(engine, answerer, items, run_config(concurrency=2, stream=mode))
    calls.prefetch(items)
    eventually(lambda: len(answerer.started) == 3)
    # Under "sample", each model's lowest-hash items always stream: all of so few.
    assert sum(stream for _, _, stream in answerer.started) == streamed


def test_a_plain_tests_calls_are_numbered_per_item(engine: Engine) -> None:
    answerer = Gated()
    calls = scheduler(engine, answerer)
    asked = [("t.py::test_a", 0), ("t.py::test_a", 0), ("t.py::test_b", 0)]
    texts = [calls.complete(FAKE, [], {}, repeat=r, nodeid=n).text for n, r in asked]
    assert answerer.plain == [("t.py::test_a", 1), ("t.py::test_a", 2), ("t.py::test_b", 1)]
    assert texts[1] == "answer of t.py::test_a call 2"


def test_a_long_wait_is_announced_with_the_models_pending_calls(engine: Engine) -> None:
    answerer, items = Gated(), plans(3)
    notices: list[str] = []

    def notice(text: str) -> None:
        notices.append(text)
        answerer.gate(items[0].nodeid).set()  # answered after the first notice

    calls = scheduler(
        engine, answerer, items, run_config(concurrency=2), notice=notice, notice_every_s=0.01
    )
    calls.prefetch(items)
    assert calls.take(items[0]) == answer_of(items[0].nodeid)
    assert notices == ["llmbench: waiting 0 s on fake: 3 calls pending (in flight or queued)"]


def test_ctrl_c_while_an_item_waits_cancels_its_call_and_every_pending_one(
    engine: Engine,
) -> None:
    answerer, items = Gated(), plans(3)

    def interrupt(text: str) -> None:
        raise KeyboardInterrupt  # as Ctrl-C lands while the main thread waits

    calls = scheduler(
        engine, answerer, items, run_config(concurrency=2), notice=interrupt, notice_every_s=0.01
    )
    calls.prefetch(items)
    eventually(lambda: len(answerer.started) == 3)
    with pytest.raises(KeyboardInterrupt):
        calls.take(items[0])
    assert list(calls.started()) == []
    eventually(lambda: len(answerer.cancelled) == 3)
    assert answerer.finished == []
