"""The Answerer in-process (no pytest session): each case kind answered against the local fake
server, through the real pacer; what each kind's answer carries."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_support import (
    AGENT,
    LOGLIKELIHOOD,
    PLAIN,
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

from pytest_llmbench.engine.conversation_calls import NOT_RUN_RESULT
from pytest_llmbench.models.item_errors import ProviderError


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(default_reply="fine") as started:
        yield started


def test_a_plain_case_is_one_call_and_its_reply(tmp_path: Path, server: FakeLLMServer) -> None:
    server.add_rule(Rule(match="capital", reply="Paris"))
    plan = plan_of(loaded(tmp_path, PLAIN))
    answer = answer_of(answerer(tmp_path, server.base_url), plan)
    assert answer.completion.text == "Paris"
    assert len(server.chat_requests()) == 1
    assert (answer.conversation, answer.agent, answer.messages) == (None, None, None)


def test_scripted_turns_are_one_call_each_with_the_history(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    plan = plan_of(loaded(tmp_path, TURNS))
    answer = answer_of(answerer(tmp_path, server.base_url), plan)
    run = answer.conversation
    assert run is not None and [reply.turn for reply in run.replies] == [0, 1]
    second = server.chat_requests()[1].body["messages"]
    assert [m["content"] for m in second] == ["Hi there", "fine", "And now?"]
    assert answer.messages == tuple(second)  # the last call's messages are the ones recorded


def test_a_simulated_user_writes_the_user_turns_until_its_stop_marker(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    from pytest_llmbench.spec.schema import DEFAULT_STOP_MARKER

    server.add_rule(Rule(model="fake-model-2", reply=DEFAULT_STOP_MARKER))
    plan = plan_of(loaded(tmp_path, SIMULATED))
    answer = answer_of(answerer(tmp_path, server.base_url), plan)
    run = answer.conversation
    assert run is not None
    assert (run.stopped, len(run.replies), len(run.user_calls)) == ("goal", 1, 1)
    assert run.turns[0].content == "My order never arrived."


def test_an_agent_loops_in_its_workdir(tmp_path: Path, server: FakeLLMServer) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "a.txt").write_text("forty-two")
    server.add_rule(Rule(match_last="forty-two", reply="done"))
    server.add_rule(
        Rule(
            match="Read a.txt", tool_calls=[{"name": "read_file", "arguments": {"path": "a.txt"}}]
        ),
    )
    plan = plan_of(loaded(tmp_path, AGENT))
    answer = answer_of(answerer(tmp_path, server.base_url), plan, workdir)
    assert answer.agent is not None and answer.sandbox is not None
    assert (answer.completion.text, answer.agent.turns) == ("done", 2)
    assert [call.name for call in answer.agent.tool_calls] == ["read_file"]


def test_a_solver_answers_with_its_calls_and_its_context(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    (tmp_path / "shout.py").write_text(SHOUT)
    server.add_rule(Rule(match="Say hello", reply="hello"))
    plan = plan_of(loaded(tmp_path, SOLVER))
    answer = answer_of(answerer(tmp_path, server.base_url), plan)
    assert (answer.completion.text, answer.retrieved_context) == ("HELLO", ("retrieved chunk",))
    assert answer.solver_verdict is None


def test_log_likelihood_scores_each_option(tmp_path: Path, server: FakeLLMServer) -> None:
    server.word_logprobs.update({"Lyon": -3.0, "Paris": -0.5})
    plan = plan_of(loaded(tmp_path, LOGLIKELIHOOD))
    answer = answer_of(answerer(tmp_path, server.base_url), plan)
    assert answer.loglikelihood is not None
    assert (answer.completion.text, answer.loglikelihood["chosen"]) == ("B", "B")
    assert not server.chat_requests()  # nothing is generated


def test_a_conversation_cut_by_an_error_carries_what_was_said(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    server.add_rule(Rule(match="And now?", status=500))
    plan = plan_of(loaded(tmp_path, TURNS))
    engine = answerer(tmp_path, server.base_url)
    with pytest.raises(ProviderError) as raised:
        answer_of(engine, plan)
    partial = raised.value.partial
    assert [reply.completion.text for reply in partial.replies] == ["fine"]
    assert engine.said_so_far(plan.nodeid) is None  # no longer followed once it ended


def test_a_turn_reply_calling_a_tool_is_answered_as_not_run(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    spec = loaded(tmp_path, TURNS.replace("cases:", FUNCTIONS + "cases:"))
    server.add_rule(Rule(match="Hi there", tool_calls=[{"name": "lookup", "arguments": {}}]))
    answer_of(answerer(tmp_path, server.base_url), plan_of(spec))
    second = server.chat_requests()[1].body["messages"]
    assert second[2] == {"role": "tool", "tool_call_id": second[1]["tool_calls"][0]["id"],
                         "content": NOT_RUN_RESULT}  # fmt: skip


FUNCTIONS = """tools:
  - name: lookup
    description: Look something up
    parameters: {type: object, properties: {}}
"""
