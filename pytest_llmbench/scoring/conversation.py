"""Scoring a scripted conversation: verdicts tied to their turn, and the first turn that fails.

Each assertion of a conversation checks the reply to one turn. Its verdict carries that turn and
weighs its own weight times the turn's ``weight``, so that the case's score
(:func:`~.assertions.score_verdicts`) is the weighted mean over every turn's assertions. A turn
fails as a case does: some checked verdict of it failed and its own weighted score is below the
case's threshold; the item fails when any turn fails.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from .assertions import score_verdicts
from .base import Verdict, one_line


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
    ``assistant (given)``."""
    lines = ["  transcript:"]
    for entry in entries:
        if entry["turn"] > last:
            break
        given = entry["role"] == "assistant" and not entry["generated"]
        role = "assistant (given)" if given else entry["role"]
        lines.append(f"    [{entry['turn']}] {role}: {one_line(entry['content'], width)}")
    return lines
