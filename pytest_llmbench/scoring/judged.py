"""The settings of a model-graded assertion, as written in an eval file.

``llm-rubric``, ``jury``, ``factuality`` and ``closed-qa`` are graded by judge models, and
``similarity`` with ``method: embedding`` by an embedding model; they run in the engine after
the evaluated model answered (see :mod:`pytest_llmbench.judging.panel`). Everything here is
checked at collection, so a bad setting is a collection error naming the file and line.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: RAG metrics (:mod:`pytest_llmbench.scoring.rag`): judged, scored 0..1 from per-claim or
#: per-chunk verdicts.
RAG_TYPES: frozenset[str] = frozenset(
    {"faithfulness", "answer-relevance", "context-recall", "context-precision"}
)
#: The RAG metrics that read the case's (or the solver's) retrieved context.
CONTEXT_TYPES: frozenset[str] = RAG_TYPES - {"answer-relevance"}
#: Assertion types graded by judge models.
JUDGE_TYPES: frozenset[str] = (
    frozenset({"llm-rubric", "jury", "factuality", "closed-qa"}) | RAG_TYPES
)
#: The user's own grader (:mod:`pytest_llmbench.scoring.model_graded`): a judged type too.
GRADER_TYPES: frozenset[str] = frozenset({"model-graded"})
JUDGE_TYPES |= GRADER_TYPES
#: Pairwise judging against a ``--baseline`` run's answer (:mod:`pytest_llmbench.scoring.pairwise`).
PAIRWISE_TYPES: frozenset[str] = frozenset({"pairwise"})
JUDGE_TYPES |= PAIRWISE_TYPES
#: Picking the best answer of a case's contestants (:mod:`pytest_llmbench.scoring.select_best`).
SELECT_BEST_TYPES: frozenset[str] = frozenset({"select-best"})
JUDGE_TYPES |= SELECT_BEST_TYPES
#: Keys of a ``select-best`` assertion besides the judged ones: the shuffle's seed, and whether
#: every rotation of the order is judged.
SELECT_BEST_KEYS: frozenset[str] = frozenset({"seed", "rotate"})
#: How a panel's scores of one dimension become the item's: ``majority`` passes a dimension
#: when more than half of the judges reach the threshold; the others compare the statistic.
AGGREGATIONS: tuple[str, ...] = ("mean", "median", "majority", "min")
SIMILARITY_METHODS: tuple[str, ...] = ("rouge-l", "embedding")
#: Keys a judged assertion may have, besides type/value/weight/threshold.
JUDGE_KEYS: frozenset[str] = frozenset(
    {"judges", "dimensions", "aggregate", "structured", "temperature", "scope", "show_reasoning"}
)
#: The judged types whose judges may be shown the answer's reasoning (``show_reasoning``):
#: those that judge one answer with a prompt of ours.
REASONING_SHOWN_TYPES: tuple[str, ...] = ("llm-rubric", "jury", "factuality", "closed-qa")
#: What a judged assertion's judges see: ``turn`` (the default), the reply it is attached to
#: with the question it answers; ``conversation``, the whole transcript up to that reply;
#: ``trajectory``, every step that led to the answer (user turns, the model's texts, its tool
#: calls with their arguments and results, errors marked), rendered by
#: :mod:`pytest_llmbench.judging.trajectory_judge`.
SCOPES: tuple[str, ...] = ("turn", "conversation", "trajectory")
#: The judged types that may judge a whole conversation (factuality compares one answer with
#: its expected answer: a transcript has none).
CONVERSATION_TYPES: tuple[str, ...] = ("llm-rubric", "jury", "closed-qa")
#: The judged types that may judge a whole trajectory: a rubric (the built-in ones too), a
#: jury's dimensions, and a user's grader (its prompt reads ``{{trajectory}}``).
TRAJECTORY_TYPES: tuple[str, ...] = ("llm-rubric", "jury", "model-graded")
SIMILARITY_KEYS: frozenset[str] = frozenset({"method", "embedding_model"})
#: ``answer-relevance``'s own keys: Ragas' way, the judges write questions the answer would
#: answer and an embedding model compares them with the case's (:class:`RelevanceSpec`).
RELEVANCE_KEYS: frozenset[str] = frozenset({"embedding_model", "questions"})
JUDGE_KEYS |= RELEVANCE_KEYS
#: How many questions each judge writes by default (Ragas' ``strictness``).
DEFAULT_QUESTIONS = 3
#: Pass thresholds: jury dimensions are scored 1..5, the other kinds 0..1.
_DEFAULT_THRESHOLD = {"jury": 3.0, "similarity-rouge-l": 0.5, "similarity-embedding": 0.8}
_THRESHOLD_RANGE = {"jury": (1.0, 5.0)}


class GradedSpecError(ValueError):
    """A bad setting of a model-graded assertion; ``field`` is the offending key."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class JudgeSpec:
    """How one judged assertion is graded."""

    kind: str  #: ``llm-rubric``, ``jury``, ``factuality``, ``closed-qa`` or a RAG metric
    #: judge names as written (profile names, litellm ids, @sets); empty: the run's panel
    judges: tuple[str, ...] = ()
    #: extra jury dimensions written on the assertion (normalised keys)
    dimensions: tuple[str, ...] = ()
    aggregate: str = "mean"
    #: jury: 1..5 per dimension; the other kinds: 0..1
    threshold: float = 0.5
    #: ask for the verdict's JSON schema as structured output (a grammar on llama.cpp)
    structured: bool = True
    temperature: float = 0.0
    #: the judges see the answer's reasoning (its thinking) too, labelled apart from it; in a
    #: case's hash only when true, so that other cases' hashes stay what they were
    show_reasoning: bool = field(default=False, metadata={"digest": "when_set"})

    @property
    def whole_conversation(self) -> bool:
        """Whether the judges see the whole transcript (``scope: conversation``)."""
        return False

    @property
    def whole_trajectory(self) -> bool:
        """Whether the judges see the trajectory (``scope: trajectory``)."""
        return False


@dataclass(frozen=True)
class ConversationJudgeSpec(JudgeSpec):
    """A judged assertion with ``scope: conversation``: its judges see the transcript, with
    roles, up to and including the reply it is attached to.

    A subclass rather than a field of :class:`JudgeSpec`, so that the case hashes of judged
    assertions without a scope stay what they were (a case hash digests the spec's fields).
    """

    scope: str = "conversation"

    @property
    def whole_conversation(self) -> bool:
        """Always: the judges see the transcript."""
        return True


@dataclass(frozen=True)
class TrajectoryJudgeSpec(JudgeSpec):
    """A judged assertion with ``scope: trajectory``: its judges see every step that led to
    the answer (an agent's run, a conversation up to the reply, a function-calling reply with
    the messages it answers), as :mod:`pytest_llmbench.judging.trajectory_judge` renders it.

    A subclass rather than a field of :class:`JudgeSpec`, as :class:`ConversationJudgeSpec` is,
    so that the case hashes of judged assertions without a scope stay what they were.
    """

    scope: str = "trajectory"

    @property
    def whole_trajectory(self) -> bool:
        """Always: the judges see the trajectory."""
        return True


@dataclass(frozen=True)
class RelevanceSpec(JudgeSpec):
    """``answer-relevance`` with ``embedding_model``, as Ragas scores it: each judge writes
    ``questions`` questions the answer would answer, and says whether it is noncommittal; the
    embedding model compares each with the case's question (:mod:`.rag`).

    A subclass rather than fields of :class:`JudgeSpec`, so that the case hashes of the other
    judged assertions stay what they were (a case hash digests the spec's fields).
    """

    embedding_model: str = ""  #: profile name or litellm id of the embedding model
    questions: int = DEFAULT_QUESTIONS  #: questions each judge writes (Ragas' strictness)


def scope_refusal(kind: str, scope: str = "conversation") -> str:
    """Why an assertion of type ``kind`` takes no ``scope`` (``scope: trajectory``: no
    trajectory scope)."""
    if scope == "trajectory":
        types = ", ".join(TRAJECTORY_TYPES)
        return (
            f"`scope: trajectory` applies to {types} (the types whose judges may read a "
            f"whole trajectory), not to {kind}"
        )
    types = ", ".join(CONVERSATION_TYPES)
    if kind == "factuality":
        return (
            "factuality compares one reply with its expected answer: it takes no "
            f"`scope: conversation` (the types that judge a whole conversation: {types})"
        )
    return f"`scope` applies to judged assertions ({types}), not to {kind}"


@dataclass(frozen=True)
class EmbeddingSpec:
    """``similarity`` by embedding cosine: which model embeds, and the pass threshold."""

    model: str  #: profile name or litellm id of the embedding model
    threshold: float = 0.8


def parse_judge_spec(kind: str, raw: Mapping[str, Any]) -> JudgeSpec:
    """The :class:`JudgeSpec` of a judged assertion mapping; raise :class:`GradedSpecError`."""
    judges = _names(raw.get("judges"), "judges")
    dimensions: tuple[str, ...] = ()
    if "dimensions" in raw:
        if kind != "jury":
            raise GradedSpecError("'dimensions' applies to jury only", "dimensions")
        try:
            dimensions = tuple(
                dimension_key(name) for name in _names(raw["dimensions"], "dimensions")
            )
        except ValueError as exc:
            raise GradedSpecError(f"dimensions: {exc}", "dimensions") from None
    aggregate = str(raw.get("aggregate", "mean"))
    if aggregate not in AGGREGATIONS:
        raise GradedSpecError(
            f"aggregate must be one of {', '.join(AGGREGATIONS)}, got {aggregate!r}", "aggregate"
        )
    structured = raw.get("structured", True)
    if not isinstance(structured, bool):
        raise GradedSpecError(f"structured must be true or false, got {structured!r}", "structured")
    scope = _scope(kind, raw)
    spec_class = _SCOPED.get(scope, JudgeSpec)
    relevance = _relevance(kind, raw)
    spec = spec_class(
        kind=kind,
        judges=judges,
        dimensions=dimensions,
        aggregate=aggregate,
        threshold=_threshold(kind, raw),
        structured=structured,
        temperature=_number(raw, "temperature", 0.0, (0.0, 2.0)),
        show_reasoning=_show_reasoning(kind, scope, raw),
    )
    if relevance is None:
        return spec
    fields = {name: getattr(spec, name) for name in spec.__dataclass_fields__}
    return RelevanceSpec(**fields, embedding_model=relevance[0], questions=relevance[1])


def _relevance(kind: str, raw: Mapping[str, Any]) -> tuple[str, int] | None:
    """``answer-relevance``'s ``embedding_model`` and ``questions``; None without a model."""
    given = sorted(key for key in RELEVANCE_KEYS if key in raw)
    if given and kind != "answer-relevance":
        where = (
            " (similarity takes it with method: embedding)" if given[0] == "embedding_model" else ""
        )
        raise GradedSpecError(f"{given[0]!r} applies to answer-relevance only{where}", given[0])
    if not given:
        return None
    model = raw.get("embedding_model")
    if not isinstance(model, str) or not model.strip():
        message = "embedding_model must name an embedding model (a profile name or litellm id)"
        if model is None:
            message = "questions needs embedding_model (a profile name or litellm id)"
        raise GradedSpecError(message, "embedding_model" if model is not None else "questions")
    count = raw.get("questions", DEFAULT_QUESTIONS)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 10:
        raise GradedSpecError(
            f"questions must be an integer from 1 to 10, got {count!r}", "questions"
        )
    return model.strip(), count


def _show_reasoning(kind: str, scope: str, raw: Mapping[str, Any]) -> bool:
    """Whether the judges see the answer's reasoning too: a boolean, for the judged types of
    :data:`REASONING_SHOWN_TYPES` judging one reply."""
    shown = raw.get("show_reasoning", False)
    if not isinstance(shown, bool):
        raise GradedSpecError(
            f"show_reasoning must be true or false, got {shown!r}", "show_reasoning"
        )
    if shown and kind not in REASONING_SHOWN_TYPES:
        types = ", ".join(REASONING_SHOWN_TYPES)
        raise GradedSpecError(
            f"show_reasoning applies to {types} (judging one reply), not to {kind}",
            "show_reasoning",
        )
    if shown and scope != "turn":
        raise GradedSpecError(
            f"show_reasoning shows one reply's reasoning: not with scope: {scope}",
            "show_reasoning",
        )
    return shown


#: The settings class of each scope but ``turn`` (a subclass: hashes without a scope stay).
_SCOPED: dict[str, type[JudgeSpec]] = {
    "conversation": ConversationJudgeSpec,
    "trajectory": TrajectoryJudgeSpec,
}


def _scope(kind: str, raw: Mapping[str, Any]) -> str:
    scope = raw.get("scope", "turn")
    if scope not in SCOPES:
        raise GradedSpecError(
            f"scope must be turn, conversation or trajectory, got {scope!r}", "scope"
        )
    if scope == "conversation" and kind not in CONVERSATION_TYPES:
        raise GradedSpecError(scope_refusal(kind), "scope")
    if scope == "trajectory" and kind not in TRAJECTORY_TYPES:
        raise GradedSpecError(scope_refusal(kind, "trajectory"), "scope")
    return str(scope)


def parse_embedding_spec(raw: Mapping[str, Any]) -> EmbeddingSpec | None:
    """The embedding settings of a ``similarity`` assertion, or None for ROUGE-L."""
    method = str(raw.get("method", "rouge-l"))
    if method not in SIMILARITY_METHODS:
        choices = ", ".join(SIMILARITY_METHODS)
        raise GradedSpecError(f"method must be one of {choices}, got {method!r}", "method")
    model = raw.get("embedding_model")
    if method == "rouge-l":
        if model is not None:
            raise GradedSpecError("embedding_model needs method: embedding", "embedding_model")
        return None
    if not isinstance(model, str) or not model.strip():
        message = "method: embedding needs embedding_model (a profile name or litellm id)"
        raise GradedSpecError(message, "embedding_model")
    threshold = _number(raw, "threshold", _DEFAULT_THRESHOLD["similarity-embedding"], (-1.0, 1.0))
    return EmbeddingSpec(model.strip(), threshold)


def rouge_threshold(raw: Mapping[str, Any]) -> float:
    """The pass threshold of a ROUGE-L ``similarity`` assertion."""
    return _number(raw, "threshold", _DEFAULT_THRESHOLD["similarity-rouge-l"], (0.0, 1.0))


def _threshold(kind: str, raw: Mapping[str, Any]) -> float:
    default = _DEFAULT_THRESHOLD.get(kind, 0.5)
    return _number(raw, "threshold", default, _THRESHOLD_RANGE.get(kind, (0.0, 1.0)))


def _number(raw: Mapping[str, Any], key: str, default: float, bounds: tuple[float, float]) -> float:
    if key not in raw:
        return default
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise GradedSpecError(f"{key} must be a number, got {value!r}", key)
    low, high = bounds
    if not low <= float(value) <= high:
        raise GradedSpecError(f"{key} must be between {low:g} and {high:g}, got {value!r}", key)
    return float(value)


def _names(value: Any, key: str) -> tuple[str, ...]:
    """A list of names, or one comma-separated string of them."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise GradedSpecError(f"{key} must be a list of names, got {value!r}", key)
    names = tuple(item.strip() for item in items if item.strip())
    if not names:
        raise GradedSpecError(f"{key} must name at least one entry", key)
    return names


_NOT_KEY = re.compile(r"[\W_]+")


def dimension_key(name: str) -> str:
    """The key of a jury dimension: ``"Brand voice"`` -> ``"brand_voice"``.

    Lowercase, each run of non-alphanumerics becomes one ``_``, and ``_`` is stripped from the
    ends. Raises ValueError when nothing is left.
    """
    key = _NOT_KEY.sub("_", name.lower()).strip("_")
    if not key:
        raise ValueError(f"dimension name {name!r} has no letters or digits")
    return key
