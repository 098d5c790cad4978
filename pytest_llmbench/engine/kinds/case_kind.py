"""What a case kind is: :class:`CaseKind`, and the views of the engine and of an item's result
that its methods read.

A kind owns, for its items, how they are answered (on the engine loop, through the
:class:`Engine` the :class:`~..answer.Answerer` is), how their verdicts are made and what
decides their failure (on the item's thread, from a :class:`KindResult`), and which record
fields they fill (plain data, read by :mod:`pytest_llmbench.results.item_record`). Stage order
forbids the engine to import the item or the results stage: both are read here through
protocols they satisfy (:class:`~pytest_llmbench.results.state.EvalResult` is a
:class:`KindResult`), so the whole kind is one module of ``engine/kinds/``.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, Protocol, TypeVar

from ...models import Completion, ItemError, total_usage
from .tool_shim import read_shim, shim_offered

if TYPE_CHECKING:
    from ...agent import AgentRun, McpPool, Sandbox, StateSnapshot
    from ...judging import GradedAssertion
    from ...scoring import Assertion, AssertionContext, CallMeasures, Verdict
    from ..conversation_calls import Progress
    from ..grading import HelperCalls, HelperTargets
    from ..pacing import CallPacer
    from ..plan import CallPlan
    from ..request import Answer, ConversationRun, Request

T = TypeVar("T")


class Engine(Protocol):
    """What a kind's answer may use of the engine (the :class:`~..answer.Answerer`)."""

    @property
    def pacer(self) -> CallPacer:
        """Every call of the item goes through it: paced, cached, budgeted."""

    @property
    def helpers(self) -> HelperCalls:
        """Judges' and helper models' calls."""

    def kind_state(self, name: str, make: Callable[[], T]) -> T:
        """The state kind ``name`` keeps for this engine (made by ``make`` on first use)."""

    def talking(self, nodeid: str) -> AbstractContextManager[Progress]:
        """Follow item ``nodeid``'s conversation while it runs (pytest-timeout reads it)."""

    def mcp_pool(self) -> McpPool:
        """This process's MCP pool."""

    async def grade(
        self,
        plan: CallPlan,
        completion: Completion,
        targets: HelperTargets,
        retrieved: tuple[str, ...] | None = None,
        run: AgentRun | None = None,
    ) -> tuple[GradedAssertion, ...]:
        """The judges of ``plan``'s model-graded assertions on ``completion``."""

    async def grade_turns(
        self,
        plan: CallPlan,
        run: ConversationRun,
        targets: HelperTargets,
        paths: Mapping[int, AgentRun] | None = None,
    ) -> tuple[GradedAssertion, ...]:
        """The judges of each turn's model-graded assertions on that turn's reply (``paths``:
        an agent's conversation, each reply's turn -> the agent's run up to it)."""


@dataclass(frozen=True)
class KindCall:
    """One item's answering, as its kind gets it on the engine loop."""

    plan: CallPlan
    request: Request  #: the item's own call (images, an optimizer's rewrite, a shim in it)
    targets: HelperTargets  #: the judges' and helpers' targets (or why they cannot be called)
    prepared: Any = None  #: what the kind's :meth:`CaseKind.prepare` made on the main thread


class KindResult(Protocol):
    """What a kind reads and writes of an item's result (an ``EvalResult`` is one)."""

    plan: CallPlan
    completion: Completion | None
    graded: dict[int, GradedAssertion]
    verdicts: list[Verdict]
    score: float | None
    agent_run: AgentRun | None
    sandbox: Sandbox | None
    workdir: Path | None
    post_metrics: dict[str, float]
    item_error: ItemError | None
    solver_verdict: bool | None
    loglikelihood: dict[str, Any] | None
    agent_verdicts: dict[int, Verdict]
    conversation: ConversationRun | None
    state_snapshot: StateSnapshot | None


@dataclass(frozen=True)
class Checking:
    """What an item's verdicts are made from: its result and the context its checks read."""

    result: KindResult
    context: AssertionContext

    def verdict(
        self,
        index: int,
        assertion: Assertion,
        text: str | None = None,
        context: AssertionContext | None = None,
    ) -> Verdict:
        """Assertion ``index``'s verdict: its judges', else its check on ``text`` (the
        answer's by default) in ``context`` (the item's by default)."""
        from ...scoring import evaluate

        graded = self.result.graded.get(index) if assertion.engine_graded else None
        if graded is not None and graded.verdict is not None:
            verdict = dataclasses.replace(
                graded.verdict, criterion=assertion.criterion, judges=graded.judges
            )
            return gated(verdict, assertion, graded, self.result.plan)
        if text is None:
            assert self.result.completion is not None
            text = self.result.completion.text
        return evaluate(assertion, text, context or self.context)


def gated(
    verdict: Verdict, assertion: Assertion, graded: GradedAssertion, plan: CallPlan
) -> Verdict:
    """A judged ``verdict`` under the judge gate of ``plan``'s file: marked with the ruling on
    its judge group (``graded.judges``: those called on it, a failed one included, as
    :func:`~pytest_llmbench.results.reviews.judges_of` reads them; its type; its criterion), and
    unchecked when the gate demotes that judge (``passed`` kept as the judge said). An
    embedding's similarity, and a verdict no judge decided, are no judge's: left alone."""
    from ...scoring import EmbeddingSpec

    gate = plan.judge_gate
    if gate is None or verdict.unchecked or isinstance(assertion.graded, EmbeddingSpec):
        return verdict
    if not graded.judges:
        return verdict
    ruling = gate.ruling((graded.judges, verdict.type, verdict.criterion))
    if ruling.decision != "demoted":
        return dataclasses.replace(verdict, judge_gate=ruling.decision)
    said = "pass" if verdict.passed else "fail"
    reason = f"{ruling.reason} (the judge said {said}: {verdict.reason})"
    return dataclasses.replace(verdict, unchecked=True, reason=reason, judge_gate="demoted")


def call_measures(result: KindResult, completion: Completion | None = None) -> CallMeasures:
    """What the call (or ``completion``, one call of a conversation) measured, for the latency,
    cost and tokens checks; the judges' cost and calls beside."""
    from ...scoring import CallMeasures

    completion = completion or result.completion
    assert completion is not None
    calls = [call for graded in result.graded.values() for call in graded.calls]
    judge_cost = total_usage(call.usage for call in calls).cost_usd
    return CallMeasures.of(completion, judge_cost=judge_cost, judge_calls=len(calls))


@dataclass(frozen=True)
class Settling:
    """An item's setup after its answer came, as its kind finishes it (an agent's
    ``post_process`` and workdir checks)."""

    result: KindResult
    nodeid: str
    env_file: Path | None  #: the run's ``.env`` file, hidden from the item's commands
    fail: Callable[[ItemError], NoReturn]  #: end the item with this error


#: Counts a prompt's tokens: (litellm model id, messages) -> tokens.
TokenCounter = Callable[[str, Sequence[dict[str, Any]]], int]


class CaseKind(abc.ABC):
    """One case kind from end to end. Subclasses set :attr:`name`, implement :meth:`answer`
    and override what their kind does differently from a plain call's defaults."""

    #: the kind's name: its key in :data:`pytest_llmbench.engine.kinds.CASE_KINDS`
    name: ClassVar[str]
    #: answered by one call of its model and nothing more: a cached answer is read on the
    #: calling thread (when no rewrite nor judge is asked either)
    one_call: ClassVar[bool] = False
    #: its model's target is resolved to score log-likelihoods, not to complete
    scores_options: ClassVar[bool] = False
    #: its function definitions may go through the tool shim
    shimmable: ClassVar[bool] = True

    # -- answering ----------------------------------------------------------------------------
    def prepare(self, engine: Engine, plan: CallPlan, workdir: Path | None) -> Any:
        """What the answer needs made on the calling (main) thread, before the engine loop."""
        return None

    @abc.abstractmethod
    async def answer(self, engine: Engine, call: KindCall) -> Answer:
        """The item's answer and its model-graded verdicts (no optimization field: the
        engine adds it)."""

    def shimmed(self, plan: CallPlan) -> bool:
        """Whether ``plan``'s function definitions go through the tool shim."""
        return self.shimmable and shim_offered(plan)

    def read(self, plan: CallPlan, completion: Completion) -> Completion:
        """A reply as the item reads it: its thinking apart from its answer by the plan's
        thinking rule (after the cache: a replay reads it by today's rule), then a shimmed
        one's calls as native tool calls (a call written in the thinking is no call; the shim
        reads the answer alone, whatever ``strip`` says)."""
        from ...models import read_reply

        rule = plan.thinking_rule
        if not self.shimmed(plan):
            return read_reply(completion, rule)
        return read_shim(read_reply(completion, rule.model_copy(update={"strip": True})))

    # -- the item -----------------------------------------------------------------------------
    def keep_partial(self, result: KindResult, error: BaseException) -> None:
        """Keep in ``result`` what an error (or the budget) cut short, when the kind has any."""
        return None  # a single call leaves nothing behind

    def settle(self, settling: Settling) -> None:
        """Finish the item's setup once its answer is in ``settling.result``."""
        return None  # most kinds are done once answered

    def verdicts(self, checking: Checking) -> list[Verdict]:
        """Every assertion's verdict on the answer."""
        case = checking.result.plan.case
        return [checking.verdict(index, a) for index, a in enumerate(case.assertions)]

    def failure(self, result: KindResult, checked: Sequence[Verdict]) -> str | None:
        """Why the item fails, or None. Graded checks (judges, similarity, python scores) pass
        at their own thresholds with a score below 1: a case passes when every assertion
        passes, or on partial credit when its weighted score reaches the case's threshold."""
        from ...scoring import case_failure

        return case_failure(checked, result.score, result.plan.case.threshold)

    def shown(self, result: KindResult, width: int) -> list[str] | None:
        """The lines a failure shows in place of the prompt's (None: the prompt's)."""
        return None

    # -- the record ---------------------------------------------------------------------------
    def record_fields(self, result: KindResult) -> dict[str, Any]:
        """The record fields the kind fills: by default a function-calling reply's calls."""
        return function_call_fields(self, result)

    def metrics(self, result: KindResult) -> dict[str, float]:
        """Named metrics the kind adds to the record's ``metrics``."""
        return {}

    def spent(self, result: KindResult) -> Completion | None:
        """What an answer an error cut short still spent (its calls as one completion)."""
        return None

    # -- the estimate -------------------------------------------------------------------------
    def estimated_tokens(self, plan: CallPlan, count: TokenCounter) -> tuple[int, int]:
        """Input and output tokens of the item's calls, before any is made (``--estimate-cost``):
        by default one call of the case's messages, answered within its token budget."""
        return count(plan.model.model, plan.case.messages), plan.answer_token_budget


def function_call_fields(kind: CaseKind, result: KindResult) -> dict[str, Any]:
    """A function-calling reply's calls (a plain file's ``tools:``): recorded, never run."""
    completion = result.completion
    if result.plan.functions is None or completion is None:
        return {}
    calls = [dict(call) for call in completion.tool_calls]
    counts: dict[str, int] = {}
    for call in calls:
        counts[str(call.get("name"))] = counts.get(str(call.get("name")), 0) + 1
    return {
        "tool_calls": calls,
        "tool_call_count": len(calls),
        "tool_counts": counts,
        "shimmed": kind.shimmed(result.plan),
    }


def sent_messages(plan: CallPlan, request: Request) -> tuple[dict[str, Any], ...] | None:
    """The messages sent, when they are not the case's own (a rewritten prompt, images)."""
    return None if request.messages is plan.case.messages else tuple(request.messages)
