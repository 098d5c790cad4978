"""Columns: which of a row's keys are the case's prompt, expected answer, id, choices, ...

:func:`resolve_columns` maps a source's ``prompt:``, ``expected:``, ``id:``, ... (or their
default names) onto the columns a row has; :func:`check_keys` refuses a hand-written row's key
that is a typo of a case key (:data:`CASE_KEYS`). :mod:`.rows` builds the rows with them.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .source import DatasetSource, RowError

_PROMPT_KEYS = ("text_prompt", "prompt", "question", "input")
_EXPECTED_KEYS = ("golden_answer", "expected", "answer", "output")
_CHOICES_KEYS = ("choices",)
#: Answer columns of multiple choice sets: MMLU/Winogrande ``answer``, ARC ``answerKey``,
#: HellaSwag/PIQA ``label``.
_ANSWER_KEYS = ("answer", "answerKey", "label")
_IMAGE_KEYS = ("images", "image")

#: A JSONL row's keys that mean something to a case: its own keys and 360-eval's. Any other key
#: is data (a variable), unless it is a typo of one of these (:func:`near_case_key`).
CASE_KEYS = frozenset(
    {
        "id", "prompt", "expected", "tags", "task", "threshold", "expected_output_tokens",
        "vars", "assert", "judge_metrics", "user_defined_metrics", "images", "image",
        "choices", "answer", "turns", "context", *_PROMPT_KEYS, *_EXPECTED_KEYS, *_ANSWER_KEYS,
    }
)  # fmt: skip


@dataclass(frozen=True)
class Columns:
    """The keys a source's mapping resolves to, given the columns a row has."""

    prompt: str | None
    expected: str | None
    id: str | None
    tags: str | None
    choices: str | tuple[str, ...] | None
    answer: str | None
    images: str | None


def resolve_columns(source: DatasetSource, available: list[str], needs_prompt: bool) -> Columns:
    def pick(key: str, column: str | None, defaults: tuple[str, ...]) -> str | None:
        if column is not None and column not in available:
            raise RowError(f"column {column!r} (dataset.{key}) not found; available: {names}")
        return column or next((name for name in defaults if name in available), None)

    names = ", ".join(map(repr, available)) or "(none)"
    prompt = pick("prompt", source.prompt, _PROMPT_KEYS)
    if prompt is None and needs_prompt:
        raise RowError(
            f"no prompt column (looked for {', '.join(_PROMPT_KEYS)}); available: {names}; "
            "set dataset.prompt to the column holding the prompt"
        )
    for var, column in source.columns.items():
        pick(f"columns.{var}", column, ())
    for key, mapped in (("tools", source.tools), ("tool_calls", source.tool_calls)):
        if mapped is not None:
            pick(key, mapped.column, ())
    if isinstance(source.choices, tuple):
        choices: str | tuple[str, ...] | None = source.choices
        for column in source.choices:
            pick("choices", column, ())
    else:
        choices = pick("choices", source.choices, _CHOICES_KEYS)
    if source.answer is not None and choices is None:
        raise RowError("dataset.answer needs choices: set dataset.choices or add a choices column")
    answer = pick("answer", source.answer, _ANSWER_KEYS if choices else ())
    if choices is not None and answer is None:
        looked = ", ".join(_ANSWER_KEYS)
        raise RowError(
            f"no answer column for the choices (looked for {looked}); set dataset.answer"
        )
    # With choices the answer column names the right choice; it is not the expected text.
    expected_defaults = tuple(name for name in _EXPECTED_KEYS if name != answer)
    return Columns(
        prompt=prompt,
        expected=pick("expected", source.expected, expected_defaults),
        id=pick("id", source.id, ("id",)),
        tags=pick("tags", source.tags, ("tags",)),
        choices=choices,
        answer=answer,
        images=pick("images", source.images, _IMAGE_KEYS),
    )


def check_keys(fields: Mapping[str, Any], source: DatasetSource, used: frozenset[str]) -> None:
    """A hand-written row's keys are case keys or data; one a typo away from a case key (and
    no mapped column or template name) would leave the case without what it meant, so it is
    an error that names the key it resembles."""
    mapped = {
        *(c for c in (source.prompt, source.expected, source.id, source.tags) if c),
        *(c for c in (source.answer, source.images) if c),
        *([source.choices] if isinstance(source.choices, str) else source.choices or ()),
        *source.columns.values(),
        *(mapped.column for mapped in (source.tools, source.tool_calls) if mapped),
    }
    for key in fields:
        if key in CASE_KEYS or key in mapped or key in used:
            continue
        meant = near_case_key(key)
        if meant is not None:
            raise RowError(
                f"unknown key {key!r} (did you mean {meant!r}?); as data, map it: "
                f"dataset.columns: {{var: {key}}}"
            )


#: Case keys a typo is looked for near: the longer names, whose typos no honest field makes.
#: Keys of 4 letters or fewer (``id``, ``tags``, ``task``, ``vars``) have too many honest
#: neighbours (``idx``, ``qid``, ``bars``, ``mask``) to guess from.
_TYPO_MIN_LENGTH = 5
#: Edits (a letter added, dropped, changed, or two swapped) that make a typo: one (``asert``,
#: ``expcted``, ``thresold``), two for names of 10 letters or more (``judge_metircs``), whose
#: honest neighbours are rarer (``answered`` is two edits from ``answerKey``, and data).
_TYPO_EDITS = ((10, 2), (_TYPO_MIN_LENGTH, 1))
#: Plurals and singulars of case keys are honest fields of real datasets (SQuAD's ``answers``,
#: multi-label ``labels``, ``inputs``/``outputs``), except these, which are only ever typos.
_NOT_A_PLURAL = frozenset(
    {"asserts", "judge_metric", "user_defined_metric", "expected_output_token"}
)


@functools.lru_cache(maxsize=1024)  # rows repeat their keys: each is looked at once
def near_case_key(key: str) -> str | None:
    """The case key that ``key`` is a typo of, or None when it is an honest name of its own."""
    if len(key) < _TYPO_MIN_LENGTH:
        return None
    for known in sorted(CASE_KEYS):
        if len(known) < _TYPO_MIN_LENGTH or abs(len(known) - len(key)) > 2:
            continue
        if key not in _NOT_A_PLURAL and (key == known + "s" or key + "s" == known):
            continue
        allowed = next(edits for length, edits in _TYPO_EDITS if len(known) >= length)
        if _edit_distance(key, known, allowed) <= allowed:
            return known
    return None


def _edit_distance(a: str, b: str, limit: int) -> int:
    """Optimal string alignment distance of ``a`` and ``b`` (adjacent swaps count one), or
    ``limit + 1`` as soon as it must exceed ``limit``."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], previous2[j - 2] + 1)
        if min(current) > limit:
            return limit + 1
        previous2, previous = previous, current
    return previous[-1]
