"""What the judges of one answer read, and the calls the engine makes for them: an
:class:`AnswerView`, built once per answer by the engine
(:func:`pytest_llmbench.engine.grading.grade`) and handed to each judged assertion's kind
(:mod:`.judge_kinds`). This stage comes before the engine and cannot import it: the view is the
engine's side of the seam, as plain values and callables.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .trajectory_judge import Trajectory

if TYPE_CHECKING:
    from ..models import Completion, ModelProfile
    from ..scoring import Assertion, BaselineAnswer, EmbeddingSpec, JudgeSpec, ModelGradedSpec
    from .panel import CompleteFn, GradedAssertion, PanelForm


class JudgedEntry(Protocol):
    """A judged assertion of a case with its panel (the engine's ``GradedSpec``)."""

    @property
    def index(self) -> int:
        """The assertion's index in its case."""

    @property
    def assertion(self) -> Assertion:
        """The assertion as written."""

    @property
    def spec(self) -> JudgeSpec | EmbeddingSpec:
        """Its judge settings (or its embedding model's)."""

    @property
    def judges(self) -> tuple[ModelProfile, ...]:
        """The panel, or the one embedding model (an embedding-scored relevance: last)."""


#: One embedding call: (the embedding model, the texts) -> the vectors as JSON text.
EmbedFn = Callable[["ModelProfile", Sequence[str]], Awaitable["Completion"]]


@dataclass(frozen=True)
class AnswerView:
    """One answer as its judges see it, and how they are called (paced, cached, budgeted)."""

    #: the answer as judges read it: its text with a line per tool call, an agent's calls and
    #: results before its final answer
    answer: str
    reply: str  #: the model's reply text alone (what an embedding compares)
    agent: bool  #: the answer is an agent's run (its saved record keeps the final answer)
    #: the history before the answer, as text messages (system, user, assistant)
    messages: tuple[dict[str, str], ...]
    question: str | None  #: the last user message's text; None when there is none
    expected: str | None  #: the case's expected answer
    task: dict[str, Any] | None  #: the case's task type and criteria
    #: the retrieved context (a solver's, else the case's); None: the case gives none
    context: tuple[str, ...] | None
    #: jury dimensions beyond the standard six: the run's, then the file's and the case's
    extra_dimensions: tuple[str, ...]
    conversation: bool  #: a scripted or simulated conversation (no single reply to compare)
    complete: CompleteFn  #: one judge call
    embed: EmbedFn  #: one embedding call
    #: whether a judged assertion reads the retrieved context (a RAG metric, a grader's prompt)
    reads_context: Callable[[JudgeSpec], bool]
    #: a user's grader's prompt rendered for this answer
    grader_prompt: Callable[[ModelGradedSpec], str]
    #: the ``--baseline`` run's answer to this case, or why there is none
    baseline: Callable[[], BaselineAnswer | str]
    #: this answer's verdict in its select-best contest, once the contest is judged
    contest: Callable[[JudgedEntry], Awaitable[GradedAssertion]]
    #: the model's thinking before its answer ("": none), shown to the judges of an assertion
    #: with ``show_reasoning: true`` only
    reasoning: str = ""
    #: every step that led to the answer, rendered (:mod:`.trajectory_judge`); built only when some
    #: judged assertion of the answer has ``scope: trajectory`` (else empty)
    trajectory: Trajectory = field(default_factory=Trajectory)


#: How a judge kind grades one answer: (the assertion, the answer's view, the kind's panel
#: form) -> the verdict with every call made.
GradeFn = Callable[[JudgedEntry, AnswerView, "PanelForm"], Awaitable["GradedAssertion"]]
