"""A conversation item's transcript in HTML, and the turn at which it failed.

report.html's per-case table, ``llmbench view``'s item page and pytest-html's extras show a
conversation (a record's ``conversation``) through :func:`conversation_html`: every message in
order with its role, each reply of the model with its tool calls, measures and verdicts, and
the first failing turn highlighted. The case x model matrices say where a conversation failed with
:func:`failing_turn_note`. Which turn fails is decided once, by
:func:`pytest_llmbench.scoring.conversation.failed_turn`, over the record's verdicts.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .function_calls import FUNCTION_CALLS_STYLE, function_calls_html
from .state_html import STATE_STYLE

if TYPE_CHECKING:
    from ..scoring import Verdict

Record = Mapping[str, Any]

_TRANSCRIPT_STYLE = """
ol.conversation{list-style:none;padding:0;margin:6px 0}
ol.conversation>li{border-left:4px solid #d0d7de;margin:4px 0;padding:2px 8px}
ol.conversation>li.assistant{border-left-color:#0969da;background:#f6f8fa}
ol.conversation>li.failing{border-left-color:#cf222e;background:#fff0ee}
ol.conversation .who{font-weight:600}ol.conversation .measures{color:#666;font-size:.9em}
ol.conversation ul.verdicts{margin:2px 0;padding-left:18px}
ol.conversation .pass{color:#1a7f37}ol.conversation .fail{color:#cf222e}
"""
#: The transcript's look with its replies' tool calls and an agent's state: the same in
#: report.html and the viewer.
CONVERSATION_STYLE = _TRANSCRIPT_STYLE + FUNCTION_CALLS_STYLE + STATE_STYLE


def entries(record: Record) -> list[Mapping[str, Any]]:
    """The record's ``conversation`` messages (empty for any other item)."""
    value = record.get("conversation")
    return (
        [entry for entry in value if isinstance(entry, Mapping)] if isinstance(value, list) else []
    )


def opening(messages: Iterable[Any]) -> list[Any]:
    """The messages that open a conversation item's ``messages`` (its system prompt): the rest
    of them, the history of its last call, is in its ``conversation``."""
    shown = []
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") != "system":
            break
        shown.append(message)
    return shown


def failing_turn(record: Record) -> tuple[int, int] | None:
    """``(turn, turns)`` of a failed conversation: its first failing turn and its number of
    turns; None for a conversation that did not fail, and for any other item."""
    talk = entries(record)
    if record.get("outcome") != "failed" or not talk:
        return None
    from ..scoring import failed_turn

    verdicts = [_verdict(entry) for entry in record.get("assertions") or []]
    threshold = record.get("threshold")
    found = failed_turn(verdicts, float(threshold) if threshold is not None else 1.0)
    if found is None:
        return None
    return found[0], max(int(entry.get("turn") or 0) for entry in talk)


def _verdict(entry: Mapping[str, Any]) -> Verdict:
    # A record's verdict as the scorer made it, for the scorer's rule of the failing turn.
    from ..scoring import Verdict

    return Verdict(
        type=str(entry.get("type")),
        passed=bool(entry.get("passed")),
        score=float(entry.get("score") or 0.0),
        weight=float(entry.get("weight") or 0.0),
        reason=str(entry.get("reason") or ""),
        unchecked=bool(entry.get("unchecked")),
        turn=entry.get("turn"),
    )


def failing_turn_note(record: Record) -> str:
    """``failed at turn 2/3`` for a failed conversation, else an empty text."""
    found = failing_turn(record)
    return "" if found is None else f"failed at turn {found[0]}/{found[1]}"


def conversation_html(record: Record) -> str:
    """The transcript of a conversation item (empty for any other item), every text escaped."""
    talk = entries(record)
    if not talk:
        return ""
    found = failing_turn(record)
    failing = found[0] if found else None
    items = "".join(_message(entry, failing) for entry in talk)
    note = f'<p class="failed">{_text(failing_turn_note(record))}</p>' if found else ""
    return f'{_ended(record)}{note}<ol class="conversation">{items}</ol>'


def _ended(record: Record) -> str:
    """How a simulated user's conversation ended (its record's ``conversation_stopped``)."""
    stopped = record.get("conversation_stopped")
    if not stopped:
        return ""
    why = _ENDINGS.get(str(stopped), "")
    return f'<p class="ended">Simulated user; ended: {_text(stopped)}{_text(why)}</p>'


#: What each ``conversation_stopped`` value means, as the transcript says it.
_ENDINGS = {
    "goal": " (the simulated user said its stop marker)",
    "max_turns": " (max_turns reached)",
    "failed": " (a stop_on_fail assertion failed)",
}


def _message(entry: Mapping[str, Any], failing: int | None) -> str:
    role = str(entry.get("role") or "?")
    generated = bool(entry.get("generated"))
    turn = entry.get("turn")
    css = [_css_word(role)]
    if generated and turn == failing:
        css.append("failing")
    who = f"{role} (given)" if role == "assistant" and not generated else role
    body = f"<pre>{_text(entry.get('content') or '')}</pre>"
    if generated:  # a reply's tool calls, under its text
        body += function_calls_html(entry.get("tool_calls"))
    extra = _measures(entry) + _verdicts(entry.get("assertions") or []) if generated else ""
    return (
        f'<li class="{" ".join(css)}" data-turn="{_text(turn)}">'
        f'<span class="who">[{_text(turn)}] {_text(who)}</span>{body}{extra}</li>'
    )


def _css_word(role: str) -> str:
    return role if role in ("user", "assistant", "system") else "other"


def _measures(entry: Mapping[str, Any]) -> str:
    figures = [
        _seconds("latency", entry.get("latency_s")),
        _seconds("TTFT", entry.get("ttft_s")),
        _tokens(entry.get("input_tokens"), entry.get("output_tokens")),
        "cached" if entry.get("cached") else "",
    ]
    shown = ", ".join(figure for figure in figures if figure)
    return f'<div class="measures">{_text(shown)}</div>' if shown else ""


def _seconds(name: str, value: Any) -> str:
    return f"{name} {float(value):.3f} s" if isinstance(value, (int, float)) else ""


def _tokens(sent: Any, received: Any) -> str:
    if sent is None and received is None:
        return ""
    return (
        f"{'-' if sent is None else sent} in / {'-' if received is None else received} out tokens"
    )


def _verdicts(verdicts: Sequence[Any]) -> str:
    rows = "".join(_verdict_item(v) for v in verdicts if isinstance(v, Mapping))
    return f'<ul class="verdicts">{rows}</ul>' if rows else ""


def _verdict_item(verdict: Mapping[str, Any]) -> str:
    if verdict.get("unchecked"):
        mark, css = "UNCHECKED", "unchecked"
    else:
        mark, css = ("PASS", "pass") if verdict.get("passed") else ("FAIL", "fail")
    return (
        f'<li class="{css}"><b>{mark}</b> {_text(verdict.get("type"))} '
        f"(weight {_text(verdict.get('weight'))}): {_text(verdict.get('reason') or '')}</li>"
    )


def _text(value: Any) -> str:
    return html.escape(str(value))
