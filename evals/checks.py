"""Python checks used by the example evals (``type: python, value: checks:<function>``).

A check is called as ``function(output, context)``: ``output`` is the model's answer and
``context`` an ``AssertionContext`` (``expected``, ``prompt``, ``vars``, ``model``, ``case_id``).
It returns a bool, a score from 0 to 1 (passing at the assertion's ``threshold``, default 0.5)
or a dict with ``pass``, ``score`` and ``reason``. The module is imported with this folder first
on ``sys.path``, so it needs no package or install.
"""

from __future__ import annotations

import re
from typing import Any

#: The teams of support-tickets.eval.yaml.
TICKET_TEAMS = ("billing", "shipping", "technical", "account")
_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> list[str]:
    # "$1,299" -> "1299", "Dr. Sarah" -> "dr sarah": formatting is not what we score.
    return _WORD.findall(re.sub(r"(?<=\d)[,.](?=\d)", "", text.lower()))


def _value_found(value: str, answer_words: set[str]) -> bool:
    # Short alphabetic words ("Dr", "of") are optional; numbers and names are not.
    needed = [w for w in _words(value) if len(w) > 2 or w.isdigit()]
    return bool(needed) and all(w in answer_words for w in needed)


def golden_fields(output: str, context: Any) -> dict[str, Any]:
    """Graded: the share of the golden answer's ``Field: value`` values found in the output.

    For 360-eval's data-extraction rows, whose golden answers are lines like
    ``CEO: Dr. Sarah Johnson``. Field names and order do not matter, only the values.
    """
    golden = context.expected or ""
    values = [line.split(":", 1)[1].strip() for line in golden.splitlines() if ":" in line]
    values = [value for value in values if value]
    if not values:
        return {"pass": False, "score": 0.0, "reason": "golden answer has no 'Field: value' lines"}
    answer_words = set(_words(output))
    missing = [value for value in values if not _value_found(value, answer_words)]
    found = len(values) - len(missing)
    reason = f"{found}/{len(values)} golden values found"
    if missing:
        reason += "; missing " + ", ".join(repr(value) for value in missing)
    return {"score": found / len(values), "reason": reason}


def ticket_team(output: str, context: Any) -> dict[str, Any]:
    """Pass when the answer names the expected team and no other team."""
    named = [team for team in TICKET_TEAMS if re.search(rf"\b{team}\b", output, re.IGNORECASE)]
    expected = (context.expected or "").strip().lower()
    if named == [expected]:
        return {"pass": True, "reason": f"routed to {expected}"}
    if not named:
        return {"pass": False, "reason": f"names no team; expected {expected}"}
    return {"pass": False, "reason": f"names {', '.join(named)}; expected only {expected}"}
