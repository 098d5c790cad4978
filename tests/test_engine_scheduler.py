"""The call scheduler for real: concurrency, ordering, -x/-k/--lf/Ctrl-C, pacing, cache, budget.

Every test drives pytest through pytester against the in-process fake server and reads what the
server saw (requests in arrival order, how many it held at once, models) beside the records the
run wrote. No test bounds a run's wall time: concurrency is read from the server's own count of
requests in flight, so a loaded machine makes the suite slower, never red.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from typing import Any

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest
from conftest import FAKE_KEY_ENV, Bench, Rule
from fakeserver import FakeLLMServer, RecordedRequest, peak_in_flight

#: How long the fake server holds each call, so that concurrent calls overlap there.
DELAY = 0.3


def cases_yaml(
    count: int, *, header: str = "", expected: str = "ok", topic: str = "Question"
) -> str:
    """``count`` cases c00.. whose prompts are "<topic> NN ..." and which pass on ``expected``."""
    lines = [header, "cases:"]
    for index in range(count):
        lines += [
            f"  - id: c{index:02d}",
            f"    prompt: {topic} {index:02d} is asked here please",
            f"    expected: {expected}",
            "    assert: [contains]",
        ]
    return "\n".join(lines) + "\n"


def nodeid_order(stdout: str) -> list[str]:
    """Node ids of the ``-v`` result lines, in the order they were reported."""
    return re.findall(r"^(\S+\.eval\.yaml::\S+) (?:PASSED|FAILED|ERROR|SKIPPED)", stdout, re.M)


# --- 1-3: concurrency --------------------------------------------------------------------------
@pytest.mark.slow
def test_calls_run_concurrently_bounded_and_are_reported_in_order(bench: Bench) -> None:
    bench.server.add_rule(Rule(delay_s=DELAY))
    bench.eval_file("many", cases_yaml(16))
    result = bench.run("-v", "-n", "0", "--models=fake", "--concurrency", "8", "--stream=off")
    result.assert_outcomes(passed=16)

    requests = bench.server.chat_requests()
    assert len(requests) == 16
    first_answer = min(r.answered for r in requests if r.answered is not None)
    assert all(r.arrived < first_answer for r in requests[:8]), "the first 8 calls start together"
    assert requests[8].arrived > first_answer, "a 9th call waits for a slot"
    assert peak_in_flight(requests) == 8

    expected = [f"many.eval.yaml::c{index:02d}[fake-r0]" for index in range(16)]
    assert nodeid_order(result.stdout.str()) == expected
    assert sorted(record["nodeid"] for record in bench.records()) == expected


@pytest.mark.slow
def test_concurrency_one_never_overlaps(bench: Bench) -> None:
    bench.server.add_rule(Rule(delay_s=0.2))
    bench.eval_file("few", cases_yaml(5))
    bench.run("--models=fake", "--concurrency", "1").assert_outcomes(passed=5)
    requests = bench.server.chat_requests()
    assert len(requests) == 5
    for earlier, later in itertools.pairwise(requests):
        assert earlier.answered is not None and later.arrived > earlier.answered
    assert peak_in_flight(requests) == 1


@pytest.mark.slow
def test_concurrency_is_per_model(bench: Bench) -> None:
    bench.server.add_rule(Rule(delay_s=0.2))
    bench.eval_file("many", cases_yaml(8))
    result = bench.run("--models=fake,fake2", "--concurrency", "2", "--stream=off")
    result.assert_outcomes(passed=16)
    requests = bench.server.chat_requests()
    for model in ("fake-model", "fake-model-2"):
        mine = [request for request in requests if request.body["model"] == model]
        assert len(mine) == 8
        assert peak_in_flight(mine) == 2, model
    # Both models' calls run side by side: 4 in flight at the busiest moment.
    assert peak_in_flight(requests) == 4


# --- 4-6: pytest's controls keep their meaning ----------------------------------------------
@pytest.mark.parametrize(("flags", "reported"), [(("-x",), 2), (("--maxfail", "2"), 4)])
@pytest.mark.slow
def test_stopping_early_cancels_pending_calls(
    bench: Bench, flags: tuple[str, ...], reported: int
) -> None:
    bench.server.add_rule(Rule(match="Question 01", reply="wrong", delay_s=0.2))
    bench.server.add_rule(Rule(match="Question 03", reply="wrong", delay_s=0.2))
    bench.server.add_rule(Rule(delay_s=0.2))
    bench.eval_file("many", cases_yaml(20))
    result = bench.run("-v", "--models=fake", "--concurrency", "2", *flags)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    order = nodeid_order(result.stdout.str())
    assert order == [f"many.eval.yaml::c{index:02d}[fake-r0]" for index in range(reported)]
    records = bench.records()
    assert sorted(record["nodeid"] for record in records) == order
    seen = len(bench.server.chat_requests())
    # The look-ahead is bounded by the failures still allowed: every call belongs to an item
    # that ran (-x sends one call at a time).
    assert seen == reported, "no call was started for an item that did not run"
    time.sleep(0.5)  # nothing left running goes on calling the server after the run
    assert len(bench.server.chat_requests()) == seen


INTERRUPT = """
from pathlib import Path

def check(output, ctx):
    if ctx.case_id == "c02":
        Path("interrupted_at").write_text(ctx.case_id)
        raise KeyboardInterrupt
    return True
"""


@pytest.mark.slow
def test_ctrl_c_ends_the_run_and_keeps_finished_records(bench: Bench) -> None:
    for index in range(3):
        bench.server.add_rule(Rule(match=f"Question {index:02d}", delay_s=0.05))
    bench.server.add_rule(Rule(delay_s=30))  # calls still pending at Ctrl-C never finish
    bench.pytester.makepyfile(interrupt=INTERRUPT)
    header = "assert:\n  - {type: python, value: 'interrupt:check'}"
    bench.eval_file("many", cases_yaml(12, header=header))
    result = bench.pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--results-dir=out", "--models=fake", "--concurrency=4",
        timeout=90,
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert [record["case_id"] for record in bench.records()] == ["c00", "c01"]
    assert all(record["outcome"] == "passed" for record in bench.records())
    assert (bench.pytester.path / "interrupted_at").read_text() == "c02"
    held = [r for r in bench.server.chat_requests() if _case_id(r) not in ("c00", "c01", "c02")]
    assert held, "calls were pending at the interrupt"
    # The server holds those for 30 s: had the process waited for one, it would be answered.
    assert all(r.answered is None for r in held), "a pending call kept the process alive"


def test_deselected_items_are_never_called(bench: Bench) -> None:
    bench.eval_file("many", cases_yaml(12))
    result = bench.run("--models=fake", "-k", "c03 or c07", "--concurrency", "8")
    result.assert_outcomes(passed=2)
    prompts = sorted(r.body["messages"][-1]["content"] for r in bench.server.chat_requests())
    assert prompts == [
        "Question 03 is asked here please",
        "Question 07 is asked here please",
    ]


def test_last_failed_reruns_only_the_failure_once(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="Question 04", reply="wrong", times=1))
    bench.eval_file("many", cases_yaml(8))
    args = ("--results-dir=out", "--models=fake")
    bench.pytester.runpytest(*args).assert_outcomes(passed=7, failed=1)
    bench.server.reset()
    result = bench.pytester.runpytest(*args, "--lf")
    result.assert_outcomes(passed=1)
    requests = bench.server.chat_requests()
    assert len(requests) == 1
    assert "Question 04" in requests[0].body["messages"][-1]["content"]


# --- 7-8: serial evals and models, xdist --------------------------------------------------
SERIAL_PROFILE = """
models:
  serial:
    model: openai/fake-model-serial
    api_base: {base}
    api_key_env: {env}
    parallel_safe: false
"""


@pytest.mark.slow
def test_parallel_unsafe_file_never_overlaps(bench: Bench) -> None:
    bench.server.add_rule(Rule(delay_s=0.2))
    bench.eval_file("serial", cases_yaml(5, header="parallel_safe: false", topic="Serial"))
    bench.eval_file("free", cases_yaml(6, topic="Free"))
    result = bench.run("--models=fake", "--concurrency", "8", "--stream=off")
    result.assert_outcomes(passed=11)
    requests = bench.server.chat_requests()
    serial = [r for r in requests if "Serial" in r.body["messages"][-1]["content"]]
    free = [r for r in requests if "Free" in r.body["messages"][-1]["content"]]
    assert len(serial) == 5 and len(free) == 6
    assert peak_in_flight(serial) == 1
    assert peak_in_flight(free) == 6, "the other file still runs concurrently"


@pytest.mark.slow
def test_parallel_unsafe_profile_never_overlaps(bench: Bench) -> None:
    bench.server.add_rule(Rule(delay_s=0.2))
    profile = SERIAL_PROFILE.format(base=bench.server.base_url, env=FAKE_KEY_ENV)
    bench.pytester.makefile(".yaml", **{"profiles/serial": profile})
    bench.eval_file("many", cases_yaml(5))
    result = bench.run("--models=serial,fake", "--concurrency", "8", "--stream=off")
    result.assert_outcomes(passed=10)
    requests = bench.server.chat_requests()
    serial = [r for r in requests if r.body["model"] == "fake-model-serial"]
    free = [r for r in requests if r.body["model"] == "fake-model"]
    assert len(serial) == 5 and len(free) == 5
    assert peak_in_flight(serial) == 1
    assert peak_in_flight(free) >= 2


@pytest.mark.slow
def test_xdist_workers_each_run_calls_concurrently(bench: Bench) -> None:
    bench.server.add_rule(Rule(delay_s=DELAY))
    bench.eval_file("many", cases_yaml(16))
    result = bench.run_subprocess("-n", "2", "--models=fake", "--concurrency", "4")
    result.assert_outcomes(passed=16)
    worker_of = {record["case_id"]: record["worker"] for record in bench.records()}
    assert sorted(worker_of) == [f"c{i:02d}" for i in range(16)]
    assert set(worker_of.values()) == {"gw0", "gw1"}
    requests = bench.server.chat_requests()
    assert len(requests) == 16
    assert peak_in_flight(requests) <= 4, "the run's concurrency is split between workers"
    for worker in ("gw0", "gw1"):
        mine = [r for r in requests if worker_of[_case_id(r)] == worker]
        assert peak_in_flight(mine) == 2, f"{worker} runs its share concurrently"


def _case_id(request: RecordedRequest) -> str:
    """c07 for the prompt "<topic> 07 is asked here please"."""
    return "c" + request.body["messages"][-1]["content"].split()[1]


# --- 9: 429 -----------------------------------------------------------------------------------
def test_rate_limited_calls_are_retried_and_counted(bench: Bench) -> None:
    bench.server.add_rule(Rule(status=429, retry_after=0.05, times=3))
    bench.eval_file("many", cases_yaml(6))
    bench.run("--models=fake", "--concurrency", "8").assert_outcomes(passed=6)
    records = bench.records()
    assert sum(record["transport_retries"] for record in records) == 3
    retried = [record for record in records if record["transport_retries"]]
    assert retried and all(record["rate_limit_wait_s"] >= 0.05 for record in retried)
    assert len(bench.server.chat_requests()) == 9


# --- 10: stream policy --------------------------------------------------------------------------
def _streamed(records: list[dict[str, Any]]) -> set[str]:
    for record in records:
        assert (record["ttft_s"] is not None) == record["streamed"], record["nodeid"]
    return {record["nodeid"] for record in records if record["streamed"]}


@pytest.mark.slow
def test_stream_policy(bench: Bench) -> None:
    bench.eval_file("many", cases_yaml(40))
    bench.run("--models=fake").assert_outcomes(passed=40)
    sample = _streamed(bench.records())
    # Each model's 20 lowest-hash items, plus about 2% of the rest.
    assert 20 <= len(sample) < 40
    bench.run("--models=fake").assert_outcomes(passed=40)
    assert _streamed(bench.records()) == sample, "the sample is seeded, not random"
    bench.run_subprocess("--models=fake", "-n", "2").assert_outcomes(passed=40)
    assert _streamed(bench.records()) == sample, "workers pick the same sample"
    bench.run("--models=fake", "--stream=all").assert_outcomes(passed=40)
    assert len(_streamed(bench.records())) == 40
    bench.run("--models=fake", "--stream=off").assert_outcomes(passed=40)
    assert _streamed(bench.records()) == set()
    assert all(r.body.get("stream") is not True for r in bench.server.chat_requests()[-40:])


# --- 11-12: cache -----------------------------------------------------------------------------
def _answers(records: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    return {r["nodeid"]: (r["response"], r["score"], r["outcome"]) for r in records}


def test_cache_use_makes_a_second_run_free(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="Question 01", reply="not it"))
    bench.eval_file("many", cases_yaml(4))
    cache = ("--models=fake", "--cache=use", "--cache-dir=c")
    bench.pytester.makeconftest(_ENGINE_THREAD_PROBE)
    bench.run(*cache).assert_outcomes(passed=3, failed=1)
    first = bench.records()
    assert len(bench.server.chat_requests()) == 4
    assert not any(record["cached"] for record in first)
    probes = bench.pytester.path / "engine-thread.txt", bench.pytester.path / "warm-up.txt"
    # Calls were made: the session end's imports ran on their thread meanwhile.
    assert [probe.read_text() for probe in probes] == ["True", "thread"]
    bench.server.reset()
    probes[1].unlink()
    bench.run(*cache).assert_outcomes(passed=3, failed=1)
    assert bench.server.chat_requests() == []
    second = bench.records()
    assert all(record["cached"] for record in second)
    assert _answers(second) == _answers(first)
    # Cached answers are read on the main thread: the engine's thread never started, nor the
    # imports' thread, which would only have shared the interpreter with the items.
    assert probes[0].read_text() == "False" and not probes[1].exists()
    assert (bench.pytester.path / "out" / "report.html").is_file()


#: A conftest that writes, at the session end, whether the engine's thread ever ran, and
#: whether the session end's imports ran on their own thread.
_ENGINE_THREAD_PROBE = """
import threading

from pytest_llmbench.report import session_end

def pytest_configure(config):
    warm_up = session_end._warm_up

    def probe():
        (config.rootpath / "warm-up.txt").write_text("thread")
        warm_up()

    session_end._warm_up = probe
    config.add_cleanup(lambda: setattr(session_end, "_warm_up", warm_up))

def pytest_sessionfinish(session):
    started = any(thread.name == "llmbench-engine" for thread in threading.enumerate())
    (session.config.rootpath / "engine-thread.txt").write_text(str(started))
"""


@pytest.mark.slow
def test_cache_keeps_repeats_apart_and_refresh_calls_again(bench: Bench) -> None:
    bench.eval_file("one", cases_yaml(1))
    cache = ("--models=fake", "--cache-dir=c", "--repeat=2")
    bench.run(*cache, "--cache=use").assert_outcomes(passed=2)
    assert len(bench.server.chat_requests()) == 2
    bench.run(*cache, "--cache=use").assert_outcomes(passed=2)
    assert len(bench.server.chat_requests()) == 2
    bench.server.add_rule(Rule(reply="ok, refreshed"))
    bench.run(*cache, "--cache=refresh").assert_outcomes(passed=2)
    assert len(bench.server.chat_requests()) == 4
    assert not any(record["cached"] for record in bench.records())
    bench.run(*cache, "--cache=replay").assert_outcomes(passed=2)
    assert len(bench.server.chat_requests()) == 4
    assert {record["response"] for record in bench.records()} == {"ok, refreshed"}


def test_errors_are_never_cached(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="Question 01", status=503, times=1))
    bench.eval_file("many", cases_yaml(3))
    cache = ("--models=fake", "--cache=use", "--cache-dir=c", "--max-retries=0")
    bench.run(*cache).assert_outcomes(passed=2, errors=1)
    bench.server.reset()
    bench.run(*cache).assert_outcomes(passed=3)
    requests = bench.server.chat_requests()
    assert len(requests) == 1 and "Question 01" in requests[0].body["messages"][-1]["content"]


def test_replay_needs_the_cache_and_makes_no_call(bench: Bench) -> None:
    bench.eval_file("many", cases_yaml(3))
    replay = ("--models=fake", "--cache=replay", "--cache-dir=c")
    result = bench.run(*replay)
    result.assert_outcomes(errors=3)
    assert result.stdout.str().count("no cached answer") >= 3
    assert all("no cached answer" in record["error"] for record in bench.records())
    assert bench.server.chat_requests() == []
    bench.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(passed=3)
    bench.server.reset()
    bench.run(*replay).assert_outcomes(passed=3)
    assert bench.server.chat_requests() == []


@pytest.mark.slow
def test_workers_share_one_cache(bench: Bench) -> None:
    bench.eval_file("many", cases_yaml(16))
    result = bench.run_subprocess("-n", "2", "--models=fake", "--cache=use", "--cache-dir=c")
    result.assert_outcomes(passed=16)
    assert {record["worker"] for record in bench.records()} == {"gw0", "gw1"}
    bench.server.reset()
    bench.run("-n", "0", "--models=fake", "--cache=replay", "--cache-dir=c").assert_outcomes(
        passed=16
    )
    assert bench.server.chat_requests() == []


def test_rescore_follows_a_changed_assertion_without_calls(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply="Paris"))
    bench.eval_file("many", cases_yaml(3, expected="Paris"))
    bench.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(passed=3)
    bench.server.reset()
    bench.eval_file("many", cases_yaml(3, expected="Lyon"))
    result = bench.run("--models=fake", "--cache-dir=c", "--rescore")
    result.assert_outcomes(failed=3)
    assert bench.server.chat_requests() == []
    assert {(r["response"], r["score"]) for r in bench.records()} == {("Paris", 0.0)}
    bench.eval_file("more", cases_yaml(1, topic="Unseen"))
    result = bench.run("--models=fake", "--cache-dir=c", "--rescore", "more.eval.yaml")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*no cached answer for more.eval.yaml::c00*--rescore makes no*"])
    assert bench.server.chat_requests() == []


# --- 13: cost budget ------------------------------------------------------------------------
PRICEY_PROFILE = """
models:
  pricey:
    model: openai/fake-model-pricey
    api_base: {base}
    api_key_env: {env}
    cost_per_1k: {{input: 1.0, output: 1.0}}
"""


def test_max_cost_skips_the_rest_without_calling(bench: Bench) -> None:
    profile = PRICEY_PROFILE.format(base=bench.server.base_url, env=FAKE_KEY_ENV)
    bench.pytester.makefile(".yaml", **{"profiles/pricey": profile})
    # 6 prompt words and 1 answer word ("ok"): 7 tokens, 0.007 USD a call.
    bench.eval_file("many", cases_yaml(10))
    result = bench.run("-rs", "--models=pricey", "--max-cost", "0.03", "--concurrency", "1")
    records = bench.records()
    passed = [r for r in records if r["outcome"] == "passed"]
    skipped = [r for r in records if r["outcome"] == "skipped"]
    assert passed and skipped and len(passed) + len(skipped) == 10
    result.assert_outcomes(passed=len(passed), skipped=len(skipped))
    assert len(bench.server.chat_requests()) == len(passed)
    spent = sum(r["cost_usd"] for r in passed)
    assert 0.03 <= spent <= 0.03 + 0.007 + 1e-9
    assert [r["case_id"] for r in passed] == [f"c{i:02d}" for i in range(len(passed))]
    result.stdout.fnmatch_lines([f"SKIPPED [[]{len(skipped)}[]] *--max-cost 0.03 USD reached*"])
    assert result.ret == 6  # stopped by the budget: incomplete, not a pass


SKIP_EVERY_OTHER = """
import pytest

def pytest_collection_modifyitems(items):
    for item in items[1::2]:
        item.add_marker(pytest.mark.skip(reason="not today"))
"""


@pytest.mark.slow
def test_skipped_items_are_not_called_and_do_not_stall_the_lookahead(bench: Bench) -> None:
    bench.server.add_rule(Rule(delay_s=0.2))
    bench.pytester.makeconftest(SKIP_EVERY_OTHER)
    bench.eval_file("many", cases_yaml(20))
    result = bench.run("--models=fake", "--concurrency", "2", "--stream=off")
    result.assert_outcomes(passed=10, skipped=10)
    prompts = [r.body["messages"][-1]["content"] for r in bench.server.chat_requests()]
    assert sorted(prompt.split()[1] for prompt in prompts) == [f"{i:02d}" for i in range(0, 20, 2)]
    # 10 calls two at a time: prefetch keeps both slots busy.
    assert peak_in_flight(bench.server.chat_requests()) == 2


BROKEN_FIXTURE = """
import pytest

@pytest.fixture(autouse=True)
def broken_for_some(request):
    if request.node.name[1:3] in {"01", "02", "03", "04", "05", "06"}:
        raise RuntimeError("fixture broke")
"""


@pytest.mark.slow
def test_items_whose_setup_fails_early_do_not_stall_the_lookahead(bench: Bench) -> None:
    bench.server.add_rule(Rule(delay_s=0.2))
    bench.pytester.makeconftest(BROKEN_FIXTURE)
    bench.eval_file("many", cases_yaml(16))
    result = bench.run("--models=fake", "--concurrency", "2", "--stream=off")
    result.assert_outcomes(passed=10, errors=6)
    requests = bench.server.chat_requests()
    later = [r for r in requests if int(r.body["messages"][-1]["content"].split()[1]) >= 8]
    assert len(later) == 8
    assert peak_in_flight(later) == 2


@pytest.mark.slow
def test_parallel_unsafe_file_and_profile_hold_across_xdist_workers(bench: Bench) -> None:
    bench.server.add_rule(Rule(delay_s=0.2))
    profile = SERIAL_PROFILE.format(base=bench.server.base_url, env=FAKE_KEY_ENV)
    bench.pytester.makefile(".yaml", **{"profiles/serial": profile})
    bench.eval_file("serial", cases_yaml(6, header="parallel_safe: false", topic="Serial"))
    bench.eval_file("free", cases_yaml(6, topic="Free"))
    result = bench.run_subprocess("-n", "2", "--models=fake,serial", "--stream=off")
    result.assert_outcomes(passed=24)
    assert {record["worker"] for record in bench.records()} == {"gw0", "gw1"}
    requests = bench.server.chat_requests()
    serial_file = [r for r in requests if "Serial" in r.body["messages"][-1]["content"]]
    serial_model = [r for r in requests if r.body["model"] == "fake-model-serial"]
    assert len(serial_file) == len(serial_model) == 12
    assert peak_in_flight(serial_file) == 1
    assert peak_in_flight(serial_model) == 1
    assert peak_in_flight(requests) >= 3, "everything else still runs concurrently"


WIDE_PROFILE = """
models:
  wide:
    model: openai/fake-model-wide
    api_base: {base}
    api_key_env: {env}
    concurrency: 10
"""


@pytest.mark.slow
def test_a_profiles_own_concurrency_is_reached(bench: Bench) -> None:
    bench.server.add_rule(Rule(delay_s=DELAY))
    profile = WIDE_PROFILE.format(base=bench.server.base_url, env=FAKE_KEY_ENV)
    bench.pytester.makefile(".yaml", **{"profiles/wide": profile})
    bench.eval_file("many", cases_yaml(20))
    result = bench.run("--models=wide,fake", "--concurrency", "2", "--stream=off")
    result.assert_outcomes(passed=40)
    requests = bench.server.chat_requests()
    wide = [r for r in requests if r.body["model"] == "fake-model-wide"]
    narrow = [r for r in requests if r.body["model"] == "fake-model"]
    assert peak_in_flight(wide) == 10, "the profile's concurrency overrides --concurrency"
    assert peak_in_flight(narrow) == 2


@pytest.mark.slow
def test_retries_wait_their_turn_in_the_rate_limiter(fake_llm: FakeLLMServer) -> None:
    from pytest_llmbench.engine.pacing import ModelLane
    from pytest_llmbench.engine.ratelimit import AdaptiveConcurrency, RateLimiter
    from pytest_llmbench.models.providers.calls import acomplete
    from pytest_llmbench.models.providers.completion import CallTarget

    fake_llm.add_rule(Rule(status=500, times=2))
    turns: list[int] = []

    async def before_retry() -> float:
        turns.append(len(fake_llm.chat_requests()))
        return 0.25  # as if the limiter had made the retry wait

    target = CallTarget("fake", "openai/fake-model", fake_llm.base_url, "sk-test-key")
    messages = [{"role": "user", "content": "hi"}]
    completion = asyncio.run(
        acomplete(target, messages, {}, stream=False, max_retries=2, before_retry=before_retry)
    )
    # Each retry asked the limiter first, after the failed attempt and before the next one.
    assert turns == [1, 2]
    assert completion.retries == 2 and completion.rate_limit_wait_s == pytest.approx(0.5)
    lane = ModelLane(AdaptiveConcurrency(4), RateLimiter(rpm=2))
    lane.on_retry(429)
    assert lane.concurrency.current == 2
    lane.on_retry(429)  # the same burst: not halved again
    assert lane.concurrency.current == 2


@pytest.mark.slow
def test_a_fully_cached_run_never_imports_litellm(bench: Bench) -> None:
    """litellm's import costs seconds: a replayed run must not pay it (checked in a fresh process)."""
    bench.eval_file("many", cases_yaml(3))
    bench.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(passed=3)
    bench.pytester.makeconftest(
        """
        import sys

        def pytest_sessionfinish(session):
            open("imported.txt", "w").write(str("litellm" in sys.modules))
        """
    )
    bench.run_subprocess("--models=fake", "--cache=replay", "--cache-dir=c").assert_outcomes(
        passed=3
    )
    assert (bench.pytester.path / "imported.txt").read_text() == "False"


@pytest.mark.parametrize("verbosity", ["-q", "-v"])
def test_a_slow_call_is_announced_while_the_run_waits(bench: Bench, verbosity: str) -> None:
    bench.server.add_rule(Rule(match="Question 00", delay_s=1.5))
    bench.eval_file("slow", cases_yaml(2))
    bench.pytester.makeini("[pytest]\nllmbench_wait_notice_s = 0.3\n")
    result = bench.run(verbosity, "--models=fake", "--concurrency", "1")
    result.assert_outcomes(passed=2)
    lines = result.stdout.lines
    notices = [line for line in lines if line.startswith("llmbench: waiting ")]
    assert notices, "the wait on the slow call was announced"
    assert all(
        re.fullmatch(
            r"llmbench: waiting \d+ s on fake: [12] calls? pending \(in flight or queued\)", n
        )
        for n in notices
    ), notices
    if verbosity == "-v":
        assert nodeid_order(result.stdout.str()) == [
            "slow.eval.yaml::c00[fake-r0]",
            "slow.eval.yaml::c01[fake-r0]",
        ]


def test_a_slow_call_is_announced_under_xdist(bench: Bench) -> None:
    # Workers' output never reaches the terminal: the controller says it.
    bench.server.add_rule(Rule(match="Question 0", delay_s=2.0))
    bench.eval_file("slow", cases_yaml(2))
    bench.pytester.makeini("[pytest]\nllmbench_wait_notice_s = 0.5\n")
    result = bench.run_subprocess("-n", "2", "--models=fake")
    result.assert_outcomes(passed=2)
    notices = [line for line in result.stdout.lines if "llmbench: waiting " in line]
    assert notices, result.stdout.str()
    assert all(
        re.search(r"llmbench: waiting \d+ s on fake: [12] items? in progress on the workers$", n)
        for n in notices
    ), notices


def test_a_plain_run_under_xdist_says_nothing_of_waiting(bench: Bench) -> None:
    bench.pytester.makepyfile("import time\ndef test_slow():\n    time.sleep(1.5)\n")
    bench.pytester.makeini("[pytest]\nllmbench_wait_notice_s = 0.3\n")
    result = bench.run_subprocess("-n", "2")
    result.assert_outcomes(passed=1)
    assert "llmbench: waiting" not in result.stdout.str()


def test_wait_notice_setting_is_checked(bench: Bench) -> None:
    bench.eval_file("slow", cases_yaml(1))
    bench.pytester.makeini("[pytest]\nllmbench_wait_notice_s = soon\n")
    result = bench.run("--models=fake")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*llmbench_wait_notice_s: not a number*"])


def test_max_cost_drops_queued_look_ahead_calls(bench: Bench) -> None:
    """With calls in flight the spend may pass the limit, but once it is reached no queued
    look-ahead call is sent: every request belongs to an item that passed."""
    profile = PRICEY_PROFILE.format(base=bench.server.base_url, env=FAKE_KEY_ENV)
    bench.pytester.makefile(".yaml", **{"profiles/pricey": profile})
    bench.server.add_rule(Rule(delay_s=0.1))
    bench.eval_file("many", cases_yaml(30))
    result = bench.run("-rs", "--models=pricey", "--max-cost", "0.03", "--concurrency", "3")
    records = bench.records()
    passed = [r for r in records if r["outcome"] == "passed"]
    skipped = [r for r in records if r["outcome"] == "skipped"]
    assert passed and skipped and len(passed) + len(skipped) == 30
    assert len(bench.server.chat_requests()) == len(passed)
    assert len(passed) <= 5 + 3, "at most the calls in flight when the limit was reached"
    result.assert_outcomes(passed=len(passed), skipped=len(skipped))


def _default_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_sigint_while_calls_are_pending_sends_nothing_more(bench: Bench) -> None:
    """A real Ctrl-C (SIGINT to the process) while calls are held at the server and more are
    queued: the run ends interrupted and no request reaches the server after the signal."""
    import signal
    import subprocess
    import sys

    bench.server.add_rule(Rule(delay_s=30))  # nothing is ever answered before the interrupt
    bench.eval_file("many", cases_yaml(12))
    # -X faulthandler: a run that does not end after the signal prints its threads' stacks on
    # SIGABRT, and the failure shows them.
    argv = [sys.executable, "-X", "faulthandler", "-m", "pytest", "-p", "no:cacheprovider"]
    argv += ["--results-dir=out", "--models=fake", "--concurrency=2"]
    stderr = bench.pytester.path / "stderr.txt"
    with stderr.open("w") as errors:
        process = subprocess.Popen(
            argv,
            cwd=bench.pytester.path,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            # The run's Ctrl-C as a terminal gives it, whoever started the suite: a shell that
            # runs it in the background (``make test &``) ignores SIGINT, which the child would
            # inherit, and Python then installs no handler (the run never heard the signal).
            preexec_fn=_default_sigint,
        )
    try:
        for _ in range(600):  # until the two calls in flight are held at the server
            if len(bench.server.chat_requests()) >= 2 or process.poll() is not None:
                break
            time.sleep(0.1)
        time.sleep(0.5)  # every call that can start has started: the rest are queued
        seen = len(bench.server.chat_requests())
        assert 2 <= seen < 12, "calls in flight, the rest queued"
        process.send_signal(signal.SIGINT)
        interrupted_at = time.time()
        try:
            status = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)
            process.wait(timeout=10)
            pytest.fail(f"still running 60 s after SIGINT:\n{stderr.read_text()[-8000:]}")
        assert status == pytest.ExitCode.INTERRUPTED
    finally:
        process.kill()
    time.sleep(0.5)  # a call the process left behind would reach the server now
    requests = bench.server.chat_requests()
    assert len(requests) == seen
    assert all(r.time < interrupted_at for r in requests)


def test_the_engine_calls_back_once_its_first_calls_are_under_way() -> None:
    import threading

    from pytest_llmbench.engine.event_loop import Engine

    steps: list[str] = []

    async def call(name: str) -> str:
        steps.append(f"{name} first step")
        await asyncio.sleep(0.05)
        return name

    engine = Engine()
    calls: list[tuple[str, str]] = []
    here = threading.current_thread().name

    def first() -> None:
        steps.append("callback")
        calls.append(("first", threading.current_thread().name))

    engine.when_calling(first)
    assert calls == []  # nothing submitted: no callback
    try:
        futures = engine.submit_many([call("a"), call("b")])
        assert [future.result(timeout=5) for future in futures] == ["a", "b"]
        # On the engine's thread, behind both calls' first steps.
        assert calls == [("first", "llmbench-engine")]
        assert steps == ["a first step", "b first step", "callback"]
        assert engine.submit(call("c")).result(timeout=5) == "c"
        assert calls == [("first", "llmbench-engine")]  # once
        engine.when_calling(lambda: calls.append(("late", threading.current_thread().name)))
        assert calls[-1] == ("late", here)  # calls were made: at once, on the caller's thread
    finally:
        engine.close()


def test_a_single_submitted_call_also_runs_the_callbacks_behind_its_first_step() -> None:
    from pytest_llmbench.engine.event_loop import Engine

    order: list[str] = []

    async def call() -> None:
        order.append("call")
        await asyncio.sleep(0)

    engine = Engine()
    engine.when_calling(lambda: order.append("callback"))
    try:
        engine.submit(call()).result(timeout=5)
        deadline = time.monotonic() + 5
        while len(order) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert order == ["call", "callback"]
    finally:
        engine.close()
