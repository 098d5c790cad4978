"""``llm.chat`` with tools: a plain test's ``send(..., tools=[...])`` exposes the reply's calls
(``Completion.tool_calls``), and the next send's history holds them with a "not run" result
per call, as a scripted conversation's does (engine/conversation_calls.py reply_messages)."""

from __future__ import annotations

import json

from conftest import Bench, Rule

from pytest_llmbench.engine.conversation_calls import NOT_RUN_RESULT

WEATHER_TEST = """
import json

TOOLS = [{"type": "function", "function": {"name": "get_weather",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


def test_weather(llm):
    convo = llm.chat()
    first = convo.send("What is the weather in Paris?", tools=TOOLS)
    assert first.text == ""
    assert [(c["name"], json.loads(c["arguments"])) for c in first.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    second = convo.send("Thanks.", tools=TOOLS)
    assert second.text == "You are welcome." and second.tool_calls == ()
"""


def test_a_chats_tool_calls_are_exposed_and_sent_back(bench: Bench) -> None:
    calls = [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    bench.server.add_rule(Rule(match="weather in Paris", tool_calls=calls))
    bench.server.add_rule(Rule(match="Thanks", reply="You are welcome."))
    bench.pytester.makepyfile(test_chat=WEATHER_TEST)
    bench.run("--models=fake").assert_outcomes(passed=1)
    first, second = [request.body for request in bench.server.chat_requests()]
    assert first["tools"][0]["function"]["name"] == "get_weather"
    assert first["stream"] is True  # a plain test's calls stream, tool calls included
    user, assistant, tool, thanks = second["messages"]
    assert user == first["messages"][0]
    (call,) = assistant["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert tool == {"role": "tool", "tool_call_id": call["id"], "content": NOT_RUN_RESULT}
    assert thanks == {"role": "user", "content": "Thanks."}
    (record,) = bench.records()
    replies = [entry for entry in record["conversation"] if entry["generated"]]
    assert [[c["name"] for c in entry["tool_calls"]] for entry in replies] == [
        ["get_weather"],
        [],
    ]
