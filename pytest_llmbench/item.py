"""An eval item: one case x model x variant x repeat, as pytest runs and scores it.

:class:`EvalItem` is a ``pytest.Function`` built with ``callobj=``, so fixtures, markers, ``-k``,
``--lf`` and xdist work through pytest's public machinery. It holds its
:class:`~pytest_llmbench.engine.plan.CallPlan` (built at collection) and its
:class:`~pytest_llmbench.results.state.EvalResult` (in its stash, where the record is built
from). The model call happens in ``setup`` (a provider failure is an *error*), the scoring in
the call phase (a low score is a *failure*).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from .engine import get_runtime
from .models import ItemError, JudgeError
from .results import EVAL_RESULT_KEY, EvalFailure, EvalResult, utc_now
from .scoring import one_line

if TYPE_CHECKING:
    from _pytest._code.code import ExceptionInfo, TerminalRepr

    from .engine import Answer, CallPlan, CaseKind, SandboxWarning
    from .models import ModelProfile
    from .spec import EvalCase

__all__ = ["EvalFailure", "EvalItem", "SandboxWarning", "run_eval_case"]


def __getattr__(name: str) -> Any:
    # SandboxWarning moved to the agent kind; still importable from here, without importing
    # the case kinds when the plugin loads this module.
    if name == "SandboxWarning":
        from .engine import SandboxWarning

        return SandboxWarning
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Characters of the prompt, expected answer and answer a failure shows, each on one line.
_SHOWN = 300


#: Why an item with nothing to check is skipped, not passed.
UNCHECKED = (
    "llmbench: nothing to check: the case has no assertion and no expected answer; give it "
    "`expected:` (checked with icontains) or `assert:`, or run with --latency-only to measure"
)


def reparse_node_id(item: pytest.Item) -> None:
    """Give the item the structured id that pytest parses from its node id string.

    pytest 9 keys the ``--lf``/``--ff``/``--nf`` caches by a parsed ``NodeId`` (names, then the
    ``[...]`` params apart), but builds a Function's own id without a callspec as the single name
    ``france[fake-r0]``: the two never compared equal, so ``--lf`` reran everything. Older
    pytest has no structured id and nothing to do.
    """
    node_id = getattr(item, "_id", None)
    parse = getattr(type(node_id), "parse", None)
    if node_id is not None and callable(parse):
        item._id = parse(str(node_id))


def run_eval_case() -> None:
    """The test function of every eval item, as pytest sees it: it asks for no fixture (a
    ``request`` argument costs a fixture definition per item), and :meth:`EvalItem.runtest`
    scores the answer in its place."""


class EvalItem(pytest.Function):
    """One case x model x repeat."""

    def __init__(self, *, plan: CallPlan, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        reparse_node_id(self)
        assert plan.nodeid == self.nodeid, (plan.nodeid, self.nodeid)
        #: what the engine is asked (built at collection)
        self.plan = plan
        self.result = EvalResult(plan)
        self.stash[EVAL_RESULT_KEY] = self.result

    @property
    def case(self) -> EvalCase:
        """The plan's case."""
        return self.plan.case

    @property
    def model(self) -> ModelProfile:
        """The plan's evaluated model."""
        return self.plan.model

    @property
    def repeat(self) -> int:
        """The plan's repeat, 0-based."""
        return self.plan.repeat

    def setup(self) -> None:
        """Fixtures first, then the model call.

        Every attempt starts from a fresh result (a rerun of pytest-rerunfailures calls the
        model again and is scored on its own answer).
        """
        result = self.result = EvalResult(self.plan)
        self.stash[EVAL_RESULT_KEY] = result
        super().setup()
        if self.plan.needs_workdir:
            result.workdir = self._workdir()
        result.started_at = utc_now()
        answer = self._take()
        kind = self._kind()
        if isinstance(answer, ItemError):
            # An answer an error cut short (an agent's turns, a conversation) is recorded.
            kind.keep_partial(result, answer)
            # No traceback: it says nothing the message does not, and formatting one parses
            # source while the engine thread may be compiling (a CPython 3.11 ast race). Failed
            # outside the except block, so that the error is printed once, not as a chain.
            self._fail(answer)
        _keep_answer(result, answer)
        from .engine import Settling

        env_file = get_runtime(self.config).run.env_file
        kind.settle(Settling(result, self.nodeid, env_file, self._fail))
        failures = [graded.failure for graded in answer.graded if graded.failure]
        if failures:
            # No verdict is not a failed verdict: the judges, not the answer, are at fault.
            self._fail(JudgeError("; ".join(failures)))

    def _kind(self) -> CaseKind:
        from .engine import kind_of

        return kind_of(self.plan)

    def _take(self) -> Answer | ItemError:
        """The scheduler's answer for this item, or the provider error it ended with."""
        from .engine import BudgetExceeded

        skipped: str | None = None
        try:
            return get_runtime(self.config).scheduler().take(self.plan, self.result.workdir)
        except BudgetExceeded as exc:
            skipped = str(exc)
            # A conversation the budget cut short: what was said is kept in the record.
            self._kind().keep_partial(self.result, exc)
        except ItemError as exc:
            return exc
        pytest.skip(skipped)

    def _workdir(self) -> Path:
        """The ``workdir`` fixture's folder; one the OS refuses to seed (a ``files:`` path past
        PATH_MAX under a long temporary folder) is the item's ``config`` error, said alone."""
        from .engine import WorkdirError

        try:
            folder: Path = self._request.getfixturevalue("workdir")
            return folder
        except WorkdirError as exc:
            error = ItemError(str(exc), "config")
        self.result.item_error = error
        pytest.fail(f"llmbench workdir error: {error.message}", pytrace=False)

    def _fail(self, error: ItemError) -> NoReturn:
        self.result.item_error = error
        message = get_runtime(self.config).redactor.text(error.message)
        pytest.fail(f"llmbench {error.words}: {message}", pytrace=False)

    def runtest(self) -> None:
        """The call phase: score the answer fetched in setup."""
        self.score_answer()

    def score_answer(self) -> None:
        """Evaluate every assertion; raise :class:`EvalFailure` below the threshold."""
        from .engine import Checking, call_measures
        from .scoring import AssertionContext, score_verdicts

        result = self.result
        assert result.completion is not None
        if self.plan.latency_only:
            return  # measured, not scored: no verdicts, no score
        context = AssertionContext(
            expected=self.case.expected,
            prompt=self.case.prompt,
            vars=self.case.vars,
            model=self.model.name,
            case_id=self.case.id,
            base_dir=self.plan.base_dir,
            choices=self.case.choices,
            answer_index=self.case.answer_index,
            workdir=result.workdir,
            measures=call_measures(result),
            tool_calls=result.completion.tool_calls,
            tool_schemas=self.plan.functions.schemas() if self.plan.functions else None,
        )
        unfinished = result.completion.unfinished  # as the item's thinking rule read the reply
        if unfinished is not None:
            # No answer came out of the thinking: nothing to check, neither right nor wrong.
            result.unchecked = True
            pytest.skip(f"llmbench: nothing checked: {unfinished}")
        kind = self._kind()
        result.verdicts = kind.verdicts(Checking(result, context))
        if not result.verdicts:
            # Answered, measured, recorded; but nothing says whether it is right: not a pass.
            result.unchecked = True
            pytest.skip(UNCHECKED)
        checked = [verdict for verdict in result.verdicts if not verdict.unchecked]
        if not checked:
            # Only checks that had nothing to measure (a cached answer's latency): not a pass.
            result.unchecked = True
            reasons = "; ".join(f"{v.type}: {v.reason}" for v in result.verdicts)
            pytest.skip(f"llmbench: nothing checked: {reasons}")
        result.score = score_verdicts(result.verdicts)
        failure = kind.failure(result, checked)
        if failure is not None:
            raise EvalFailure(failure)

    def repr_failure(  # type: ignore[override]  # as pytest.Function: no style
        self, excinfo: ExceptionInfo[BaseException]
    ) -> str | TerminalRepr:
        """A readable verdict instead of a traceback for low scores; the message alone for a
        provider error (pytest-timeout's expiry in the call phase)."""
        if isinstance(excinfo.value, EvalFailure):
            return self._failure_text(str(excinfo.value))
        if isinstance(excinfo.value, ItemError):
            return get_runtime(self.config).redactor.text(excinfo.value.message)
        return super().repr_failure(excinfo)

    def expire(self, seconds: float) -> NoReturn:
        """pytest-timeout's ``--timeout`` ran out: the item is an error of kind ``timeout``."""
        message = f"{self.plan.label}: pytest-timeout: the item ran past --timeout {seconds:g} s"
        error = ItemError(message, "timeout")
        # A conversation keeps what was said before (nothing is said of other items).
        error.partial = get_runtime(self.config).said_so_far(self.nodeid)
        self.result.item_error = error
        raise error

    def _failure_text(self, headline: str) -> str:
        redactor = get_runtime(self.config).redactor
        completion = self.result.completion
        answer = completion.text if completion else ""
        plan = self.plan
        lines = [
            f"{plan.suite}::{self.case.id} on {plan.label} (repeat {self.repeat}): {headline}",
            f"  prompt:   {one_line(self.case.prompt or '', _SHOWN)}",
            f"  expected: {one_line(self.case.expected or '-', _SHOWN)}",
            f"  got:      {one_line(answer, _SHOWN)}",
        ]
        shown = self._kind().shown(self.result, _SHOWN)
        if shown is not None:
            lines[1:2] = shown
        for verdict in self.result.verdicts:
            mark = "UNCHECKED" if verdict.unchecked else "PASS" if verdict.passed else "FAIL"
            turn = f"turn {verdict.turn}: " if verdict.turn is not None else ""
            lines.append(
                f"  [{mark}] {turn}{verdict.type} (weight {verdict.weight:g}): {verdict.reason}"
            )
        return redactor.text("\n".join(lines))

    def reportinfo(self) -> tuple[Path, int, str]:
        """Point at the case's line in the eval file."""
        return self.path, self.case.line - 1, self.name


def _keep_answer(result: EvalResult, answer: Answer) -> None:
    """What the item's result keeps of its answer (its record and verdicts read them)."""
    result.completion = answer.completion
    result.agent_run = answer.agent
    result.conversation = answer.conversation
    result.sandbox = answer.sandbox
    result.graded = {graded.index: graded for graded in answer.graded}
    result.optimization = answer.optimization
    result.sent_messages = answer.messages
    result.solver_verdict = answer.solver_verdict
    result.loglikelihood = answer.loglikelihood
    result.retrieved_context = answer.retrieved_context
