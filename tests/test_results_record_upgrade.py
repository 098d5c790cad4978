"""Record schema 2: a schema-1 record of an older run is read with schema 2's names.

The schema-1 records below have the field order of ``results/record.py`` at schema 1 (before
the renames); every reader of results.jsonl (the viewer, ``llmbench merge``, a baseline) goes
through :func:`pytest_llmbench.results_folder.upgrade_record`.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest

from pytest_llmbench.results.baseline import compare_runs, load_results
from pytest_llmbench.results.record import FIELDS, SCHEMA_VERSION, build_record
from pytest_llmbench.results_folder import RECORD_SCHEMA, ResultsFolder, upgrade_record
from pytest_llmbench.view.pages import item_page
from pytest_llmbench.view.runs import load_run

#: The record's fields at schema 1, in their order then (results/record.py's FIELDS).
SCHEMA_1_FIELDS = (
    "schema", "nodeid", "suite", "eval_file", "case_id", "case_hash", "model", "model_id",
    "profile", "prompt_variant", "temperature", "optimized", "optimization", "eval_type",
    "model_tags", "repeat", "tags", "task", "outcome", "score", "threshold", "passed", "ttft_s",
    "latency_s", "input_tokens", "output_tokens", "tokens_estimated", "tokens_per_s", "cost_usd",
    "judge_cost", "judge_tokens", "user_sim_cost_usd", "user_sim_tokens", "retries", "tool_calls",
    "turns", "tool_counts", "stopped", "conversation_stopped", "streamed", "cached",
    "rate_limit_wait_s", "error", "error_kind", "prompt", "messages", "response", "conversation",
    "transcript", "timeline", "function_calls", "shimmed", "workdir", "images", "solver",
    "choice", "loglikelihood", "expected", "context", "assertions", "judges", "dimensions",
    "params", "metrics", "worker", "started_at", "attempts",
)  # fmt: skip
#: The renames of schema 2, old -> new, as docs/outputs.md lists them.
RENAMED = {
    "tool_calls": "tool_call_count",
    "function_calls": "tool_calls",
    "turns": "agent_steps",
    "stopped": "agent_stopped",
    "retries": "transport_retries",
    "judge_cost": "judge_cost_usd",
}


def schema_1_record(case_id: str, **values: Any) -> dict[str, Any]:
    """A schema-1 record of suite ``agent`` on model ``m``: every field of schema 1, in order."""
    record: dict[str, Any] = dict.fromkeys(SCHEMA_1_FIELDS)
    record.update(
        schema=1, nodeid=f"evals/agent.eval.yaml::{case_id}[m-r0]", suite="agent",
        eval_file="evals/agent.eval.yaml", case_id=case_id, case_hash=f"{case_id:0>16}"[:16],
        model="m", model_id="openai/m", repeat=0, outcome="passed", score=1.0, threshold=1.0,
        passed=True, retries=0, tool_calls=0, tool_counts={}, function_calls=[], timeline=[],
        transcript=[], assertions=[], judges=[], attempts=[], worker="main",
        started_at="2026-11-01T10:00:00+00:00",
    )  # fmt: skip
    record.update(values)
    return record


#: An agent item that hit its step limit, judged, run twice (one earlier attempt).
AGENT_1 = schema_1_record(
    "loop",
    outcome="failed", score=0.0, passed=False, retries=2, tool_calls=1, turns=2,
    tool_counts={"read_file": 1}, stopped="max_turns", judge_cost=0.003, judge_tokens=30,
    timeline=[
        {"kind": "model", "role": "turn", "turn": 1, "latency_s": 0.5, "cached": False},
        {"kind": "model", "role": "interpreter", "turn": 1, "latency_s": 0.1, "cached": False},
        {"kind": "tool", "turn": 1, "name": "read_file", "seconds": 0.01, "error": False,
         "result": "notes"},
        {"kind": "model", "role": "turn", "turn": 2, "latency_s": 0.4, "cached": False},
    ],
    judges=[{"assertion": 0, "type": "jury", "judge": "j", "model_id": "openai/j",
             "scores": {"correctness": 2.0}, "reasons": {}, "error": None, "attempts": 2,
             "cost_usd": 0.003}],
    attempts=[{"outcome": "error", "score": None, "error": "boom", "error_kind": "provider",
               "judge_cost": None, "retries": 3, "cached": False}],
)  # fmt: skip
#: A function-calling conversation: its replies' calls, and the item's.
CALLS = [{"id": "c1", "name": "get_weather", "arguments": '{"city": "Paris"}'}]
TALK_1 = schema_1_record(
    "weather",
    tool_calls=1, tool_counts={"get_weather": 1}, function_calls=CALLS,
    conversation=[
        {"turn": 1, "role": "user", "content": "Weather?", "generated": False, "function_calls": []},
        {"turn": 1, "role": "assistant", "content": "", "generated": True, "function_calls": CALLS},
    ],
)  # fmt: skip


def test_a_schema_1_record_gets_schema_2s_names_everywhere() -> None:
    before = copy.deepcopy(AGENT_1)
    record = upgrade_record(AGENT_1)
    assert AGENT_1 == before  # the record read is left as it was
    assert record["schema"] == SCHEMA_VERSION == RECORD_SCHEMA == 2
    assert list(record) == list(FIELDS)  # every field of schema 2, in its order
    assert (record["agent_steps"], record["tool_call_count"], record["agent_stopped"]) == (
        2, 1, "max_steps",
    )  # fmt: skip
    assert (record["transport_retries"], record["judge_cost_usd"]) == (2, 0.003)
    assert record["tool_calls"] == [] and not set(RENAMED) - {"tool_calls"} & set(record)
    assert [(s["kind"], s.get("role"), s["step"]) for s in record["timeline"]] == [
        ("model", "step", 1), ("model", "interpreter", 1), ("tool", None, 1), ("model", "step", 2),
    ]  # fmt: skip
    assert not any("turn" in step for step in record["timeline"])
    (judge,) = record["judges"]
    assert judge["call_attempts"] == 2 and "attempts" not in judge
    (attempt,) = record["attempts"]
    assert (attempt["transport_retries"], attempt["judge_cost_usd"]) == (3, None)
    assert "retries" not in attempt and "judge_cost" not in attempt


def test_a_schema_1_conversation_names_its_replies_calls_tool_calls() -> None:
    record = upgrade_record(TALK_1)
    assert (record["tool_calls"], record["tool_call_count"]) == (CALLS, 1)
    assert [entry["tool_calls"] for entry in record["conversation"]] == [[], CALLS]
    assert [entry["turn"] for entry in record["conversation"]] == [1, 1]  # user turns stay turns
    assert not any("function_calls" in entry for entry in record["conversation"])


def test_a_record_without_schema_is_schema_1_and_a_schema_2_record_is_left_as_it_is() -> None:
    oldest = {k: v for k, v in TALK_1.items() if k != "schema"}
    assert upgrade_record(oldest) == upgrade_record(TALK_1)
    current = build_record(suite="s", case_id="c", outcome="passed", tool_calls=CALLS)
    assert upgrade_record(current) is current


def _schema_1_folder(path: Path, records: list[dict[str, Any]]) -> Path:
    """A results folder as a schema-1 run left it: its results.jsonl and a run.json."""
    path.mkdir()
    lines = "".join(json.dumps(record) + "\n" for record in records)
    (path / "results.jsonl").write_text(lines, encoding="utf-8")
    (path / "run.json").write_text(json.dumps({"exitstatus": 1, "args": []}), encoding="utf-8")
    return path


def _schema_2_folder(path: Path, records: list[dict[str, Any]]) -> Path:
    folder = ResultsFolder(path)
    folder.write_records(records)
    folder.write_run_info({"exitstatus": 1, "args": []})
    return path


def test_the_viewer_and_a_baseline_read_an_old_run_with_the_new_names(tmp_path: Path) -> None:
    old = _schema_1_folder(tmp_path / "old", [AGENT_1, TALK_1])
    run = load_run([tmp_path], "0/old")
    assert [r["schema"] for r in run.records] == [2, 2]
    agent = run.records[0]
    page = item_page(run, agent)
    assert "<th>agent_steps</th><td>2</td>" in page
    assert "<th>agent_stopped</th><td>max_steps</td>" in page
    assert "<th>transport_retries</th><td>2</td>" in page
    assert "model call 1" in page and "tool read_file</b> (step 1)" in page
    assert "shim interpreter call 1" in page
    # A baseline: its records paired with a schema-2 run's by case hash.
    baseline = load_results(old)
    assert baseline == run.records
    new = [upgrade_record({**AGENT_1, "outcome": "passed", "score": 1.0, "passed": True}),
           upgrade_record(TALK_1)]  # fmt: skip
    (comparison,) = compare_runs(baseline, new)
    assert comparison.model == "m" and not comparison.changed and not comparison.lost


def test_llmbench_merge_of_an_old_and_a_new_shard_gives_schema_2_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_llmbench.cli import main

    old = _schema_1_folder(tmp_path / "old", [AGENT_1])
    talk = upgrade_record(TALK_1)
    new = _schema_2_folder(tmp_path / "new", [talk])
    assert main(["merge", str(old), str(new), "-o", str(tmp_path / "merged"), "--force"]) in (0, 1)
    capsys.readouterr()
    written = (tmp_path / "merged" / "results.jsonl").read_text(encoding="utf-8").splitlines()
    merged = [json.loads(line) for line in written]
    assert [(r["case_id"], r["schema"]) for r in merged] == [("loop", 2), ("weather", 2)]
    assert merged[0] == upgrade_record(AGENT_1) and merged[1] == talk
    assert all(list(record) == list(FIELDS) for record in merged)
    leaderboard = (tmp_path / "merged" / "leaderboard.csv").read_text(encoding="utf-8")
    header = leaderboard.splitlines()[0].split(",")
    assert {"transport_retries_total", "tool_call_count_total", "judge_cost_usd_total"} <= set(
        header
    )
    assert "retries_total" not in header and "judge_cost_total" not in header
