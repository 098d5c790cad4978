"""eval_record in-process (no pytest session): the fields every item has, and those each case
kind fills, from answers of the local fake server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from engine_support import (
    AGENT,
    LOGLIKELIHOOD,
    SHOUT,
    SIMULATED,
    SOLVER,
    TURNS,
    answer_of,
    answerer,
    loaded,
    plan_of,
)
from fakeserver import FakeLLMServer, Rule

from pytest_llmbench.engine.plan import CallPlan
from pytest_llmbench.engine.request import Answer
from pytest_llmbench.models.item_errors import ProviderError
from pytest_llmbench.results.item_record import eval_record
from pytest_llmbench.results.state import EvalResult
from pytest_llmbench.spec.schema import DEFAULT_STOP_MARKER

FUNCTIONS = """
tools:
  - name: lookup
    description: Look something up
    parameters: {type: object, properties: {}}
cases:
  - id: call
    prompt: Look it up
    expected: x
"""


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(default_reply="fine") as started:
        yield started


def _record(tmp_path: Path, plan: CallPlan, answer: Answer, **kept: Any) -> dict[str, Any]:
    """The record of ``plan`` answered with ``answer``, passed (as the item keeps it)."""
    result = EvalResult(
        plan,
        completion=answer.completion,
        agent_run=answer.agent,
        conversation=answer.conversation,
        sandbox=answer.sandbox,
        sent_messages=answer.messages,
        solver_verdict=answer.solver_verdict,
        loglikelihood=answer.loglikelihood,
        retrieved_context=answer.retrieved_context,
        **kept,
    )
    return eval_record(result, "passed", None, root=tmp_path, worker="master")


def _answered(
    tmp_path: Path, server: FakeLLMServer, text: str, workdir: Path | None = None
) -> tuple[CallPlan, Answer]:
    plan = plan_of(loaded(tmp_path, text))
    return plan, answer_of(answerer(tmp_path, server.base_url), plan, workdir)


def test_a_function_calling_reply_records_its_calls(tmp_path: Path, server: FakeLLMServer) -> None:
    server.add_rule(Rule(tool_calls=[{"name": "lookup", "arguments": {}}]))
    record = _record(tmp_path, *_answered(tmp_path, server, FUNCTIONS))
    assert [call["name"] for call in record["tool_calls"]] == ["lookup"]
    assert (record["tool_call_count"], record["tool_counts"], record["shimmed"]) == (
        1,
        {"lookup": 1},
        False,
    )
    assert record["conversation"] is None and record["conversation_stopped"] is None
    assert record["agent_steps"] is None


def test_scripted_turns_record_their_conversation(tmp_path: Path, server: FakeLLMServer) -> None:
    record = _record(tmp_path, *_answered(tmp_path, server, TURNS))
    said = [(entry["role"], entry["content"]) for entry in record["conversation"]]
    assert said == [
        ("user", "Hi there"),
        ("assistant", "fine"),
        ("user", "And now?"),
        ("assistant", "fine"),
    ]
    assert record["user_sim_tokens"] is None


def test_a_simulated_user_records_how_it_ended_and_its_own_usage(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    server.add_rule(Rule(model="fake-model-2", reply=DEFAULT_STOP_MARKER))
    record = _record(tmp_path, *_answered(tmp_path, server, SIMULATED))
    assert record["conversation_stopped"] == "goal"
    assert record["user_sim_tokens"] and record["user_sim_tokens"] > 0
    assert [entry["role"] for entry in record["conversation"]] == ["user", "assistant"]


def test_an_agent_records_its_loop(tmp_path: Path, server: FakeLLMServer) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    server.add_rule(Rule(reply="done"))
    plan, answer = _answered(tmp_path, server, AGENT, workdir)
    record = _record(tmp_path, plan, answer, workdir=workdir)
    assert (record["agent_steps"], record["tool_call_count"], record["agent_stopped"]) == (
        1,
        0,
        answer.agent.stopped,
    )
    assert record["workdir"] == str(workdir) and record["transcript"]
    assert record["response"] == "done"


def test_a_solver_records_its_name_and_the_context_it_retrieved(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    (tmp_path / "shout.py").write_text(SHOUT)
    record = _record(tmp_path, *_answered(tmp_path, server, SOLVER))
    assert (record["solver"], record["response"]) == ("shout:solve", "FINE")
    assert record["context"]["source"] == "solver"


def test_log_likelihood_records_its_scores_as_metrics(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    server.word_logprobs.update({"Lyon": -3.0, "Paris": -0.5})
    record = _record(tmp_path, *_answered(tmp_path, server, LOGLIKELIHOOD))
    assert record["metrics"] == {"acc": 1.0, "acc_norm": 1.0}
    assert record["loglikelihood"]["chosen"] == "B"


def test_a_conversation_cut_short_records_what_it_spent_and_no_response(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    server.add_rule(Rule(match="And now?", status=500))
    plan = plan_of(loaded(tmp_path, TURNS))
    with pytest.raises(ProviderError) as raised:
        answer_of(answerer(tmp_path, server.base_url), plan)
    error = raised.value
    result = EvalResult(plan, conversation=error.partial, item_error=error)
    record = eval_record(result, "error", error.message, root=tmp_path, worker="master")
    assert record["response"] is None and record["input_tokens"]
    assert [entry["content"] for entry in record["conversation"]][:2] == ["Hi there", "fine"]
    assert record["error_kind"] == error.kind
