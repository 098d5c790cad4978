"""What the judges of a ``scope: trajectory`` assertion read: the trajectory, rendered as text
with a bounded size, and the built-in trajectory rubrics.

The engine turns an answer into :class:`TrajectoryStep`\\ s (an agent's run, a conversation up
to the reply judged, a function-calling reply after the messages it answers:
:mod:`pytest_llmbench.engine.trajectories`); :func:`render_trajectory` writes them one entry a
line, in order::

    [user] Cancel order W1001, I no longer need it.
    [step 1, agent] Let me look the order up.
    [step 1, agent] [called get_order({"order_id": "W1001"})]
    [step 1, tool get_order] {"status": "pending"}
    [step 2, agent] [called cancel_pending_order({"order_id": "W1001"})]
    [step 2, tool cancel_pending_order, ERROR] error: TypeError: missing 'reason'
    [final answer] Your order W1001 is cancelled.

A step is one call of the model; a tool's result is cut at :data:`TRAJECTORY_RESULT_CHARS`,
any other text at :data:`TRAJECTORY_TEXT_CHARS` (a call's arguments as
:func:`~pytest_llmbench.scoring.call_line` bounds them), and the whole at
:data:`TRAJECTORY_CHARS`: past it the first and the last entries are kept and one line in
between says how many were cut (the start says what was asked, the end how it ended).

The built-in rubrics (:data:`BUILTIN_RUBRICS`) are an ``llm-rubric``'s value written exactly
as their name; any other value is the user's own rubric. ``recovered`` on a trajectory where no
tool call failed passes without asking the judges: there was nothing to recover from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: The most characters of one tool result a trajectory shows.
TRAJECTORY_RESULT_CHARS = 600
#: The most characters of any other text of one entry (a user turn, a model's text, the answer).
TRAJECTORY_TEXT_CHARS = 2000
#: The most characters of a whole rendered trajectory.
TRAJECTORY_CHARS = 16000
#: Who acted in a step: the user, the model under test (its text or a call), a tool's result,
#: the final answer.
ACTORS: tuple[str, ...] = ("user", "agent", "tool", "answer")
#: How a judge is told to read a trajectory (the prompts say it once, beside the tag).
TRAJECTORY_LEGEND = (
    "The <trajectory> lists every step in order, one entry a line: [user] a user's message; "
    "[step N, agent] the assistant's text or a tool call it made at its N-th model call, with "
    "the call's arguments; [step N, tool NAME] what the tool returned, ERROR marking a call that "
    "failed; [final answer] the assistant's final answer. Long results are cut, and a line says "
    "how many entries were cut from a long trajectory."
)

#: The built-in rubrics of ``scope: trajectory``, by the value that names them.
BUILTIN_RUBRICS: dict[str, str] = {
    "goal-completed": (
        "The user's goal was reached: by the end of the trajectory, what the user asked for "
        "(in the first message and in any later turn) was actually done, through tool calls "
        "that succeeded with the right arguments or in the final answer, not merely claimed "
        "or promised. Score 0 when the goal was not reached, when the assistant stopped "
        "before reaching it, or when it claims a success that the tool results contradict."
    ),
    "efficient": (
        "The assistant reached its result without needless steps: no call repeated with the "
        "same arguments, no call the task did not need or whose result it ignored, no loops. "
        "Score 1 when every call served the task, less for each needless or repeated call, 0 "
        "when most calls were needless."
    ),
    "recovered": (
        "After a tool call failed (a result marked ERROR), the assistant recovered: it read the "
        "error and corrected the call (other arguments, another tool) or told the user plainly "
        "what could not be done, instead of repeating the same failing call, ignoring the error "
        "or claiming a success. Score 1 when every error was handled so, 0 when an error was "
        "ignored or hidden."
    ),
}
#: Why ``recovered`` passes on a trajectory without a failed tool call.
NOTHING_TO_RECOVER = "recovered: no tool call failed, so there was nothing to recover from"
_CUT_ROOM = 100  # room kept for the line that says how many entries were cut


@dataclass(frozen=True)
class TrajectoryStep:
    """One entry of a trajectory."""

    actor: str  #: one of :data:`ACTORS`
    text: str  #: what was said, called (a :func:`~pytest_llmbench.scoring.call_line`) or returned
    step: int = 0  #: the 1-based model call it belongs to (0: a user's message, the answer)
    tool: str = ""  #: a tool result's tool
    error: bool = False  #: a tool result of a call that failed


@dataclass(frozen=True)
class Trajectory:
    """A trajectory as its judges read it, and the counts its rules need."""

    text: str = ""  #: the rendering (:func:`render_trajectory`); "" when none was built
    steps: int = 0  #: model calls
    tool_calls: int = 0  #: tool results shown (calls that ran)
    tool_errors: int = 0  #: of those, the failed ones
    cut: int = 0  #: entries cut from the middle to keep the size bound


def render_trajectory(steps: Sequence[TrajectoryStep]) -> Trajectory:
    """``steps`` as the judges read them, within :data:`TRAJECTORY_CHARS`."""
    lines = [_line(step) for step in steps]
    text, cut = _bounded_lines(lines, TRAJECTORY_CHARS)
    results = [step for step in steps if step.actor == "tool"]
    return Trajectory(
        text=text,
        steps=max((step.step for step in steps), default=0),
        tool_calls=len(results),
        tool_errors=sum(step.error for step in results),
        cut=cut,
    )


def _line(step: TrajectoryStep) -> str:
    if step.actor == "user":
        label = "[user]"
    elif step.actor == "answer":
        label = "[final answer]"
    elif step.actor == "tool":
        label = f"[step {step.step}, tool {step.tool}{', ERROR' if step.error else ''}]"
    else:
        label = f"[step {step.step}, agent]"
    limit = TRAJECTORY_RESULT_CHARS if step.actor == "tool" else TRAJECTORY_TEXT_CHARS
    return f"{label} {_cut(step.text.strip(), limit)}"


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} more characters]"


def _bounded_lines(lines: Sequence[str], limit: int) -> tuple[str, int]:
    """``lines`` joined, or the first and last of them within ``limit`` with a line saying how
    many were cut between; and how many were."""
    whole = "\n".join(lines)
    if len(whole) <= limit:
        return whole, 0
    room = limit - _CUT_ROOM
    head = _fitting(lines, room // 2)
    tail = _fitting(lines[len(head) :][::-1], room - _size(head))[::-1]
    cut = len(lines) - len(head) - len(tail)
    note = f"[... {cut} entries cut: the trajectory is longer than {limit} characters ...]"
    return "\n".join([*head, note, *tail]), cut


def _fitting(lines: Sequence[str], room: int) -> list[str]:
    """The leading ``lines`` whose joined size stays within ``room``."""
    kept: list[str] = []
    used = 0
    for line in lines:
        used += len(line) + 1
        if used > room:
            break
        kept.append(line)
    return kept


def _size(lines: Sequence[str]) -> int:
    return sum(len(line) + 1 for line in lines)


def trajectory_rubric(value: object) -> str | None:
    """The rubric an ``llm-rubric``'s ``value`` stands for under ``scope: trajectory``: a
    built-in's text, or the value itself (None: no text value)."""
    if not isinstance(value, str):
        return None
    return BUILTIN_RUBRICS.get(value, value)


def nothing_to_recover(kind: str, value: object, tool_errors: int) -> bool:
    """Whether an assertion of type ``kind`` with ``value`` on a trajectory with
    ``tool_errors`` failed calls is the built-in ``recovered`` with nothing to recover from:
    it passes without asking the judges (:data:`NOTHING_TO_RECOVER`)."""
    return kind == "llm-rubric" and value == "recovered" and not tool_errors
