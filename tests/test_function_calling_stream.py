"""Streamed tool calls (issue 28, point 2): a reply's ``delta.tool_calls`` fragments are put
back together (models/providers/tool_deltas.py) by both clients into the same recorded calls a
whole answer gives; the first fragment is the first token."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import Bench, Rule

from pytest_llmbench.models.providers.tool_deltas import StreamedToolCalls

TWO_TOOLS = """
tools:
  - {name: get_weather, parameters: {type: object, properties: {city: {type: string}}}}
  - {name: get_time, parameters: {type: object, properties: {zone: {type: string}}}}
cases:
  - id: paris
    prompt: What is the weather and the time in Paris?
    assert:
      - {type: tool-call, value: get_weather, args: {city: Paris, note: "a \\"long\\" one"}}
      - {type: tool-call, value: get_time, args: {zone: Europe/Paris}}
"""

CALLS = [
    {"name": "get_weather", "arguments": {"city": "Paris", "note": 'a "long" one'}},
    {"name": "get_time", "arguments": {"zone": "Europe/Paris"}},
]


def test_fragments_are_joined_by_index_whatever_their_shape() -> None:
    calls = StreamedToolCalls()
    assert not calls.add([])
    first = {"index": 0, "id": "c1", "function": {"name": "f", "arguments": ""}}
    assert calls.add([first])
    # litellm gives objects of the same shape; fragments of two calls may interleave
    second = SimpleNamespace(index=1, id="c2", function=SimpleNamespace(name="g", arguments="{"))
    calls.add([second, {"index": 0, "function": {"arguments": '{"a": '}}])
    calls.add(
        [
            {"index": 1, "function": {"arguments": "}"}},
            {"index": 0, "function": {"arguments": "1}"}},
        ]
    )
    assert calls.calls() == (
        {"id": "c1", "name": "f", "arguments": '{"a": 1}'},
        {"id": "c2", "name": "g", "arguments": "{}"},
    )


def _calls(record: dict[str, Any]) -> list[tuple[str, str]]:
    return [(call["name"], call["arguments"]) for call in record["tool_calls"]]


def test_both_clients_give_the_same_calls_streamed_or_whole(bench: Bench) -> None:
    # Text before the calls, two calls, arguments cut every 4 characters (the fake server
    # streams as OpenAI does: id and name first, then the arguments in pieces).
    bench.server.add_rule(Rule(match="weather", reply="Let me look.", tool_calls=CALLS))
    bench.eval_file("calls", TWO_TOOLS)
    seen = {}
    for client in ("auto", "litellm"):
        for stream in ("off", "all"):
            bench.run("--models=fake", f"--client={client}", f"--stream={stream}").assert_outcomes(
                passed=1
            )
            (record,) = bench.records()
            request = bench.server.chat_requests()[-1]
            assert bool(request.body.get("stream")) is (stream == "all"), (client, stream)
            assert record["streamed"] is (stream == "all"), (client, stream)
            assert (record["ttft_s"] is not None) is (stream == "all"), (client, stream)
            assert record["response"] == "Let me look.", (client, stream)
            assert record["tool_counts"] == {"get_weather": 1, "get_time": 1}
            seen[client, stream] = _calls(record)
    expected = [(call["name"], json.dumps(call["arguments"])) for call in CALLS]
    assert all(calls == expected for calls in seen.values()), seen


@pytest.mark.parametrize("client", ["auto", "litellm"])
def test_a_reply_of_calls_only_has_a_ttft_when_streamed(bench: Bench, client: str) -> None:
    bench.server.add_rule(Rule(match="weather", tool_calls=CALLS[:1]))
    bench.eval_file(
        "calls", TWO_TOOLS.replace("      - {type: tool-call, value: get_time", "      # ")
    )
    bench.run("--models=fake", f"--client={client}", "--stream=all").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["response"] == "" and record["streamed"] is True
    # no text at all: the first fragment of the call is the first token
    assert record["ttft_s"] is not None and 0 < record["ttft_s"] <= record["latency_s"]
    assert [name for name, _ in _calls(record)] == ["get_weather"]


def test_a_stream_cut_inside_a_tool_call_says_what_came() -> None:
    import asyncio

    from pytest_llmbench.models.providers import litellm_client, openai_compatible
    from pytest_llmbench.models.providers.transport_retry import IncompleteStreamError

    fragment = {"index": 0, "id": "c1", "function": {"name": "get_weather", "arguments": '{"ci'}}
    event = json.dumps({"choices": [{"delta": {"tool_calls": [fragment]}}]})

    class Stub:  # the lean client's response: a body that ends before any finish reason
        class content:
            @staticmethod
            async def iter_any() -> Any:
                yield f"data: {event}\n\n".encode()

    with pytest.raises(IncompleteStreamError, match="cut after 15 characters"):
        asyncio.run(openai_compatible._read_stream(Stub(), 0.0))

    class Chunks:  # litellm's stream: the same fragment, then the end
        received_finish_reason = None

        def __aiter__(self) -> Any:
            return self._chunks()

        async def _chunks(self) -> Any:
            delta = SimpleNamespace(content=None, tool_calls=[fragment])
            yield SimpleNamespace(
                usage=None, choices=[SimpleNamespace(delta=delta, finish_reason=None)]
            )

    with pytest.raises(IncompleteStreamError, match="cut after 15 characters"):
        asyncio.run(litellm_client._consume_stream(Chunks(), 0.0))
