"""Multiple choice: show the choices, read the answer key, and find the choice a model names.

Choices are shown with marks, the letters ``A``, ``B``, ... unless a case gives its own
``labels`` (ARC's ``1``..``4``). :func:`answer_index` normalises an answer key to a 0-based
index; :func:`extract_choice` reads a free-form reply ("The correct answer is: C. Paris") and
returns the index of the choice it names, or None when it names none or several. Pure functions
over strings: nothing here imports more than :mod:`re`.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "LETTERS",
    "answer_index",
    "choice_marks",
    "choice_outcome",
    "choice_prompt",
    "extract_choice",
    "format_choices",
]

#: The marks shown before the choices, in order.
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

#: The words a model uses to state its answer; a mark must follow them (after the glue).
_STATEMENT = re.compile(
    r"(?:\banswer|\b(?:correct|right|best|final)\s+(?:option|choice|letter|pick)"
    r"|\b(?:I'd|I\s+would)\s+say|\bpick|\bchoose|\bchose|\bselect(?:ed)?"
    r"|\bgo(?:ing)?\s+with|\bopt\s+for|\\boxed)",
    re.IGNORECASE,
)
#: What may stand between a statement and its mark: "answer is: option **B**".
_GLUE = re.compile(
    r"(?:[^\S\n]|[*:=#_-]|\bis\b|\bwould\s+be\b|\bshould\s+be\b|\bwill\s+be\b|\bmust\s+be\b"
    r"|\bbe\b|\bhere\b|\bthen\b|\btherefore\b|\boption\b|\bchoice\b|\bletter\b)*",
    re.IGNORECASE,
)
#: "B is correct", "(B) is the right answer" (not "A is incorrect").
_VERDICT_AFTER = re.compile(
    r"[^\S\n]+(?:is|would\s+be|seems\s+to\s+be)[^\S\n]+(?:the[^\S\n]+)?(?:correct|right|best)\b"
    r"|[^\S\n]+is[^\S\n]+the[^\S\n]+answer\b",
    re.IGNORECASE,
)
#: A negation just before a statement: "I would not choose A".
_NEGATED = re.compile(r"(?:\bnot|n't|\bnever)[^\S\n]*$", re.IGNORECASE)
#: "A or B", "A, B and C": a statement that names several marks.
_CONJUNCTION = re.compile(r"[^\S\n]*(?:,|/|&|\bor\b|\band\b)[^\S\n]*", re.IGNORECASE)
#: What separates a mark from the choice text that may follow it: "B) London", "C. Paris".
_SEPARATOR = re.compile(r"[\s.:)\]*]*(?:[-\u2013\u2014]+\s+)?")  # a dash only as "B - London"
#: A mark followed by a word ("A good question", "a city", "I think"), but not "A or B".
_PROSE_AFTER = re.compile(r"[^\S\n]+(?!(?:or|and|nor|vs)\b)[A-Za-z]", re.IGNORECASE)
#: Markdown that may open a line before a mark: "## B", "> **B**", "- B".
_LINE_LEAD = re.compile(r"[^\S\n]*(?:[#>_`-][^\S\n]*)*")


def format_choices(choices: Sequence[str], labels: Sequence[str] | None = None) -> str:
    """The choices one a line, each after its mark: ``"A. Paris\\nB. London"``."""
    marks = choice_marks(choices, labels)
    return "\n".join(f"{mark}. {choice}" for mark, choice in zip(marks, choices, strict=True))


def choice_prompt(
    question: str, choices: Sequence[str], labels: Sequence[str] | None = None
) -> str:
    """A prompt with the question, the marked choices and an instruction to answer with a mark.

    Used when a prompt template does not place ``{{choices}}`` itself.
    """
    marks = choice_marks(choices, labels)
    listed = ", ".join(marks[:-1]) + f" or {marks[-1]}" if len(marks) > 1 else marks[0]
    return (
        f"{question.rstrip()}\n\n{format_choices(choices, labels)}\n\n"
        f"Answer with the letter of the correct choice ({listed})."
    )


# --- the answer key --------------------------------------------------------------------------


def answer_index(
    answer: Any, choices: Sequence[str], labels: Sequence[str] | None = None, base: int = 0
) -> int:
    """The 0-based index of the choice that ``answer`` designates.

    ``answer`` is an integer or a digit string (counted from ``base``: 1 for Winogrande's
    "1"/"2"), a letter ("b", "B"), a label of ``labels`` (ARC's "3" of "1".."4"), or the exact
    text of a choice. With ``labels``, a text answer must be a label or a choice's text.
    Raises ValueError saying why for anything out of range, unknown or ambiguous.
    """
    count = len(choice_marks(choices, labels))
    if not isinstance(answer, bool) and isinstance(answer, numbers.Integral):
        return _in_range(int(answer) - base, answer, count, base)
    if isinstance(answer, float) and answer.is_integer():  # an int column read as floats
        return _in_range(int(answer) - base, answer, count, base)
    if not isinstance(answer, str) or not answer.strip():
        raise ValueError(f"answer {answer!r} is not a letter, an index or a choice's text")
    text = answer.strip()
    by_text = _text_index(text, choices)
    try:
        by_mark = _mark_index(text, count, labels, base)
    except ValueError:
        if by_text is None:  # "4" of choices "1".."4" is out of range but a choice's text
            raise
        by_mark = None
    if by_mark is not None and by_text is not None and by_mark != by_text:
        raise ValueError(
            f"answer {answer!r} is ambiguous: it designates choice {by_mark} by position and "
            f"choice {by_text} by text; give the answer as a letter"
        )
    found = by_mark if by_mark is not None else by_text
    if found is None:
        raise ValueError(_unknown_answer(answer, count, labels))
    return found


def _mark_index(text: str, count: int, labels: Sequence[str] | None, base: int) -> int | None:
    """The index ``text`` designates as a label, a letter or a position; None if it is none."""
    if labels is not None:
        return _label_index(text, labels)
    if len(text) == 1 and text.upper() in LETTERS:
        index = LETTERS.index(text.upper())
        if index >= count:
            raise ValueError(f"answer {text!r} is past the last choice {LETTERS[count - 1]}")
        return index
    if text.isdigit():
        return _in_range(int(text) - base, text, count, base)
    return None


def _label_index(text: str, labels: Sequence[str]) -> int | None:
    folded = [label.casefold() for label in labels]
    if text in labels:
        return list(labels).index(text)
    return folded.index(text.casefold()) if text.casefold() in folded else None


def _text_index(text: str, choices: Sequence[str]) -> int | None:
    """The index of the choice whose text is ``text`` (exactly, else ignoring case)."""
    for same in (lambda choice: choice.strip() == text, _folds_to(text)):
        found = [index for index, choice in enumerate(choices) if same(choice)]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise ValueError(f"answer {text!r} is the text of several choices {found}")
    return None


def _folds_to(text: str) -> Any:
    return lambda choice: choice.strip().casefold() == text.casefold()


def _in_range(index: int, answer: Any, count: int, base: int) -> int:
    if not 0 <= index < count:
        raise ValueError(
            f"answer {answer!r} is out of range for {count} choices "
            f"({'1-based' if base else '0-based'}: {base}..{count - 1 + base})"
        )
    return index


def _unknown_answer(answer: Any, count: int, labels: Sequence[str] | None) -> str:
    if labels is not None:
        return f"answer {answer!r} is neither a label ({', '.join(labels)}) nor a choice's text"
    return f"answer {answer!r} is not a letter A..{LETTERS[count - 1]}, an index or a choice's text"


def choice_marks(choices: Sequence[str], labels: Sequence[str] | None = None) -> tuple[str, ...]:
    """The mark shown before each choice: its label, else its letter.

    Raises ValueError for no choices, more than 26 without labels, or labels that do not fit.
    """
    if isinstance(choices, str) or not choices:
        raise ValueError("a multiple choice case needs a non-empty list of choices")
    if labels is None:
        if len(choices) > len(LETTERS):
            raise ValueError(f"{len(choices)} choices is more than the {len(LETTERS)} letters")
        return tuple(LETTERS[: len(choices)])
    marks = tuple(str(label).strip() for label in labels)
    if len(marks) != len(choices):
        raise ValueError(f"{len(marks)} labels for {len(choices)} choices")
    if not all(marks) or len({mark.casefold() for mark in marks}) != len(marks):
        raise ValueError(f"choice labels must be distinct and non-empty, got {list(labels)}")
    return marks


# --- reading the reply -----------------------------------------------------------------------


def extract_choice(
    text: str | None, choices: Sequence[str], labels: Sequence[str] | None = None
) -> int | None:
    """The index of the choice that the reply ``text`` names; None when it names none or several.

    Looked for in order, the first that finds a mark deciding: explicit statements ("The answer
    is B", "Answer: **B**", "I choose option B", "B is correct"); the mark a reply opens with
    ("B", "(B)", "B) London"), unless its lines list several marks (an echo of the choices);
    marks anywhere in the text; last, the one choice whose text the reply contains. A mark
    followed by another choice's text ("B) Paris" when B is London) names both. A lower-case
    letter or a digit counts alone only where it cannot be prose ("b", "(b)", "b)", "b."), "A"
    and "I" followed by a word are an article or a pronoun, and "not A" names nothing.
    """
    if not text or not text.strip():
        return None
    reply = _Reply(text, choice_marks(choices, labels), tuple(choices))
    for named in (reply.stated(), reply.opening(), reply.anywhere()):
        if named:
            return named.pop() if len(named) == 1 else None
    return reply.by_text()


def choice_outcome(
    text: str | None,
    choices: Sequence[str],
    answer_index: int,
    labels: Sequence[str] | None = None,
) -> dict[str, Any]:
    """``{"chosen": "B" | None, "answer": "C", "correct": bool}``: the record's ``choice``."""
    marks = choice_marks(choices, labels)
    chosen = extract_choice(text, choices, labels)
    return {
        "chosen": None if chosen is None else marks[chosen],
        "answer": marks[answer_index],
        "correct": chosen == answer_index,
    }


class _Reply:
    """A model's reply, read for the marks and choice texts it names."""

    def __init__(self, text: str, marks: Sequence[str], choices: Sequence[str]) -> None:
        self.text = text
        self.marks = marks
        self.choices = choices
        self._folded = [mark.casefold() for mark in marks]
        self._normal_choices = [_normal(choice) for choice in choices]
        # How far past a mark its choice's text may reach (markdown and spaces included).
        self._reach = 2 * max(len(choice) for choice in choices) + 16
        alternatives = "|".join(re.escape(m) for m in sorted(marks, key=len, reverse=True))
        # A mark standing alone, perhaps wrapped: B, (B), B), **B**, {B}; not B's, A/B, e.g.
        self.token = re.compile(
            rf"(?<![\w'./])(?P<open>[(\[{{*]*)[^\S\n]*(?P<mark>{alternatives})"
            rf"(?P<close>[)\]}}*]*)(?![\w'/])(?!\.\w)",
            re.IGNORECASE,
        )

    def stated(self) -> set[int]:
        """The marks that explicit statements name, "A or B" naming both."""
        named: set[int] = set()
        for statement in _STATEMENT.finditer(self.text):
            if not _negated(self.text, statement.start()):
                named |= self._listed(_end(_GLUE, self.text, statement.end()))
        for match in self.token.finditer(self.text):
            if _VERDICT_AFTER.match(self.text, match.end()) and self._meant(match, strict=False):
                named |= self._named_by(match)
        return named

    def opening(self) -> set[int]:
        """The mark the reply opens with, unless several lines open with different marks."""
        openers = [self._line_mark(line) for line in self.text.splitlines()]
        found = [match for match in openers if match is not None]
        if not found or found[0].string.strip() != self.text.strip().splitlines()[0].strip():
            return set()
        if len({self._index(match) for match in found}) > 1:
            return set()
        first = found[0]
        return self._named_by(first) if self._meant(first, strict=True) else set()

    def anywhere(self) -> set[int]:
        """Every mark in the text that is meant as one."""
        named: set[int] = set()
        for match in self.token.finditer(self.text):
            if self._meant(match, strict=True):
                named |= self._named_by(match)
        return named

    def by_text(self) -> int | None:
        """The one choice whose text the reply contains (as whole words, ignoring case)."""
        reply = _normal(self.text)
        spans: dict[int, list[tuple[int, int]]] = {}
        for index, choice in enumerate(self.choices):
            norm = _normal(choice)
            hits = [m.span() for m in re.finditer(_whole(norm), reply)] if norm else []
            if hits:
                spans[index] = hits
        # "Paris, Texas" holds "Paris": a choice seen only inside a longer one is not named.
        inside = {
            short
            for short in spans
            for long in spans.keys() - {short}
            if all(_within(span, spans[long]) for span in spans[short])
        }
        named = spans.keys() - inside
        return named.pop() if len(named) == 1 else None

    def _listed(self, start: int) -> set[int]:
        """The marks from ``start`` on: one, or several joined by "or", "and", commas."""
        named: set[int] = set()
        while (match := self.token.match(self.text, start)) is not None:
            if not self._meant(match, strict=False):
                break
            named |= self._named_by(match)
            start = _end(_CONJUNCTION, self.text, match.end())
            if start == match.end():
                break
        return named

    def _line_mark(self, line: str) -> re.Match[str] | None:
        match = self.token.match(line, _end(_LINE_LEAD, line, 0))
        return match if match is not None and _wrapped(match) else None

    def _meant(self, match: re.Match[str], *, strict: bool) -> bool:
        """Whether a mark is meant as one rather than a word of prose.

        A mark wrapped ("(b)", "b)", "B.") or followed by its own choice's text counts, and so
        does a reply that is only the mark. Otherwise "A"/"I" before a word are prose, "not A"
        names nothing, and with ``strict`` (no statement before it) only an upper-case letter
        counts; after a statement only a lower-case letter before a word ("is a city") is prose.
        """
        text, written = match.string, match.group("mark")
        if _negated(text, match.start()):
            return False
        if _wrapped(match) or text.strip() == match.group().strip():
            return True
        if self._following(match) == self._index(match):
            return True
        prose_after = _PROSE_AFTER.match(text, match.end()) is not None
        if written.upper() in ("A", "I") and prose_after:
            return False
        if strict:
            return written.isalpha() and written.isupper()
        return not (written.islower() and prose_after)

    def _index(self, match: re.Match[str]) -> int:
        return self._folded.index(match.group("mark").casefold())

    def _named_by(self, match: re.Match[str]) -> set[int]:
        """The choice a mark names, and another choice whose text follows it ("B) Paris")."""
        following = self._following(match)
        return {self._index(match)} | (set() if following is None else {following})

    def _following(self, match: re.Match[str]) -> int | None:
        """The choice whose text comes right after the mark and its separator, if any."""
        start = _end(_SEPARATOR, match.string, match.end())
        rest = _normal(match.string[start : start + self._reach])
        found = [
            (len(norm), index)
            for index, norm in enumerate(self._normal_choices)
            if norm and rest.startswith(norm) and not rest[len(norm) : len(norm) + 1].isalnum()
        ]
        return max(found)[1] if found else None


def _wrapped(match: re.Match[str]) -> bool:
    """Brackets or emphasis around a mark, or a "." or ":" right after it ("B.", "B:").

    A lower-case "a." or "i." inside a line ends a sentence rather than names a choice.
    """
    if match.group("open") or match.group("close"):
        return True
    text, end = match.string, match.end()
    if text[end : end + 1] not in (".", ":"):
        return False
    line_start = text.rfind("\n", 0, match.start()) + 1
    return match.group("mark") not in ("a", "i") or not text[line_start : match.start()].strip()


def _negated(text: str, start: int) -> bool:
    """Whether "not", "n't" or "never" comes right before ``start``."""
    return _NEGATED.search(text, max(0, start - 20), start) is not None


def _end(pattern: re.Pattern[str], text: str, start: int) -> int:
    """Where a match of ``pattern`` (one that may be empty) starting at ``start`` ends."""
    match = pattern.match(text, start)
    return start if match is None else match.end()


def _whole(norm: str) -> str:
    before = r"(?<!\w)" if norm[0].isalnum() else ""
    after = r"(?!\w)" if norm[-1].isalnum() else ""
    return before + re.escape(norm) + after


def _within(span: tuple[int, int], others: Iterable[tuple[int, int]]) -> bool:
    return any(start <= span[0] and span[1] <= end for start, end in others)


def _normal(text: str) -> str:
    """Case-folded, markdown emphasis dropped, each run of whitespace one space."""
    return re.sub(r"\s+", " ", text.replace("**", "").replace("__", "")).strip().casefold()
