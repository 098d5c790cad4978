"""Issue 39's features in the combinations users write, each a whole pytest run against real
fake servers on 127.0.0.1 (pytest-xdist for real where ``-n 2``):

- an Anthropic model under ``--batch`` (Message Batches, through the fake of its API);
- ``--stop-early`` with ``--batch`` and ``--repeat``: the repeats go in waves, a stopped repeat
  sends no line, a replay takes and stops the same repeats; killed with SIGKILL mid-batch and
  resumed with ``--resume-batch``, each line is still sent once;
- ``--batch`` then ``--cache=replay`` on the same cache: nothing sent, the records still batched;
- plain, judged and conversation files in one ``--batch -n 2`` run: the conversation live, the
  rest batched, each line once;
- ``--batch --repeat 3 -n 2``: each repeat its own line and its own cache entry.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest
from conftest import FAKE_KEY_ENV, TWO_CAPITALS, Bench, Rule
from fake_anthropic_batches import API_KEY, FakeAnthropicBatches
from fakeserver import count_words

from pytest_llmbench.models.providers.batch_routes import forget_backends

POLL = "--batch-poll=0.05"
#: A model whose calls go to the fake server's OpenAI Batch API.
PROFILES = """
models:
  batched:
    model: openai/fake-model
    api_base: {base}
    api_key_env: {env}
    batch: true
    params: {{temperature: 0}}
    cost_per_1k: {{input: 0.001, output: 0.002}}
"""
#: claude-haiku-4-5's batch prices per token in litellm's map (half the live 1e-06 / 5e-06).
CLAUDE_BATCH_IN, CLAUDE_BATCH_OUT = 5e-07, 2.5e-06
CLAUDE_KEY_ENV = "FAKE_ANTHROPIC_KEY"


@pytest.fixture(autouse=True)
def _fresh_backends() -> Iterator[None]:
    """Each test's servers are new: no backend made for an earlier one is reused."""
    forget_backends()
    yield
    forget_backends()


def _openai_batches(bench: Bench) -> None:
    """The ``batched`` profile, its batches on the bench's fake server."""
    text = PROFILES.format(base=bench.server.base_url, env=FAKE_KEY_ENV)
    bench.pytester.makefile(".yaml", **{"profiles/batched": text})


def _capitals(bench: Bench) -> None:
    for country, capital in (("France", "Paris."), ("Japan", "Kyoto.")):
        bench.server.add_rule(Rule(match=country, reply=capital))


def _sent_lines(bench: Bench) -> dict[str, str]:
    """Every line of every batch input file the fake server received: custom_id -> the
    line's body as JSON text (a custom_id sent twice keeps its last body)."""
    store = bench.server._batches
    lines: dict[str, str] = {}
    with store.lock:
        inputs = [
            store.contents[file_id]
            for file_id, meta in store.files.items()
            if meta["purpose"] == "batch"
        ]
    for data in inputs:
        for raw in data.splitlines():
            if raw.strip():
                entry = json.loads(raw)
                lines[entry["custom_id"]] = json.dumps(entry["body"])
    return lines


def _forget_batches(bench: Bench) -> None:
    """Drop the fake server's files and batches (``reset`` keeps them): a second run's lines
    are then its own."""
    store = bench.server._batches
    with store.lock:
        store.files.clear()
        store.contents.clear()
        store.batches.clear()
        store.polled.clear()


def _verdicts(bench: Bench) -> dict[str, str]:
    with bench.out("case_verdicts.csv").open(newline="", encoding="utf-8") as handle:
        return {row["case_id"]: row["verdict"] for row in csv.DictReader(handle)}


def _cache_keys(folder: Path) -> set[str]:
    with sqlite3.connect(folder / "responses.sqlite") as connection:
        return {key for (key,) in connection.execute("SELECT key FROM responses")}


# -- 1. an Anthropic model under --batch -------------------------------------------------------


@pytest.fixture
def claude(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropicBatches]:
    """A ``claude`` profile (claude-haiku-4-5) whose api_base is the fake Anthropic API."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_API_BASE", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(CLAUDE_KEY_ENV, API_KEY)
    rules = [
        Rule(match="capital of France", reply="Paris is the capital."),
        Rule(match="capital of Japan", reply="Tokyo, of course."),
    ]
    with FakeAnthropicBatches(rules) as server:
        server.script.polls = 2  # one poll finds it in progress, the next ended
        profile = f"""
models:
  claude:
    model: anthropic/claude-haiku-4-5
    api_base: {server.base_url}
    api_key_env: {CLAUDE_KEY_ENV}
"""
        bench.pytester.makefile(".yaml", **{"profiles/claude": profile})
        yield server


def test_an_anthropic_model_is_batched_at_its_batch_price_and_a_rerun_sends_nothing(
    bench: Bench, claude: FakeAnthropicBatches
) -> None:
    bench.eval_file("capitals", TWO_CAPITALS)
    args = ("--models=claude", "--batch", POLL, "--cache-dir=c")
    result = bench.run(*args)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*llmbench: batch: claude: batched (anthropic batch API at*"])
    assert claude.creates == 1 and claude.messages_bodies == []  # one batch, nothing live
    assert sorted(claude.lines_received.values()) == [1, 1]
    (batch_id,) = claude.batches
    replies = {"france": "Paris is the capital.", "japan": "Tokyo, of course."}
    prompts = {"france": "What is the capital of France?", "japan": "What is the capital of Japan?"}
    records = {record["case_id"]: record for record in bench.records()}
    for case, record in records.items():
        assert (record["batched"], record["batch_id"]) == (True, batch_id)
        assert record["latency_s"] is None and record["ttft_s"] is None
        # the fake counts words: the prompt's in, the reply's out
        tokens_in, tokens_out = count_words(prompts[case]), count_words(replies[case])
        assert (record["input_tokens"], record["output_tokens"]) == (tokens_in, tokens_out)
        want = tokens_in * CLAUDE_BATCH_IN + tokens_out * CLAUDE_BATCH_OUT
        assert record["cost_usd"] == pytest.approx(want, rel=1e-9)
    # france: 6 words in, 4 out: 6 * 5e-07 + 4 * 2.5e-06 = 1.3e-05 USD
    assert records["france"]["cost_usd"] == pytest.approx(1.3e-05, rel=1e-9)
    polls, downloads = claude.polls, claude.downloads
    rerun = bench.run(*args)
    rerun.assert_outcomes(passed=2)
    assert (claude.creates, claude.polls, claude.downloads) == (1, polls, downloads)
    assert claude.messages_bodies == []
    assert all(record["cached"] and record["batched"] for record in bench.records())


# -- 2. --stop-early with --batch --------------------------------------------------------------

STABILITY = """
model_params: {temperature: 0, max_tokens: 16}
cases:
  - id: right
    prompt: What is the capital of France?
    expected: Paris
    assert: [contains]
  - id: wrong
    prompt: What is the capital of Japan?
    expected: Tokyo
    assert: [contains]
  - id: flaky
    prompt: Is it flaky?
    expected: "yes"
    assert: [contains]
"""


def _stability_answers(bench: Bench) -> None:
    """France always right, Japan always wrong, 'flaky' yes then no, again and again."""
    bench.server.reset()
    _capitals(bench)
    for reply in ("yes", "no", "yes", "no"):
        bench.server.add_rule(Rule(match="flaky", reply=reply, times=1))


def _case_of(body: str) -> str:
    return "right" if "France" in body else "wrong" if "Japan" in body else "flaky"


@pytest.mark.parametrize("workers", ["0", "2"])
def test_stop_early_under_batch_sends_only_the_repeats_taken_in_waves(
    bench: Bench, workers: str
) -> None:
    _openai_batches(bench)
    bench.eval_file("stability", STABILITY)
    base = ("--models=batched", "--repeat=4", "--repeat-policy=majority")
    run = bench.run if workers == "0" else bench.run_subprocess
    _stability_answers(bench)
    # the full run and the replay in-process: only the stopped run needs the workers
    bench.run(*base, "--batch", POLL, "--cache-dir=full").assert_outcomes(passed=6, failed=6)
    full = _verdicts(bench)
    assert sorted(bench.server.lines_received.values()) == [1] * 12

    _stability_answers(bench)
    _forget_batches(bench)
    result = run(*base, "--batch", POLL, "--cache-dir=stopped", "--stop-early", "-n", workers)
    records = bench.records()
    taken = [record for record in records if not record["stopped_early"]]
    stopped = [record for record in records if record["stopped_early"]]
    by_case = Counter(record["case_id"] for record in taken)
    # stable cases stop once settled: majority of 4: three passes settle a pass, two fails a fail; flaky (yes, no, yes, no)
    # runs all four
    assert by_case == {"right": 3, "wrong": 2, "flaky": 4}
    assert {record["case_id"] for record in stopped} == {"right", "wrong"}
    result.assert_outcomes(
        passed=sum(r["outcome"] == "passed" for r in taken),
        failed=sum(r["outcome"] == "failed" for r in taken),
        skipped=len(stopped),
    )
    # the fake saw one line per repeat taken, none for a stopped one, each once
    server = bench.server
    assert sorted(server.lines_received.values()) == [1] * len(taken)
    sent = _sent_lines(bench)
    assert Counter(_case_of(body) for body in sent.values()) == by_case
    # the repeats past the floor waited for the verdicts of the first ones: waves
    assert server.creates > 1
    batch_of = {(r["case_id"], r["repeat"]): r["batch_id"] for r in taken}
    assert batch_of["right", 2] != batch_of["right", 0]
    assert batch_of["flaky", 3] not in (batch_of["flaky", 0], batch_of["flaky", 1])
    assert server.chat_requests() == []
    assert all(record["batched"] for record in taken)
    assert all(record["batch_id"] is None for record in stopped)
    assert _verdicts(bench) == full
    # replayed from the cache: the same repeats taken and stopped, and nothing sent
    said = sorted((r["case_id"], r["repeat"], r["outcome"], r["batch_id"]) for r in records)
    bench.server.reset()
    bench.run(*base, "--cache-dir=stopped", "--stop-early", "--cache=replay")
    again = sorted(
        (r["case_id"], r["repeat"], r["outcome"], r["batch_id"]) for r in bench.records()
    )
    assert again == said and bench.server.requests == []
    assert _verdicts(bench) == full


WAVES = "cases:\n" + "".join(
    f"  - {{id: c{i}, prompt: 'What is the capital of France? ({i})', expected: Paris, "
    "assert: [contains]}\n"
    for i in range(6)
)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_stop_early_under_batch_sends_one_batch_per_wave_not_per_case(
    bench: Bench, workers: str
) -> None:
    # Under "all", a passing case is never settled before its last repeat: every repeat runs.
    # In case order, each case's repeats past the floor would be a batch of one line each
    # (6 cases x 2 = 12 batches after the first); in waves, one batch per repeat past the
    # floor, per process.
    _openai_batches(bench)
    _capitals(bench)
    bench.eval_file("waves", WAVES)
    run = bench.run if workers == "0" else bench.run_subprocess
    args = ("--models=batched", "--repeat=4", "--repeat-policy=all", "--stop-early")
    result = run(*args, "--batch", POLL, "-n", workers)
    result.assert_outcomes(passed=24)
    assert sorted(bench.server.lines_received.values()) == [1] * 24
    processes = 1 if workers == "0" else 2
    # the floor's wave (repeats 0 and 1), then repeat 2's, then repeat 3's: three per process
    assert bench.server.creates <= 3 * processes
    waves = {}
    for record in bench.records():
        waves.setdefault(record["repeat"], set()).add(record["batch_id"])
    assert len(waves[2] & waves[3]) == 0  # repeat 3 went after repeat 2 was scored
    assert all(len(ids) <= processes for ids in waves.values())


def test_a_stop_early_run_killed_mid_batch_resumes_sending_each_line_once(bench: Bench) -> None:
    import os
    import signal

    from fakeserver import BatchScript
    from test_engine_batch_resume import _popen, _wait_for

    _openai_batches(bench)
    bench.eval_file("stability", STABILITY)
    args = ("--models=batched", "--repeat=4", "--repeat-policy=majority", "--stop-early")
    args += ("--batch", POLL, "--cache-dir=c")
    _stability_answers(bench)
    bench.server.batch = BatchScript(polls=10**9)  # in progress until the script changes
    killed = _popen(bench, *args, "--results-dir=first")
    try:
        _wait_for(bench.pytester.path / "first" / "batches.jsonl", "created", killed, 1)
    finally:
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait()
    journal = bench.pytester.path / "first" / "batches.jsonl"
    created = {e["batch_id"] for e in map(json.loads, journal.read_text().splitlines())
               if e["event"] == "created"}  # fmt: skip
    first_wave = dict(bench.server.lines_received)
    assert set(first_wave.values()) == {1} and len(first_wave) <= 6  # at most the floors
    bench.server.batch = BatchScript()  # it completes at the provider meanwhile
    bench.run(*args, "--resume-batch=first").assert_outcomes(passed=5, failed=4, skipped=3)
    server = bench.server
    assert sorted(server.lines_received.values()) == [1] * 9 and server.chat_requests() == []
    records = bench.records()
    taken = Counter(r["case_id"] for r in records if not r["stopped_early"])
    assert taken == {"right": 3, "wrong": 2, "flaky": 4}
    assert Counter(_case_of(body) for body in _sent_lines(bench).values()) == taken
    assert all(r["batched"] for r in records if not r["stopped_early"])
    # the killed run's batches answered the resumed run: none was made again
    answered_by = {r["batch_id"] for r in records if not r["stopped_early"]}
    assert created <= answered_by <= set(server._batches.batches)


# -- 3. --batch, then --cache=replay on the same cache -----------------------------------------


def test_a_replay_of_a_batched_run_sends_nothing_and_keeps_the_batch_records(
    bench: Bench,
) -> None:
    _openai_batches(bench)
    _capitals(bench)
    bench.eval_file("capitals", TWO_CAPITALS)
    bench.run("--models=batched", "--batch", POLL, "--cache-dir=c").assert_outcomes(
        passed=1, failed=1
    )
    first = {record["case_id"]: record for record in bench.records()}
    verdicts = _verdicts(bench)
    assert {record["batch_id"] for record in first.values()} == set(bench.server._batches.batches)
    for replay in (("--cache=replay",), ("--rescore",)):
        bench.server.reset()
        result = bench.run("--models=batched", "--cache-dir=c", *replay)
        result.assert_outcomes(passed=1, failed=1)
        assert bench.server.requests == []  # nothing sent: no chat, no file, no batch
        again = {record["case_id"]: record for record in bench.records()}
        for case, record in again.items():
            assert record["cached"] and record["batched"], replay
            assert record["batch_id"] == first[case]["batch_id"]
            assert record["latency_s"] is None and record["ttft_s"] is None
            assert record["cost_usd"] == first[case]["cost_usd"]
        assert _verdicts(bench) == verdicts


# -- 4. plain, judged and conversation files together, under -n 2 ------------------------------

JUDGED = """
cases:
  - id: judged
    prompt: What is the capital of Italy?
    expected: Rome
    assert:
      - contains
      - {type: llm-rubric, value: JUDGE-RUBRIC names the capital, judges: [batched]}
"""
TALK = """
cases:
  - id: talk
    turns:
      - user: Hello there, CHAT-ONE
      - user: And again, CHAT-TWO
    expected: fine
"""


def test_plain_judged_and_conversation_files_under_batch_and_xdist(bench: Bench) -> None:
    _openai_batches(bench)
    _capitals(bench)
    server = bench.server
    server.add_rule(Rule(match_any="JUDGE-RUBRIC", reply='{"score": 0.9, "reason": "ok"}'))
    server.add_rule(Rule(match="Italy", reply="Rome."))
    server.add_rule(Rule(match="CHAT-", reply="fine, thanks"))
    bench.eval_file("plain", TWO_CAPITALS)
    bench.eval_file("judged", JUDGED)
    bench.eval_file("talk", TALK)
    result = bench.run_subprocess("--models=batched", "--batch", POLL, "--cache-dir=c", "-n", "2")
    result.assert_outcomes(passed=3, failed=1)
    # the conversation's two turns live, one request each; nothing else live
    live = [json.dumps(request.body) for request in server.chat_requests()]
    assert len(live) == 2 and all("CHAT-" in body for body in live)
    # the plain items, the judged item's answer and its verdict batched, each line once
    sent = _sent_lines(bench)
    assert sorted(server.lines_received.values()) == [1, 1, 1, 1]
    assert not any("CHAT-" in body for body in sent.values())
    assert sum("JUDGE-RUBRIC" in body for body in sent.values()) == 1
    records = {record["case_id"]: record for record in bench.records()}
    assert records["talk"]["batched"] is False and records["talk"]["batch_id"] is None
    for case in ("france", "japan", "judged"):
        assert records[case]["batched"] is True and records[case]["batch_id"]
    result.stdout.fnmatch_lines(["*llmbench: batch: batched: batched (openai batch API at*"])


# -- 5. --batch --repeat 3 under -n 2 ----------------------------------------------------------


def test_each_repeat_is_its_own_line_and_cache_entry_under_xdist(bench: Bench) -> None:
    _openai_batches(bench)
    _capitals(bench)
    bench.eval_file("capitals", TWO_CAPITALS)
    args = ("--models=batched", "--repeat=3", "--batch", POLL, "--cache-dir=c", "-n", "2")
    bench.run_subprocess(*args).assert_outcomes(passed=3, failed=3)
    server = bench.server
    received = dict(server.lines_received)
    assert len(received) == 6 and set(received.values()) == {1}  # 2 cases x 3 repeats
    assert Counter(_case_of(body) for body in _sent_lines(bench).values()) == {
        "right": 3,
        "wrong": 3,
    }
    assert _cache_keys(bench.pytester.path / "c") == set(received)
    records = bench.records()
    assert sorted((r["case_id"], r["repeat"]) for r in records) == [
        (case, repeat) for case in ("france", "japan") for repeat in range(3)
    ]
    assert all(record["batched"] for record in records)
    assert server.chat_requests() == []
