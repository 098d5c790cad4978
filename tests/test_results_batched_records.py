"""Honest records of batched answers: ``batched``, ``batch_id`` and ``batch_wait_s`` in the
record, no latency or TTFT (null), their latency checks unchecked, and left out of the latency
columns and the timed gates (results/item_record.py, record.py, aggregation.py, gates.py,
scoring/performance.py).

The run-level tests answer from the response cache with entries an earlier run stored and then
marked as a batch's answers, as a finished batch leaves them: the engine reads a batch's answers
from the cache the same way."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import Bench

from pytest_llmbench.judging.panel import AttemptsUsage
from pytest_llmbench.models import batch_fields
from pytest_llmbench.models.profiles import ModelProfile
from pytest_llmbench.models.providers.completion import Completion
from pytest_llmbench.results.gates import RunState, decide
from pytest_llmbench.results.item_record import completion_fields
from pytest_llmbench.results.record import FIELDS, build_record
from pytest_llmbench.results.summary import aggregate, records_frame
from pytest_llmbench.scoring.performance import BATCHED

BATCH_WAIT_S = 5400.0


def _completion(**fields: Any) -> Completion:
    values: dict[str, Any] = {
        "text": "Paris",
        "model_id": "gpt-4o-mini",
        "input_tokens": 1000,
        "output_tokens": 200,
        "tokens_estimated": False,
        "ttft_s": 0.25,
        "latency_s": 2.0,
        "cost_usd": 0.00027,
        "retries": 0,
        "streamed": True,
        "finish_reason": "stop",
    }
    return Completion(**{**values, **fields})


def test_a_batched_completions_record_has_its_batch_and_no_timings() -> None:
    batched = _completion(
        batched=True,
        batch_id="batch_abc",
        batch_wait_s=BATCH_WAIT_S,
        latency_s=BATCH_WAIT_S,
        ttft_s=None,
        streamed=False,
        cost_usd=0.000135,
    )
    fields = completion_fields(batched)
    assert (fields["batched"], fields["batch_id"], fields["batch_wait_s"]) == (
        True,
        "batch_abc",
        BATCH_WAIT_S,
    )
    assert (fields["latency_s"], fields["ttft_s"], fields["tokens_per_s"]) == (None, None, None)
    assert fields["cost_usd"] == 0.000135  # as the completion was priced: at the batch price
    live = completion_fields(_completion())
    assert (live["batched"], live["batch_id"], live["batch_wait_s"]) == (False, None, None)
    assert (live["latency_s"], live["ttft_s"]) == (2.0, 0.25)


def test_the_batch_fields_sit_after_cached_and_default_to_live() -> None:
    at = FIELDS.index("cached")
    assert FIELDS[at : at + 4] == ("cached", "batched", "batch_id", "batch_wait_s")
    record = build_record(nodeid="n", model="m", outcome="passed")
    assert (record["batched"], record["batch_id"], record["batch_wait_s"]) == (False, None, None)


def test_an_item_of_several_calls_is_batched_when_any_call_was() -> None:
    live, batched = _completion(), _completion(batched=True, batch_id="b1", batch_wait_s=60.0)
    later = _completion(batched=True, batch_id="b2", batch_wait_s=90.0)
    assert batch_fields([live, live]) == {
        "batched": False,
        "batch_id": None,
        "batch_wait_s": None,
    }
    assert batch_fields([live, batched, later]) == {
        "batched": True,
        "batch_id": "b1",
        "batch_wait_s": 90.0,
    }


def test_a_batched_judge_call_carries_its_batch_cost_and_no_latency() -> None:
    usage = AttemptsUsage()
    usage.add(_completion(batched=True, batch_id="b", cost_usd=0.000135, latency_s=BATCH_WAIT_S))
    judge = ModelProfile(name="judge", model="gpt-4o-mini")
    entry = usage.call(0, "rubric", judge, 1, scores={"rubric": 1.0}).to_dict()
    assert (entry["cost_usd"], entry["batched"], entry["latency_s"]) == (0.000135, True, None)
    live = AttemptsUsage()
    live.add(_completion())
    entry = live.call(0, "rubric", judge, 1, scores={"rubric": 1.0}).to_dict()
    assert (entry["cost_usd"], entry["batched"], entry["latency_s"]) == (0.00027, False, 2.0)


def _record(model: str, **fields: Any) -> dict[str, Any]:
    values = {"nodeid": f"{model}-{len(fields)}", "model": model, "outcome": "passed"}
    return build_record(**{**values, **fields})


def test_aggregates_leave_batched_items_out_of_the_latency_columns_and_count_them() -> None:
    records = [
        _record("m", case_id="a", latency_s=1.0, ttft_s=0.1, cost_usd=0.01),
        _record("m", case_id="b", latency_s=3.0, ttft_s=0.3, cost_usd=0.01),
        _record("m", case_id="c", batched=True, batch_id="x", cost_usd=0.005),
        _record("m", case_id="d", batched=True, batch_id="x", cost_usd=0.005),
    ]
    (row,) = aggregate(records_frame(records), ["model"]).to_dict("records")
    assert row["batched_items"] == 2
    assert (row["latency_s_p50"], row["latency_s_mean"], row["ttft_n"]) == (2.0, 2.0, 2)
    assert row["cost_usd_total"] == pytest.approx(0.03)  # batched items are paid for


def _run(**options: Any) -> Any:
    defaults = {
        "min_pass_rate": None,
        "repeat_policy": "all",
        "fail_on_regression": False,
        "max_latency_p95": None,
        "max_ttft_p50": None,
        "max_cost_per_item": None,
    }
    return SimpleNamespace(**{**defaults, **options})


def test_the_timed_gates_leave_batched_answers_out_and_say_so() -> None:
    ok = pytest.ExitCode.OK
    slow_batch = {"batched": True, "latency_s": BATCH_WAIT_S, "ttft_s": BATCH_WAIT_S}
    records = [
        _record("live", latency_s=1.0, ttft_s=0.1),
        _record("live", **slow_batch),  # a batched record with timings still left out
        _record("batch", **slow_batch),
        _record("mixed", **slow_batch),
        _record("mixed", cached=True, latency_s=1.0),
    ]
    run = _run(max_latency_p95=10.0, max_ttft_p50=1.0)
    decision = decide(RunState(ok, 0, False), run, board=None, repeats=None, records=records)
    assert decision.exitstatus == ok and decision.failures == ()
    why = "a batch's wait says nothing of the model's latency"
    assert decision.unmeasured == (
        f"batch: --max-latency-p95 not applied: every answered item was batched ({why})",
        f"mixed: --max-latency-p95 not applied: 1 answered items were batched ({why}), the "
        "others from the response cache",
        f"batch: --max-ttft-p50 not applied: every answered item was batched ({why})",
        f"mixed: --max-ttft-p50 not applied: 1 answered items were batched ({why}), the "
        "others not streamed uncached",
    )


# --- in a run: answers a batch left in the response cache --------------------------------------

LATENCY_CASES = """
cases:
  - id: only-latency
    prompt: one
    assert: [{type: latency, threshold: 30}, {type: latency, threshold: 30, metric: ttft}]
  - id: with-contains
    prompt: two
    expected: ok
    assert: [contains, {type: latency, threshold: 30}]
"""


def _as_batched(cache_dir: Path) -> int:
    """Mark every stored answer in ``cache_dir`` as a batch's: what a finished batch stores."""
    with sqlite3.connect(cache_dir / "responses.sqlite") as db:
        rows = db.execute("SELECT key, value FROM responses").fetchall()
        for key, value in rows:
            stored = json.loads(value)
            stored.update(
                batched=True, batch_id="batch_abc", batch_wait_s=BATCH_WAIT_S, ttft_s=None
            )
            db.execute("UPDATE responses SET value = ? WHERE key = ?", (json.dumps(stored), key))
    return len(rows)


def test_a_batched_answers_latency_checks_are_unchecked_in_a_run(bench: Bench) -> None:
    bench.eval_file("batched", LATENCY_CASES)
    cache = ("--models=fake", "--cache=use", "--cache-dir=c", "--stream=all")
    bench.run(*cache).assert_outcomes(passed=2)
    assert _as_batched(bench.pytester.path / "c") == 2
    again = bench.run(*cache, "--max-latency-p95=0.001", "--junitxml=junit.xml")
    again.assert_outcomes(passed=1, skipped=1)
    assert again.ret == 0  # no live answer to gate: not a failure of the gate
    again.stdout.fnmatch_lines(
        [
            "llmbench: 2 answers through a batch API: their latency and TTFT are unchecked and "
            "left out of the latency columns and gates",
            "*--max-latency-p95 not applied: every answered item was batched*",
        ]
    )
    only, both = sorted(bench.records(), key=lambda record: record["case_id"])
    for record in (only, both):
        assert (record["batched"], record["batch_id"], record["batch_wait_s"]) == (
            True,
            "batch_abc",
            BATCH_WAIT_S,
        )
        assert (record["latency_s"], record["ttft_s"], record["tokens_per_s"]) == (None, None, None)
    assert (only["outcome"], only["error_kind"]) == ("skipped", "unchecked")
    assert [check["reason"] for check in only["assertions"]] == [BATCHED, BATCHED]
    assert all(check["unchecked"] and not check["passed"] for check in only["assertions"])
    assert both["outcome"] == "passed" and both["score"] == 1.0
    assert [check.get("unchecked", False) for check in both["assertions"]] == [False, True]
    junit = (bench.pytester.path / "junit.xml").read_text()
    assert 'name="llmbench_batched" value="true"' in junit
    assert 'name="llmbench_batch_id" value="batch_abc"' in junit
    assert "llmbench_latency_s" not in junit
