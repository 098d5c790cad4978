"""Pairwise judging (``type: pairwise``): the model's answer against a ``--baseline`` run's answer
to the same case, judged in both orders.

Written in an eval file as::

    - type: pairwise
      value: the more accurate and concise answer    # optional: what "better" means
      judges: [gpt-judge]                             # optional: the run's panel by default
      threshold: 0.5                                  # the score that passes (default 0.5)

The opponent is the answer of the ``--baseline`` run's record with the same ``case_hash``
(:func:`baseline_answer`). Each judge sees the two answers as A and B twice: the model's first,
then the baseline's first. An order *prefers* the answer most of its judges picked (an even
split is no preference). Both orders preferring the model is a ``win`` (score 1), both
preferring the baseline a ``loss`` (0), anything else a ``tie`` (0.5): a judge that picks by
position, not by content, ties. No baseline answer for the case (or no ``--baseline``) is an
unchecked verdict with the reason, never a failure.

Everything here is pure: the engine (:mod:`pytest_llmbench.engine.grading`) finds the baseline's
answer and :mod:`pytest_llmbench.judging.pairwise_judge` asks the judges.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .judged import JudgeSpec
from .model_graded import ModelGradedSpec, choice_grader

#: The assertion type.
PAIRWISE_TYPE = "pairwise"
#: The record's dimension (``dimensions``) of a pairwise verdict: 1 win, 0.5 tie, 0 loss.
PAIRWISE_SCORE_KEY = "pairwise"
#: The score of each outcome; a tie counts half (in the score and in the win rate).
OUTCOME_SCORES: dict[str, float] = {"win": 1.0, "tie": 0.5, "loss": 0.0}
#: The two orders each pair is judged in: which answer is shown as A.
ORDERS: tuple[str, ...] = ("model-first", "baseline-first")
#: What the judge picks from: the answer shown first (A) or second (B).
LABELS: tuple[str, str] = ("A", "B")


@dataclass(frozen=True)
class BaselineAnswer:
    """The baseline run's answer to a case: its text and who gave it."""

    text: str
    model: str  #: the baseline record's model label (the win matrix's opponent)
    repeat: int


def order_grader(spec: JudgeSpec) -> ModelGradedSpec:
    """The choice the judges make in one order: A or B, scored 1 and 0 for the answer shown
    first (the judge settings, structured output and temperature, are the assertion's)."""
    return choice_grader(spec, ((LABELS[0], 1.0), (LABELS[1], 0.0)))


def pair_prompt(question: str | None, first: str, second: str, criterion: str | None) -> str:
    """The judge's prompt for one order: the question, then answer A and answer B."""
    better = f" ({criterion.strip()})" if criterion and criterion.strip() else ""
    parts = [
        "Two answers to the same question follow, labelled A and B. Decide which answer is "
        f"better{better}. Judge what they say, not their order or their length.",
    ]
    if question:
        parts.append(f"[Question]\n{question}")
    parts += [f"[Answer A]\n{first}", f"[Answer B]\n{second}"]
    return "\n\n".join(parts)


def model_label(order: str) -> str:
    """The label the model's answer has in ``order`` (``model-first``: A)."""
    return LABELS[0] if order == ORDERS[0] else LABELS[1]


def preference(picks: Sequence[str]) -> str | None:
    """What one order's judges prefer, from what each picked (``model`` or ``baseline``):
    ``model``, ``baseline``, or ``none`` for an even split; None when no judge picked."""
    if not picks:
        return None
    mine = sum(1 for pick in picks if pick == "model")
    if mine * 2 == len(picks):
        return "none"
    return "model" if mine * 2 > len(picks) else "baseline"


def outcome(first: str, second: str) -> str:
    """``win``, ``tie`` or ``loss`` from the two orders' preferences: only agreeing orders
    decide; a position-biased judge (A both times) ties."""
    if first == second == "model":
        return "win"
    if first == second == "baseline":
        return "loss"
    return "tie"


def baseline_answer(
    records: Iterable[Mapping[str, Any]], case_hash: str | None, model: str, repeat: int
) -> BaselineAnswer | str:
    """The baseline's answer to the case ``case_hash``, or why there is none.

    The records of that hash with an answer are candidates; the model's own (same label) come
    first, the same repeat first among them. Another model's answer is taken only when one
    model alone answered the case in the baseline (comparing with another model's run);
    several other models: no answer (which one would be a guess).
    """
    if case_hash is None:
        return "the case has no case hash"
    found = [record for record in records if _answers(record, case_hash)]
    if not found:
        return (
            f"the baseline has no answer to this case (case hash {case_hash}; a baseline run "
            "from the same eval file, this assertion included, has the same hash)"
        )
    own = [record for record in found if str(record.get("model")) == model]
    if not own:
        others = sorted({str(record.get("model")) for record in found})
        if len(others) > 1:
            names = ", ".join(others)
            return f"the baseline answered this case with {names}, not {model}: which to compare?"
        own = found
    same = [record for record in own if record.get("repeat") == repeat]
    chosen = (same or own)[0]
    raw_repeat = chosen.get("repeat")
    return BaselineAnswer(
        str(chosen["response"]),
        str(chosen.get("model")),
        raw_repeat if isinstance(raw_repeat, int) else 0,
    )


def _answers(record: Mapping[str, Any], case_hash: str) -> bool:
    """Whether ``record`` holds an answer to the case (whatever its outcome: a baseline run
    whose only check was this pairwise one has its items unchecked, and their answers)."""
    return record.get("case_hash") == case_hash and isinstance(record.get("response"), str)
