"""The tool shim: tool calls as JSON in plain text, for models without native tool calling.

The embedded SmolLM2 model has no tool-calling chat format, so the tools are described in the
system message and the model answers with one JSON object per turn: ``{"tool": ..., "arguments":
{...}}`` to call a tool, ``{"answer": ...}`` to finish. :func:`shim_response_format` hands the
server a JSON schema of exactly those two shapes; llama.cpp compiles it into a grammar, so even a
135M model can only emit protocol JSON (with the tool name one of the tools).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ShimTurn",
    "parse_shim_reply",
    "shim_response_format",
    "shim_system_prompt",
    "shim_tool_result",
    "with_shim_prompt",
]

_PROTOCOL = """\
Reply with ONLY one JSON object and nothing else. Either call one tool:
{"tool": "<tool name>", "arguments": {<the tool's arguments>}}
and its result comes back in the next message; or, when the task is done, give the final answer:
{"answer": "<your final answer>"}"""

_CALLS_PROTOCOL = """\
Reply with ONLY one JSON object and nothing else. Either call the tools the request needs, one
entry per call (several entries to call several times):
{"calls": [{"tool": "<tool name>", "arguments": {<the tool's arguments>}}]}
or, when no tool fits, answer in words:
{"answer": "<your answer>"}"""

# A reply wrapped in a Markdown code fence, as chat models like to do.
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```$", re.DOTALL)


@dataclass(frozen=True)
class ShimTurn:
    """One model reply read through the shim: a tool call, or the final answer."""

    #: the tool asked for; None when the reply is the final answer
    tool: str | None = None
    #: the call's arguments ({} when they were not a JSON object: see ``problem``)
    arguments: dict[str, Any] = field(default_factory=dict)
    #: the final answer; None for a tool call
    answer: str | None = None
    #: why the call's arguments cannot be used (the tool is then not run)
    problem: str | None = None


def shim_system_prompt(schemas: Sequence[Mapping[str, Any]], *, calls: bool = False) -> str:
    """The tools (from their OpenAI function schemas) and the reply protocol, for the model:
    the agent's (one call per turn), or with ``calls`` a function-calling eval's (one reply of
    calls, never run).

    Each tool is shown as the exact JSON that calls it, with placeholders: a small model copies
    a template far more reliably than it reads a JSON Schema (shown one, it copies the schema).
    """
    lines = ["You can use these tools:"]
    for schema in schemas:
        function = _function(schema)
        name = str(function.get("name", ""))
        lines.append(f"- {name}: {function.get('description', '')}".rstrip())
        template = {"tool": name, "arguments": _placeholders(function.get("parameters"))}
        lines.append(f"  call: {json.dumps(template, ensure_ascii=False)}")
        for argument, spec in _properties(function.get("parameters")).items():
            if isinstance(spec, Mapping) and spec.get("description"):
                lines.append(f"  {argument}: {spec['description']}")
    return "\n".join(lines) + "\n\n" + (_CALLS_PROTOCOL if calls else _PROTOCOL)


def _function(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """The function part of an OpenAI tool schema (or the schema itself, already that)."""
    function = schema.get("function")
    return function if isinstance(function, Mapping) else schema


def _properties(parameters: Any) -> Mapping[str, Any]:
    if not isinstance(parameters, Mapping):
        return {}
    properties = parameters.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _placeholders(parameters: Any) -> dict[str, str]:
    """``{"path": "<string>", ...}``: each argument with its type where a value goes."""
    shown = {}
    for argument, spec in _properties(parameters).items():
        kind = spec.get("type", "value") if isinstance(spec, Mapping) else "value"
        shown[str(argument)] = f"<{kind}>"
    return shown


def with_shim_prompt(
    messages: Sequence[Mapping[str, Any]],
    schemas: Sequence[Mapping[str, Any]],
    *,
    calls: bool = False,
) -> list[dict[str, Any]]:
    """``messages`` with the shim's instructions (``calls``: see :func:`shim_system_prompt`)
    added to the first system message (or a new one in front), so the eval's own system prompt
    keeps its place and wording."""
    prompt = shim_system_prompt(schemas, calls=calls)
    result = [dict(message) for message in messages]
    for message in result:
        if message.get("role") == "system" and isinstance(message.get("content"), str):
            message["content"] = f"{message['content']}\n\n{prompt}"
            return result
    return [{"role": "system", "content": prompt}, *result]


def shim_response_format(
    tool_names: Sequence[str], schemas: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """A ``json_object`` response format whose schema admits exactly the protocol's shapes.

    With the tools' ``schemas``, each tool gets its own branch whose ``arguments`` follow that
    tool's parameters, so the grammar also forces the right argument names; without them any
    object passes as arguments. Plain JSON Schema only (type, properties, required, enum,
    anyOf): that is what llama.cpp's grammar compiler handles.
    """
    answer = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
    }
    if not tool_names:  # an empty enum matches nothing; answering is the only move left
        return {"type": "json_object", "schema": answer}
    parameters: dict[str, dict[str, Any]] = {}
    for schema in schemas:
        function = _function(schema)
        if isinstance(function.get("parameters"), Mapping):
            parameters[str(function.get("name"))] = dict(function["parameters"])
    branches = [_call_branch([name], parameters[name]) for name in tool_names if name in parameters]
    generic = [name for name in tool_names if name not in parameters]
    if generic:
        branches.append(_call_branch(generic, {"type": "object"}))
    return {"type": "json_object", "schema": {"anyOf": [*branches, answer]}}


def _call_branch(names: Sequence[str], arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "tool": {"type": "string", "enum": list(names)},
            "arguments": arguments,
        },
        "required": ["tool", "arguments"],
    }


def shim_tool_result(name: str, result: str) -> dict[str, Any]:
    """How a tool's result goes back to a shimmed model: a user message (it knows no tool role)."""
    return {"role": "user", "content": f"Tool {name} returned:\n{result}"}


def parse_shim_reply(text: str, tool_names: Sequence[str]) -> ShimTurn:
    """Read one reply: a protocol tool call, a protocol answer, or (anything else) the answer.

    A tool name outside ``tool_names`` still counts as a call, so the model is told the tool
    does not exist instead of having its attempt taken for a final answer.
    """
    stripped = text.strip()
    found = _json_object(stripped)
    if found is None:
        return ShimTurn(answer=stripped)
    tool = found.get("tool")
    if isinstance(tool, str) and tool:
        return _tool_turn(tool, found.get("arguments", {}))
    if "answer" in found:
        answer = found["answer"]
        return ShimTurn(answer=answer if isinstance(answer, str) else json.dumps(answer))
    return ShimTurn(answer=stripped)


def _tool_turn(tool: str, arguments: Any) -> ShimTurn:
    if isinstance(arguments, str):
        # Some models send the arguments as a JSON string, as native tool calls do.
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
    if isinstance(arguments, dict):
        return ShimTurn(tool=tool, arguments=arguments)
    shown = json.dumps(arguments, ensure_ascii=False)[:200]
    return ShimTurn(tool=tool, problem=f"the arguments are not a JSON object: {shown}")


def _json_object(text: str) -> dict[str, Any] | None:
    """The JSON object the reply consists of, or begins with (after prose or inside a fence)."""
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        value = json.loads(text)
    except ValueError:
        start = text.find("{")
        if start < 0:
            return None
        try:
            value, _ = json.JSONDecoder().raw_decode(text, start)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def is_protocol_reply(text: str) -> bool:
    """Whether ``text`` is protocol JSON (a tool call or an answer), not free text."""
    found = _json_object(text.strip())
    return found is not None and ("tool" in found or "answer" in found)


def interpreter_messages(reply: str, schemas: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages asking a second model to turn a free-text ``reply`` into protocol JSON.

    For models that answer in prose ("I'll write the file hello.txt with ..."): the
    interpreter only translates, it does not do the task.
    """
    system = (
        "You translate another assistant's reply into a tool protocol. Do not solve anything "
        "yourself: only restate what the reply asks for or answers.\n\n"
        + shim_system_prompt(schemas)
    )
    user = f"The assistant's reply:\n<reply>\n{reply}\n</reply>\nThe JSON object:"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


# --- function-calling replies (a plain file's tools:, never run) -----------------------------


#: Most calls one shimmed function-calling reply may hold (a bound for the grammar, so a small
#: model cannot list calls until its tokens run out).
MAX_SHIM_CALLS = 8


def calls_response_format(
    tool_names: Sequence[str], schemas: Sequence[Mapping[str, Any]], *, answer_allowed: bool = True
) -> dict[str, Any]:
    """The response format of ``with_shim_prompt(..., calls=True)``: ``{"calls": [...]}`` (each
    entry one of :func:`shim_response_format`'s call branches) or, when ``answer_allowed``
    (``tool_choice`` is not ``required`` nor one forced tool), ``{"answer": ...}``."""
    one = shim_response_format(tool_names, schemas)["schema"]
    branches = one.get("anyOf", [])[:-1]  # the call branches; the last one is the answer
    answer = one.get("anyOf", [one])[-1]
    if not branches:
        return {"type": "json_object", "schema": answer}
    calls = {
        "type": "object",
        "properties": {
            "calls": {
                "type": "array",
                "items": {"anyOf": branches},
                "minItems": 1,
                "maxItems": MAX_SHIM_CALLS,
            }
        },
        "required": ["calls"],
    }
    if not answer_allowed:
        return {"type": "json_object", "schema": calls}
    return {"type": "json_object", "schema": {"anyOf": [calls, answer]}}


def parse_calls_reply(text: str) -> tuple[tuple[dict[str, str], ...], str]:
    """A shimmed function-calling reply as native tool calls ``{id, name, arguments}`` (the
    arguments as JSON text, as a native reply sends them) and its answer text ("" when it
    called). A lone ``{"tool": ...}`` call counts; anything else is the answer."""
    found = _json_object(text.strip())
    entries: list[Any] = []
    if found is not None and isinstance(found.get("calls"), list):
        entries = found["calls"]
    elif found is not None and isinstance(found.get("tool"), str):
        entries = [found]
    elif found is None:
        entries = _whole_entries(text)  # a reply cut off (max_tokens) inside its calls
    calls: list[dict[str, str]] = []
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("tool"), str) and entry["tool"]:
            arguments = entry.get("arguments", {})
            shown = arguments if isinstance(arguments, str) else json.dumps(arguments)
            calls.append({"id": f"shim_{len(calls)}", "name": entry["tool"], "arguments": shown})
    if calls:
        return tuple(calls), ""
    return (), parse_shim_reply(text, ()).answer or ""


def calls_reply_text(calls: Sequence[Mapping[str, Any]], answer: str) -> str:
    """A reply :func:`parse_calls_reply` read, said again as the protocol's JSON: its
    ``{"calls": [...]}`` (each call's arguments as the object they encode) or its
    ``{"answer": ...}``. A shimmed conversation's history shows the model its own replies so."""
    if not calls:
        return json.dumps({"answer": answer}, ensure_ascii=False)
    entries = [
        {"tool": str(call.get("name", "")), "arguments": _arguments(call.get("arguments"))}
        for call in calls
    ]
    return json.dumps({"calls": entries}, ensure_ascii=False)


def _arguments(arguments: Any) -> Any:
    """A call's arguments as a JSON value (a native call sends them as JSON text)."""
    if not isinstance(arguments, str):
        return arguments if arguments is not None else {}
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


_CALLS_START = re.compile(r'^\s*\{\s*"calls"\s*:\s*\[')


def _whole_entries(text: str) -> list[Any]:
    """The entries a ``{"calls": [...`` reply finished before it was cut off."""
    start = _CALLS_START.match(text)
    if start is None:
        return []
    entries: list[Any] = []
    at, decoder = start.end(), json.JSONDecoder()
    while True:
        at = len(text) - len(text[at:].lstrip(" \t\n\r,"))
        try:
            entry, at = decoder.raw_decode(text, at)
        except ValueError:
            return entries
        entries.append(entry)
