"""Tool calls inside scripted conversations (issue 28, point 2): a file with ``turns:`` and
``tools:`` offers the tools on every turn, records each reply's calls, sends them back in the
next turn's history with a "not run" result per call, and checks a turn's tool-call assertions
on that turn's reply."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import Bench, Rule

from pytest_llmbench.engine.conversation_calls import NOT_RUN_RESULT

TALK = """
tools:
  - {name: get_weather, parameters: {type: object, properties: {city: {type: string}}}}
  - {name: get_time, parameters: {type: object, properties: {}}}
cases:
  - id: weather-talk
    turns:
      - user: What is the weather in Paris?
        assert: [{type: tool-call, value: get_weather, args: {city: Paris}}, valid-tool-call]
      - user: Thanks. Anything else?
        assert: [no-tool-call, {type: icontains, value: welcome}]
  - id: wrong-turn
    turns:
      - user: What is the weather in Rome?
        assert: [no-tool-call]
      - user: Thanks again.
        assert: [{type: tool-call, value: get_weather}]
"""


def _script(bench: Bench) -> None:
    for city in ("Paris", "Rome"):
        calls = [{"name": "get_weather", "arguments": {"city": city}}]
        bench.server.add_rule(Rule(match=f"weather in {city}", tool_calls=calls))
    bench.server.add_rule(Rule(match="Thanks", reply="You are welcome."))


def _requests(bench: Bench, needle: str) -> list[dict[str, Any]]:
    """The chat requests whose first user message holds ``needle``, in order."""
    bodies = [request.body for request in bench.server.chat_requests()]
    return [body for body in bodies if needle in str(body["messages"][0]["content"])]


@pytest.mark.parametrize(("client", "stream"), [("auto", "off"), ("litellm", "all")])
def test_calls_go_back_with_a_not_run_result_and_are_checked_per_turn(
    bench: Bench, client: str, stream: str
) -> None:
    _script(bench)
    bench.eval_file("talk", TALK)
    result = bench.run("--models=fake", f"--client={client}", f"--stream={stream}")
    result.assert_outcomes(passed=1, failed=1)
    # wrong-turn: turn 1 called a tool (no-tool-call fails there), turn 2 called none
    result.stdout.fnmatch_lines(["*wrong-turn on fake*turn 1 of 2: no-tool-call*"])

    first, second = _requests(bench, "Paris")
    assert first["tools"] == second["tools"] and len(first["tools"]) == 2  # on every turn
    assistant, tool, user = second["messages"][-3:]
    (call,) = assistant["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert not assistant.get("content")  # a reply of calls only: no text
    assert tool == {"role": "tool", "tool_call_id": call["id"], "content": NOT_RUN_RESULT}
    assert user == {"role": "user", "content": "Thanks. Anything else?"}

    records = {record["case_id"]: record for record in bench.records()}
    talk = records["weather-talk"]
    replies = [entry for entry in talk["conversation"] if entry["generated"]]
    assert [[c["name"] for c in entry["tool_calls"]] for entry in replies] == [
        ["get_weather"],
        [],
    ]
    assert [(v["turn"], v["type"], v["passed"]) for v in talk["assertions"]] == [
        (1, "tool-call", True),
        (1, "valid-tool-call", True),
        (2, "no-tool-call", True),
        (2, "icontains", True),
    ]
    # the item's calls are every turn's: counted like a single reply's
    assert [c["name"] for c in talk["tool_calls"]] == ["get_weather"]
    assert talk["tool_counts"] == {"get_weather": 1}
    wrong = records["wrong-turn"]
    assert [(v["turn"], v["passed"]) for v in wrong["assertions"]] == [(1, False), (2, False)]


def test_a_turn_assertion_naming_an_undeclared_tool_is_an_error_at_its_line(
    bench: Bench,
) -> None:
    bench.eval_file("talk", TALK.replace("value: get_weather}]", "value: get_wether}]"))
    result = bench.run("--models=fake")
    result.stdout.fnmatch_lines(["*talk.eval.yaml:*: tool-call names 'get_wether'*"])
    result.stdout.no_fnmatch_line("*Traceback*")
    assert result.ret != 0


SIMULATED = """
tools:
  - {name: get_weather, parameters: {type: object, properties: {city: {type: string}}}}
cases:
  - id: simulated
    simulated_user:
      model: fake2
      instructions: You are Ada. Ask about the weather in Paris.
      first_message: What is the weather in Paris?
      max_turns: 2
      assert: [valid-tool-call]
"""


def test_a_simulated_users_conversation_sends_the_calls_back_too(bench: Bench) -> None:
    calls = [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    bench.server.add_rule(Rule(model="fake-model", match="weather in Paris", tool_calls=calls))
    bench.server.add_rule(Rule(model="fake-model-2", reply="Thanks. And tomorrow?"))
    bench.server.add_rule(Rule(model="fake-model", match="tomorrow", reply="Sunny."))
    bench.eval_file("talk", SIMULATED)
    bench.run("--models=fake").assert_outcomes(failed=1)  # turn 2 called no tool
    model = [r.body for r in bench.server.chat_requests() if r.body["model"] == "fake-model"]
    first, second = model
    assert first["tools"] == second["tools"]
    assistant, tool, user = second["messages"][-3:]
    assert assistant["tool_calls"][0]["function"]["name"] == "get_weather"
    assert tool["role"] == "tool" and tool["content"] == NOT_RUN_RESULT
    assert user == {"role": "user", "content": "Thanks. And tomorrow?"}
    (record,) = bench.records()
    assert [(v["turn"], v["passed"]) for v in record["assertions"]] == [(1, True), (2, False)]


# -- through the tool shim: every turn shimmed, its reply read back into its calls ------------


def _shimmed_requests(bench: Bench, needle: str) -> list[dict[str, Any]]:
    """The chat requests whose first user message (after the shim's system one) holds
    ``needle``, in order."""
    bodies = [request.body for request in bench.server.chat_requests()]
    return [body for body in bodies if needle in str(body["messages"][1]["content"])]


def test_a_shimmed_conversation_reads_each_turns_calls_and_sends_them_back(
    bench: Bench,
) -> None:
    call = {"calls": [{"tool": "get_weather", "arguments": {"city": "Paris"}}]}
    bench.server.add_rule(Rule(match="weather in Paris", reply=json.dumps(call)))
    bench.server.add_rule(Rule(match="weather in Rome", reply='{"answer": "Rainy."}'))
    bench.server.add_rule(Rule(match="Thanks", reply='{"answer": "You are welcome."}'))
    bench.eval_file("talk", TALK + "tool_shim: always\n")
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*wrong-turn on fake*turn 2 of 2: tool-call*"])

    first, second = _shimmed_requests(bench, "Paris")
    for body in (first, second):  # offered in the prompt on every turn, not natively
        assert "tools" not in body and "response_format" in body
        assert body["messages"][0]["role"] == "system"
        assert '{"calls": [{"tool": "<tool name>"' in body["messages"][0]["content"]
    assistant, result_message, user = second["messages"][-3:]
    assert assistant == {"role": "assistant", "content": json.dumps(call)}
    assert result_message["role"] == "user"
    assert result_message["content"] == f"Tool get_weather returned:\n{NOT_RUN_RESULT}"
    assert user == {"role": "user", "content": "Thanks. Anything else?"}

    records = {record["case_id"]: record for record in bench.records()}
    talk = records["weather-talk"]
    assert talk["shimmed"] is True
    replies = [entry for entry in talk["conversation"] if entry["generated"]]
    calls = [[(c["name"], json.loads(c["arguments"])) for c in e["tool_calls"]] for e in replies]
    assert calls == [[("get_weather", {"city": "Paris"})], []]
    assert [(v["turn"], v["type"], v["passed"]) for v in talk["assertions"]] == [
        (1, "tool-call", True),
        (1, "valid-tool-call", True),
        (2, "no-tool-call", True),
        (2, "icontains", True),
    ]
    wrong = records["wrong-turn"]
    # turn 1 answered in words (no call: passes); turn 2 wanted a call and got an answer
    assert [(v["turn"], v["passed"]) for v in wrong["assertions"]] == [(1, True), (2, False)]
    rome = _shimmed_requests(bench, "Rome")[1]["messages"]
    assert {"role": "assistant", "content": '{"answer": "Rainy."}'} in rome


@pytest.mark.slow
def test_a_conversation_with_tools_runs_on_the_embedded_model_through_the_shim(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    talk = TALK.split("  - id: wrong-turn")[0] + "model_params: {max_tokens: 64}\n"
    pytester.makefile(".eval.yaml", talk=talk)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--results-dir=out")
    assert result.ret in (0, 1), result.stdout.str()  # verdicts, whichever they are
    (line,) = (pytester.path / "out" / "results.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["model"] == "local/smollm2" and record["shimmed"] is True
    assert record["outcome"] in ("passed", "failed"), record["error"]
    assert [v["turn"] for v in record["assertions"]] == [1, 1, 2, 2]
    replies = [entry for entry in record["conversation"] if entry["generated"]]
    assert len(replies) == 2
    # the grammar lets the model name only the declared tools
    called = {c["name"] for entry in replies for c in entry["tool_calls"]}
    assert called <= {"get_weather", "get_time"}
    system = record["messages"][0]
    assert system["role"] == "system" and '{"calls": [' in system["content"]
