"""A reply's thinking told apart from its answer, by a :class:`ThinkingRule`.

A reasoning model writes its thinking first, between tags (``<think>...</think>``), or its server
gives it apart (``reasoning_content``, read by the clients into ``Completion.reasoning``). The
rule says which tags open the thinking, whether a lone closing tag ends thinking whose opening
tag was in the prompt (Qwen3.5's and DeepSeek-R1-0528's chat templates put it there), and
whether the answer checks are shown the thinking too (``strip: false``).

:func:`split` is pure and reads only the start of the reply: a tag later in the answer (in a
code block, in a sentence about tags) is the answer's. It is applied where a reply is read,
after the response cache (a replay re-splits with the rule of the day): an item's reply
(``CaseKind.read``), each step of an agent, a judge's verdict.

A profile's ``thinking:`` and an eval file's ``thinking:`` are each a :class:`ThinkingRule`;
the file's keys override the profile's (:func:`merged_rule`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, StrictBool, field_validator

if TYPE_CHECKING:
    from .completion import Completion

__all__ = [
    "DEFAULT_TAGS",
    "ThinkingRule",
    "bare_split",
    "merged_rule",
    "read_reply",
    "shown_answer",
    "split",
    "unfinished_reason",
    "unfinished_thinking",
]

#: The thinking tags read when a rule gives none: the ones litellm reads.
DEFAULT_TAGS: tuple[tuple[str, str], ...] = (
    ("<think>", "</think>"),
    ("<thinking>", "</thinking>"),
    ("<budget:thinking>", "</budget:thinking>"),
)
#: The tags that show thinking to the answer checks under ``strip: false``.
CANONICAL_TAGS = ("<think>", "</think>")
#: Between the pieces of thinking joined into one (given apart, then each leading block).
_JOINER = "\n\n"


class ThinkingRule(BaseModel):
    """How a model's replies are read: which leading blocks are thinking, and who sees it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    strip: StrictBool = True
    """True: the answer checks see the answer alone. False: they see the thinking too,
    as ``<think>{thinking}</think>{answer}`` (the record's ``reasoning`` keeps it as well)."""
    tags: tuple[tuple[str, str], ...] = DEFAULT_TAGS
    """The ``[open, close]`` pairs that enclose thinking; given, exactly these (not added to the
    defaults)."""
    implicit_open: StrictBool = True
    """A closing tag with no opening tag before it: everything before it is thinking (the
    opening tag was in the prompt)."""

    @field_validator("tags", mode="before")
    @classmethod
    def _pairs(cls, value: object) -> object:
        # A pair is two non-empty strings; a bare string is a common slip for a pair.
        if not isinstance(value, (list, tuple)):
            raise ValueError("expected a list of [open, close] pairs, e.g. [['<think>', '</think>']]")  # fmt: skip
        for index, pair in enumerate(value):
            if (
                not isinstance(pair, (list, tuple))
                or len(pair) != 2
                or not all(isinstance(tag, str) and tag.strip() for tag in pair)
            ):
                raise ValueError(
                    f"pair {index + 1}: expected [open, close], two non-empty strings, got {pair!r}"
                )
        return value


def merged_rule(profile: ThinkingRule | None, file: ThinkingRule | None) -> ThinkingRule:
    """The rule a reply of an eval file's item is read by: the file's keys as written, over the
    profile's, over the defaults."""
    base = profile or ThinkingRule()
    if file is None:
        return base
    return base.model_copy(update={key: getattr(file, key) for key in file.model_fields_set})


def split(text: str, reasoning: str, rule: ThinkingRule) -> tuple[str, str, str | None]:
    """``(answer, thinking, unfinished)`` of a reply: ``text`` as the model wrote it,
    ``reasoning`` the thinking its server gave apart.

    Only blocks that open the reply (after whitespace) are thinking, each up to the first
    closing tag of its pair (nesting is not counted); several are joined, after the thinking
    given apart; empty ones are dropped. Without an opening tag, a closing tag of a pair whose
    opening tag does not come before it ends thinking that began in the prompt (when the rule's
    ``implicit_open``). An opening tag never closed: no answer, and ``unfinished`` says why.
    The answer loses its leading whitespace when thinking came before it. Under ``strip:
    false`` the answer is ``<think>{thinking}</think>{answer}`` when there was thinking."""
    answer, thinking, unfinished = bare_split(text, reasoning, rule)
    return shown_answer(answer, thinking, rule), thinking, unfinished


def shown_answer(answer: str, thinking: str, rule: ThinkingRule) -> str:
    """The answer the checks see: ``answer`` alone, or under ``strip: false`` with its
    ``thinking`` before it in the canonical tags."""
    if rule.strip or not thinking:
        return answer
    opening, closing = CANONICAL_TAGS
    return f"{opening}{thinking}{closing}{answer}"


def bare_split(text: str, reasoning: str, rule: ThinkingRule) -> tuple[str, str, str | None]:
    """:func:`split` with the answer alone whatever ``rule.strip`` says."""
    pieces = [reasoning.strip()] if reasoning.strip() else []
    given = len(pieces)
    answer, unfinished = _leading_blocks(text, rule, pieces)
    if pieces:
        answer = answer.lstrip()
    if len(pieces) == given:  # no thinking in the text: the server's, exactly as it came
        return answer, reasoning if given else "", unfinished
    return answer, _JOINER.join(piece for piece in pieces if piece), unfinished


def _leading_blocks(text: str, rule: ThinkingRule, pieces: list[str]) -> tuple[str, str | None]:
    """``text`` past its leading thinking blocks, each block's thinking added to ``pieces``;
    and why there is no answer when a block is never closed."""
    rest = text
    opened = False
    while True:
        body = rest.lstrip()
        pair = next((pair for pair in rule.tags if body.startswith(pair[0])), None)
        if pair is None:
            break
        opening, closing = pair
        inside = body[len(opening) :]
        end = inside.find(closing)
        if end < 0:
            pieces.append(inside.strip())
            return "", f"its thinking was never closed ({opening} without {closing})"
        pieces.append(inside[:end].strip())
        rest, opened = inside[end + len(closing) :], True
    if opened or not rule.implicit_open:
        return rest, None
    return _after_lone_closing(text, rule, pieces), None


def _after_lone_closing(text: str, rule: ThinkingRule, pieces: list[str]) -> str:
    """``text`` past the first closing tag of a pair whose opening tag is not before it (its
    thinking added to ``pieces``); ``text`` when it has no such tag."""
    found = [
        (at, closing)
        for opening, closing in rule.tags
        if (at := text.find(closing)) >= 0 and opening not in text[:at]
    ]
    if not found:
        return text
    at, closing = min(found)
    pieces.append(text[:at].strip())
    return text[at + len(closing) :]


def unfinished_reason(
    answer: str, thinking: str, finish_reason: str | None, unclosed: str | None
) -> str | None:
    """Why a reply read as ``answer`` and ``thinking`` is no answer, or None: its thinking was
    never closed (``unclosed``, from :func:`split`), or it stopped at ``max_tokens`` with
    thinking and no answer. Such a reply is no answer to check, right or wrong."""
    cut = " when it reached max_tokens" if finish_reason == "length" else ""
    if unclosed is not None:
        return f"the reply ended inside its thinking{cut}: no answer (raise max_tokens)"
    if thinking and not answer.strip() and finish_reason == "length":
        return (
            f"ran out of tokens while reasoning: {len(thinking)} characters of thinking and no "
            "answer (raise max_tokens)"
        )
    return None


def read_reply(completion: Completion, rule: ThinkingRule) -> Completion:
    """``completion`` as ``rule`` reads it: its ``text`` the answer, its ``reasoning`` all its
    thinking, ``unfinished`` why it holds no answer (None: it does). Read a reply once: under
    ``strip: false`` the answer shows its thinking in tags, which a second reading would take
    for thinking again."""
    answer, thinking, unclosed = bare_split(completion.text, completion.reasoning, rule)
    why = unfinished_reason(answer, thinking, completion.finish_reason, unclosed)
    shown = shown_answer(answer, thinking, rule)
    read = dataclasses.replace(completion, text=shown, reasoning=thinking, unfinished=why)
    return _recounted(read) if thinking != completion.reasoning else read


def _recounted(completion: Completion) -> Completion:
    """``completion`` with its reasoning tokens counted again from all its thinking, when the
    rule found thinking the client did not (another tag, a lone closing tag, an unclosed block)
    and the provider reported no count (the client's count, if any, was an estimate)."""
    if completion.reasoning_tokens is not None and not completion.reasoning_tokens_estimated:
        return completion
    from .tokens import counted_reasoning

    counted = counted_reasoning(completion.model_id, completion.reasoning, completion.output_tokens)
    if counted is None:
        return completion
    return dataclasses.replace(
        completion, reasoning_tokens=counted, reasoning_tokens_estimated=True
    )


def unfinished_thinking(
    text: str, reasoning: str, finish_reason: str | None, rule: ThinkingRule | None = None
) -> str | None:
    """Why a reply holds no answer because its thinking never finished, or None: a reply that
    opens a thinking block (of ``rule``'s tags, the default ones by default) it never closes, or
    that stopped at ``max_tokens`` with thinking and no answer. Such a reply is no answer to
    check, right or wrong (:func:`read_reply` says it of a reply it reads)."""
    answer, thinking, unclosed = bare_split(text, reasoning, rule or ThinkingRule())
    return unfinished_reason(answer, thinking, finish_reason, unclosed)
