"""The values every assertion module shares: the parsed assertion, its context and verdict.

:mod:`.assertions` parses and evaluates; the checkers (:mod:`.text_checks`,
:mod:`.structured_checks`, :mod:`.python_checks`) build an :class:`Outcome` with the helpers
here, or raise :class:`CheckFailed` when the check cannot be made.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .judged import EmbeddingSpec, JudgeSpec

if TYPE_CHECKING:
    from ..models import Completion

QUOTE_LIMIT = 80


class AssertionSpecError(ValueError):
    """Bad assertion in an eval file; ``.field`` is the offending key ('type', 'value', ...)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclasses.dataclass(frozen=True)
class Assertion:
    """One parsed ``assert:`` item."""

    type: str  #: as written, e.g. ``not-contains``
    base_type: str  #: without the ``not-`` prefix, e.g. ``contains``
    negate: bool = False  #: whether the ``not-`` prefix was given
    #: the value, normalised (a number given as text becomes str, a list a tuple); None if omitted
    value: Any = None
    weight: float = 1.0  #: weight in the case score, >= 0
    #: type-specific extras (tolerance, rel_tolerance, threshold) as floats; read-only
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: how a model grades it (judged types, embedding similarity); None for local checks
    graded: JudgeSpec | EmbeddingSpec | None = None
    #: an agent check (``file-exists``, ``command``, ``tool-called``, ...): judged on the
    #: agent's workdir and tool calls, not on the answer text
    agent_check: Any = None
    #: True when no value was given but the type needs one: the case's ``expected`` is used
    needs_value: bool = False

    @property
    def engine_graded(self) -> bool:
        """True when a model call grades this assertion (a judge panel or an embedding)."""
        return self.graded is not None

    @property
    def criterion(self) -> str | None:
        """What a judge is asked, as text (a rubric, criteria, a grader's prompt name), for
        telling one judged assertion from another in calibration; None when it has no value."""
        if self.value is None:
            return None
        if isinstance(self.value, str):
            return self.value
        return json.dumps(self.value, sort_keys=True, ensure_ascii=False, default=str)


@dataclasses.dataclass(frozen=True)
class CallMeasures:
    """What the model call measured, for the ``latency``, ``cost`` and ``tokens`` checks; a
    value the provider did not report (or no price known) is None."""

    latency_s: float | None = None  #: the whole call, seconds
    ttft_s: float | None = None  #: time to first token, seconds (streamed calls only)
    cost_usd: float | None = None  #: the model call's cost
    judge_cost: float | None = None  #: the item's judge calls' cost (None: none known)
    judge_calls: int = 0  #: judge calls made for the item
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None  #: of the output tokens, those spent thinking
    reasoning_tokens_estimated: bool = False  #: counted from the thinking's text
    cached_input_tokens: int | None = None  #: of the input tokens, those read from a cache
    cached: bool = False  #: the answer came from the response cache (no call was timed)
    #: the answer came through a provider's batch API (its wait says nothing of the model)
    batched: bool = False
    finish_reason: str | None = None  #: why the model stopped, as the provider said

    @classmethod
    def of(
        cls, completion: Completion, *, judge_cost: float | None = None, judge_calls: int = 0
    ) -> CallMeasures:
        """What ``completion`` (a ``Completion``) measured, with the item's judges' cost."""
        return cls(
            latency_s=completion.latency_s,
            ttft_s=completion.ttft_s,
            cost_usd=completion.cost_usd,
            judge_cost=judge_cost,
            judge_calls=judge_calls,
            input_tokens=completion.input_tokens,
            output_tokens=completion.output_tokens,
            reasoning_tokens=completion.reasoning_tokens,
            reasoning_tokens_estimated=completion.reasoning_tokens_estimated,
            cached_input_tokens=completion.cached_input_tokens,
            cached=completion.cached,
            batched=completion.batched,
            finish_reason=completion.finish_reason,
        )


@dataclasses.dataclass(frozen=True)
class AssertionContext:
    """What an assertion may know about the case besides the answer."""

    expected: str | None = None  #: the case's expected answer; used when a value is omitted
    prompt: str | None = None  #: the rendered prompt
    vars: Mapping[str, Any] = dataclasses.field(default_factory=dict)  #: the case's variables
    model: str = ""  #: the model name as selected
    case_id: str = ""  #: the case id inside its suite
    #: the eval file's directory; python modules and schema files resolve against it
    base_dir: Path = Path(".")
    choices: tuple[str, ...] | None = None  #: a multiple choice case's choices, in order
    answer_index: int | None = None  #: the 0-based index of the right choice
    #: the marks shown before the choices when not the letters A, B, ... (ARC's "1".."4")
    choice_labels: tuple[str, ...] | None = None
    #: the item's workdir (an agent's, or one seeded from ``files:``), for ``python`` checks
    #: to read what was left there; None when the item has none
    workdir: Path | None = None
    #: the call's latency, cost and tokens; None where nothing was measured
    measures: CallMeasures | None = None
    #: the reply's tool calls (``{"id", "name", "arguments"}``, arguments as sent) of a
    #: function-calling item
    tool_calls: tuple[Mapping[str, Any], ...] = ()
    #: a function-calling item's declared tools: name -> JSON schema of the arguments
    tool_schemas: Mapping[str, Mapping[str, Any]] | None = None
    #: everything the model said to the user, in order, as ``communicated`` reads it: in a
    #: conversation the text of each reply up to the one checked (an agent's answers, never its
    #: tool calls nor their results); None: the answer checked is all it said
    said: tuple[str, ...] | None = None


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The result of one assertion on one answer."""

    type: str  #: the assertion type as written
    passed: bool  #: whether the assertion holds
    score: float  #: 0..1: 1.0 or 0.0 for pass/fail checks, graded for python checks
    weight: float  #: the assertion's weight
    reason: str  #: a short human-readable explanation
    #: nothing could be measured (a cached answer's latency, an unknown cost): neither a pass
    #: nor a failure, left out of the score
    unchecked: bool = False
    #: the 1-based turn of a conversation whose reply it checked (None outside conversations)
    turn: int | None = None
    #: a judged assertion's rubric or criteria as text (what a judge was asked), for telling
    #: judges apart in calibration; None for other checks
    criterion: str | None = None
    #: the judge gate's decision on a judged verdict (``ok``, ``demoted``, ``failing``,
    #: ``too_few_labels``, ``kappa_undefined``); None when no gate applies. A demoted verdict
    #: is unchecked and keeps ``passed`` as its judge said it (labels still calibrate it)
    judge_gate: str | None = None
    #: a judged verdict's judge group: the judges called on it (names as configured, else
    #: model ids; one that failed included), sorted; () for other checks. Kept on the verdict
    #: so that it names its judges wherever it stands (a conversation's turns, a select-best
    #: contestant whose judge calls are recorded on another contestant)
    judges: tuple[str, ...] = ()

    @property
    def demoted(self) -> bool:
        """The judge gate demoted it: its judge disagrees with people (unchecked)."""
        return self.judge_gate == "demoted"

    def to_dict(self) -> dict[str, Any]:
        """The verdict as JSON primitives, for the wire record (``unchecked`` and ``turn`` only
        when set)."""
        fields: dict[str, Any] = {
            "type": self.type,
            "passed": bool(self.passed),
            "score": float(self.score),
            "weight": float(self.weight),
            "reason": self.reason,
        }
        if self.unchecked:
            fields["unchecked"] = True
        if self.turn is not None:
            fields["turn"] = self.turn
        if self.criterion is not None:
            fields["criterion"] = self.criterion
        if self.judges:
            fields["judges"] = list(self.judges)
        if self.judge_gate is not None:
            fields["judge_gate"] = self.judge_gate
        if self.demoted:
            fields["demoted"] = True
        return fields


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What a checker found, before negation: passed, why, and the 0..1 score."""

    passed: bool
    reason: str
    score: float


class CheckFailed(Exception):
    """The check could not be made (not a fault of the answer); the message is the reason."""


class NotMeasured(Exception):
    """What the check reads was not measured (a cached answer's latency, an unknown price): the
    verdict is unchecked, neither passed nor failed; the message is the reason."""


Checker = Callable[[Any, str, Assertion, AssertionContext], Outcome]


@dataclasses.dataclass(frozen=True)
class TypeSpec:
    """How one assertion type is parsed and checked: an entry of the registry."""

    check: Checker
    #: "defaults": the case's expected when omitted; "required": must be given; "none": no value
    value_rule: Literal["defaults", "required", "none"]
    parse_value: Callable[[str, Any], Any] | None = None  #: normalises a written value, or raises
    hint: str = ""  #: what a required value looks like
    options: frozenset[str] = frozenset()


# --- helpers for checkers --------------------------------------------------------------------


def is_number(value: Any) -> bool:
    """A real number that is not a bool (YAML's ``true`` is not 1)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def weight_of(raw: Mapping[str, Any]) -> float:
    """A written assertion's ``weight`` (1 when not given): a finite number >= 0."""
    value = raw.get("weight", 1.0)
    if not is_number(value) or not math.isfinite(value) or value < 0:
        raise AssertionSpecError(f"weight must be a number >= 0, got {value!r}", "weight")
    return float(value)


#: Seconds one regex check may search an answer or a file: a pattern that backtracks
#: catastrophically fails its check instead of hanging the run.
REGEX_TIMEOUT_S = 2.0


def compile_regex(pattern: str) -> Any:
    """``pattern`` compiled by the ``regex`` package (``re``'s syntax, searches with a time
    limit); ``ValueError`` says why it does not compile (``a{4294967296}``, groups nested past
    Python's recursion limit and the like included)."""
    import regex

    try:
        return regex.compile(pattern)
    except (regex.error, OverflowError, RecursionError, MemoryError) as exc:
        raise ValueError(str(exc) or type(exc).__name__) from None


def valid_regex(pattern: str) -> str:
    """``pattern``, or an :class:`AssertionSpecError` naming why it does not compile."""
    try:
        compile_regex(pattern)
    except ValueError as exc:
        raise AssertionSpecError(f"invalid regex {pattern!r}: {exc}", "value") from None
    return pattern


def regex_search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text``.

    :class:`CheckFailed` when it does not compile, or when the search runs past
    :data:`REGEX_TIMEOUT_S`.
    """
    try:
        compiled = compile_regex(pattern)
    except ValueError as exc:  # only a pattern taken from the case's expected gets here
        raise CheckFailed(f"invalid regex {quoted(pattern)}: {exc}") from None
    try:
        return compiled.search(text, timeout=REGEX_TIMEOUT_S) is not None
    except TimeoutError:
        raise CheckFailed(
            f"regex {quoted(pattern)} searched for more than {REGEX_TIMEOUT_S:g} s without an "
            "answer (catastrophic backtracking): simplify it"
        ) from None


def pass_fail(passed: bool, if_passed: str, if_failed: str) -> Outcome:
    """A check that passes or fails outright: score 1 or 0, with the reason for either."""
    return Outcome(passed, if_passed if passed else if_failed, 1.0 if passed else 0.0)


def clip(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, ``...`` included, when it is longer."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def one_line(text: str, limit: int) -> str:
    """``text`` on one line, each run of white space one space, clipped to ``limit``."""
    return clip(" ".join(text.split()), limit)


def quoted(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text`` quoted for a verdict's reason: control characters escaped, then clipped."""
    escaped = text.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return f"'{clip(escaped, limit)}'"


def number_text(value: float) -> str:
    """A number as a reason shows it: up to 10 significant digits, no trailing zeros."""
    return f"{value:.10g}"
