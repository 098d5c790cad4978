"""Identical requests of one run share one answer (engine/pacing.py ``SingleFlight``, the cache's
``put`` with ``keep``): two items asking the same thing at once make one call, and an entry this
run wrote is kept over a later answer to the same key, so a replay of the run finds every
history its items continued from."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Bench, FakeLLMServer, Rule

from pytest_llmbench.engine.cache import CacheEntry, ResponseCache, cache_key, cache_path
from pytest_llmbench.engine.pacing import CallPacer, PacerSettings
from pytest_llmbench.engine.ratelimit import AdaptiveConcurrency, ModelLane, RateLimiter
from pytest_llmbench.engine.request import Request
from pytest_llmbench.models.item_errors import ProviderError
from pytest_llmbench.models.providers.completion import CallTarget, Completion

#: Two conversations whose first turn is the same request (the same cache key).
SHARED_OPENING = """
cases:
  - id: one
    turns: [{user: Hi}, {user: One more}]
    expected: fine
  - id: two
    turns: [{user: Hi}, {user: Two more}]
    expected: fine
"""
THIS_RUN, OLD_RUN = "pytest-llmbench-1-this", "pytest-llmbench-0-old"
DAY = 86400.0


def _replies(records: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each item's conversation, as the texts said in order."""
    return {
        record["nodeid"]: [entry["content"] for entry in record["conversation"]]
        for record in records
    }


def _opening_answered_twice(server: FakeLLMServer, first: str, then: str) -> None:
    """The shared opening answered ``first`` once, then ``then``: two calls of it would differ."""
    server.add_rule(Rule(match="Hi", reply=first, times=1, delay_s=0.3))
    server.add_rule(Rule(match="Hi", reply=then))
    server.add_rule(Rule(reply="fine"))


def _replayed(bench: Bench, *args: str) -> dict[str, list[str]]:
    """The conversations of a ``--cache=replay`` run that must make no request."""
    asked = len(bench.server.chat_requests())
    replay = bench.run_subprocess if "-n" in args else bench.run
    replay("--models=fake", "--cache=replay", "--cache-dir=c", *args).assert_outcomes(passed=2)
    assert len(bench.server.chat_requests()) == asked
    return _replies(bench.records())


# -- whole runs ------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["use", "refresh"])
def test_conversations_sharing_an_opening_continue_from_one_answer_and_replay(
    bench: Bench, mode: str
) -> None:
    bench.eval_file("talk", SHARED_OPENING)
    _opening_answered_twice(bench.server, "Hello A", "Hello B")
    bench.run("--models=fake", f"--cache={mode}", "--cache-dir=c").assert_outcomes(passed=2)
    said = _replies(bench.records())
    assert {replies[1] for replies in said.values()} == {"Hello A"}
    openings = [r for r in bench.server.chat_requests() if len(r.body["messages"]) == 1]
    assert len(openings) == 1, "the shared opening is asked once"
    assert _replayed(bench) == said


def test_refresh_replaces_an_older_run_s_answer_once(bench: Bench) -> None:
    """The first refreshed answer replaces the older run's entry; the second conversation's
    identical opening continues from it instead of replacing it again."""
    bench.eval_file("talk", SHARED_OPENING)
    bench.server.add_rule(Rule(match="Hi", reply="Hello old", times=1))
    _opening_answered_twice(bench.server, "Hello C", "Hello D")
    bench.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(passed=2)
    bench.run("--models=fake", "--cache=refresh", "--cache-dir=c").assert_outcomes(passed=2)
    said = _replies(bench.records())
    assert {replies[1] for replies in said.values()} == {"Hello C"}
    assert _replayed(bench) == said


@pytest.mark.slow
def test_xdist_workers_sharing_an_opening_continue_from_one_answer(bench: Bench) -> None:
    """One conversation per file, each file on its own worker (``--dist loadfile``): both miss
    the opening at once and call it; the second to store it continues from the first's."""
    for name, follow_up in (("one", "One more"), ("two", "Two more")):
        turns = f"[{{user: Hi}}, {{user: {follow_up}}}]"
        bench.eval_file(name, f"cases:\n  - id: {name}\n    turns: {turns}\n    expected: fine\n")
    _opening_answered_twice(bench.server, "Hello A", "Hello B")
    xdist = ("-n", "2", "--dist", "loadfile")
    result = bench.run_subprocess("--models=fake", "--cache=use", "--cache-dir=c", *xdist)
    result.assert_outcomes(passed=2)
    assert {record["worker"] for record in bench.records()} == {"gw0", "gw1"}
    said = _replies(bench.records())
    assert len({replies[1] for replies in said.values()}) == 1, said
    assert _replayed(bench, *xdist) == said


# -- the pacer, in-process -------------------------------------------------------------------
MESSAGES = ({"role": "user", "content": "Hi"},)


def _pacer(tmp_path: Path, mode: str, ttl_s: float | None = None) -> CallPacer:
    settings = PacerSettings(
        concurrency=4, rpm=None, tpm=None, max_cost=None, cache_mode=mode, rescore=False,
        request_timeout_s=30, max_retries=0, cache_dir=tmp_path / "c", slot_dir=tmp_path / "s",
        cache_ttl_s=ttl_s, run_id=THIS_RUN,
    )  # fmt: skip
    return CallPacer(settings, n_workers=1)


def _request(
    server: FakeLLMServer, missed_key: str | None = None, nodeid: str = "talk.eval.yaml::one"
) -> Request:
    target = CallTarget("fake", "openai/fake-model", server.base_url, "sk-fake")
    return Request(
        target=target, messages=MESSAGES, params={}, key_params={}, repeat=0, stream=False,
        lane=ModelLane(AdaptiveConcurrency(4), RateLimiter()), slots=(), estimate=10,
        model_name="fake", nodeid=nodeid, missed_key=missed_key,
    )  # fmt: skip


def _key(server: FakeLLMServer) -> str:
    return cache_key("openai/fake-model", MESSAGES, {}, 0, api_base=server.base_url)


def _answer(text: str) -> Completion:
    return Completion(text, "openai/fake-model", 1, 1, False, None, 0.1, None, 0, False, "stop")


def _stored(tmp_path: Path, key: str, text: str, run: str, age_s: float) -> ResponseCache:
    """An entry for ``key`` written ``age_s`` ago by ``run``."""
    cache = ResponseCache(cache_path(tmp_path / "c"))
    cache.put(key, _answer(text), run=run)
    db = sqlite3.connect(cache.path)
    db.execute("UPDATE responses SET created_at = ?", (time.time() - age_s,))
    db.commit()
    db.close()
    return cache


@pytest.mark.parametrize(
    ("run", "age_s", "mode", "kept"),
    [
        pytest.param(THIS_RUN, 20 * DAY, "refresh", True, id="this-run-s-is-kept-stale-or-not"),
        pytest.param(OLD_RUN, 0.0, "use", True, id="an-older-fresh-one-is-kept-under-use"),
        pytest.param(OLD_RUN, 0.0, "refresh", False, id="an-older-one-is-replaced-by-refresh"),
        pytest.param(OLD_RUN, 2 * DAY, "use", False, id="a-stale-one-is-replaced"),
    ],
)
def test_an_answer_stored_meanwhile_is_kept_or_replaced(
    fake_llm: FakeLLMServer, tmp_path: Path, run: str, age_s: float, mode: str, kept: bool
) -> None:
    """The call missed (``missed_key``) and, while it ran, another process stored the key."""
    fake_llm.add_rule(Rule(reply="ours"))
    key = _key(fake_llm)
    cache = _stored(tmp_path, key, "theirs", run, age_s)
    pacer = _pacer(tmp_path, mode, ttl_s=DAY)
    got = asyncio.run(pacer.paced(_request(fake_llm, missed_key=key)))
    pacer.close()
    assert len(fake_llm.chat_requests()) == 1
    assert (got.text, got.cached) == (("theirs", True) if kept else ("ours", False))
    entry = cache.entry(key)
    assert entry is not None and entry.completion.text == got.text
    assert entry.run == (run if kept else THIS_RUN)
    cache.close()


@pytest.mark.parametrize(("run", "calls"), [(THIS_RUN, 0), (OLD_RUN, 1)])
def test_refresh_answers_from_an_entry_this_run_wrote(
    fake_llm: FakeLLMServer, tmp_path: Path, run: str, calls: int
) -> None:
    fake_llm.add_rule(Rule(reply="ours"))
    _stored(tmp_path, _key(fake_llm), "theirs", run, 0.0).close()
    pacer = _pacer(tmp_path, "refresh")
    got = asyncio.run(pacer.paced(_request(fake_llm)))
    pacer.close()
    assert len(fake_llm.chat_requests()) == calls
    assert got.text == ("theirs" if calls == 0 else "ours")


@pytest.mark.parametrize(
    ("askers", "calls"),
    [
        pytest.param(["one", "one"], 2, id="a-rerun-of-the-only-taker-samples-anew"),
        pytest.param(["one", "two", "one"], 1, id="a-rerun-keeps-an-answer-another-took"),
    ],
)
def test_refresh_samples_anew_for_a_rerun_unless_another_item_took_the_answer(
    fake_llm: FakeLLMServer, tmp_path: Path, askers: list[str], calls: int
) -> None:
    """Reruns under --cache=refresh sample the model again (docs/outcomes.md), but not by
    replacing an answer another item of the run continued from."""
    fake_llm.add_rule(Rule(reply="Hello A", times=1))
    fake_llm.add_rule(Rule(reply="Hello B"))
    pacer = _pacer(tmp_path, "refresh")

    async def ask() -> list[str]:
        return [(await pacer.paced(_request(fake_llm, nodeid=who))).text for who in askers]

    said = asyncio.run(ask())
    pacer.close()
    assert len(fake_llm.chat_requests()) == calls
    assert said[-1] == ("Hello B" if calls == 2 else "Hello A")
    cache = ResponseCache(cache_path(tmp_path / "c"))
    stored = cache.get(_key(fake_llm))
    cache.close()
    assert stored is not None and stored.text == said[-1]  # the run's last answer is kept


async def _together(pacer: CallPacer, server: FakeLLMServer, cancel_first: bool) -> Any:
    """Two identical requests at once, the second started while the first is in flight."""
    first = asyncio.ensure_future(pacer.paced(_request(server)))
    while not server.requests:  # the first has reached the server
        await asyncio.sleep(0.01)
    second = asyncio.ensure_future(pacer.paced(_request(server)))
    await asyncio.sleep(0.05)  # the second is waiting on the first
    if cancel_first:
        first.cancel()
    return await asyncio.wait_for(asyncio.gather(first, second, return_exceptions=True), 60)


@pytest.mark.parametrize("mode", ["use", "refresh"])
def test_identical_requests_at_once_make_one_call(
    fake_llm: FakeLLMServer, tmp_path: Path, mode: str
) -> None:
    fake_llm.add_rule(Rule(reply="Hello A", times=1, delay_s=0.3))
    fake_llm.add_rule(Rule(reply="Hello B"))
    pacer = _pacer(tmp_path, mode)
    first, second = asyncio.run(_together(pacer, fake_llm, cancel_first=False))
    pacer.close()
    assert len(fake_llm.chat_requests()) == 1
    assert (first.text, first.cached) == ("Hello A", False)
    assert (second.text, second.cached, second.retries) == ("Hello A", True, 0)


@pytest.mark.parametrize("cancel_first", [False, True], ids=["failed", "cancelled"])
def test_when_the_first_of_identical_requests_fails_the_second_calls(
    fake_llm: FakeLLMServer, tmp_path: Path, cancel_first: bool
) -> None:
    """An error is never shared, and a cancelled first call leaves the second to call (the
    scheduler cancels look-ahead work): it neither fails with it nor hangs."""
    fake_llm.add_rule(Rule(status=400, error_message="no", times=1, delay_s=0.3))
    fake_llm.add_rule(Rule(reply="Hello B"))
    pacer = _pacer(tmp_path, "use")
    first, second = asyncio.run(_together(pacer, fake_llm, cancel_first))
    pacer.close()
    expected = asyncio.CancelledError if cancel_first else ProviderError
    assert isinstance(first, expected)
    assert (second.text, second.cached) == ("Hello B", False)
    assert len(fake_llm.chat_requests()) == 2


# -- the cache's put with keep ---------------------------------------------------------------
def _keep_this_run(entry: CacheEntry) -> bool:
    return entry.run == THIS_RUN


def test_put_keeps_what_it_is_told_to_and_returns_what_the_entry_holds(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "responses.sqlite")
    ours, replaced = _answer("ours"), _answer("replaced")
    assert cache.put("k", ours, run=OLD_RUN, keep=_keep_this_run) is ours
    assert cache.put("k", replaced, run=THIS_RUN, keep=_keep_this_run) is replaced
    assert cache.put("k", ours, run=THIS_RUN, keep=_keep_this_run) == replaced
    entry = cache.entry("k")
    assert entry is not None and (entry.completion, entry.run) == (replaced, THIS_RUN)
    assert cache.put("k", ours, run=THIS_RUN) is ours  # without keep: replaced, as ever
    cache.close()
