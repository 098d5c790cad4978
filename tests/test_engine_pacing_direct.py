"""CallPacer in-process (engine/pacing.py): lanes, slots, the response cache, the budget, 429s
and redaction, each call sent to the local fake server on an event loop of the test's own.

No pytest session runs here: a request is built as the Answerer builds it and passed to the
pacer. Concurrency is read from the server's own count of requests in flight, never from a
clock; the rate limiter's waits run on a fake clock.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest
from fakeserver import FakeLLMServer, Rule, letter_vector, peak_in_flight
from test_engine_ratelimit import FakeClock

from pytest_llmbench.config import RunConfig
from pytest_llmbench.engine.cache import ResponseCache, cache_key, cache_path
from pytest_llmbench.engine.pacing import (
    BudgetExceeded,
    CallPacer,
    PacerSettings,
    lookahead,
    process_limit,
    refill,
)
from pytest_llmbench.engine.ratelimit import (
    AdaptiveConcurrency,
    ModelLane,
    ProcessSlot,
    RateLimiter,
)
from pytest_llmbench.engine.request import Request
from pytest_llmbench.models.item_errors import ItemError, ProviderError
from pytest_llmbench.models.profiles import ModelProfile, ProfileRegistry
from pytest_llmbench.models.providers.completion import CallTarget, Completion
from pytest_llmbench.models.providers.openai_compatible import close_sessions

T = TypeVar("T")
NODE = "quiz.eval.yaml::c00[fake-r0]"
#: 1 USD per 1000 tokens each way: "Question 00 asked" (3 words) answered "ok" costs 0.004.
PRICE = 1.0


def run(main: Callable[[], Awaitable[T]]) -> T:
    """``main()`` on a fresh event loop, the lean client's connections closed after it."""

    async def wrapper() -> T:
        try:
            return await main()
        finally:
            await close_sessions()

    return asyncio.run(wrapper())


def settings(tmp_path: Path, **changes: Any) -> PacerSettings:
    """A run's pacer settings: concurrency 2, no limits, no cache, no retries."""
    base = PacerSettings(
        concurrency=2,
        rpm=None,
        tpm=None,
        max_cost=None,
        cache_mode="off",
        rescore=False,
        request_timeout_s=30.0,
        max_retries=0,
        cache_dir=tmp_path / "cache",
        slot_dir=tmp_path / "slots",
        run_id="run-1",
    )
    return replace(base, **changes)


def profile(server: FakeLLMServer, name: str = "fake", **fields: Any) -> ModelProfile:
    return ModelProfile(name=name, model=f"openai/{name}-model", api_base=server.base_url, **fields)


def ask(
    pacer: CallPacer,
    model: ModelProfile,
    text: str = "Question 00 asked",
    *,
    nodeid: str = NODE,
    repeat: int = 0,
    lane: ModelLane | None = None,
    slots: Sequence[ProcessSlot] = (),
    **fields: Any,
) -> Request:
    """The request of one plain call of ``model``, as the Answerer builds it."""
    target = CallTarget(
        model.name,
        model.model,
        model.api_base,
        "sk-test-key",
        cost_per_1k_input=PRICE,
        cost_per_1k_output=PRICE,
    )
    return Request(
        target=target,
        messages=({"role": "user", "content": text},),
        params={},
        key_params={},
        repeat=repeat,
        stream=False,
        lane=lane or pacer.lane(model, file_parallel_safe=True),
        slots=tuple(slots),
        estimate=10,
        model_name=model.name,
        nodeid=nodeid,
        **fields,
    )


def calls(server: FakeLLMServer) -> list[str]:
    """The prompts the server was sent, in arrival order."""
    return [request.body["messages"][-1]["content"] for request in server.chat_requests()]


# -- lanes and slots -------------------------------------------------------------------------


def test_each_model_has_one_lane_and_a_serial_one_of_its_own(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    pacer = CallPacer(settings(tmp_path, concurrency=8), n_workers=2)
    fake, wide = profile(fake_llm), profile(fake_llm, "wide", concurrency=10)
    assert pacer.lane(fake, True) is pacer.lane(fake, True)
    assert pacer.lane(fake, False) is not pacer.lane(fake, True)
    assert pacer.lane(fake, True).concurrency.current == 4  # 8 split between 2 workers
    assert pacer.lane(fake, False).concurrency.current == 1  # a parallel_safe: false file
    assert pacer.lane(wide, True).concurrency.current == 5  # the profile's own, split
    serial = profile(fake_llm, "serial", parallel_safe=False)
    assert pacer.limit(serial, True) == 1


def run_config(models: Sequence[ModelProfile], concurrency: int) -> RunConfig:
    return RunConfig(
        models=tuple(models),
        repeat=1,
        results_dir=None,
        min_pass_rate=None,
        request_timeout_s=30.0,
        max_retries=0,
        profiles=ProfileRegistry(models={m.name: m for m in models}, sets={}),
        env_file=None,
        concurrency=concurrency,
    )


def test_the_look_ahead_fills_every_models_slots_twice(fake_llm: FakeLLMServer) -> None:
    fake, wide = profile(fake_llm), profile(fake_llm, "wide", concurrency=10)
    serial = profile(fake_llm, "serial", parallel_safe=False)
    assert process_limit(4, fake, n_workers=3) == 2  # a share is rounded up, never 0
    assert process_limit(4, fake, n_workers=1, file_parallel_safe=False) == 1
    one = run_config([fake, wide, serial], concurrency=4)
    assert lookahead(one, 1) == 2 * (4 + 10 + 1)
    assert refill(one, 1) == 4 + 10 + 1  # the started calls never fall below the slots
    assert lookahead(one, 2) == 2 * (2 + 5 + 1)
    assert lookahead(run_config([fake], concurrency=5000), 1) == 1024  # bounded


def test_calls_of_one_lane_are_bounded_and_lanes_run_side_by_side(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    fake_llm.add_rule(Rule(delay_s=0.2))
    pacer = CallPacer(settings(tmp_path), n_workers=1)
    fake, other = profile(fake_llm), profile(fake_llm, "other")
    requests = [ask(pacer, model, f"Question {i:02d}") for model in (fake, other) for i in range(4)]

    async def main() -> list[Completion]:
        return await asyncio.gather(*(pacer.paced(request) for request in requests))

    assert [c.text for c in run(main)] == ["ok"] * 8
    seen = fake_llm.chat_requests()
    for model in ("fake-model", "other-model"):
        assert peak_in_flight([r for r in seen if r.body["model"] == model]) == 2, model
    assert peak_in_flight(seen) == 4


def test_activity_counts_the_calls_in_flight(tmp_path: Path, fake_llm: FakeLLMServer) -> None:
    fake_llm.add_rule(Rule(delay_s=0.5))
    pacer = CallPacer(settings(tmp_path, concurrency=3), n_workers=1)
    fake = profile(fake_llm)
    seen: list[tuple[int, int]] = [pacer.activity()]

    async def main() -> None:
        tasks = [asyncio.ensure_future(pacer.paced(ask(pacer, fake, f"Q {i}"))) for i in range(5)]
        while len(fake_llm.chat_requests()) < 3:
            await asyncio.sleep(0.01)
        seen.append(pacer.activity())
        await asyncio.gather(*tasks)
        seen.append(pacer.activity())

    run(main)
    assert seen == [(0, 0), (3, 0), (0, 0)]


def test_a_serial_slot_keeps_calls_of_every_lane_apart(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    fake_llm.add_rule(Rule(delay_s=0.1))
    pacer = CallPacer(settings(tmp_path, concurrency=4), n_workers=1)
    slot = pacer.slot("serial.eval.yaml")
    assert pacer.slot("serial.eval.yaml") is slot and slot.path.parent == tmp_path / "slots"
    assert pacer.slot("other.eval.yaml").path != slot.path
    models = profile(fake_llm), profile(fake_llm, "other")
    requests = [ask(pacer, m, f"Q {i}", slots=[slot]) for m in models for i in range(3)]

    async def main() -> None:
        await asyncio.gather(*(pacer.paced(request) for request in requests))

    run(main)
    assert len(fake_llm.chat_requests()) == 6
    assert peak_in_flight(fake_llm.chat_requests()) == 1


# -- rate limits and retries -----------------------------------------------------------------


def test_a_429_is_retried_halves_the_lane_and_counts_its_wait(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    fake_llm.add_rule(Rule(status=429, retry_after=0.05, times=1))
    pacer = CallPacer(settings(tmp_path, concurrency=4, max_retries=2), n_workers=1)
    fake = profile(fake_llm)
    completion = run(lambda: pacer.paced(ask(pacer, fake)))
    assert completion.text == "ok" and completion.retries == 1
    assert completion.rate_limit_wait_s >= 0.05  # Retry-After counts as a rate-limit wait
    assert len(fake_llm.chat_requests()) == 2
    assert pacer.lane(fake, True).concurrency.current == 2


def test_a_wait_for_the_rate_window_is_added_to_the_calls_wait(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    clock = FakeClock()
    limiter = RateLimiter(rpm=1, clock=clock, sleep=clock.sleep)
    lane = ModelLane(AdaptiveConcurrency(2), limiter)
    pacer = CallPacer(settings(tmp_path), n_workers=1)
    fake = profile(fake_llm)

    async def main() -> list[Completion]:
        first = await pacer.paced(ask(pacer, fake, "Q 1", lane=lane))
        return [first, await pacer.paced(ask(pacer, fake, "Q 2", lane=lane))]

    first, second = run(main)
    assert first.rate_limit_wait_s == 0.0
    assert second.rate_limit_wait_s == 60.0  # the first request left the window at t=60
    assert clock.now == 60.0


# -- the budget ------------------------------------------------------------------------------


@pytest.mark.parametrize("workers", [1, 2])
def test_the_budget_stops_new_calls_once_this_processs_share_is_spent(
    tmp_path: Path, fake_llm: FakeLLMServer, workers: int
) -> None:
    # Each call costs 0.004 USD; the process's share is 0.006: the second call passes it.
    pacer = CallPacer(settings(tmp_path, max_cost=0.006 * workers), n_workers=workers)
    fake = profile(fake_llm)

    async def main() -> list[Completion]:
        return [await pacer.paced(ask(pacer, fake, f"Question {i:02d} asked")) for i in range(3)]

    with pytest.raises(BudgetExceeded, match=rf"--max-cost {0.006 * workers:g} USD reached"):
        run(main)
    assert calls(fake_llm) == ["Question 00 asked", "Question 01 asked"]


def test_a_cached_answer_is_given_past_the_budget(tmp_path: Path, fake_llm: FakeLLMServer) -> None:
    pacer = CallPacer(settings(tmp_path, max_cost=0.001, cache_mode="use"), n_workers=1)
    fake = profile(fake_llm)

    async def main() -> list[Completion]:
        return [await pacer.paced(ask(pacer, fake)) for _ in range(2)]

    first, again = run(main)
    assert first.cost_usd == pytest.approx(0.004) and again.cached
    with pytest.raises(BudgetExceeded):
        run(lambda: pacer.paced(ask(pacer, fake, "Question 01 asked")))
    assert len(fake_llm.chat_requests()) == 1
    pacer.close()


# -- the response cache ----------------------------------------------------------------------


def test_use_answers_the_same_request_from_the_cache(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    fake_llm.add_rule(Rule(status=429, retry_after=0.01, times=1))
    pacer = CallPacer(settings(tmp_path, cache_mode="use", max_retries=1), n_workers=1)
    fake = profile(fake_llm)

    async def main() -> list[Completion]:
        return [
            await pacer.paced(ask(pacer, fake)),
            await pacer.paced(ask(pacer, fake, nodeid="quiz.eval.yaml::c00[fake-r1]")),
            await pacer.paced(ask(pacer, fake, repeat=1)),
            await pacer.paced(ask(pacer, fake, "Question 01 asked")),
        ]

    called, hit, repeat, other = run(main)
    assert (called.cached, called.retries) == (False, 1)
    # A hit reports no retries and no wait of its own: it made no call.
    assert hit == replace(called, cached=True, retries=0, rate_limit_wait_s=0.0)
    assert not repeat.cached and not other.cached  # repeats and prompts are apart
    assert len(fake_llm.chat_requests()) == 4  # the 429 and three calls
    pacer.close()


def test_cached_reads_a_hit_on_the_calling_thread_and_passes_on_a_miss(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    pacer = CallPacer(settings(tmp_path, cache_mode="use"), n_workers=1)
    fake = profile(fake_llm)
    request = ask(pacer, fake)
    missed = pacer.cached(request)
    assert isinstance(missed, Request) and missed.missed_key
    assert missed == replace(request, missed_key=missed.missed_key)
    called = run(lambda: pacer.paced(missed))
    found = pacer.cached(request)
    assert isinstance(found, Completion) and found.cached and found.text == called.text
    assert len(fake_llm.chat_requests()) == 1
    pacer.close()
    for mode in ("off", "refresh"):
        other = CallPacer(settings(tmp_path, cache_mode=mode), n_workers=1)
        assert other.cached(request) is request, mode


def test_off_stores_nothing_and_calls_every_time(tmp_path: Path, fake_llm: FakeLLMServer) -> None:
    pacer = CallPacer(settings(tmp_path), n_workers=1)
    fake = profile(fake_llm)

    async def main() -> list[Completion]:
        return [await pacer.paced(ask(pacer, fake)) for _ in range(2)]

    assert [c.cached for c in run(main)] == [False, False]
    assert len(fake_llm.chat_requests()) == 2
    pacer.close()
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize(("rescore", "flag"), [(False, "--cache=replay"), (True, "--rescore")])
def test_a_replay_that_misses_names_the_item_and_calls_nothing(
    tmp_path: Path, fake_llm: FakeLLMServer, rescore: bool, flag: str
) -> None:
    pacer = CallPacer(settings(tmp_path, cache_mode="replay", rescore=rescore), n_workers=1)
    request = ask(pacer, profile(fake_llm))
    assert pacer.cached(request) is request  # the call says so, as ever
    with pytest.raises(ItemError) as raised:  # the harness's miss, not a provider's error
        run(lambda: pacer.paced(request))
    assert not isinstance(raised.value, ProviderError) and raised.value.kind == "cache_miss"
    assert raised.value.message == f"fake: no cached answer for {NODE} ({flag} makes no calls)"
    assert fake_llm.chat_requests() == []
    pacer.close()


def test_a_replay_answers_from_what_an_earlier_run_stored(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    fake = profile(fake_llm)
    writer = CallPacer(settings(tmp_path, cache_mode="use", run_id="earlier"), n_workers=1)
    stored = run(lambda: writer.paced(ask(writer, fake)))
    writer.close()
    replay = CallPacer(settings(tmp_path, cache_mode="replay"), n_workers=1)
    answer = run(lambda: replay.paced(ask(replay, fake)))
    assert answer == replace(stored, cached=True)
    assert len(fake_llm.chat_requests()) == 1
    replay.close()


def test_the_embedded_models_answers_are_kept_across_its_ports(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    # The embedded server listens on a new port each run: its answers are keyed by its name.
    fake = profile(fake_llm)
    writer = CallPacer(settings(tmp_path, cache_mode="use", run_id="earlier"), n_workers=1)
    asked = ask(writer, fake)
    embedded = replace(asked, target=replace(asked.target, embedded=True))
    stored = run(lambda: writer.paced(embedded))
    writer.close()
    replay = CallPacer(settings(tmp_path, cache_mode="replay"), n_workers=1)
    moved = replace(embedded.target, api_base="http://127.0.0.1:1/v1")  # the next run's port
    assert run(lambda: replay.paced(replace(embedded, target=moved))) == replace(
        stored, cached=True
    )
    elsewhere = replace(asked.target, api_base="http://127.0.0.1:1/v1")  # another endpoint
    with pytest.raises(ItemError, match="no cached answer"):
        run(lambda: replay.paced(replace(asked, target=elsewhere)))
    assert len(fake_llm.chat_requests()) == 1
    replay.close()


def old_entry(tmp_path: Path, request: Request, run_id: str | None, text: str) -> None:
    """``text`` stored for ``request`` by ``run_id``, written 1000 s after the epoch."""
    target = request.target
    key = cache_key(target.model_id, request.messages, {}, 0, api_base=target.api_base)
    answer = Completion(text, target.model_id, 3, 1, False, None, 0.1, 0.0, 0, False, "stop")
    cache = ResponseCache(cache_path(tmp_path / "cache"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(time, "time", lambda: 1000.0)
        cache.put(key, answer, run=run_id)
    cache.close()


def test_a_stale_entry_is_called_again_unless_this_run_wrote_it(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    fake = profile(fake_llm)
    ttl = settings(tmp_path, cache_mode="use", cache_ttl_s=3600.0)
    pacer = CallPacer(ttl, n_workers=1)
    old_entry(tmp_path, ask(pacer, fake), "older-run", "stale")
    assert run(lambda: pacer.paced(ask(pacer, fake))).text == "ok"
    assert len(fake_llm.chat_requests()) == 1
    pacer.close()
    old_entry(tmp_path, ask(pacer, fake), "run-1", "mine")
    again = CallPacer(ttl, n_workers=1)  # the same run (another xdist worker, say)
    answer = run(lambda: again.paced(ask(again, fake)))
    assert (answer.text, answer.cached) == ("mine", True)
    assert len(fake_llm.chat_requests()) == 1
    again.close()


def test_a_replay_names_how_old_a_stale_entry_is(tmp_path: Path, fake_llm: FakeLLMServer) -> None:
    pacer = CallPacer(settings(tmp_path, cache_mode="replay", cache_ttl_s=3600.0), n_workers=1)
    old_entry(tmp_path, ask(pacer, profile(fake_llm)), None, "stale")
    stale = r"the cached answer for \S+ is \S+ old, older than --cache-ttl 1h \(--cache=replay"
    with pytest.raises(ItemError, match=stale):
        run(lambda: pacer.paced(ask(pacer, profile(fake_llm))))
    assert fake_llm.chat_requests() == []
    pacer.close()


def test_refresh_calls_again_and_a_rerun_alone_samples_anew(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    fake = profile(fake_llm)
    pacer = CallPacer(settings(tmp_path, cache_mode="refresh"), n_workers=1)
    old_entry(tmp_path, ask(pacer, fake), None, "from an earlier run")
    first, second = NODE, "quiz.eval.yaml::c00[fake-r0-bis]"

    async def main() -> list[Completion]:
        answers = []
        for asker in (first, first, second, first):
            fake_llm.add_rule(Rule(reply=f"call {len(fake_llm.chat_requests()) + 1}", times=1))
            answers.append(await pacer.paced(ask(pacer, fake, nodeid=asker)))
        return answers

    answers = run(main)
    # The stored answer is called again; the item's rerun samples anew; another item takes
    # that answer, which is shared from then on, for the rerun too.
    assert [(a.text, a.cached) for a in answers] == [
        ("call 1", False),
        ("call 2", False),
        ("call 2", True),
        ("call 2", True),
    ]
    assert len(fake_llm.chat_requests()) == 2
    pacer.close()


def test_identical_requests_in_flight_make_one_call(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    fake_llm.add_rule(Rule(delay_s=0.3))
    pacer = CallPacer(settings(tmp_path, cache_mode="use"), n_workers=1)
    fake = profile(fake_llm)
    askers = [f"quiz.eval.yaml::c00[fake-{n}]" for n in "abc"]

    async def main() -> list[Completion]:
        return await asyncio.gather(*(pacer.paced(ask(pacer, fake, nodeid=n)) for n in askers))

    answers = run(main)
    assert len(fake_llm.chat_requests()) == 1
    assert [a.cached for a in answers] == [False, True, True]
    assert {a.text for a in answers} == {"ok"}
    pacer.close()


def test_a_failure_is_never_shared_nor_cached(tmp_path: Path, fake_llm: FakeLLMServer) -> None:
    fake_llm.add_rule(Rule(status=503, delay_s=0.2, times=1))
    pacer = CallPacer(settings(tmp_path, cache_mode="use"), n_workers=1)
    fake = profile(fake_llm)

    async def main() -> list[Completion | BaseException]:
        both = (pacer.paced(ask(pacer, fake, nodeid=n)) for n in ("a::x", "a::y"))
        return await asyncio.gather(*both, return_exceptions=True)

    failed, waited = run(main)
    assert isinstance(failed, ProviderError) and "503" in failed.message
    # The waiter called in the failed call's place, and that answer is the one stored.
    assert isinstance(waited, Completion) and (waited.text, waited.cached) == ("ok", False)
    assert len(fake_llm.chat_requests()) == 2
    again = run(lambda: pacer.paced(ask(pacer, fake, nodeid="a::z")))
    assert again.cached and len(fake_llm.chat_requests()) == 2
    pacer.close()


# -- redaction and the other call kinds ------------------------------------------------------


def hide_secret(messages: Sequence[dict[str, Any]]) -> Sequence[dict[str, Any]]:
    """The redaction the run passes: "SECRET" replaced, the same object when there is none."""
    if not any("SECRET" in json.dumps(message) for message in messages):
        return messages
    return [json.loads(json.dumps(message).replace("SECRET", "[hidden]")) for message in messages]


def test_secrets_never_reach_the_provider_nor_the_cache(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    fake_llm.add_rule(Rule(reply="the key is SECRET"))
    pacer = CallPacer(settings(tmp_path, cache_mode="use"), n_workers=1, redact=hide_secret)
    fake = profile(fake_llm)

    async def main() -> list[Completion]:
        return [await pacer.paced(ask(pacer, fake, "my key is SECRET")) for _ in range(2)]

    called, hit = run(main)
    assert calls(fake_llm) == ["my key is [hidden]"]
    assert called.text == "the key is SECRET"  # the item's own answer, as the model gave it
    assert (hit.text, hit.cached) == ("the key is [hidden]", True)  # what the cache keeps
    pacer.close()
    assert b"SECRET" not in cache_path(tmp_path / "cache").read_bytes()


def test_embeddings_are_paced_and_cached_like_completions(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    pacer = CallPacer(settings(tmp_path, cache_mode="use"), n_workers=1)
    fake = profile(fake_llm)
    texts = ({"role": "user", "content": "abc"}, {"role": "user", "content": "zz"})
    request = replace(ask(pacer, fake), messages=texts, embed=True)

    async def main() -> list[Completion]:
        return [await pacer.paced(request) for _ in range(2)]

    called, hit = run(main)
    assert json.loads(called.text) == [letter_vector("abc"), letter_vector("zz")]
    assert hit.cached and hit.text == called.text
    embedded = [r for r in fake_llm.requests if r.path.endswith("/embeddings")]
    assert len(embedded) == 1 and embedded[0].body["input"] == ["abc", "zz"]
    pacer.close()
