"""The model version the provider served (``response_model``): read alike by both clients,
whole and streamed; kept by the response cache; carried to an item's completion from its last
call; and marked by ``llmbench trend`` when the provider moves a model to another version."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from conftest import FAKE_KEY, Bench, FakeLLMServer, Rule

from pytest_llmbench.cli import main
from pytest_llmbench.engine.cache import ResponseCache
from pytest_llmbench.engine.request import ConversationRun, Reply
from pytest_llmbench.engine.solver import SolverRun, solver_completion
from pytest_llmbench.models.providers.calls import acomplete
from pytest_llmbench.models.providers.completion import CallTarget, Completion, served_model

SERVED = "fake-model-2026-11-01"
MESSAGES = [{"role": "user", "content": "Capital of France?"}]


def _call(server: FakeLLMServer, client: str, stream: bool) -> Completion:
    target = CallTarget("m", "openai/fake-model", server.base_url, api_key=FAKE_KEY, client=client)
    return asyncio.run(acomplete(target, MESSAGES, {}, stream=stream))


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("client", ["auto", "litellm"])
def test_both_clients_read_the_served_version_whole_and_streamed(
    fake_llm: FakeLLMServer, litellm_loaded: Any, client: str, stream: bool
) -> None:
    fake_llm.add_rule(Rule(reply="Paris."))
    echoed = _call(fake_llm, client, stream)
    fake_llm.served_model = SERVED
    served = _call(fake_llm, client, stream)
    # The request names fake-model: an echo of it is its version, another name is the served one.
    assert [body["model"] for body in (r.body for r in fake_llm.chat_requests())] == [
        "fake-model",
        "fake-model",
    ]
    assert (echoed.response_model, served.response_model) == ("fake-model", SERVED)
    assert (echoed.model_id, served.model_id) == ("openai/fake-model", "openai/fake-model")


def test_a_served_model_is_a_non_empty_string_or_none() -> None:
    assert served_model(" gpt-4o-2024-08-06 ") == "gpt-4o-2024-08-06"
    assert [served_model(value) for value in ("", "  ", None, 4, ["x"])] == [None] * 5


def _completion(**changes: Any) -> Completion:
    fields: dict[str, Any] = {
        "text": "Paris",
        "model_id": "openai/fake-model",
        "input_tokens": 3,
        "output_tokens": 1,
        "tokens_estimated": False,
        "ttft_s": None,
        "latency_s": 0.5,
        "cost_usd": None,
        "retries": 0,
        "streamed": False,
        "finish_reason": "stop",
    }
    return Completion(**{**fields, **changes})


def test_the_cache_keeps_the_version_that_answered_and_reads_older_entries_as_none(
    tmp_path: Path,
) -> None:
    cache = ResponseCache(tmp_path / "responses.sqlite")
    try:
        cache.put("new", _completion(response_model=SERVED))
        assert cache.get("new") == _completion(response_model=SERVED)
        # An entry written before the field existed: the same JSON without it.
        older = asdict(_completion())
        older.pop("response_model")
        cache.put("old", _completion(text="Rome"))
        connection = cache._connection()
        connection.execute(
            "UPDATE responses SET value = ? WHERE key = ?", (json.dumps(older), "old")
        )
        connection.commit()
        read = cache.get("old")
        assert read is not None and read.text == "Paris" and read.response_model is None
    finally:
        cache.close()
    with sqlite3.connect(tmp_path / "responses.sqlite") as db:
        kept = {key: json.loads(value).get("response_model")
                for key, value in db.execute("SELECT key, value FROM responses")}  # fmt: skip
    assert kept == {"new": SERVED, "old": None}


def test_a_conversation_and_a_solver_report_their_last_calls_version() -> None:
    first, last = _completion(response_model="v1"), _completion(response_model="v2")
    conversation = ConversationRun(replies=(Reply(0, (), first), Reply(1, (), last)), reached=1)
    talked = conversation.completion("openai/fake-model")
    assert talked is not None and talked.response_model == "v2"
    solved = solver_completion(SolverRun("Paris", (first, last), 1.0), "openai/fake-model")
    assert solved.response_model == "v2"
    assert solver_completion(SolverRun("Paris", (), 1.0), "m").response_model is None


CAPITALS = """cases:
  - id: capital
    prompt: "What is the capital of France?"
    expected: Paris
    assert: [contains]
  - id: river
    prompt: "Which river flows through Paris?"
    expected: Seine
    assert: [contains]
"""


@pytest.mark.slow
def test_a_provider_moving_to_another_version_is_a_model_mark_in_the_trend(
    bench: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three runs of one profile (``openai/fake-model``, never edited): the provider serves
    one snapshot twice, then another."""
    bench.eval_file("capitals", CAPITALS)
    versions = ["fake-model-2026-08-06", "fake-model-2026-08-06", SERVED]
    for number, version in enumerate(versions, 1):
        bench.server.reset()
        bench.server.served_model = version
        bench.server.add_rule(Rule(match="France", reply="Paris."))
        bench.server.add_rule(Rule(match="river", reply="The Seine."))
        result = bench.run("--models=fake", f"--results-dir=runs/r{number}")
        assert result.ret == 0
        path = bench.pytester.path / "runs" / f"r{number}" / "results.jsonl"
        records = [json.loads(line) for line in path.read_text().splitlines()]
        assert {record["response_model"] for record in records} == {version}
        assert {record["model_id"] for record in records} == {"openai/fake-model"}
    runs = bench.pytester.path / "runs"
    capsys.readouterr()  # the runs' own output

    assert main(["trend", str(runs), "--json"]) == 0
    out, _ = capsys.readouterr()
    (series,) = json.loads(out)["series"]
    points = [(p["run_id"], p["model_versions"], p["marks"]) for p in series["points"]]
    assert points == [
        ("r1", ["fake-model-2026-08-06"], []),
        ("r2", ["fake-model-2026-08-06"], []),
        ("r3", [SERVED], ["model"]),
    ]
    index = [json.loads(line) for line in (runs / "trend.jsonl").read_text().splitlines()]
    assert [{item["response_model"] for item in entry["items"]} for entry in index] == [
        {version} for version in versions
    ]

    assert main(["trend", str(runs)]) == 0
    out, _ = capsys.readouterr()
    rows = [line.split() for line in out.splitlines() if line.startswith("  r")]
    assert [(row[0], row[-1]) for row in rows if row[0] in ("r1", "r2", "r3")] == [
        ("r1", "-"),
        ("r2", "-"),
        ("r3", "model"),
    ]


def test_a_cached_answer_reports_the_version_that_answered_it(bench: Bench) -> None:
    bench.eval_file("capitals", CAPITALS.split("  - id: river")[0])
    bench.server.add_rule(Rule(match="France", reply="Paris."))
    bench.server.served_model = "fake-model-2026-08-06"
    cached = ("--models=fake", "--cache=use", "--cache-dir=c")
    bench.run(*cached).assert_outcomes(passed=1)
    bench.server.served_model = SERVED  # the provider moved on; the cache answers from before
    bench.run(*cached).assert_outcomes(passed=1)
    (record,) = bench.records()
    assert (record["cached"], record["response_model"]) == (True, "fake-model-2026-08-06")
    assert len(bench.server.chat_requests()) == 1
