"""Scoring a scripted conversation: verdicts tied to their turn, and the first turn that fails;
and how a reply's tool calls read as text.

Each assertion of a conversation checks the reply to one turn. Its verdict carries that turn and
weighs its own weight times the turn's ``weight``, so that the case's score
(:func:`~.assertions.score_verdicts`) is the weighted mean over every turn's assertions. A turn
fails as a case does: some checked verdict of it failed and its own weighted score is below the
case's threshold; the item fails when any turn fails.

A reply made of tool calls has no text: wherever a reply is shown as text (to a judge, to a
simulated user, in a failure's transcript) each call is a line :func:`call_line` and each tool
result a line :func:`result_line`, both bounded in size (:func:`reply_text`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from .assertions import score_verdicts
from .base import Verdict, one_line

#: The most characters of one call's arguments shown as text (more are cut, with a note).
SHOWN_ARGUMENTS_CHARS = 500
#: The most characters of one tool result shown as text: an agent's file read may be long.
SHOWN_RESULT_CHARS = 1000


def call_line(call: Mapping[str, Any]) -> str:
    """A tool call as a line of text: ``[called get_weather({"city": "Paris"})]``.

    ``call`` is a completion's (``name``, ``arguments``) or in OpenAI's wire shape (``function``
    holding them); the arguments are shown as compact JSON, or as sent when they are not JSON.
    """
    arguments = _bounded(_arguments_text(_flat(call).get("arguments")), SHOWN_ARGUMENTS_CHARS)
    return f"[called {call_name(call)}({arguments})]"


def call_name(call: Mapping[str, Any]) -> str:
    """The tool a call names, in either shape :func:`call_line` reads."""
    return str(_flat(call).get("name") or "?")


def _flat(call: Mapping[str, Any]) -> Mapping[str, Any]:
    function = call.get("function")
    return function if isinstance(function, Mapping) else call


def result_line(name: str, result: str) -> str:
    """A tool's result as a line of text: ``[get_weather returned: 18 C]`` (an unrun call's
    says it was not run; a failed one's starts with ``error:``)."""
    return f"[{name} returned: {_bounded(result, SHOWN_RESULT_CHARS)}]"


def reply_text(text: str, calls: Sequence[Mapping[str, Any]]) -> str:
    """A reply as text: its text, then a :func:`call_line` per tool call; a reply of calls
    alone is its calls, never an empty answer. Without calls, the text as it is."""
    if not calls:
        return text
    lines = [call_line(call) for call in calls]
    return "\n".join([text, *lines] if text.strip() else lines)


def _arguments_text(arguments: Any) -> str:
    if arguments is None:
        return ""
    if not isinstance(arguments, str):
        return json.dumps(arguments, ensure_ascii=False)
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False)
    except ValueError:
        return arguments  # broken JSON (or none: "") is shown as the model wrote it


def _bounded(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} more characters]"


def on_turn(verdict: Verdict, turn: int, weight: float) -> Verdict:
    """``verdict`` of an assertion on the reply to ``turn`` (1-based), whose weight is
    ``weight``: its own weight multiplied by the turn's."""
    return dataclasses.replace(verdict, turn=turn, weight=verdict.weight * weight)


def failed_turn(verdicts: Sequence[Verdict], threshold: float) -> tuple[int, Verdict] | None:
    """The first failing turn and its first failed verdict, or None when every turn passes."""
    turns: dict[int, list[Verdict]] = {}
    for verdict in verdicts:
        if verdict.turn is not None and not verdict.unchecked:
            turns.setdefault(verdict.turn, []).append(verdict)
    for turn in sorted(turns):
        failed = [verdict for verdict in turns[turn] if not verdict.passed]
        score = score_verdicts(turns[turn])
        if failed and (score is None or score < threshold):
            return turn, failed[0]
    return None


def failure_headline(turn: int, verdict: Verdict, turns: int) -> str:
    """``turn 2 of 3: regex: no match for ...``: the failing turn and why it failed."""
    reason = verdict.reason
    if not reason.startswith(verdict.type):
        reason = f"{verdict.type}: {reason}"
    return f"turn {turn} of {turns}: {reason}"


def transcript_lines(entries: Sequence[Mapping[str, Any]], last: int, width: int) -> list[str]:
    """A conversation's messages (the record's ``conversation``) up to turn ``last``, one line
    each, shortened to ``width`` characters: ``[2] user: ...``; a verbatim reply is
    ``assistant (given)``, a reply's tool calls follow its text (:func:`reply_text`)."""
    lines = ["  transcript:"]
    for entry in entries:
        if entry["turn"] > last:
            break
        given = entry["role"] == "assistant" and not entry["generated"]
        role = "assistant (given)" if given else entry["role"]
        said = reply_text(entry["content"] or "", entry.get("tool_calls") or ())
        lines.append(f"    [{entry['turn']}] {role}: {one_line(said, width)}")
    return lines
