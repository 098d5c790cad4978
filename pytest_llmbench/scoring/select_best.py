"""Choosing the best answer of a case (``type: select-best``): the judges see the answers of
every contestant of the same case and repeat (its models and prompt variants) and pick one.

Written in an eval file as::

    - type: select-best
      value: the clearest correct answer   # optional: what "best" means
      judges: [gpt-judge]                  # optional: the run's panel by default
      seed: 7                              # optional: the shuffle's seed (else one per contest)
      rotate: true                         # the default: every rotation of the order judged

A *contest* is one case and repeat of one eval file; its contestants are the items that answer
it: one per model and variant (the record's ``model`` label). The answers are shown as A, B,
C... in an order shuffled by :func:`shuffled` with a seed that is the assertion's ``seed`` or
one derived from the contest (:func:`contest_seed`), so every process and every run shows the
same order, and the record says which. Each judge is shown that order and each of its
rotations (:func:`rotations`; ``rotate: false``: the order alone) and picks one label in each;
the contest's pick is the contestant picked most often (:func:`plurality`), so a judge that
picks by position spreads its votes evenly and decides nothing. A tie between the most picked
is no pick, and the contest is unchecked, saying so. The picked contestant scores 1, the others 0: with the default
threshold 0.5 the picked one passes and the others fail, as promptfoo's ``select-best`` does.

Everything here is pure: :mod:`pytest_llmbench.engine.contests` gathers the answers and
:mod:`pytest_llmbench.judging.select_best_judge` asks the judges.
"""

from __future__ import annotations

import hashlib
import random
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .judged import GradedSpecError, JudgeSpec
from .model_graded import ModelGradedSpec, choice_grader

#: The assertion type.
SELECT_BEST_TYPE = "select-best"
#: The record's dimension of a select-best verdict: 1 picked, 0 not.
SELECT_BEST_SCORE_KEY = "select_best"
#: The labels the answers are shown under; a contest has at most this many contestants.
LABELS: tuple[str, ...] = tuple(string.ascii_uppercase)


@dataclass(frozen=True)
class SelectBestSpec(JudgeSpec):
    """A ``select-best`` assertion: the judge settings and the shuffle's seed.

    A subclass of :class:`JudgeSpec`, so that the case hashes of the other judged types stay
    what they were (a case hash digests the spec's fields).
    """

    #: the shuffle's seed as written; None: derived from the contest (:func:`contest_seed`)
    seed: int | None = None
    #: judge every rotation of the shuffled order (each answer shown first once), so that a
    #: judge picking by position ties; False: the shuffled order alone
    rotate: bool = True


def parse_select_best(base: JudgeSpec, raw: Mapping[str, Any]) -> SelectBestSpec:
    """The :class:`SelectBestSpec` of a ``select-best`` assertion whose judge settings were
    parsed into ``base``; raise :class:`GradedSpecError` naming the offending key."""
    seed = raw.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise GradedSpecError(f"seed must be a whole number >= 0, got {seed!r}", "seed")
    rotate = raw.get("rotate", True)
    if not isinstance(rotate, bool):
        raise GradedSpecError(f"rotate must be true or false, got {rotate!r}", "rotate")
    fields = {name: getattr(base, name) for name in base.__dataclass_fields__}
    return SelectBestSpec(**fields, seed=seed, rotate=rotate)


@dataclass(frozen=True)
class Contestant:
    """One answer of a contest: who gave it (the record's ``model`` label) and its text."""

    label: str
    text: str


def contest_seed(spec: SelectBestSpec, key: str) -> int:
    """The shuffle's seed: the assertion's, else one derived from the contest's ``key`` (its
    file, case and repeat), the same in every process."""
    if spec.seed is not None:
        return spec.seed
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big")


def shuffled(contestants: Sequence[Contestant], seed: int) -> list[Contestant]:
    """``contestants`` in the order shown to the judges: sorted by label, then shuffled by a
    generator seeded with ``seed`` (the same order for the same labels and seed)."""
    ordered = sorted(contestants, key=lambda c: c.label)
    random.Random(seed).shuffle(ordered)
    return ordered


def rotations(shown: Sequence[Contestant], rotate: bool) -> list[list[Contestant]]:
    """The orders the judges are shown: ``shown``, then (``rotate``) each of its rotations, so
    that every answer is shown first once and in every position once."""
    count = len(shown) if rotate else 1
    return [[*shown[start:], *shown[:start]] for start in range(count)]


def chooser(spec: JudgeSpec, count: int) -> ModelGradedSpec:
    """The choice each judge makes: one of the first ``count`` labels (the judge settings,
    structured output and temperature, are the assertion's)."""
    return choice_grader(spec, tuple((label, 1.0) for label in LABELS[:count]))


def contest_prompt(question: str | None, shown: Sequence[Contestant], criterion: str | None) -> str:
    """The judges' prompt: the question, then every answer under its label."""
    best = f" ({criterion.strip()})" if criterion and criterion.strip() else ""
    labels = ", ".join(LABELS[: len(shown)])
    parts = [
        f"{len(shown)} answers to the same question follow, labelled {labels}. Pick the best "
        f"answer{best}. Judge what they say, not their order or their length."
    ]
    if question:
        parts.append(f"[Question]\n{question}")
    parts += [f"[Answer {LABELS[i]}]\n{c.text}" for i, c in enumerate(shown)]
    return "\n\n".join(parts)


def plurality(picks: Sequence[str]) -> str | None:
    """The contestant picked most often (over judges and orders); None when none was picked or
    the most picked are tied."""
    counted = Counter(picks).most_common()
    if not counted or (len(counted) > 1 and counted[0][1] == counted[1][1]):
        return None
    return counted[0][0]


def votes(picks: Sequence[str]) -> str:
    """``gpt-4o 2, claude 1``: each picked contestant and how many times it was picked."""
    counted = sorted(Counter(picks).items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{label} {count}" for label, count in counted)


def check_contestants(count: int) -> str | None:
    """Why a case with ``count`` contestants cannot hold a contest, or None."""
    if count < 2:
        return (
            f"select-best needs at least two contestants (models or prompt variants) per case, "
            f"and this run has {count}: give several --models or a `prompts:` list"
        )
    if count > len(LABELS):
        return f"select-best shows at most {len(LABELS)} answers at once; this run has {count}"
    return None
