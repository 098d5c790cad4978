"""The steps of an answer's trajectory, for the judges of ``scope: trajectory`` assertions
(:mod:`pytest_llmbench.judging.trajectory_judge` renders them).

Three sources, one shape: an agent's run (its transcript in order, each tool call with the
arguments it ran with and the result it was shown, from the run's own ``tool_calls``: a shimmed
run's transcript holds them as JSON in text), a conversation up to the reply judged (the history
it answered, the user's turns among it, then the reply), and a function-calling reply (the
case's messages, then the reply and the calls it asked for, never run).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..agent import AgentRun, ToolCall
    from ..judging import TrajectoryStep
    from ..models import Completion


def trajectory_steps(
    history: Sequence[Mapping[str, Any]], completion: Completion, run: AgentRun | None = None
) -> list[TrajectoryStep]:
    """The steps of the answer ``completion`` to ``history``: an agent's ``run``'s when given."""
    if run is not None:
        return agent_steps(run)
    return reply_steps(history, completion)


def agent_steps(run: AgentRun) -> list[TrajectoryStep]:
    """An agent run's steps: its transcript walked in order (the system prompt left out), each
    assistant message one model call, its tool calls taken from ``run.tool_calls`` in the order
    they ran; then the final answer, or why there is none."""
    from ..judging import TrajectoryStep

    pending = deque(run.tool_calls)
    transcript = run.transcript
    steps: list[TrajectoryStep] = []
    step, skip = 0, False
    for index, message in enumerate(transcript):
        role = message.get("role")
        if skip or role in ("system", "tool"):  # a tool's message: its ToolCall says it
            skip = False
            continue
        if role == "user":
            steps.append(TrajectoryStep("user", _text(message)))
            continue
        step += 1
        following = transcript[index + 1] if index + 1 < len(transcript) else None
        if run.shimmed:
            made, skip = _shim_call(following, pending)
            steps += _shim_step(message, step, made)
        else:
            steps += _native_step(message, step, pending)
    return _with_answer(steps, run)


def _native_step(
    message: Mapping[str, Any], step: int, pending: deque[ToolCall]
) -> list[TrajectoryStep]:
    """A native assistant message: its text, then each call it made with its result."""
    from ..judging import TrajectoryStep

    text = _text(message)
    steps = [TrajectoryStep("agent", text, step)] if text.strip() else []
    for wired in message.get("tool_calls") or ():
        steps += _call_steps(pending.popleft() if pending else None, wired, step)
    return steps


def _shim_step(
    message: Mapping[str, Any], step: int, made: ToolCall | None
) -> list[TrajectoryStep]:
    """A shimmed assistant message: its prose or protocol answer (not the protocol JSON of a
    call: the call's own line says it), then the call it made with its result."""
    from ..judging import TrajectoryStep

    text = _shim_text(_text(message))
    steps = [TrajectoryStep("agent", text, step)] if text.strip() else []
    return steps + (_call_steps(made, {}, step) if made is not None else [])


def _shim_call(
    following: Mapping[str, Any] | None, pending: deque[ToolCall]
) -> tuple[ToolCall | None, bool]:
    """The call a shimmed step made (taken from ``pending``), known by the message after it
    being that call's result as the shim gives it back; and whether that message is it."""
    if following is None or following.get("role") != "user" or not pending:
        return None, False
    said = _text(following)
    if said.startswith("Tool ") and said.endswith(f" returned:\n{pending[0].result}"):
        return pending.popleft(), True
    return None, False


def _shim_text(text: str) -> str:
    """What a shimmed reply said: a protocol answer's text, nothing for a protocol call (its
    call's line says it), prose as it is."""
    try:
        found = json.loads(text)
    except ValueError:
        return text
    if not isinstance(found, dict):
        return text
    if isinstance(found.get("answer"), str):
        return str(found["answer"])
    return "" if "tool" in found else text


def _call_steps(call: ToolCall | None, wired: Mapping[str, Any], step: int) -> list[TrajectoryStep]:
    """A call and its result (the call as it ran); a call that never ran: the call as asked."""
    from ..judging import TrajectoryStep
    from ..scoring import call_line

    if call is None:
        return [TrajectoryStep("agent", call_line(wired), step)]
    shown = call_line({"name": call.name, "arguments": call.arguments})
    return [
        TrajectoryStep("agent", shown, step),
        TrajectoryStep("tool", call.result, step, tool=call.name, error=call.error),
    ]


def _with_answer(steps: list[TrajectoryStep], run: AgentRun) -> list[TrajectoryStep]:
    """``steps`` ending on the final answer: the run's answer in place of the last message
    that says it, or a line saying why the run has none."""
    from ..judging import TrajectoryStep

    answer = run.answer.strip()
    if not answer:
        return [*steps, TrajectoryStep("answer", f"(none: the run stopped: {run.stopped})")]
    if steps and steps[-1].actor == "agent" and steps[-1].text.strip() == answer:
        steps = steps[:-1]
    return [*steps, TrajectoryStep("answer", answer)]


def reply_steps(
    history: Sequence[Mapping[str, Any]], completion: Completion
) -> list[TrajectoryStep]:
    """A reply's steps after the history it answered (a conversation's turns, earlier replies
    with their calls and the results they were given): the reply's text is the final answer
    when it made no call; its calls, not run, end it otherwise."""
    from ..judging import TrajectoryStep
    from ..scoring import call_line, call_name

    steps: list[TrajectoryStep] = []
    names: dict[str, str] = {}  # a call's id -> its tool, for its result
    step = 0
    for message in history:
        role = message.get("role")
        if role == "user":
            steps.append(TrajectoryStep("user", _text(message)))
        elif role == "assistant":
            step += 1
            calls = message.get("tool_calls") or ()
            names.update((str(call.get("id")), call_name(call)) for call in calls)
            text = _text(message)
            steps += [TrajectoryStep("agent", text, step)] if text.strip() else []
            steps += [TrajectoryStep("agent", call_line(call), step) for call in calls]
        elif role == "tool":
            tool = names.get(str(message.get("tool_call_id")), str(message.get("name") or "?"))
            result = _text(message)
            error = result.startswith("error: ")
            steps.append(TrajectoryStep("tool", result, step, tool=tool, error=error))
    step += 1
    if not completion.tool_calls:
        return [*steps, TrajectoryStep("answer", completion.text)]
    if completion.text.strip():
        steps.append(TrajectoryStep("agent", completion.text, step))
    return steps + [
        TrajectoryStep("agent", call_line(call), step) for call in completion.tool_calls
    ]


def _text(message: Mapping[str, Any]) -> str:
    from ..spec import message_text

    return message_text(message)
