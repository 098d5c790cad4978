"""The response cache: stable keys, exact round trips, real concurrent writers, entries that
age (``--cache-ttl``, aged by writing an old ``created_at`` into the file) and the old layout."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import random
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

import pytest
from conftest import FRANCE, Bench, Rule

from pytest_llmbench.engine.cache import (
    CacheError,
    ResponseCache,
    cache_key,
    format_age,
    parse_age,
)
from pytest_llmbench.models.providers.completion import Completion
from pytest_llmbench.yamlguard import ValueLimitError

MESSAGES = [
    {"role": "system", "content": "Answer in one word."},
    {"role": "user", "content": "What is the capital of France?"},
]
PARAMS = {"temperature": 0.7, "max_tokens": 32}
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
BASE_KEY = cache_key("openai/gpt-4o-mini", MESSAGES, PARAMS, 0)

WORKERS = 4
DISTINCT_PER_WORKER = 200
SHARED_KEYS = 50


def make_completion(text: str = "Paris", **changes: Any) -> Completion:
    fields: dict[str, Any] = {
        "text": text,
        "model_id": "openai/gpt-4o-mini",
        "input_tokens": 17,
        "output_tokens": 3,
        "tokens_estimated": False,
        "ttft_s": 0.123456789012345,
        "latency_s": 0.9876543210987654,
        "cost_usd": 1.5e-06,
        "retries": 2,
        "streamed": True,
        "finish_reason": "stop",
    }
    return Completion(**{**fields, **changes})


@pytest.fixture
def cache(tmp_path: Path) -> Any:
    response_cache = ResponseCache(tmp_path / "cache" / "responses.sqlite")
    yield response_cache
    response_cache.close()


# -- keys ------------------------------------------------------------------------------------
def test_key_is_the_sha256_of_the_canonical_json() -> None:
    canonical = json.dumps(
        {
            "v": 1,
            "model": "m",
            "api_base": "http://x",
            "messages": [{"role": "user", "content": "héllo"}],
            "params": {"temperature": 0},
            "tools": None,
            "repeat": 3,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    expected = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    key = cache_key(
        "m", [{"role": "user", "content": "héllo"}], {"temperature": 0}, 3, api_base="http://x"
    )
    assert key == expected


def test_a_parameter_that_holds_itself_or_nests_deep_is_a_located_value_error() -> None:
    """A plain test's parameters are the user's Python values: the key names the place
    instead of json's "Circular reference detected" or a RecursionError."""
    looped: dict[str, Any] = {"a": 1}
    looped["self"] = looped
    with pytest.raises(ValueLimitError, match=r"^params\.extra\.self: the value contains itself$"):
        cache_key("m", MESSAGES, {"extra": looped}, 0)
    deep: list[Any] = []
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(ValueLimitError, match=r"^params\.extra\.0\.0.*nested more than 64"):
        cache_key("m", MESSAGES, {"extra": deep}, 0)


def test_key_ignores_dict_order() -> None:
    reordered_messages = [dict(reversed(list(message.items()))) for message in MESSAGES]
    reordered_params = dict(reversed(list(PARAMS.items())))
    reordered_tools = [{"function": TOOLS[0]["function"], "type": "function"}]
    assert reordered_messages[0] == MESSAGES[0]
    assert list(reordered_messages[0]) != list(MESSAGES[0])
    first = cache_key("m", MESSAGES, PARAMS, 1, tools=TOOLS)
    second = cache_key("m", reordered_messages, reordered_params, 1, tools=reordered_tools)
    assert first == second


def test_key_is_the_same_in_another_process() -> None:
    code = (
        "import json, sys\n"
        "from pytest_llmbench.engine.cache import cache_key\n"
        "m, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])\n"
        "print(cache_key('openai/gpt-4o-mini', m, p, 0))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    args = [sys.executable, "-c", code, json.dumps(MESSAGES), json.dumps(PARAMS)]
    result = subprocess.run(args, capture_output=True, text=True, env=env, check=True)
    assert result.stdout.strip() == BASE_KEY


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(cache_key("openai/gpt-4o", MESSAGES, PARAMS, 0), id="model"),
        pytest.param(
            cache_key("openai/gpt-4o-mini", MESSAGES, PARAMS, 0, api_base="http://h"), id="api_base"
        ),
        pytest.param(
            cache_key(
                "openai/gpt-4o-mini",
                [MESSAGES[0], {"role": "user", "content": "What is the capital of Spain?"}],
                PARAMS,
                0,
            ),
            id="user-message",
        ),
        pytest.param(
            cache_key(
                "openai/gpt-4o-mini",
                [{"role": "system", "content": "Be terse."}, MESSAGES[1]],
                PARAMS,
                0,
            ),
            id="system-message",
        ),
        pytest.param(cache_key("openai/gpt-4o-mini", MESSAGES[1:], PARAMS, 0), id="message-count"),
        pytest.param(
            cache_key("openai/gpt-4o-mini", MESSAGES, {**PARAMS, "temperature": 0.0}, 0),
            id="temperature",
        ),
        pytest.param(
            cache_key("openai/gpt-4o-mini", MESSAGES, {**PARAMS, "seed": 1}, 0), id="new-param"
        ),
        pytest.param(cache_key("openai/gpt-4o-mini", MESSAGES, PARAMS, 0, tools=TOOLS), id="tools"),
        pytest.param(cache_key("openai/gpt-4o-mini", MESSAGES, PARAMS, 1), id="repeat"),
    ],
)
def test_key_changes_with_what_determines_the_answer(changed: str) -> None:
    assert changed != BASE_KEY
    assert len(changed) == 64 and int(changed, 16) >= 0


def test_key_ignores_params_that_do_not_change_the_answer() -> None:
    transport = {
        "timeout": 30,
        "max_retries": 5,
        "stream": True,
        "stream_options": {"include_usage": True},
        "api_key": "sk-secret",
    }
    assert cache_key("openai/gpt-4o-mini", MESSAGES, {**PARAMS, **transport}, 0) == BASE_KEY


# -- storage ---------------------------------------------------------------------------------
def test_round_trip_keeps_every_field(cache: ResponseCache) -> None:
    stored = make_completion("Paris — «ville lumière»\n")
    before = time.time()
    cache.put(BASE_KEY, stored)
    after = time.time()
    assert cache.get(BASE_KEY) == stored
    sparse = make_completion(
        "", input_tokens=None, output_tokens=None, ttft_s=None, cost_usd=None, finish_reason=None
    )
    cache.put("other", sparse)
    assert cache.get("other") == sparse
    row = cache._connection().execute("SELECT value, created_at FROM responses").fetchone()
    assert set(json.loads(row[0])) == {field.name for field in fields(Completion)}
    assert before <= row[1] <= after  # created_at: when it was put


def test_miss_returns_none(cache: ResponseCache) -> None:
    cache.put(BASE_KEY, make_completion())
    assert cache.get("0" * 64) is None


def test_put_replaces_an_earlier_answer(cache: ResponseCache) -> None:
    cache.put(BASE_KEY, make_completion("first"))
    cache.put(BASE_KEY, make_completion("second"))
    assert cache.get(BASE_KEY) == make_completion("second")
    assert len(cache) == 1


def test_put_refuses_a_completion_without_text(cache: ResponseCache) -> None:
    with pytest.raises(ValueError, match="errors are not cached"):
        cache.put(BASE_KEY, make_completion(None))  # type: ignore[arg-type]
    assert cache.get(BASE_KEY) is None


def test_len_counts_entries(cache: ResponseCache) -> None:
    assert len(cache) == 0
    for index in range(3):
        cache.put(f"key-{index}", make_completion(str(index)))
    assert len(cache) == 3


def test_entries_persist_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite"
    first = ResponseCache(path)
    first.put(BASE_KEY, make_completion())
    first.close()
    second = ResponseCache(path)
    try:
        assert second.get(BASE_KEY) == make_completion()
        assert len(second) == 1
    finally:
        second.close()


def test_an_entry_from_an_older_completion_shape_is_a_miss(cache: ResponseCache) -> None:
    cache.put(BASE_KEY, make_completion())
    connection = cache._connection()
    connection.execute("UPDATE responses SET value = ?", (json.dumps({"text": "Paris"}),))
    assert cache.get(BASE_KEY) is None


def test_gets_reuse_one_connection(cache: ResponseCache, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[object] = []
    open_connection = cache._open
    monkeypatch.setattr(cache, "_open", lambda: opened.append(1) or open_connection())
    cache.put(BASE_KEY, make_completion())
    for _ in range(50):
        assert cache.get(BASE_KEY) == make_completion()
    assert len(opened) == 1, "the connection is opened once, not per call"


def test_no_file_until_first_use(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "responses.sqlite"
    response_cache = ResponseCache(path)
    assert not path.parent.exists()
    try:
        assert response_cache.get(BASE_KEY) is None
        assert path.is_file()
    finally:
        response_cache.close()


def test_each_thread_gets_its_own_connection_and_close_closes_all(cache: ResponseCache) -> None:
    cache.put(BASE_KEY, make_completion())
    barrier = threading.Barrier(4)

    def read_in_thread(_: int) -> Completion | None:
        barrier.wait()  # all four threads alive at once, so none reuses another's connection
        return cache.get(BASE_KEY)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(read_in_thread, range(4)))
    assert results == [make_completion()] * 4
    assert len(cache._connections) == 5  # the main thread's and four workers'
    cache.close()
    assert cache._connections == []
    assert cache.get(BASE_KEY) == make_completion()  # usable again after close


# -- errors ----------------------------------------------------------------------------------
@pytest.mark.parametrize("operation", ["get", "put", "len"])
def test_corrupt_file_raises_cache_error_naming_the_path(tmp_path: Path, operation: str) -> None:
    path = tmp_path / "responses.sqlite"
    path.write_bytes(random.Random(0).randbytes(8192))
    response_cache = ResponseCache(path)
    calls = {
        "get": lambda: response_cache.get(BASE_KEY),
        "put": lambda: response_cache.put(BASE_KEY, make_completion()),
        "len": lambda: len(response_cache),
    }
    with pytest.raises(CacheError) as excinfo:
        calls[operation]()
    assert str(path) in str(excinfo.value)
    assert "not a database" in str(excinfo.value)
    response_cache.close()


def test_a_directory_at_the_path_raises_cache_error(tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite"
    path.mkdir()
    with pytest.raises(CacheError) as excinfo:
        ResponseCache(path).get(BASE_KEY)
    assert str(path) in str(excinfo.value)


# -- concurrency -----------------------------------------------------------------------------
def _write_keys(path: str, worker: int, barrier: Any) -> None:
    """One writer process: its own keys and the shared ones, started with all the others."""
    response_cache = ResponseCache(Path(path))
    barrier.wait()
    for index in range(DISTINCT_PER_WORKER):
        response_cache.put(f"w{worker}-{index}", make_completion(f"{worker}:{index}"))
        if index < SHARED_KEYS:
            response_cache.put(f"shared-{index}", make_completion(f"shared by {worker}"))
    response_cache.close()


def _in_processes(target: Any, path: Path) -> None:
    """Run ``target(path, worker, barrier)`` in WORKERS spawned processes at once; all exit 0."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(WORKERS)
    processes = [
        context.Process(target=target, args=(str(path), worker, barrier))
        for worker in range(WORKERS)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)
    assert [process.exitcode for process in processes] == [0] * WORKERS


def test_concurrent_writer_processes_lose_nothing(tmp_path: Path) -> None:
    # The file does not exist yet: the processes also race to create it and its schema.
    path = tmp_path / "cache" / "responses.sqlite"
    _in_processes(_write_keys, path)

    response_cache = ResponseCache(path)
    try:
        assert len(response_cache) == WORKERS * DISTINCT_PER_WORKER + SHARED_KEYS
        for worker in range(WORKERS):
            for index in range(DISTINCT_PER_WORKER):
                stored = response_cache.get(f"w{worker}-{index}")
                assert stored == make_completion(f"{worker}:{index}")
        writers = {f"shared by {worker}" for worker in range(WORKERS)}
        for index in range(SHARED_KEYS):
            shared = response_cache.get(f"shared-{index}")
            assert shared is not None and shared.text in writers
            assert shared == replace(make_completion(), text=shared.text)
    finally:
        response_cache.close()


def _store_the_shared_key(path: str, worker: int, barrier: Any) -> None:
    """One process of a run storing its own answer to the key all of them missed at once."""
    response_cache = ResponseCache(Path(path))
    len(response_cache)  # open (and create) the file before the race
    barrier.wait()
    held = response_cache.put(
        BASE_KEY, make_completion(f"by {worker}"), run="the-run", keep=lambda e: e.run == "the-run"
    )
    response_cache.put(f"seen-{worker}", held)
    response_cache.close()


def test_processes_storing_one_key_at_once_all_continue_from_the_first(tmp_path: Path) -> None:
    """Each look and write is one transaction: every process of the run gets the answer the
    first stored (not its own), so they all continue from the one the file keeps."""
    path = tmp_path / "responses.sqlite"
    _in_processes(_store_the_shared_key, path)
    response_cache = ResponseCache(path)
    entry = response_cache.entry(BASE_KEY)
    seen = [response_cache.get(f"seen-{worker}") for worker in range(WORKERS)]
    response_cache.close()
    assert entry is not None and entry.run == "the-run"
    assert seen == [entry.completion] * WORKERS


# -- ages, models and the old file layout ----------------------------------------------------
@pytest.mark.parametrize(
    ("text", "seconds", "shown"),
    [("90s", 90, "90s"), ("30m", 1800, "30m"), ("12h", 43200, "12h"), ("14d", 1209600, "14d"),
     ("36h", 129600, "36h"), (" 1.5H ", 5400, "90m")],
)  # fmt: skip
def test_ages_read_and_print_in_their_units(text: str, seconds: float, shown: str) -> None:
    assert parse_age(text) == seconds
    assert format_age(seconds) == shown


def test_an_age_between_units_is_shown_rounded_down() -> None:
    assert format_age(20.7 * 86400) == "20d"
    assert format_age(100) == "100s" and format_age(130) == "2m"


@pytest.mark.parametrize("text", ["", "14", "d", "0d", "-3d", "14 days", "2w", "nan", "1e3s"])
def test_a_malformed_age_is_a_value_error_saying_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not an age: write a positive number and a unit"):
        parse_age(text)


def test_an_entry_carries_its_write_time_and_model(cache: ResponseCache) -> None:
    before = time.time()
    cache.put(BASE_KEY, make_completion(), model="openai/asked-for")
    cache.put("other", make_completion(model_id="openai/answered"))
    entry = cache.entry(BASE_KEY)
    assert entry is not None and entry.completion == make_completion()
    assert entry.created_at is not None and before <= entry.created_at <= time.time()
    models = {info.key: info.model for info in cache.entries()}
    assert models == {BASE_KEY: "openai/asked-for", "other": "openai/answered"}
    assert cache.entry("missing") is None


def _old_layout_file(path: Path, rows: list[tuple[str, str, float | None]]) -> None:
    """A cache file as written before entries named their model (no ``model`` column)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE responses (key TEXT PRIMARY KEY, value TEXT NOT NULL, created_at REAL)"
    )
    db.executemany("INSERT INTO responses VALUES (?, ?, ?)", rows)
    db.commit()
    db.close()


def test_a_file_of_the_old_layout_gains_the_model_and_run_columns_and_keeps_working(
    tmp_path: Path,
) -> None:
    path = tmp_path / "responses.sqlite"
    stored = json.dumps(asdict(make_completion(model_id="openai/old")))
    _old_layout_file(path, [("a", stored, time.time()), ("b", "{not json", None)])
    response_cache = ResponseCache(path)
    try:
        old = response_cache.entry("a")
        assert old is not None and old.completion == make_completion(model_id="openai/old")
        assert old.run is None  # written before entries named their run
        infos = {info.key: info for info in response_cache.entries()}
        assert infos["a"].model == "openai/old"  # filled from the stored answer
        assert infos["b"].model is None and infos["b"].created_at is None
        response_cache.put("c", make_completion(), model="openai/new", run="the-run")
        assert {info.key: info.model for info in response_cache.entries()}["c"] == "openai/new"
        new = response_cache.entry("c")
        assert new is not None and new.run == "the-run"
    finally:
        response_cache.close()
    # A second open finds the column there and changes nothing.
    again = ResponseCache(path)
    assert len(again) == 3 and again.get("a") == make_completion(model_id="openai/old")
    again.close()


def _open_old_file(path: str, worker: int, barrier: Any) -> None:
    """One process of a run opening a file of the old layout with the others at once."""
    response_cache = ResponseCache(Path(path))
    barrier.wait()
    assert response_cache.get("old-0") == make_completion(model_id="openai/old")
    response_cache.put(f"new-{worker}", make_completion(), model="openai/new")
    response_cache.close()


def test_processes_opening_an_old_file_at_once_migrate_it_once(tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite"
    stored = json.dumps(asdict(make_completion(model_id="openai/old")))
    _old_layout_file(path, [(f"old-{index}", stored, time.time()) for index in range(500)])
    _in_processes(_open_old_file, path)
    response_cache = ResponseCache(path)
    models = {info.key: info.model for info in response_cache.entries()}
    response_cache.close()
    assert len(models) == 500 + WORKERS
    assert {models[f"old-{index}"] for index in range(500)} == {"openai/old"}
    assert {models[f"new-{worker}"] for worker in range(WORKERS)} == {"openai/new"}


def _set_age(path: Path, key: str, seconds: float) -> None:
    db = sqlite3.connect(path)
    db.execute("UPDATE responses SET created_at = ? WHERE key = ?", (time.time() - seconds, key))
    db.commit()
    db.close()


def test_prune_deletes_what_is_older_and_clear_what_is_named(cache: ResponseCache) -> None:
    for key, model in (("old-a", "m/a"), ("new-a", "m/a"), ("old-b", "m/b"), ("new-b", "m/b")):
        cache.put(key, make_completion(), model=model)
    for key in ("old-a", "old-b"):
        _set_age(cache.path, key, 15 * 86400)
    assert cache.prune(14 * 86400, model="m/a") == 1
    assert sorted(info.key for info in cache.entries()) == ["new-a", "new-b", "old-b"]
    assert cache.prune(14 * 86400) == 1
    assert cache.clear(model="m/b") == 1
    assert [info.key for info in cache.entries()] == ["new-a"]
    assert cache.clear() == 1 and len(cache) == 0


# -- --cache-ttl in runs ---------------------------------------------------------------------
def _age_every_entry(bench: Bench, days: float) -> None:
    db = sqlite3.connect(bench.pytester.path / "c" / "responses.sqlite")
    changed = db.execute("UPDATE responses SET created_at = ?", (time.time() - days * 86400,))
    assert changed.rowcount > 0
    db.commit()
    db.close()


def test_an_entry_past_the_ttl_is_called_again_under_use(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply="Paris"))
    bench.eval_file("france", FRANCE)
    use = ("--models=fake", "--cache=use", "--cache-dir=c")
    bench.run(*use).assert_outcomes(passed=1)
    bench.run(*use, "--cache-ttl=14d").assert_outcomes(passed=1)
    assert len(bench.server.chat_requests()) == 1 and bench.records()[0]["cached"] is True
    _age_every_entry(bench, 20)
    bench.run(*use).assert_outcomes(passed=1)  # without a TTL, answers never age
    assert len(bench.server.chat_requests()) == 1 and bench.records()[0]["cached"] is True
    bench.run(*use, "--cache-ttl=14d").assert_outcomes(passed=1)
    assert len(bench.server.chat_requests()) == 2
    assert bench.records()[0]["cached"] is False
    # The new answer replaced the stale one, written now: the next run hits it.
    bench.run(*use, "--cache-ttl=14d").assert_outcomes(passed=1)
    assert len(bench.server.chat_requests()) == 2 and bench.records()[0]["cached"] is True


def test_an_entry_past_the_ttl_is_a_replay_error_naming_its_age(bench: Bench) -> None:
    bench.eval_file("france", FRANCE)
    bench.server.add_rule(Rule(reply="Paris"))
    bench.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(passed=1)
    _age_every_entry(bench, 20.5)
    replay = ("--models=fake", "--cache=replay", "--cache-dir=c")
    result = bench.run(*replay, "--cache-ttl=14d")
    result.assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "cache_miss"
    assert "france.eval.yaml::france" in record["error"]
    assert (
        "is 20d old, older than --cache-ttl 14d (--cache=replay makes no calls)" in record["error"]
    )
    result.stdout.fnmatch_lines(["*is 20d old, older than --cache-ttl 14d*"])
    bench.run(*replay, "--cache-ttl=21d").assert_outcomes(passed=1)
    assert len(bench.server.chat_requests()) == 1


def test_the_ttl_applies_to_calls_made_on_the_engine_too(bench: Bench) -> None:
    """A plain test's calls (the ``llm`` fixture) look the cache up on the engine's loop."""
    bench.pytester.makepyfile(
        test_plain="""
        def test_hi(llm):
            assert llm.complete("Say hi").text == "hi there"
        """
    )
    bench.server.add_rule(Rule(reply="hi there"))
    use = ("--models=fake", "--cache=use", "--cache-dir=c", "--cache-ttl=1h")
    bench.run(*use).assert_outcomes(passed=1)
    _age_every_entry(bench, 2 / 24)
    bench.run(*use).assert_outcomes(passed=1)
    assert len(bench.server.chat_requests()) == 2 and bench.records()[-1]["cached"] is False
    _age_every_entry(bench, 3)
    result = bench.run("--models=fake", "--cache=replay", "--cache-dir=c", "--cache-ttl=1h")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*is 3d old, older than --cache-ttl 1h*"])
    assert len(bench.server.chat_requests()) == 2


@pytest.mark.parametrize("where", ["option", "ini"])
def test_a_malformed_ttl_is_a_usage_error_naming_it(bench: Bench, where: str) -> None:
    bench.eval_file("france", FRANCE)
    args = ["--models=fake", "--cache=use", "--cache-dir=c"]
    if where == "option":
        args.append("--cache-ttl=two weeks")
    else:
        bench.pytester.makeini("[pytest]\nllmbench_cache_ttl = two weeks\n")
    result = bench.run(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*llmbench: --cache-ttl: 'two weeks' is not an age*14d*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert bench.server.chat_requests() == []


def test_the_session_end_closes_the_cache_database(bench: Bench) -> None:
    """The response cache's SQLite connections close with the run (they were left open, and a
    long session of in-process runs ran out of descriptors)."""
    import os

    def open_cache_files() -> list[str]:
        found = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if "responses.sqlite" in target:
                found.append(target)
        return found

    bench.server.add_rule(Rule(reply="Paris"))
    bench.eval_file("france", FRANCE)
    before = open_cache_files()
    bench.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(passed=1)
    assert (bench.pytester.path / "c").is_dir()
    assert open_cache_files() == before
