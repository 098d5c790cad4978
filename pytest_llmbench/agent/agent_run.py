"""What an agent loop leaves: its run (the answer, each tool call with what it returned, the
transcript, the costs summed over the steps, the timeline) and, in a conversation, each reply
and the user's turns between them (:data:`Talk`, the user's side the loop asks for the next
turn). :mod:`.loop` makes them; the engine, the scorers and the records read them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..models import Completion, Usage

__all__ = ["AgentReply", "AgentRun", "Talk", "ToolCall", "UserLine", "UserTurn"]

#: The characters of a tool's result the timeline keeps (the transcript has the rest).
_TIMELINE_RESULT_CHARS = 300


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model asked for, and what it was shown in return."""

    turn: int  # 1-based model turn that asked for it
    name: str
    arguments: dict[str, Any]  # parsed; {} when unparseable (then error=True)
    result: str  # what the model was shown (truncated to MAX_RESULT_CHARS)
    error: bool  # the tool refused or failed (the result starts with "error: ")
    seconds: float = field(default=0.0, compare=False)  # how long it took (not what it did)
    #: the arguments sent were a JSON object (False: they could not be read, ``arguments`` is
    #: ``{}``, and they match no expected arguments)
    readable: bool = True


@dataclass(frozen=True)
class UserLine:
    """A user's message in an agent's conversation, and where it came among the steps."""

    turn: int  #: the 1-based turn of the conversation it opens
    text: str
    after_step: int  #: the model steps made before it (0: it opened the conversation)


@dataclass(frozen=True)
class UserTurn:
    """What a conversation adds before the agent's next reply."""

    turn: int  #: the 1-based turn of the conversation, as its records number it
    #: the messages added: the user's message last (a scripted turn's verbatim assistant
    #: replies before it, when the file gives some)
    messages: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class AgentReply:
    """One reply of an agent in a conversation: the steps it took to answer a user's turn."""

    answer: str  #: its final text ("" when a budget ended it)
    stopped: str  #: ``answer``, ``max_steps``, ``seconds`` or ``tokens``, as :class:`AgentRun`'s
    calls: tuple[Completion, ...]  #: its model calls in order (steps, and an interpreter's)
    tool_calls: tuple[ToolCall, ...]  #: the tool calls it made, with their results
    steps: int  #: its model steps
    #: the agent's run as it stood when this reply ended (the conversation up to it, its costs
    #: so far): what a judge of this reply's trajectory reads
    so_far: AgentRun


#: An agent's conversation: given the reply just made (None before the first), the next user
#: turn, or None when the conversation ends. A reply a budget ended ends the conversation
#: whatever it returns (it is still told of it, to record it).
Talk = Callable[[AgentReply | None], Awaitable[UserTurn | None]]


@dataclass(frozen=True)
class AgentRun:
    """A whole agent loop: its answer, its tool calls, and its costs summed over the turns."""

    answer: str  # the final text answer ("" when the loop stopped otherwise)
    turns: int  # model calls made
    tool_calls: tuple[ToolCall, ...]
    transcript: tuple[dict[str, Any], ...]  # every message: system/user/assistant/tool
    stopped: str  # "answer" | "max_steps" | "seconds" | "tokens" | "error" (the item errored)
    shimmed: bool  # tools went through the JSON-in-text shim
    usage: Usage  # summed over the turns (and a shim interpreter's calls)
    retries: int
    cached: bool  # every turn came from the cache
    #: each model call in order (turns, and a shim interpreter's): its timing, tokens, cost
    model_calls: tuple[dict[str, Any], ...] = ()
    #: the steps' thinking, joined in order ("" when none thought)
    reasoning: str = ""
    #: the steps' reasoning tokens, summed (None: none reported)
    reasoning_tokens: int | None = None
    #: the steps' input tokens read from the provider's prompt cache, summed (None: none reported)
    cached_input_tokens: int | None = None
    #: the steps' input tokens written to the provider's prompt cache, summed (None: none)
    cache_write_tokens: int | None = None
    #: some step's reasoning tokens were counted from its thinking, not reported
    reasoning_tokens_estimated: bool = False
    #: the model version the provider said served the last step that named one (None: none did)
    response_model: str | None = None
    #: a conversation's user messages, in order (none outside a conversation)
    said: tuple[UserLine, ...] = ()

    def timeline(self) -> list[dict[str, Any]]:
        """Each model call, then the tool calls it asked for, with their timing and results; in
        a conversation each user message before the step that answers it. Every entry names
        its ``actor``: ``user``, ``agent`` (a model call) or ``tool``."""
        steps: list[dict[str, Any]] = []
        lines = list(self.said)
        for call in self.model_calls:
            if call.get("role") == "step":
                while lines and lines[0].after_step < call["step"]:
                    steps.append(_user_entry(lines.pop(0)))
            steps.append({"kind": "model", "actor": "agent", **call})
            if call.get("role") != "step":
                continue
            steps += [
                {
                    "kind": "tool",
                    "actor": "tool",
                    "step": tool.turn,
                    "name": tool.name,
                    "seconds": round(tool.seconds, 4),
                    "error": tool.error,
                    "result": tool.result[:_TIMELINE_RESULT_CHARS],
                }
                for tool in self.tool_calls
                if tool.turn == call["step"]
            ]
        return steps + [_user_entry(line) for line in lines]  # said before a call that failed

    def tool_counts(self) -> dict[str, int]:
        """Calls per tool name, in order of first call."""
        return dict(Counter(call.name for call in self.tool_calls))


def _user_entry(line: UserLine) -> dict[str, Any]:
    """A user's message in the timeline, cut as a tool's result is."""
    return {
        "kind": "user",
        "actor": "user",
        "turn": line.turn,
        "text": line.text[:_TIMELINE_RESULT_CHARS],
    }
