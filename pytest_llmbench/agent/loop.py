"""The agent loop: ask the model, run the tools it calls, give it the results, until it answers.

Tools go through litellm's native tool calling, or (``shim=True``, for models without it, such
as the embedded one) through the JSON-in-text protocol of :mod:`pytest_llmbench.agent.shim`.
The loop stops at the first step without a tool call, after ``max_steps`` model calls, or when
the item's time or token budget is spent; every tool call asked for is run and answered, so the
transcript never ends on a call without its result.

In a conversation (``talk``: a simulated user or scripted turns), the loop continues: each user
turn :data:`Talk` gives is added to the transcript and the agent answers it in steps as above
(``max_steps`` per reply; the time and token budgets over the whole conversation), seeing its
earlier tool calls and their results, until ``talk`` has no more to say or a reply ends on a
budget. What the loop leaves (its run, a conversation's replies) is :mod:`.agent_run`'s.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..models import Completion, ItemError, Usage, add_known
from .agent_run import AgentReply, AgentRun, Talk, ToolCall, UserLine, UserTurn
from .shim import (
    interpreter_messages,
    is_protocol_reply,
    parse_shim_reply,
    shim_response_format,
    shim_tool_result,
    with_shim_prompt,
)
from .tool_spans import span_notes, timed

__all__ = [
    "MAX_RESULT_CHARS",
    "AgentReply",
    "AgentRun",
    "AsyncToolboxLike",
    "CompleteFn",
    "Talk",
    "ToolCall",
    "ToolboxLike",
    "UserLine",
    "UserTurn",
    "run_agent",
]

#: The most characters of one tool result the model is shown (and the transcript keeps).
MAX_RESULT_CHARS = 4000
_NOTE_ROOM = 60  # room kept for the note that says how much was cut
#: The characters of a failed tool call's error its span keeps (the transcript has it whole).
_SPAN_ERROR_CHARS = 300

#: One model call: the conversation so far and extra call parameters (tools, response format).
CompleteFn = Callable[[list[dict[str, Any]], dict[str, Any]], Awaitable[Completion]]


class ToolboxLike(Protocol):
    """What the loop needs of a toolbox (``agent.tools.Toolbox`` in the plugin)."""

    def schemas(self) -> list[dict[str, Any]]:
        """The tools in OpenAI's function-tool format."""
        ...

    def call(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        """Run one tool; failures come back as ``"error: ..."`` text."""
        ...


@runtime_checkable
class AsyncToolboxLike(Protocol):
    """A toolbox with tools of its own event loop (``agent.mcp.McpToolbox``): the loop awaits
    its calls, and records each under the name it gives."""

    def schemas(self) -> list[dict[str, Any]]:
        """The tools in OpenAI's function-tool format."""
        ...

    async def acall(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run one tool; a tool's failure is ``"error: ..."`` text, a source's failure (a
        server gone) a :class:`~..models.ToolError`."""
        ...

    def recorded_name(self, name: str) -> str:
        """The name records give the tool the model calls ``name``."""
        ...


@dataclass(frozen=True)
class _Request:
    """A tool call as the model asked for it, before it runs."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    problem: str | None  # why it cannot run (unparseable arguments)


class _Totals:
    """Measurements summed over the turns."""

    def __init__(self) -> None:
        self.turns = 0
        self.usage = Usage(latency_s=0.0)
        self.retries = 0
        self.all_cached = True
        self.calls: list[dict[str, Any]] = []
        self.thoughts: list[str] = []
        self.reasoning_tokens: int | None = None
        self.cached_input_tokens: int | None = None
        self.cache_write_tokens: int | None = None
        self.reasoning_tokens_estimated = False
        self.response_model: str | None = None
        self.completions: list[Completion] = []  # every call, for a conversation's replies
        self.said: list[UserLine] = []

    def add(self, completion: Completion, *, turn: bool = True) -> None:
        """Add a call's usage; an interpreter's call costs but is not a model turn (nor is its
        thinking or its token details the model's)."""
        self.turns += 1 if turn else 0
        if turn:
            if completion.reasoning:
                self.thoughts.append(completion.reasoning)
            self.reasoning_tokens = add_known(self.reasoning_tokens, completion.reasoning_tokens)
            self.cached_input_tokens = add_known(
                self.cached_input_tokens, completion.cached_input_tokens
            )
            self.cache_write_tokens = add_known(
                self.cache_write_tokens, completion.cache_write_tokens
            )
            self.reasoning_tokens_estimated |= completion.reasoning_tokens_estimated
            self.response_model = completion.response_model or self.response_model
        self.completions.append(completion)
        self.usage += completion.usage
        self.retries += completion.retries
        self.all_cached = self.all_cached and completion.cached
        self.calls.append(
            {
                "role": "step" if turn else "interpreter",
                "step": self.turns,
                "latency_s": round(completion.latency_s, 4),
                "ttft_s": completion.ttft_s,
                "input_tokens": completion.input_tokens,
                "output_tokens": completion.output_tokens,
                "cost_usd": completion.cost_usd,
                "cached": completion.cached,
            }
        )


async def run_agent(
    complete: CompleteFn,
    toolbox: ToolboxLike | AsyncToolboxLike,
    messages: Sequence[dict[str, Any]],
    *,
    max_turns: int,
    limit_seconds: float | None,
    limit_tokens: int | None,
    shim: bool,
    tool_names: Sequence[str],
    interpret: CompleteFn | None = None,
    talk: Talk | None = None,
) -> AgentRun:
    """Run the loop; an item error from ``complete`` (or ``talk``) propagates (the item errors).

    The time limit also bounds a model call in flight (it is cancelled); the token limit is
    checked between turns, since a call's tokens are known only once it is done. In shim mode,
    ``interpret`` (a second model) turns a reply that is not protocol JSON into protocol JSON;
    its tokens and cost count in the run's totals, not in its turns. With ``talk``, the loop is
    a conversation (the module's docstring): ``messages`` is its opening without a user's
    message, ``talk(None)`` gives the first turn, ``max_turns`` bounds each reply.
    """
    if max_turns < 1:
        raise ValueError(f"max_turns must be at least 1, not {max_turns}")
    started = time.perf_counter()
    schemas = toolbox.schemas()
    transcript = with_shim_prompt(messages, schemas) if shim else [dict(m) for m in messages]
    params: dict[str, Any] = (
        {"response_format": shim_response_format(tool_names, schemas)}
        if shim
        else {"tools": schemas, "tool_choice": "auto"}
    )
    totals = _Totals()
    calls: list[ToolCall] = []
    reply = functools.partial(
        _loop, complete, toolbox, transcript, params, calls, totals, schemas,
        started=started, max_turns=max_turns, limit_seconds=limit_seconds,
        limit_tokens=limit_tokens, shim=shim, tool_names=tool_names, interpret=interpret,
    )  # fmt: skip
    try:
        if talk is None:
            answer, stopped = await reply()
        else:
            answer, stopped = await _converse(reply, talk, transcript, calls, totals, shim)
    except ItemError as exc:
        # The item errors, but what it did up to there was done (and paid for): kept.
        exc.partial = _run("", "error", calls, transcript, totals, shim)
        exc.retries += totals.retries
        raise
    return _run(answer, stopped, calls, transcript, totals, shim)


def _run(
    answer: str,
    stopped: str,
    calls: list[ToolCall],
    transcript: list[dict[str, Any]],
    totals: _Totals,
    shim: bool,
) -> AgentRun:
    return AgentRun(
        answer=answer,
        turns=totals.turns,
        tool_calls=tuple(calls),
        transcript=tuple(transcript),
        stopped=stopped,
        shimmed=shim,
        usage=totals.usage,
        retries=totals.retries,
        cached=totals.turns > 0 and totals.all_cached,
        model_calls=tuple(totals.calls),
        reasoning="\n\n".join(totals.thoughts),
        reasoning_tokens=totals.reasoning_tokens,
        cached_input_tokens=totals.cached_input_tokens,
        cache_write_tokens=totals.cache_write_tokens,
        reasoning_tokens_estimated=totals.reasoning_tokens_estimated,
        response_model=totals.response_model,
        said=tuple(totals.said),
    )


async def _converse(
    reply: Callable[[], Awaitable[tuple[str, str]]],
    talk: Talk,
    transcript: list[dict[str, Any]],
    calls: list[ToolCall],
    totals: _Totals,
    shim: bool,
) -> tuple[str, str]:
    """Replies to ``talk``'s turns, each made by ``reply`` on the transcript so far, until
    ``talk`` has no more turns or a reply ends on a budget; the last reply's answer and why
    it stopped. ``talk`` is told of each reply with the run up to it."""
    turn = await talk(None)
    if turn is None:
        raise ValueError("a conversation opens with a user's turn")
    while True:
        for message in turn.messages:
            transcript.append(dict(message))
        totals.said.append(UserLine(turn.turn, _said_text(turn), totals.turns))
        made, called, steps = len(totals.completions), len(calls), totals.turns
        answer, stopped = await reply()
        said = AgentReply(
            answer,
            stopped,
            tuple(totals.completions[made:]),
            tuple(calls[called:]),
            totals.turns - steps,
            _run(answer, stopped, calls, transcript, totals, shim),
        )
        next_turn = await talk(said)
        if next_turn is None or stopped != "answer":
            return answer, stopped
        turn = next_turn


async def _loop(
    complete: CompleteFn,
    toolbox: ToolboxLike | AsyncToolboxLike,
    transcript: list[dict[str, Any]],
    params: dict[str, Any],
    calls: list[ToolCall],
    totals: _Totals,
    schemas: list[dict[str, Any]],
    *,
    started: float,
    max_turns: int,
    limit_seconds: float | None,
    limit_tokens: int | None,
    shim: bool,
    tool_names: Sequence[str],
    interpret: CompleteFn | None,
) -> tuple[str, str]:
    """The turns, filling ``transcript``, ``calls`` and ``totals`` as they go; the answer and
    why the loop stopped. Steps are numbered on from those ``totals`` counted already (a
    conversation's earlier replies)."""
    answer, stopped = "", "max_steps"
    for _ in range(max_turns):
        completion = await _call_within(complete, transcript, params, started, limit_seconds)
        if completion is None:
            stopped = "seconds"
            break
        totals.add(completion)
        turn = totals.turns
        read = completion
        if shim and interpret is not None and not is_protocol_reply(completion.text):
            asked = interpreter_messages(completion.text, schemas)
            read = await interpret(asked, dict(params))
            totals.add(read, turn=False)
        requests = (
            _shim_turn(completion, transcript, tool_names, turn, read)
            if shim
            else _native_turn(completion, transcript, turn)
        )
        if not requests:
            answer, stopped = _answer(read, shim, tool_names), "answer"
            break
        for request in requests:
            call = await _run_tool(toolbox, request, turn)
            calls.append(call)
            transcript.append(_result_message(request, call.result, shim))
        if limit_tokens is not None and totals.usage.tokens > limit_tokens:
            stopped = "tokens"
            break
        if limit_seconds is not None and time.perf_counter() - started > limit_seconds:
            stopped = "seconds"
            break
    return answer, stopped


def _said_text(turn: UserTurn) -> str:
    """The text of a turn's user message (its text parts, when it has images)."""
    content = turn.messages[-1].get("content") if turn.messages else None
    if isinstance(content, list):
        parts = [part.get("text", "") for part in content if isinstance(part, dict)]
        return "\n".join(part for part in parts if isinstance(part, str))
    return content if isinstance(content, str) else ""


async def _call_within(
    complete: CompleteFn,
    transcript: list[dict[str, Any]],
    params: dict[str, Any],
    started: float,
    limit_seconds: float | None,
) -> Completion | None:
    """One model call, cut off where the time budget ends (None: the budget ran out)."""
    # A copy, so a caller (or a cache key) never sees the transcript change under it.
    messages, call_params = list(transcript), dict(params)
    if limit_seconds is None:
        return await complete(messages, call_params)
    left = limit_seconds - (time.perf_counter() - started)
    if left <= 0:
        return None
    try:
        return await asyncio.wait_for(complete(messages, call_params), left)
    except asyncio.TimeoutError:
        if time.perf_counter() - started < limit_seconds:
            raise  # a timeout of the call's own, not the budget's
        return None


def _native_turn(
    completion: Completion, transcript: list[dict[str, Any]], turn: int
) -> list[_Request]:
    """Record the assistant's message; return the tool calls it asked for."""
    if not completion.tool_calls:
        transcript.append({"role": "assistant", "content": completion.text})
        return []
    requests: list[_Request] = []
    wired: list[dict[str, Any]] = []
    for index, call in enumerate(completion.tool_calls, 1):
        call_id = str(call.get("id") or f"call_{turn}_{index}")
        name = str(call.get("name", ""))
        raw = call.get("arguments", "")
        raw_text = raw if isinstance(raw, str) else json.dumps(raw)
        arguments, problem = _parse_arguments(raw)
        requests.append(_Request(call_id, name, arguments, problem))
        wired.append(
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": raw_text},
            }
        )
    # OpenAI's shape: content may be null beside the calls; the calls go back as sent.
    transcript.append(
        {"role": "assistant", "content": completion.text or None, "tool_calls": wired}
    )
    return requests


def _shim_turn(
    completion: Completion,
    transcript: list[dict[str, Any]],
    tool_names: Sequence[str],
    turn: int,
    read: Completion | None = None,
) -> list[_Request]:
    """Record the assistant's raw text; return the tool call it (or, when ``read`` is the
    interpreter's reading of it, that reading) spelled out, if any."""
    transcript.append({"role": "assistant", "content": completion.text})
    parsed = parse_shim_reply((read or completion).text, tool_names)
    if parsed.tool is None:
        return []
    return [_Request(f"shim_{turn}", parsed.tool, parsed.arguments, parsed.problem)]


def _answer(completion: Completion, shim: bool, tool_names: Sequence[str]) -> str:
    if shim:
        return parse_shim_reply(completion.text, tool_names).answer or ""
    return completion.text.strip()


def _parse_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """A native call's arguments as a dict, or ({}, why not)."""
    if isinstance(raw, dict):
        return raw, None
    if isinstance(raw, str):
        if not raw.strip():
            return {}, None  # a tool without parameters is often called with ""
        try:
            value = json.loads(raw)
        except ValueError as exc:
            return {}, f"the arguments are not valid JSON ({exc}): {raw[:200]}"
        if isinstance(value, dict):
            return value, None
    return {}, f"the arguments are not a JSON object: {str(raw)[:200]}"


async def _run_tool(
    toolbox: ToolboxLike | AsyncToolboxLike, request: _Request, turn: int
) -> ToolCall:
    started = time.perf_counter()
    name = request.name
    if isinstance(toolbox, AsyncToolboxLike):
        name = toolbox.recorded_name(request.name)
    kind = "mcp" if name.startswith("mcp:") else "tool"
    with timed(kind, name, {"tool": name, "call_id": request.call_id}) as span:
        result = await _tool_result(toolbox, request)
        if span is not None:
            _describe_tool(span, request, result)
    shown = _truncate(result)
    seconds = time.perf_counter() - started
    failed = result.startswith("error: ")
    readable = request.problem is None  # a problem is arguments that could not be read
    return ToolCall(turn, name, request.arguments, shown, failed, seconds, readable)


async def _tool_result(toolbox: ToolboxLike | AsyncToolboxLike, request: _Request) -> str:
    """What the tool call ``request`` returns (``"error: ..."`` when it failed)."""
    if request.problem is not None:
        return f"error: {request.problem}"
    return await call_tool(toolbox, request.name, request.arguments)


async def call_tool(
    toolbox: ToolboxLike | AsyncToolboxLike, name: str, arguments: dict[str, Any]
) -> str:
    """What ``toolbox``'s tool ``name`` returns (``"error: ..."`` when it failed)."""
    if isinstance(toolbox, AsyncToolboxLike):
        return str(await toolbox.acall(name, arguments))
    try:
        # Tools block (files, subprocesses); a thread keeps other items' calls moving.
        return str(await asyncio.to_thread(toolbox.call, name, arguments))
    except Exception as exc:  # custom tools are user code; the model sees what went wrong
        return f"error: {name} failed: {type(exc).__name__}: {exc}"


def _describe_tool(span: dict[str, Any], request: _Request, result: str) -> None:
    """A tool call's span: whether it failed (and why, in short); its arguments and result
    only when the run's spans carry content (they may hold data)."""
    failed = result.startswith("error: ")
    span["error"] = result.removeprefix("error: ")[:_SPAN_ERROR_CHARS] if failed else None
    notes = span_notes()
    if notes is not None and notes.content:
        span["input"] = json.dumps(request.arguments, ensure_ascii=False, default=str)
        span["output"] = result


def _truncate(result: str) -> str:
    if len(result) <= MAX_RESULT_CHARS:
        return result
    keep = MAX_RESULT_CHARS - _NOTE_ROOM
    return f"{result[:keep]}\n[... {len(result) - keep} more characters cut]"


def _result_message(request: _Request, result: str, shim: bool) -> dict[str, Any]:
    if shim:
        return shim_tool_result(request.name, result)
    return {"role": "tool", "tool_call_id": request.call_id, "content": result}
