"""Bring-your-own grader (``type: model-graded``): the user's grading prompt and a map from the
choices the judge may pick to scores.

Written in an eval file as::

    - type: model-graded
      prompt: file://graders/fact.txt      # or the prompt inline
      choices: {A: 1.0, B: 0.5, C: 0}      # labels -> scores in 0..1, in the order shown
      chain_of_thought: true               # the judge reasons first, then picks
      threshold: 0.5                       # the (mean) score that passes

The prompt is a template (:mod:`pytest_llmbench.spec.templating`, one owner of ``{{...}}``):
``{{input}}``, ``{{output}}``, ``{{expected}}``, ``{{context}}`` and the case's vars, as
``{{vars.NAME}}`` or ``{{NAME}}``. Everything that can be checked without an answer is checked
at collection (:func:`parse_grader_spec` here; the prompt's file and variables, once the case
is known, in :mod:`pytest_llmbench.spec.graders`), so a bad grader is a collection error at its
line.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .judged import (
    GRADER_TYPES,
    JUDGE_KEYS,
    SELECT_BEST_KEYS,
    SELECT_BEST_TYPES,
    GradedSpecError,
    JudgeSpec,
    TrajectoryJudgeSpec,
    parse_judge_spec,
)

#: The assertion type.
GRADER_TYPE = "model-graded"
#: Keys of a ``model-graded`` assertion besides the judged ones.
GRADER_KEYS: frozenset[str] = frozenset({"prompt", "choices", "chain_of_thought"})
#: The score key (the record's dimension) of a grader's verdict.
GRADER_SCORE_KEY = "model_graded"
#: The variables every grader prompt may name, besides the case's vars.
GRADER_VARS: tuple[str, ...] = ("input", "output", "expected", "context")
#: The variable of a ``scope: trajectory`` grader's prompt: the rendered trajectory
#: (:mod:`pytest_llmbench.judging.trajectory_judge`); such a prompt must name it, no other may.
TRAJECTORY_VAR = "trajectory"
#: ``prompt: file://PATH`` reads the prompt from PATH, relative to the eval file.
FILE_PREFIX = "file://"
#: The longest choice label: a label is a word or two the judge writes back, not a sentence.
_LABEL_LIMIT = 40


@dataclass(frozen=True)
class ModelGradedSpec(JudgeSpec):
    """A ``model-graded`` assertion: the judge settings, the prompt and the choices.

    A subclass of :class:`JudgeSpec`, so that the case hashes of the other judged types stay
    what they were (a case hash digests the spec's fields).
    """

    #: the prompt template; for ``file://`` the file's text once read at collection
    prompt: str = ""
    #: the path written after ``file://`` (None: the prompt is inline)
    prompt_file: str | None = None
    #: (label, score) per choice, in the order written; scores in 0..1
    choices: tuple[tuple[str, float], ...] = ()
    #: the judge reasons step by step before its choice; the reasoning is the verdict's reason
    chain_of_thought: bool = False

    @property
    def labels(self) -> tuple[str, ...]:
        """The choice labels, in the order written."""
        return tuple(label for label, _ in self.choices)

    def score_of(self, label: str) -> float:
        """The score of the choice ``label`` (one of :attr:`labels`)."""
        return dict(self.choices)[label]


@dataclass(frozen=True)
class TrajectoryGraderSpec(ModelGradedSpec, TrajectoryJudgeSpec):
    """A ``model-graded`` assertion with ``scope: trajectory``: its prompt reads the rendered
    trajectory as ``{{trajectory}}``. A subclass, so that other graders' hashes stay."""


def choice_grader(spec: JudgeSpec, choices: tuple[tuple[str, float], ...]) -> ModelGradedSpec:
    """A grader asking for one of ``choices`` with ``spec``'s judge settings (structured output,
    temperature): how pairwise and select-best ask their judges to pick an answer."""
    fields = {name: getattr(spec, name) for name in JudgeSpec.__dataclass_fields__}
    return ModelGradedSpec(**fields, choices=choices)


def judge_keys(kind: str) -> frozenset[str]:
    """The keys an assertion of the judged type ``kind`` may have, besides
    type/value/weight/threshold: a grader's own keys too."""
    if kind in SELECT_BEST_TYPES:
        return JUDGE_KEYS | SELECT_BEST_KEYS
    return JUDGE_KEYS | GRADER_KEYS if kind in GRADER_TYPES else JUDGE_KEYS


def parse_judged(kind: str, raw: Mapping[str, Any]) -> JudgeSpec:
    """The settings of a judged assertion of type ``kind``: a :class:`ModelGradedSpec` for a
    grader, else :func:`~.judged.parse_judge_spec`'s; raise :class:`GradedSpecError`."""
    spec = parse_judge_spec(kind, raw)
    return parse_grader_spec(spec, raw) if kind in GRADER_TYPES else spec


def parse_grader_spec(base: JudgeSpec, raw: Mapping[str, Any]) -> ModelGradedSpec:
    """The :class:`ModelGradedSpec` of a ``model-graded`` assertion whose judge settings were
    parsed into ``base``; raise :class:`GradedSpecError` naming the offending key."""
    prompt, prompt_file = _prompt(raw.get("prompt"))
    cot = raw.get("chain_of_thought", False)
    if not isinstance(cot, bool):
        raise GradedSpecError(
            f"chain_of_thought must be true or false, got {cot!r}", "chain_of_thought"
        )
    fields = {name: getattr(base, name) for name in base.__dataclass_fields__}
    grader = TrajectoryGraderSpec if isinstance(base, TrajectoryJudgeSpec) else ModelGradedSpec
    return grader(
        **fields,
        prompt=prompt,
        prompt_file=prompt_file,
        choices=parse_choices(raw.get("choices")),
        chain_of_thought=cot,
    )


def _prompt(value: Any) -> tuple[str, str | None]:
    """(inline text, None) or ("", the path after ``file://``)."""
    if value is None:
        raise GradedSpecError(
            "model-graded needs a `prompt` (the grading prompt, or file://PATH)", "prompt"
        )
    if not isinstance(value, str) or not value.strip():
        raise GradedSpecError(f"prompt must be non-empty text, got {value!r}", "prompt")
    if value.startswith(FILE_PREFIX):
        path = value.removeprefix(FILE_PREFIX).strip()
        if not path:
            raise GradedSpecError("prompt: file:// names no file", "prompt")
        return "", path
    return value, None


def parse_choices(value: Any) -> tuple[tuple[str, float], ...]:
    """``{label: score}`` as written: labels text (or integers), scores numbers in 0..1."""
    if value is None:
        raise GradedSpecError(
            "model-graded needs `choices`: a mapping of each label the judge may pick to its "
            "score in 0..1, e.g. {A: 1.0, B: 0.5, C: 0}",
            "choices",
        )
    if not isinstance(value, Mapping):
        raise GradedSpecError(
            f"choices must be a mapping of label to score, got {type(value).__name__}", "choices"
        )
    if not value:
        raise GradedSpecError("choices must name at least one choice", "choices")
    choices = [(_label(key), _score(key, score)) for key, score in value.items()]
    labels = [label for label, _ in choices]
    if len(set(labels)) < len(labels):
        raise GradedSpecError(f"choices: repeated label in {labels}", "choices")
    return tuple(choices)


def _label(key: Any) -> str:
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise GradedSpecError(
            f"choices: label {key!r} must be text (quote YAML words such as yes, no, on, off)",
            "choices",
        )
    label = str(key).strip()
    if not label or "\n" in label or len(label) > _LABEL_LIMIT:
        raise GradedSpecError(
            f"choices: label {key!r} must be one line of 1 to {_LABEL_LIMIT} characters",
            "choices",
        )
    return label


def _score(label: Any, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise GradedSpecError(f"choices: the score of {label!r} must be a number, got {value!r}",
                              "choices")  # fmt: skip
    if not math.isfinite(float(value)):
        raise GradedSpecError(f"choices: the score of {label!r} must be a number, got {value!r}",
                              "choices")  # fmt: skip
    if not 0.0 <= float(value) <= 1.0:
        raise GradedSpecError(
            f"choices: the score of {label!r} must be between 0 and 1, got {value!r}", "choices"
        )
    return float(value)


def with_prompt_text(spec: ModelGradedSpec, text: str) -> ModelGradedSpec:
    """``spec`` with its ``file://`` prompt read (``text``: the file's content)."""
    if not text.strip():
        raise ValueError(f"prompt: file://{spec.prompt_file} is empty")
    return replace(spec, prompt=text)


def votes_text(spec: ModelGradedSpec, choices: Sequence[str]) -> str:
    """The judges' votes by choice in the order the choices are written, e.g. ``A 2, B 1``."""
    counts = {label: choices.count(label) for label in spec.labels if label in choices}
    return ", ".join(f"{label} {count}" for label, count in counts.items())
