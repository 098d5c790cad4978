"""The agent loop and the tool shim: scripted models, the real toolbox, and litellm end to end."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from fakeserver import FakeLLMServer, Rule

from pytest_llmbench.agent.limits import SandboxLimits
from pytest_llmbench.agent.loop import MAX_RESULT_CHARS, AgentRun, ToolCall, run_agent
from pytest_llmbench.agent.sandbox import Sandbox
from pytest_llmbench.agent.shim import (
    ShimTurn,
    parse_shim_reply,
    shim_response_format,
    shim_system_prompt,
    with_shim_prompt,
)
from pytest_llmbench.agent.tools import BUILTIN_TOOLS, Toolbox
from pytest_llmbench.models.item_errors import ProviderError
from pytest_llmbench.models.providers.completion import CallTarget, Completion

TOOLS = ("read_file", "write_file", "list_dir")
TASK = [
    {"role": "system", "content": "You are a careful developer."},
    {"role": "user", "content": "Create notes.txt saying hello, then check it."},
]


SCHEMAS = [BUILTIN_TOOLS[name].schema() for name in TOOLS]


@pytest.fixture
def toolbox(tmp_path: Path) -> Toolbox:
    """The real toolbox on a fresh workdir (no run_command: the sandbox is tested elsewhere)."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    return Toolbox(workdir, TOOLS, Sandbox(workdir, SandboxLimits(), mode="off"), tmp_path)


class StubToolbox:
    """One tool, ``stub``, that sleeps, then raises (as custom code can) or answers."""

    def __init__(self, sleep_s: float = 0.0, fail: bool = False) -> None:
        self.sleep_s, self.fail = sleep_s, fail

    def schemas(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {"name": "stub", "parameters": {}}}]

    def call(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        time.sleep(self.sleep_s)
        if self.fail:
            raise RuntimeError("boom")
        return "done"


def completion(
    text: str = "",
    calls: Sequence[tuple[str, Any]] = (),
    *,
    tokens: tuple[int, int] = (10, 5),
    cost: float | None = 0.001,
    cached: bool = False,
    retries: int = 0,
) -> Completion:
    """A scripted answer; ``calls`` are (name, arguments: dict, or a raw string sent as is)."""
    wired = tuple(
        {"id": f"c{i}", "name": n, "arguments": a if isinstance(a, str) else json.dumps(a)}
        for i, (n, a) in enumerate(calls)
    )
    return Completion(
        text=text,
        model_id="scripted",
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        tokens_estimated=False,
        ttft_s=None,
        latency_s=0.5,
        cost_usd=cost,
        retries=retries,
        streamed=False,
        finish_reason="tool_calls" if calls else "stop",
        cached=cached,
        tool_calls=wired,
    )


class Script:
    """A fake ``complete``: hands out the scripted answers in order, recording each request."""

    def __init__(self, *answers: Completion, delay_s: float = 0.0) -> None:
        self.answers = list(answers)
        self.delay_s = delay_s
        self.requests: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []
        self.cancelled = 0  # calls cancelled while they waited

    async def __call__(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        self.requests.append((messages, params))
        if self.delay_s:
            try:
                await asyncio.sleep(self.delay_s)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        if len(self.answers) > 1:
            return self.answers.pop(0)
        return self.answers[0]  # the last answer repeats, for loops that never end


def run(script: Any, toolbox: Any, *, shim: bool = False, **limits: Any) -> AgentRun:
    options: dict[str, Any] = {"max_turns": 10, "limit_seconds": None, "limit_tokens": None}
    options.update(limits)
    names = [s["function"]["name"] for s in toolbox.schemas()]
    return asyncio.run(run_agent(script, toolbox, TASK, shim=shim, tool_names=names, **options))


# -- native tool calls --------------------------------------------------------------------------


def test_write_then_read_then_answer(toolbox: Toolbox) -> None:
    script = Script(
        completion(calls=[("write_file", {"path": "notes.txt", "content": "hello"})]),
        completion("Let me check.", calls=[("read_file", {"path": "notes.txt"})]),
        completion("  The file says hello.  ", cached=True),
    )
    result = run(script, toolbox)

    assert (toolbox.workdir / "notes.txt").read_text() == "hello"
    assert result.stopped == "answer" and result.answer == "The file says hello."
    assert result.turns == 3 and not result.shimmed
    assert result.tool_calls == (
        ToolCall(1, "write_file", {"path": "notes.txt", "content": "hello"},
                 "wrote 5 bytes to notes.txt", False),
        ToolCall(2, "read_file", {"path": "notes.txt"}, "hello", False),
    )  # fmt: skip
    assert result.tool_counts() == {"write_file": 1, "read_file": 1}
    # Summed over the three turns; one turn was not from the cache.
    assert (result.usage.input_tokens, result.usage.output_tokens) == (30, 15)
    assert result.usage.cost_usd == pytest.approx(
        0.003
    ) and result.usage.latency_s == pytest.approx(1.5)
    assert not result.cached
    # Every call offered the tools, and saw the conversation so far in OpenAI's shape.
    messages, params = script.requests[2]
    assert params == {"tools": toolbox.schemas(), "tool_choice": "auto"}
    assert [m["role"] for m in messages] == ["system", "user"] + ["assistant", "tool"] * 2
    first_call = messages[2]
    assert first_call["content"] is None
    assert first_call["tool_calls"] == [
        {
            "id": "c0",
            "type": "function",
            "function": {
                "name": "write_file",
                "arguments": json.dumps({"path": "notes.txt", "content": "hello"}),
            },
        }
    ]
    assert messages[3] == {
        "role": "tool",
        "tool_call_id": "c0",
        "content": "wrote 5 bytes to notes.txt",
    }
    assert messages[4]["content"] == "Let me check."
    assert result.transcript[-1] == {"role": "assistant", "content": "  The file says hello.  "}
    assert len(result.transcript) == 7


def test_several_calls_in_one_turn_each_get_a_result(toolbox: Toolbox) -> None:
    script = Script(
        completion(calls=[("write_file", {"path": "a", "content": "1"}), ("list_dir", {})]),
        completion("done"),
    )
    result = run(script, toolbox)
    messages, _ = script.requests[1]
    assert [m.get("tool_call_id") for m in messages[3:]] == ["c0", "c1"]
    assert messages[4]["content"] == "a"
    assert [c.turn for c in result.tool_calls] == [1, 1]
    assert result.tool_counts() == {"write_file": 1, "list_dir": 1}


def test_all_turns_cached_and_sums_of_retries(toolbox: Toolbox) -> None:
    script = Script(
        completion(calls=[("list_dir", {"path": "."})], cached=True, retries=2),
        completion("empty", cached=True, retries=1, cost=None),
    )
    result = run(script, toolbox)
    assert result.cached and result.retries == 3
    # A turn without a price adds nothing; the priced one still counts.
    assert result.usage.cost_usd == pytest.approx(0.001)


def test_max_turns_stops_a_model_that_never_answers(toolbox: Toolbox) -> None:
    script = Script(completion(calls=[("list_dir", {"path": "."})]))
    result = run(script, toolbox, max_turns=3)
    assert result.stopped == "max_steps" and result.answer == ""
    assert result.turns == 3 and len(script.requests) == 3
    assert result.tool_counts() == {"list_dir": 3}
    # The last call still ran and has its result: no call is left unanswered.
    assert result.transcript[-1]["role"] == "tool"


def test_token_limit_stops_between_turns(toolbox: Toolbox) -> None:
    script = Script(completion(calls=[("list_dir", {"path": "."})], tokens=(10, 5)))
    result = run(script, toolbox, limit_tokens=40)
    # 15 tokens a turn: 45 > 40 after the third.
    assert result.stopped == "tokens" and result.turns == 3
    assert result.usage.input_tokens == 30 and result.usage.output_tokens == 15


def test_time_limit_cancels_a_call_in_flight(toolbox: Toolbox) -> None:
    script = Script(completion("too late"), delay_s=30)
    result = run(script, toolbox, limit_seconds=0.3)
    assert script.cancelled == 1, "the call in flight was cancelled, not waited for"
    assert result.stopped == "seconds" and result.turns == 0 and result.answer == ""
    assert result.usage.input_tokens is None and not result.cached


def test_time_limit_stops_between_turns() -> None:
    script = Script(completion(calls=[("stub", {})]))
    result = run(script, StubToolbox(sleep_s=0.3), limit_seconds=0.2)
    # The slow tool ran to its end and was answered; no second model call was made.
    assert result.stopped == "seconds" and result.turns == 1 and len(script.requests) == 1
    assert result.transcript[-1]["content"] == "done" and result.answer == ""


def test_a_timeout_of_the_call_itself_is_not_the_budget(toolbox: Toolbox) -> None:
    async def times_out(messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        raise asyncio.TimeoutError

    with pytest.raises(asyncio.TimeoutError):
        run(times_out, toolbox, limit_seconds=60)


def test_tool_error_is_shown_to_the_model(toolbox: Toolbox) -> None:
    script = Script(completion(calls=[("read_file", {"path": "missing.txt"})]), completion("no"))
    result = run(script, toolbox)
    (call,) = result.tool_calls
    assert call.error and call.result.startswith("error: ")
    assert script.requests[1][0][-1] == {
        "role": "tool",
        "tool_call_id": "c0",
        "content": call.result,
    }


def test_unparseable_arguments_are_an_error_call_and_the_tool_does_not_run(
    toolbox: Toolbox,
) -> None:
    script = Script(
        completion(calls=[("write_file", '{"path": "x.txt", "content": ')]),
        completion(calls=[("write_file", '["x.txt", "hi"]')]),
        completion("gave up"),
    )
    result = run(script, toolbox)
    broken, listed = result.tool_calls
    assert broken == ToolCall(1, "write_file", {}, broken.result, True, readable=False)
    assert broken.result.startswith("error: the arguments are not valid JSON")
    assert listed.error and listed.arguments == {}
    assert "not a JSON object" in listed.result
    assert not (toolbox.workdir / "x.txt").exists()
    # The model saw the raw arguments it sent, and why they failed.
    sent = script.requests[1][0]
    assert sent[-2]["tool_calls"][0]["function"]["arguments"] == '{"path": "x.txt", "content": '
    assert sent[-1]["content"] == broken.result


def test_a_tool_that_raises_is_an_error_result() -> None:
    script = Script(completion(calls=[("stub", {})]), completion("ok"))
    (call,) = run(script, StubToolbox(fail=True)).tool_calls
    assert call.error and call.result == "error: stub failed: RuntimeError: boom"


def test_long_tool_results_are_cut_for_the_model(toolbox: Toolbox) -> None:
    (toolbox.workdir / "big.txt").write_text("x" * 10_000)
    script = Script(completion(calls=[("read_file", {"path": "big.txt"})]), completion("ok"))
    (call,) = run(script, toolbox).tool_calls
    assert len(call.result) <= MAX_RESULT_CHARS and call.result.startswith("x" * 3000)
    assert call.result.endswith("more characters cut]")
    assert script.requests[1][0][-1]["content"] == call.result


def test_provider_error_propagates(toolbox: Toolbox) -> None:
    async def failing(messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        raise ProviderError("server down", "provider")

    with pytest.raises(ProviderError, match="server down"):
        run(failing, toolbox)


def test_max_turns_must_allow_a_call(toolbox: Toolbox) -> None:
    with pytest.raises(ValueError, match="max_turns"):
        run(Script(completion("x")), toolbox, max_turns=0)


# -- the shim -----------------------------------------------------------------------------------


def test_shim_loop_tool_then_answer(toolbox: Toolbox) -> None:
    script = Script(
        completion('{"tool": "write_file", "arguments": {"path": "n.txt", "content": "hi"}}'),
        completion('```json\n{"tool": "read_file", "arguments": {"path": "n.txt"}}\n```'),
        completion('{"answer": "It says hi."}'),
    )
    result = run(script, toolbox, shim=True)
    assert result.shimmed and result.stopped == "answer" and result.answer == "It says hi."
    assert result.tool_counts() == {"write_file": 1, "read_file": 1}
    assert (toolbox.workdir / "n.txt").read_text() == "hi"
    messages, params = script.requests[2]
    # No native tools: the protocol's JSON schema instead, and the tools in the system prompt.
    assert set(params) == {"response_format"}
    assert params["response_format"] == shim_response_format(TOOLS, SCHEMAS)
    assert messages[0]["content"].startswith("You are a careful developer.\n\nYou can use")
    assert [m["role"] for m in messages] == ["system", "user"] + ["assistant", "user"] * 2
    assert messages[3] == {
        "role": "user",
        "content": "Tool write_file returned:\nwrote 2 bytes to n.txt",
    }
    assert messages[5]["content"] == "Tool read_file returned:\nhi"
    assert all("tool_calls" not in m for m in result.transcript)


def test_shim_plain_text_is_the_answer(toolbox: Toolbox) -> None:
    script = Script(
        completion('{"tool": "list_dir", "arguments": {"path": "."}}'),
        completion("  I think the folder is empty.\n"),
    )
    result = run(script, toolbox, shim=True)
    assert result.answer == "I think the folder is empty." and result.turns == 2
    assert result.stopped == "answer"


def test_shim_bad_arguments_and_unknown_tools_are_errors(toolbox: Toolbox) -> None:
    script = Script(
        completion('{"tool": "write_file", "arguments": "n.txt"}'),
        completion('{"tool": "delete_all", "arguments": {}}'),
        completion('{"answer": 42}'),
    )
    result = run(script, toolbox, shim=True)
    bad, unknown = result.tool_calls
    assert bad.error and bad.arguments == {} and "not a JSON object" in bad.result
    assert unknown.name == "delete_all" and unknown.error and "unknown tool" in unknown.result
    assert result.answer == "42"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"tool": "read_file", "arguments": {"path": "a"}}', ShimTurn("read_file", {"path": "a"})),
        ('Sure! {"tool": "list_dir", "arguments": {}} hope it helps', ShimTurn("list_dir", {})),
        ('{"tool": "read_file", "arguments": "{\\"path\\": \\"a\\"}"}',
         ShimTurn("read_file", {"path": "a"})),
        ('{"tool": "read_file"}', ShimTurn("read_file", {})),
        ('{"answer": "Paris"}', ShimTurn(answer="Paris")),
        ("```\n{\"answer\": \"Paris\"}\n```", ShimTurn(answer="Paris")),
        ('  {"other": 1}  ', ShimTurn(answer='{"other": 1}')),
        ("[1, 2]", ShimTurn(answer="[1, 2]")),
        ("Paris {broken", ShimTurn(answer="Paris {broken")),
        ("", ShimTurn(answer="")),
    ],
)  # fmt: skip
def test_parse_shim_reply(text: str, expected: ShimTurn) -> None:
    assert parse_shim_reply(text, TOOLS) == expected


def test_shim_arguments_that_are_no_object_are_a_problem() -> None:
    turn = parse_shim_reply('{"tool": "read_file", "arguments": ["a"]}', TOOLS)
    assert turn.tool == "read_file" and turn.arguments == {}
    assert turn.problem == 'the arguments are not a JSON object: ["a"]'


def test_shim_prompt_goes_into_the_first_system_message_or_a_new_one() -> None:
    schemas = SCHEMAS
    prompt = shim_system_prompt(schemas)
    # Each tool as the JSON that calls it: a small model copies templates, not schemas.
    assert '{"tool": "write_file", "arguments": {"path": "<string>", "content": "<string>"}}' in (
        prompt
    )
    assert '{"answer": "<your final answer>"}' in prompt and "ONLY one JSON object" in prompt
    user = [{"role": "user", "content": "hi"}]
    assert with_shim_prompt(user, schemas) == [{"role": "system", "content": prompt}, *user]
    later = [*user, {"role": "system", "content": "Be brief."}]
    assert with_shim_prompt(later, schemas)[1]["content"] == f"Be brief.\n\n{prompt}"
    assert later[1]["content"] == "Be brief."  # the caller's messages are left alone


def test_shim_response_format_admits_exactly_the_protocol() -> None:
    schemas = SCHEMAS
    response_format = shim_response_format(TOOLS, schemas)
    assert response_format["type"] == "json_object"
    schema = response_format["schema"]
    valid = [
        {"tool": "read_file", "arguments": {"path": "a"}},
        {"tool": "write_file", "arguments": {"path": "a", "content": "b"}},
        {"answer": "done"},
    ]
    invalid = [
        {"tool": "rm", "arguments": {}},
        {"tool": "write_file", "arguments": {"path": "a"}},  # content is required
        {"tool": "read_file", "arguments": "a"},
        {"answer": 1},
        {"other": "x"},
    ]
    for value in valid:
        jsonschema.validate(value, schema)
    for value in invalid:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(value, schema)
    # Plain JSON Schema only: what llama.cpp's grammar compiler understands.
    allowed = {"type", "properties", "required", "enum", "anyOf", "description"}
    assert _keywords(schema) <= allowed


def test_shim_response_format_without_schemas_or_tools() -> None:
    schema = shim_response_format(["custom"])["schema"]
    jsonschema.validate({"tool": "custom", "arguments": {"any": 1}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"tool": "other", "arguments": {}}, schema)
    only_answer = shim_response_format([])["schema"]
    assert only_answer["required"] == ["answer"]


def _keywords(schema: Any) -> set[str]:
    """Every JSON Schema keyword used (property names are data, not keywords)."""
    if isinstance(schema, list):
        return set().union(*(_keywords(s) for s in schema))
    if not isinstance(schema, dict):
        return set()
    found = set(schema)
    for key, value in schema.items():
        if key == "properties":
            found |= set().union(*(_keywords(v) for v in value.values()))
        elif key in ("anyOf", "items"):
            found |= _keywords(value)
    return found


def test_the_shim_grammar_compiles_in_llama_cpp() -> None:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    schema = shim_response_format(TOOLS, SCHEMAS)["schema"]
    grammar = json_schema_to_gbnf(json.dumps(schema))
    # One alternative per tool, its name fixed, its arguments by name; and the answer.
    for name in TOOLS:
        assert f'::= "\\"{name}\\""' in grammar
    assert '"\\"content\\""' in grammar and '"\\"answer\\""' in grammar


# -- the fake server's tool calls, and litellm end to end ---------------------------------------


def _post(server: FakeLLMServer, body: dict[str, Any]) -> bytes:
    request = urllib.request.Request(
        f"{server.base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return bytes(response.read())


def test_fake_server_scripts_tool_calls(fake_llm: FakeLLMServer) -> None:
    fake_llm.add_rule(
        Rule(tool_calls=[{"name": "read_file", "arguments": {"path": "a"}},
                         {"name": "list_dir", "arguments": "{broken"}], times=1)
    )  # fmt: skip
    fake_llm.add_rule(Rule(match_last="file body", reply="Thinking", tool_calls=[{"name": "x"}]))
    fake_llm.add_rule(Rule(match_any="needle", reply="found it"))
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "go"}]}

    choice = json.loads(_post(fake_llm, body))["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "read_file", "arguments": '{"path": "a"}'}},
            {"id": "call_2", "type": "function",
             "function": {"name": "list_dir", "arguments": "{broken"}},
        ],
    }  # fmt: skip
    # match_last sees the tool result, whatever its role; a changed reply goes along as text.
    body["messages"] += [{"role": "tool", "tool_call_id": "call_1", "content": "the file body"}]
    message = json.loads(_post(fake_llm, body))["choices"][0]["message"]
    assert message["content"] == "Thinking"
    assert message["tool_calls"][0]["id"] == "call_3"
    assert message["tool_calls"][0]["function"] == {"name": "x", "arguments": "{}"}
    # match_any looks at every message, here the first.
    body["messages"] = [{"role": "user", "content": "a needle"}, {"role": "user", "content": "?"}]
    assert json.loads(_post(fake_llm, body))["choices"][0]["message"]["content"] == "found it"
    body["messages"] = [{"role": "user", "content": "nothing"}]
    assert json.loads(_post(fake_llm, body))["choices"][0]["message"]["content"] == "ok"


def test_fake_server_streams_tool_calls(fake_llm: FakeLLMServer) -> None:
    fake_llm.add_rule(Rule(tool_calls=[{"name": "list_dir", "arguments": {"path": "."}}]))
    body = {"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    events = [
        json.loads(line[len(b"data: ") :])
        for line in _post(fake_llm, body).splitlines()
        if line.startswith(b"data: {")
    ]
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    fragments = [part for d in deltas if "tool_calls" in d for part in d["tool_calls"]]
    # As OpenAI streams them: the id and name in the first fragment, the arguments in pieces.
    assert len(fragments) > 1 and {f["index"] for f in fragments} == {0}
    assert fragments[0]["id"] == "call_1" and fragments[0]["function"]["name"] == "list_dir"
    assert all("id" not in f for f in fragments[1:])
    assert "".join(f["function"].get("arguments", "") for f in fragments) == '{"path": "."}'
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"


def _through_litellm(server: FakeLLMServer) -> Any:
    from pytest_llmbench.models.providers.calls import acomplete

    target = CallTarget(
        "fake", "openai/fake-model", server.base_url, "sk-fake-agent-key", client="litellm"
    )

    async def complete(messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        return await acomplete(target, messages, params, stream=False, max_retries=0)

    return complete


def test_end_to_end_through_litellm(
    fake_llm: FakeLLMServer, toolbox: Toolbox, litellm_loaded: Any
) -> None:
    write = {"name": "write_file", "arguments": {"path": "notes.txt", "content": "hello"}}
    fake_llm.add_rule(Rule(tool_calls=[write], times=1))
    fake_llm.add_rule(
        Rule(match_last="wrote 5", tool_calls=[{"name": "read_file", "arguments": '{"pa'}])
    )
    fake_llm.add_rule(
        Rule(match_last="not valid JSON", tool_calls=[{"name": "read_file",
                                                       "arguments": {"path": "notes.txt"}}])
    )  # fmt: skip
    fake_llm.add_rule(Rule(match_last="hello", reply="notes.txt says hello"))

    result = run(_through_litellm(fake_llm), toolbox, max_turns=6)

    assert result.stopped == "answer" and result.answer == "notes.txt says hello"
    assert [(c.name, c.error) for c in result.tool_calls] == [
        ("write_file", False),
        ("read_file", True),
        ("read_file", False),
    ]
    assert result.tool_counts() == {"write_file": 1, "read_file": 2}
    assert (toolbox.workdir / "notes.txt").read_text() == "hello"
    assert result.turns == 4 and result.usage.input_tokens and result.usage.output_tokens
    requests = fake_llm.chat_requests()
    assert len(requests) == 4
    first = requests[0].body
    assert first["tools"] == toolbox.schemas() and first["tool_choice"] == "auto"
    # The assistant's calls and their results went back to the server in OpenAI's shape.
    last = requests[-1].body["messages"]
    assert last[2]["tool_calls"][0]["id"] == "call_1"
    assert last[2]["tool_calls"][0]["function"]["name"] == "write_file"
    assert last[3] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "wrote 5 bytes to notes.txt",
    }
    assert [m["role"] for m in last] == ["system", "user"] + ["assistant", "tool"] * 3


def test_end_to_end_shim_through_litellm(
    fake_llm: FakeLLMServer, toolbox: Toolbox, litellm_loaded: Any
) -> None:
    fake_llm.add_rule(Rule(reply='{"tool": "list_dir", "arguments": {"path": "."}}', times=1))
    fake_llm.add_rule(Rule(match="Tool list_dir returned", reply='{"answer": "nothing there"}'))

    result = run(_through_litellm(fake_llm), toolbox, shim=True)

    assert result.answer == "nothing there" and result.tool_counts() == {"list_dir": 1}
    first, second = (r.body for r in fake_llm.chat_requests())
    assert "tools" not in first
    assert first["response_format"] == shim_response_format(TOOLS, SCHEMAS)
    assert second["messages"][-1]["content"].startswith("Tool list_dir returned:")
