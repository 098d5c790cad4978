"""The batch path (engine/batching.py): calls gathered into batches, claimed once, polled with
back-off, answered from the results (cached first), bounded by --batch-timeout; and, through
a whole run, plain items and judges batched under -n 0 and -n 2, a model without a batch API
live with its reason in the header."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from batchfake import FileBatches
from conftest import FRANCE, TWO_CAPITALS, Bench, Rule

from pytest_llmbench.engine import batching
from pytest_llmbench.engine.batch_ledger import DONE, BatchLedger
from pytest_llmbench.engine.batching import Batches, BatchSettings, batch_counts
from pytest_llmbench.engine.pacing import BudgetExceeded
from pytest_llmbench.models import BatchError, BatchLine, BatchState, CallTarget, Completion

TARGET = CallTarget("m", "openai/fake-model", "http://127.0.0.1:9/v1")


def _line(n: int) -> BatchLine:
    return BatchLine(f"{n:064x}", TARGET, ({"role": "user", "content": f"q{n}"},), {})


def _answer(line: BatchLine) -> Completion:
    return Completion(
        text=f"a:{line.messages[0]['content']}", model_id=TARGET.model_id, input_tokens=1,
        output_tokens=1, tokens_estimated=False, ttft_s=None, latency_s=0.0, cost_usd=0.001,
        retries=0, streamed=False, finish_reason="stop",
    )  # fmt: skip


class MemoryBatches:
    """A batch API in memory: each batch ends after ``polls`` polls (None: never), with
    ``done_of`` lines answered (default all), the status ``ends``."""

    name = "memory"
    max_bytes = 10_000_000

    def __init__(
        self, polls: int | None = 2, ends: str = "completed", max_lines: int = 100
    ) -> None:
        self.polls_needed, self.ends, self.max_lines = polls, ends, max_lines
        self.created: dict[str, list[BatchLine]] = {}
        self.polled: list[str] = []
        self.fail_polls = 0
        self.progress: list[int] = []  #: done counts the polls report in turn (then total)
        self.answered: int | None = None

    async def create(self, lines: Sequence[BatchLine], metadata: Mapping[str, str]) -> str:
        batch_id = f"batch_{len(self.created) + 1}"
        self.created[batch_id] = list(lines)
        return batch_id

    async def find(self, input_sha256: str) -> str | None:
        return None

    async def poll(self, batch_id: str) -> BatchState:
        self.polled.append(batch_id)
        if self.fail_polls:
            self.fail_polls -= 1
            raise ConnectionError("connection reset")
        count = self.polled.count(batch_id)
        total = len(self.created[batch_id])
        ended = self.polls_needed is not None and count >= self.polls_needed
        done = self.progress[count - 1] if count <= len(self.progress) else 0
        status = self.ends if ended else "in_progress"
        return BatchState(batch_id, status, status, total=total, done=done, created_at=0.0)

    async def results(self, state: BatchState, sent: Mapping[str, BatchLine]) -> dict[str, Any]:
        lines = self.created[state.batch_id]
        answered = len(lines) if self.answered is None else self.answered
        keep = {line.custom_id for line in lines[:answered]}
        return {
            key: _answer(line)
            if key in keep
            else BatchError(f"batch {state.batch_id}: {state.status} before {key[:8]}")
            for key, line in sent.items()
        }

    async def cancel(self, batch_id: str) -> None:
        raise AssertionError("the engine never cancels a batch")


class Clock:
    """A clock that moves only when the engine sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


def _batches(
    tmp_path: Path,
    backend: MemoryBatches,
    clock: Clock,
    stored: dict[str, Completion],
    **settings: Any,
) -> Batches:
    def store(key: str, completion: Completion) -> None:
        stored[key] = completion

    return Batches(
        BatchSettings(run_id="run", results_dir="out", send_delay_s=0.01, **settings),
        BatchLedger(tmp_path / "batches.sqlite"),
        None,
        store,
        route=lambda target, kind: backend,
        clock=clock.time,
        sleep=clock.sleep,
        rng=random.Random(7),
    )


def _run(batches: Batches, backend: MemoryBatches, lines: Sequence[BatchLine]) -> list[Any]:
    async def main() -> list[Any]:
        jobs = [batches.submit(backend, line) for line in lines]
        return list(await asyncio.gather(*jobs, return_exceptions=True))

    return asyncio.run(main())


def test_calls_gather_into_one_batch_cached_before_they_are_answered(tmp_path: Path) -> None:
    backend, clock, stored = MemoryBatches(), Clock(), {}
    batches = _batches(tmp_path, backend, clock, stored)
    lines = [_line(n) for n in range(5)]
    order: list[str] = []
    original = batches._resolve

    def resolve(key: str, completion: Completion) -> None:
        order.append("stored" if key in stored else "not stored")
        original(key, completion)

    batches._resolve = resolve  # type: ignore[method-assign]
    answers = _run(batches, backend, [*lines, lines[0]])  # the first one asked twice
    assert list(backend.created) == ["batch_1"]
    assert [line.custom_id for line in backend.created["batch_1"]] == [x.custom_id for x in lines]
    assert [answer.text for answer in answers] == [f"a:q{n}" for n in (0, 1, 2, 3, 4, 0)]
    assert all(answer.batched and answer.batch_id == "batch_1" for answer in answers)
    assert answers[0].batch_wait_s == clock.now  # created at 0 by the fake
    assert order == ["stored"] * 5 and set(stored) == {line.custom_id for line in lines}
    ledger = BatchLedger(tmp_path / "batches.sqlite")
    assert ledger.lines_done(["batch_1"]) == 5
    counts = batch_counts(ledger, "run")
    assert counts is not None
    assert (counts["submitted"], counts["done"], counts["lines"]) == (1, 1, 5)
    assert counts["items_written"] == 5 and counts["in_progress"] == 0


def test_a_full_batch_is_sent_and_the_rest_start_the_next(tmp_path: Path) -> None:
    backend, clock = MemoryBatches(max_lines=2), Clock()
    batches = _batches(tmp_path, backend, clock, {})
    answers = _run(batches, backend, [_line(n) for n in range(5)])
    assert [len(lines) for lines in backend.created.values()] == [2, 2, 1]
    assert all(isinstance(answer, Completion) for answer in answers)


def test_polls_back_off_without_progress_and_reset_on_progress(tmp_path: Path) -> None:
    backend, clock = MemoryBatches(polls=9), Clock()
    backend.progress = [0, 0, 0, 0, 3, 3, 3, 3]
    batches = _batches(tmp_path, backend, clock, {}, poll_s=100.0)
    _run(batches, backend, [_line(n) for n in range(3)])
    # 100, then x1.5 per unchanged poll to the cap of 300; progress at poll 5: 100 again.
    for waited, planned in zip(clock.sleeps, [100, 150, 225, 300, 100, 150, 225, 300], strict=True):
        assert planned * 0.8 <= waited <= planned * 1.2
    assert len(clock.sleeps) == 8


def test_failed_polls_are_retried_then_fail_the_calls_naming_the_cause(tmp_path: Path) -> None:
    backend, clock = MemoryBatches(), Clock()
    backend.fail_polls = 9
    batches = _batches(tmp_path, backend, clock, {})
    assert all(isinstance(a, Completion) for a in _run(batches, backend, [_line(1)]))
    backend, clock = MemoryBatches(), Clock()
    backend.fail_polls = 10
    batches = _batches(tmp_path / "second", backend, clock, {})
    (error,) = _run(batches, backend, [_line(2)])
    assert isinstance(error, BatchError) and error.kind == "batch"
    assert (
        "batch batch_1: polling or reading it failed 10 times in a row, the last: connection reset"
        in str(error)
    )


def test_an_outage_backs_off_and_fails_the_calls_only_after_a_quarter_hour(tmp_path: Path) -> None:
    # 12 failed polls a second apart would end the calls at the 10th: backing off (x1.5 a
    # failure), the 13th poll comes and answers
    backend, clock = MemoryBatches(), Clock()
    backend.fail_polls = 12
    batches = _batches(tmp_path, backend, clock, {}, poll_s=1.0)
    (answer,) = _run(batches, backend, [_line(1)])
    assert isinstance(answer, Completion)
    waits = clock.sleeps[:12]
    assert all(later > earlier for earlier, later in itertools.pairwise(waits))
    # a longer outage: the calls fail once polls have failed for a quarter hour
    backend, clock = MemoryBatches(), Clock()
    backend.fail_polls = 10**6
    batches = _batches(tmp_path / "long", backend, clock, {}, poll_s=1.0)
    (error,) = _run(batches, backend, [_line(2)])
    assert isinstance(error, BatchError) and "times in a row, the last: connection reset" in str(
        error
    )
    assert 900 <= sum(clock.sleeps[1:]) <= 900 + 300 * 1.2
    assert len(clock.sleeps) > 10


class _Refused(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}: No such Batch object")
        self.status_code = status


@pytest.mark.parametrize("status", [404, 401])
def test_a_batch_the_provider_refuses_fails_its_calls_at_once(tmp_path: Path, status: int) -> None:
    backend, clock = MemoryBatches(), Clock()

    async def refuse(batch_id: str) -> BatchState:
        try:
            raise _Refused(status)
        except _Refused as exc:
            raise RuntimeError("openai batch API: NotFoundError") from exc

    backend.poll = refuse  # type: ignore[method-assign]
    batches = _batches(tmp_path, backend, clock, {})
    (error,) = _run(batches, backend, [_line(1)])
    assert isinstance(error, BatchError)
    assert str(error).startswith(f"batch batch_1: the provider refuses it (HTTP {status})")
    ledger = BatchLedger(tmp_path / "batches.sqlite")
    # 404: freed, the next run sends the call anew; 401: kept, a rerun with the key collects it
    assert ledger.holder(_line(1).custom_id) == (None if status == 404 else "batch_1")
    assert len(clock.sleeps) == 0


def test_the_timeout_leaves_the_batch_running_and_says_how_to_collect_it(
    tmp_path: Path,
) -> None:
    backend, clock = MemoryBatches(polls=None), Clock()
    backend.progress = [1] * 1000
    batches = _batches(tmp_path, backend, clock, {}, timeout_s=1800.0, poll_s=15.0)
    errors = _run(batches, backend, [_line(1), _line(2)])
    message = (
        "batch batch_1: not finished after --batch-timeout 30m (in_progress, 1 of 2 answered); "
        "the batch keeps running: rerun with --resume-batch out (or --retry-errors)"
    )
    assert [str(error) for error in errors] == [message, message]
    assert sum(clock.sleeps) == pytest.approx(1800.0)
    # The lines stay the batch's: the next run collects them, sending nothing.
    assert BatchLedger(tmp_path / "batches.sqlite").holder(_line(1).custom_id) == "batch_1"


def test_an_expired_batch_answers_what_it_did_and_frees_the_rest(tmp_path: Path) -> None:
    backend, clock, stored = MemoryBatches(ends="expired"), Clock(), {}
    backend.answered = 1
    batches = _batches(tmp_path, backend, clock, stored)
    answered, expired = _run(batches, backend, [_line(1), _line(2)])
    assert isinstance(answered, Completion) and answered.batch_id == "batch_1"
    assert isinstance(expired, BatchError) and "batch batch_1: expired" in str(expired)
    ledger = BatchLedger(tmp_path / "batches.sqlite")
    assert ledger.holder(_line(2).custom_id) is None  # sent anew by a later run
    assert ledger.holder(_line(1).custom_id) == "batch_1"
    counts = batch_counts(ledger, "run")
    assert counts is not None and (counts["failed"], counts["items_written"]) == (1, 1)


def test_a_batch_holding_a_key_is_waited_on_not_sent_again(tmp_path: Path) -> None:
    backend, clock = MemoryBatches(), Clock()
    first = _batches(tmp_path, backend, clock, {})
    _run(first, backend, [_line(1), _line(2)])
    second = _batches(tmp_path, backend, clock, {})  # a rerun, the cache gone
    answers = _run(second, backend, [_line(2), _line(3)])
    assert [len(lines) for lines in backend.created.values()] == [2, 1]  # only 3 was sent
    assert [answer.batch_id for answer in answers] == ["batch_1", "batch_2"]
    assert BatchLedger(tmp_path / "batches.sqlite").holder(_line(3).custom_id) == "batch_2"


def test_the_budget_bounds_what_is_sent(tmp_path: Path) -> None:
    backend, clock = MemoryBatches(), Clock()
    batches = Batches(
        BatchSettings(run_id="run", send_delay_s=0.01),
        BatchLedger(tmp_path / "batches.sqlite"),
        None,
        lambda key, completion: None,
        route=lambda target, kind: backend,
        clock=clock.time,
        sleep=clock.sleep,
        budget_left=lambda: 0.25,
        over_budget=lambda: BudgetExceeded("--max-cost 1 USD reached"),
    )

    async def main() -> list[Any]:
        jobs = [batches.submit(backend, _line(n), estimate_usd=0.1) for n in range(4)]
        return list(await asyncio.gather(*jobs, return_exceptions=True))

    answers = asyncio.run(main())
    assert [type(answer).__name__ for answer in answers] == [
        "Completion",
        "Completion",
        "BudgetExceeded",
        "BudgetExceeded",
    ]
    assert isinstance(answers[2], BudgetExceeded)
    assert [len(lines) for lines in backend.created.values()] == [2]


def test_ledger_marks_lines_done(tmp_path: Path) -> None:
    backend, clock = MemoryBatches(), Clock()
    batches = _batches(tmp_path, backend, clock, {})
    _run(batches, backend, [_line(1)])
    ledger = BatchLedger(tmp_path / "batches.sqlite")
    rows = ledger._connection().execute("SELECT state FROM lines").fetchall()
    assert rows == [(DONE,)]


# -- whole runs ------------------------------------------------------------------------------

CONFTEST = """
import sys
from pathlib import Path

sys.path.insert(0, {tests!r})
import batchfake


def pytest_configure(config):
    batchfake.install(Path({folder!r}))
"""


@pytest.fixture
def batched(bench: Bench, tmp_path: Path) -> FileBatches:
    """The bench project with every model's batches in a file-backed fake."""
    folder = tmp_path / "fakebatches"
    tests = str(Path(__file__).parent)
    bench.pytester.makeconftest(CONFTEST.format(tests=tests, folder=str(folder)))
    yield FileBatches(folder)
    batching.ROUTE_FOR_TESTS = None


JUDGED = """
cases:
  - id: france
    prompt: What is the capital of France?
    expected: Paris
    assert:
      - contains
      - {type: llm-rubric, value: rubric names the capital, judges: [fake2]}
  - id: japan
    prompt: What is the capital of Japan?
    expected: Tokyo
    assert: [contains]
  - id: italy
    prompt: What is the capital of Italy?
    expected: Paris
    assert: [contains]
"""


@pytest.mark.parametrize("workers", ["0", "2"])
def test_items_and_judges_are_batched_each_call_once(
    bench: Bench, batched: FileBatches, workers: str
) -> None:
    bench.eval_file("capitals", JUDGED)
    args = ("--models=fake", "--batch", "--batch-poll=0.05", "--cache-dir=c", f"-n{workers}")
    result = bench.run_subprocess(*args) if workers != "0" else bench.run(*args)
    result.assert_outcomes(passed=2, failed=1)
    state = batched.snapshot()
    # 3 answers + 1 verdict, each sent once; the verdict in a second wave.
    assert sorted(state["sent"].values()) == [1, 1, 1, 1]
    kinds = [sorted(batch["lines"].values()) for batch in state["batches"].values()]
    assert sum(len(lines) for lines in kinds) == 4
    assert any("rubric" in line.lower() for lines in kinds for line in lines)
    assert bench.server.chat_requests() == []  # nothing went live
    records = bench.records()
    assert all(record["batched"] is True for record in records)
    assert {record["batch_id"] for record in records} <= set(state["batches"])
    assert all(record["latency_s"] is None for record in records)  # unchecked, not 0
    journal = [json.loads(line) for line in bench.out("batches.jsonl").read_text().splitlines()]
    events = [event["event"] for event in journal]
    assert events.count("creating") == events.count("created") == len(state["batches"])
    assert events.count("ended") >= len(state["batches"])
    result.stdout.fnmatch_lines(
        ["*llmbench: batch: fake: batched (fakebatch batch API at 127.0.0.1:*)*"]
    )
    # A rerun: every answer from the cache, nothing sent, no batch polled.
    creates = state["creates"]
    rerun = bench.run_subprocess(*args) if workers != "0" else bench.run(*args)
    rerun.assert_outcomes(passed=2, failed=1)
    assert batched.snapshot()["creates"] == creates
    assert all(record["cached"] for record in bench.records())


def test_a_model_without_a_batch_api_stays_live_and_the_header_says_why(
    bench: Bench, batched: FileBatches
) -> None:
    batched.set_script(live={"fake2": "no /batches endpoint at 127.0.0.1"})
    bench.server.add_rule(Rule(reply="Paris"))
    bench.eval_file("france", FRANCE)
    result = bench.run("--models=fake,fake2", "--batch", "--batch-poll=0.05", "--cache-dir=c")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*llmbench: batch: fake: batched (fakebatch batch API at 127.0.0.1:*)*",
            "*llmbench: batch: fake2: live (no /batches endpoint at 127.0.0.1)*",
        ]
    )
    by_model = {record["model"]: record for record in bench.records()}
    assert by_model["fake"]["batched"] is True and by_model["fake2"]["batched"] is False
    assert by_model["fake"]["batch_id"] == "batch_1" and by_model["fake2"]["batch_id"] is None
    assert len(bench.server.chat_requests()) == 1
    assert batched.snapshot()["creates"] == 1


def test_expiry_answers_some_items_and_the_rest_are_batch_errors(
    bench: Bench, batched: FileBatches
) -> None:
    batched.set_script(status="expired", answer=1)
    bench.eval_file("capitals", TWO_CAPITALS)
    result = bench.run("--models=fake", "--batch", "--batch-poll=0.05", "--cache-dir=c")
    result.assert_outcomes(passed=1, errors=1)
    errored = [record for record in bench.records() if record["outcome"] == "error"]
    assert errored[0]["error_kind"] == "batch"
    assert "batch batch_1: expired before call" in errored[0]["error"]


def test_a_failed_batch_and_a_malformed_line_are_errors_naming_the_batch(
    bench: Bench, batched: FileBatches
) -> None:
    bench.eval_file("capitals", TWO_CAPITALS)
    batched.set_script(malformed="Japan")
    result = bench.run("--models=fake", "--batch", "--batch-poll=0.05", "--cache-dir=c")
    result.assert_outcomes(passed=1, errors=1)
    (bad,) = [record for record in bench.records() if record["outcome"] == "error"]
    assert bad["error_kind"] == "batch" and "batch batch_1, output line" in bad["error"]
    assert "not JSON" in bad["error"]
    batched.set_script(status="failed")
    bench.eval_file(
        "more", FRANCE.replace("france", "france_again").replace("France?", "France, again?")
    )
    result = bench.run("--models=fake", "--batch", "--batch-poll=0.05", "--cache-dir=c")
    failed = [record for record in bench.records() if record["outcome"] == "error"]
    assert failed and all(record["error_kind"] == "batch" for record in failed)
    assert all("batch batch_2" in record["error"] for record in failed)


def test_resume_batch_needs_a_journal(bench: Bench, tmp_path: Path) -> None:
    bench.eval_file("france", FRANCE)
    (tmp_path / "empty").mkdir()
    result = bench.run(f"--resume-batch={tmp_path / 'empty'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*llmbench: --resume-batch: {tmp_path / 'empty'} holds no batches.jsonl*"]
    )


def test_pytest_timeout_does_not_cut_the_wait_on_a_batch(
    bench: Bench, batched: FileBatches
) -> None:
    """--timeout bounds a live call; under --batch an item's wait is --batch-timeout's."""
    batched.set_script(polls=6)  # about 2 s of polls from 0.1 s, backing off
    bench.eval_file("france", FRANCE)
    result = bench.run(
        "--models=fake", "--batch", "--batch-poll=0.1", "--cache-dir=c", "--timeout=1"
    )
    result.assert_outcomes(passed=1)
    assert batched.snapshot()["polls"] == 6


@pytest.mark.parametrize("workers", ["0", "2"])
def test_progress_shows_the_batches_while_they_run(
    bench: Bench, batched: FileBatches, workers: str
) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    batched.set_script(hold=True)
    bench.eval_file("capitals", TWO_CAPITALS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--results-dir=out"]
    command += ["--models=fake", "--batch", "--batch-poll=0.05", "--cache-dir=c", f"-n{workers}"]
    run = subprocess.Popen(
        command, cwd=bench.pytester.path, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    progress = bench.out("progress.json")
    state: dict[str, Any] = {}
    sent = 1 if workers == "0" else 2  # each worker batches its own item
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and state.get("batches", {}).get("submitted") != sent:
            time.sleep(0.2)
            if progress.exists():
                try:
                    state = json.loads(progress.read_text())
                except ValueError:
                    continue
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    assert state["batches"]["submitted"] == sent and state["batches"]["in_progress"] == sent
    assert state["batches"]["lines"] == 2 and state["batches"]["items_written"] == 0
    assert state["batches"]["done"] == state["batches"]["failed"] == 0
    assert isinstance(state["batches"]["oldest_created_at"], float)
    assert f"batches: {sent} in progress, 0 done · 0/2 calls answered" in state["line"]


def test_waiting_notices_are_rarer_under_batch(pytester: pytest.Pytester) -> None:
    from pytest_llmbench.engine import wait_notice_s

    assert wait_notice_s(pytester.parseconfig()) == 30.0
    assert wait_notice_s(pytester.parseconfig("--batch")) == 600.0
    assert wait_notice_s(pytester.parseconfig("--resume-batch=out")) == 600.0
    pytester.makeini("[pytest]\nllmbench_wait_notice_s = 5\n")
    assert wait_notice_s(pytester.parseconfig("--batch")) == 5.0


def test_an_earlier_runs_batch_that_expired_meanwhile_has_its_unanswered_calls_sent(
    tmp_path: Path,
) -> None:
    backend, clock = MemoryBatches(polls=None), Clock()
    first = _batches(tmp_path, backend, clock, {}, timeout_s=60.0)
    assert all(isinstance(e, BatchError) for e in _run(first, backend, [_line(1), _line(2)]))
    backend.polls_needed, backend.ends, backend.answered = 1, "expired", 1  # it expired since
    second = _batches(tmp_path, backend, clock, {})
    answers = _run(second, backend, [_line(1), _line(2)])
    assert [answer.batch_id for answer in answers] == ["batch_1", "batch_2"]
    assert [line.custom_id for line in backend.created["batch_2"]] == [_line(2).custom_id]


# -- against the fake server's OpenAI Batch API (/v1/files, /v1/batches) --------------------

BATCH_PROFILES = """
models:
  batched:
    model: openai/fake-model
    api_base: {base}
    api_key_env: {env}
    batch: true
    cost_per_1k: {{input: 0.001, output: 0.002}}
  judge:
    model: openai/fake-judge
    api_base: {base}
    api_key_env: {env}
    batch: true
    cost_per_1k: {{input: 0.001, output: 0.002}}
  local:
    model: openai/fake-model-2
    api_base: {base}
    api_key_env: {env}
"""
RUBRIC_JUDGED = """
cases:
  - id: france
    prompt: What is the capital of France?
    expected: Paris
    assert:
      - contains
      - {type: llm-rubric, value: JUDGE-RUBRIC names the capital, judges: [judge]}
  - id: japan
    prompt: What is the capital of Japan?
    expected: Tokyo
    assert: [contains]
  - id: italy
    prompt: What is the capital of Italy?
    expected: Paris
    assert: [contains]
"""


def openai_batches(bench: Bench) -> None:
    """Profiles whose batches go to the fake server's Batch API, and its answers."""
    from conftest import FAKE_KEY_ENV

    base = bench.server.base_url
    bench.pytester.makefile(
        ".yaml", **{"profiles/batched": BATCH_PROFILES.format(base=base, env=FAKE_KEY_ENV)}
    )
    bench.server.add_rule(Rule(match_any="JUDGE-RUBRIC", reply='{"score": 0.9, "reason": "ok"}'))
    for country, capital in (("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome")):
        bench.server.add_rule(Rule(match=country, reply=capital))


@pytest.mark.parametrize("workers", ["0", "2"])
def test_openai_batches_answer_items_and_judges_each_line_once(bench: Bench, workers: str) -> None:
    from pytest_llmbench.models.providers.batch_routes import forget_backends

    forget_backends()
    openai_batches(bench)
    bench.eval_file("capitals", RUBRIC_JUDGED)
    args = ("--models=batched", "--batch", "--batch-poll=0.05", "--cache-dir=c", f"-n{workers}")
    result = bench.run_subprocess(*args) if workers != "0" else bench.run(*args)
    result.assert_outcomes(passed=2, failed=1)
    server = bench.server
    assert server.chat_requests() == []  # nothing went live
    assert sorted(server.lines_received.values()) == [1, 1, 1, 1]  # 3 answers, 1 verdict
    assert server.creates == server.uploads >= 2  # the verdict in a second wave
    records = bench.records()
    assert all(record["batched"] for record in records)
    journal = [json.loads(line) for line in bench.out("batches.jsonl").read_text().splitlines()]
    created = [event["batch_id"] for event in journal if event["event"] == "created"]
    assert len(created) == server.creates
    result.stdout.fnmatch_lines(["*llmbench: batch: batched: batched (openai batch API at*"])
    rerun = bench.run_subprocess(*args) if workers != "0" else bench.run(*args)
    rerun.assert_outcomes(passed=2, failed=1)
    assert sum(server.lines_received.values()) == 4 and server.chat_requests() == []


def test_a_local_model_without_batch_true_stays_live(bench: Bench) -> None:
    from pytest_llmbench.models.providers.batch_routes import forget_backends

    forget_backends()
    openai_batches(bench)
    bench.eval_file("france", FRANCE)
    result = bench.run("--models=batched,local", "--batch", "--batch-poll=0.05", "--cache-dir=c")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*llmbench: batch: local: live (*local endpoint*"])
    assert len(bench.server.chat_requests()) == 1 and bench.server.creates == 1


def test_embedding_similarity_is_batched_in_an_embeddings_batch(bench: Bench) -> None:
    from conftest import FAKE_KEY_ENV
    from fakeserver import letter_vector

    from pytest_llmbench.models.providers.batch_routes import forget_backends
    from pytest_llmbench.scoring.similarity import cosine

    forget_backends()
    openai_batches(bench)
    emb = f"""
models:
  emb:
    model: openai/embed-1
    api_base: {bench.server.base_url}
    api_key_env: {FAKE_KEY_ENV}
    batch: true
"""
    bench.pytester.makefile(".yaml", **{"profiles/emb": emb})
    answer = "Water evaporates, condenses and falls."
    bench.server.add_rule(Rule(match="water cycle", reply=answer))
    spec = "{type: similarity, method: embedding, embedding_model: emb, threshold: 0.9}"
    bench.eval_file(
        "sim",
        f"""
cases:
  - id: near
    prompt: Describe the water cycle.
    expected: Water condenses, evaporates and falls.
    assert: [{spec}]
""",
    )
    bench.run("--models=batched", "--batch", "--batch-poll=0.05", "--cache-dir=c").assert_outcomes(
        passed=1
    )
    (record,) = bench.records()
    want = cosine(letter_vector(answer), letter_vector("Water condenses, evaporates and falls."))
    assert record["dimensions"] == {"cosine": pytest.approx(want)}
    live = [r for r in bench.server.requests if r.path.endswith(("/embeddings", "/completions"))]
    assert live == []  # the answer and the embeddings both came in batches
    assert bench.server.creates == 2 and sorted(bench.server.lines_received.values()) == [1, 1]


def test_a_cache_that_refuses_the_answers_fails_the_calls_naming_it(tmp_path: Path) -> None:
    backend, clock = MemoryBatches(), Clock()

    def refuse(key: str, completion: Completion) -> None:
        raise OSError("disk full")

    batches = Batches(
        BatchSettings(run_id="run", send_delay_s=0.01),
        BatchLedger(tmp_path / "batches.sqlite"),
        None,
        refuse,
        route=lambda target, kind: backend,
        clock=clock.time,
        sleep=clock.sleep,
    )
    (error,) = _run(batches, backend, [_line(1)])
    assert isinstance(error, BatchError)
    assert str(error).startswith(
        "batch batch_1: polling or reading it failed 10 times in a row, the last: disk full"
    )
