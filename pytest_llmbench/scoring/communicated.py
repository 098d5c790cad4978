"""The ``communicated`` check: strings the model must have told the user, by tau2-bench's rule
for a task's ``communicate_info``.

The rule, as the reference scorer applies it (inspect_evals ``tau2/common/scorer.py``): every
text the model said to the user is joined with newlines, lowercased, and its commas removed;
each string passes when its lowercased form is a substring of that (its own commas kept, so a
string holding a comma is never found: tau2-bench's quirk, kept so that scores compare). All
must be found: there is no partial credit and no threshold.

What "said to the user" is comes from the item (:attr:`~.base.AssertionContext.said`): a
conversation's replies up to the one checked (an agent's answers, never its tool calls nor
their results); else the answer, the only thing a single call or a plain agent run says.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import Assertion, AssertionContext, AssertionSpecError, Outcome, is_number, quoted

#: The strings a failed verdict's reason names (the rest are counted).
REASON_STRINGS = 5


def communicated_value(base: str, value: Any) -> tuple[str, ...]:
    """A string or a non-empty list of strings (a number is read as its text), none empty: an
    empty string is in every text, so it checks nothing."""
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(item, str) or is_number(item) for item in items):
        raise AssertionSpecError(
            f"{base} needs a string or a non-empty list of strings, got {value!r}", "value"
        )
    strings = tuple(str(item) for item in items)
    if any(not text for text in strings):
        raise AssertionSpecError(f"{base}: an empty string is always said; remove it", "value")
    return strings


def messages_from_agent(said: Sequence[str]) -> str:
    """What the model said, as tau2-bench searches it: joined by newlines, lowercased, commas
    removed."""
    return "\n".join(said).lower().replace(",", "")


def not_communicated(infos: Sequence[str], said: Sequence[str]) -> list[str]:
    """The strings of ``infos`` the texts ``said`` do not hold, by tau2-bench's rule, in order."""
    haystack = messages_from_agent(said)
    return [info for info in infos if info.lower() not in haystack]


def check_communicated(
    value: Any, output: str, assertion: Assertion, context: AssertionContext
) -> Outcome:
    """Every string of ``value`` told to the user (the context's ``said``, else ``output``)."""
    said = context.said if context.said is not None else (output,)
    missing = not_communicated(value, said)
    where = "in the answer" if context.said is None else _replies(len(said))
    if not missing:
        told = "the string" if len(value) == 1 else f"all {len(value)} strings"
        return Outcome(True, f"{told} told to the user {where}", 1.0)
    shown = ", ".join(quoted(info, 60) for info in missing[:REASON_STRINGS])
    more = len(missing) - REASON_STRINGS
    extra = f" (and {more} more)" if more > 0 else ""
    return Outcome(False, f"not told to the user {where}: {shown}{extra}", 0.0)


def _replies(count: int) -> str:
    return f"in {count} repl{'y' if count == 1 else 'ies'}"
