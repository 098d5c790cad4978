"""An eval item: one case x model x variant x repeat, as pytest runs and scores it.

:class:`EvalItem` is a ``pytest.Function`` built with ``callobj=``, so fixtures, markers, ``-k``,
``--lf`` and xdist work through pytest's public machinery. It holds its
:class:`~pytest_llmbench.engine.plan.CallPlan` (built at collection) and its
:class:`~pytest_llmbench.results.state.EvalResult` (in its stash, where the record is built
from). The model call happens in ``setup`` (a provider failure is an *error*), the scoring in
the call phase (a low score is a *failure*).
"""

from __future__ import annotations

import signal
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from .engine.runtime import get_runtime
from .models.providers.completion import ProviderError
from .results.record import utc_now
from .results.state import EVAL_RESULT_KEY, EvalFailure, EvalResult
from .scoring.base import one_line

if TYPE_CHECKING:
    from _pytest._code.code import ExceptionInfo, TerminalRepr

    from .engine.plan import CallPlan
    from .engine.request import Answer
    from .models.profiles import ModelProfile
    from .models.providers.completion import Completion
    from .scoring.assertions import Assertion, AssertionContext, Verdict
    from .scoring.base import CallMeasures
    from .spec.schema import EvalCase

__all__ = ["EvalFailure", "EvalItem", "ItemTimeouts", "SandboxWarning", "run_eval_case"]

#: Characters of the prompt, expected answer and answer a failure shows, each on one line.
_SHOWN = 300


class SandboxWarning(UserWarning):
    """Agent commands ran without bubblewrap, with resource limits only."""


def _warn_sandbox_fallback() -> None:
    """Say once per process that ``run_command`` fell back to rlimits (no working bwrap)."""
    from .agent.sandbox import fallback_notice

    notice = fallback_notice()
    if notice is not None:
        warnings.warn(notice, SandboxWarning, stacklevel=2)


#: How a setup error is named in the item's failure line, by its kind; any other kind
#: (``provider``, ``connection``, ``timeout``, ...) is a provider error.
ERROR_WORDS = {"sandbox": "sandbox error", "judge": "judge error", "tool": "tool error"}

#: Why an item with nothing to check is skipped, not passed.
UNCHECKED = (
    "llmbench: nothing to check: the case has no assertion and no expected answer; give it "
    "`expected:` (checked with icontains) or `assert:`, or run with --latency-only to measure"
)


def _with_case_values(check: Any, variables: dict[str, Any]) -> Any:
    """An agent check with ``{{expected}}`` and the case's (or dataset row's) variables filled
    into its value, path and ``output_contains``: ValueError for an unknown name."""
    import dataclasses

    from .spec.templating import render_template

    changes = {
        field: render_template(value, variables)
        for field in ("value", "path", "output_contains")
        if isinstance(value := getattr(check, field), str) and "{{" in value
    }
    return dataclasses.replace(check, **changes) if changes else check


def _solver_verdict(passed: bool) -> Any:
    """The verdict a self-judging solver gave its own answer, as one more assertion's."""
    from .scoring.base import Verdict

    reason = "the solver judged its answer " + ("right" if passed else "wrong")
    return Verdict("solver", passed, 1.0 if passed else 0.0, 1.0, reason)


def _partial_agent_run(error: ProviderError) -> Any:
    """The agent loop an error cut short (``ProviderError.partial``), or None."""
    from .agent.loop import AgentRun

    return error.partial if isinstance(error.partial, AgentRun) else None


def _partial_conversation(error: Exception) -> Any:
    """The conversation an error or the budget cut short (its ``partial``), or None."""
    from .engine.request import ConversationRun

    partial = getattr(error, "partial", None)
    return partial if isinstance(partial, ConversationRun) else None


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
        if isinstance(answer, ProviderError):
            # An agent that errored mid-loop: its turns so far go into the record.
            result.agent_run = _partial_agent_run(answer)
            result.conversation = _partial_conversation(answer)
            # No traceback: it says nothing the message does not, and formatting one parses
            # source while the engine thread may be compiling (a CPython 3.11 ast race). Failed
            # outside the except block, so that the error is printed once, not as a chain.
            self._fail(answer)
        result.completion = answer.completion
        result.agent_run = answer.agent
        result.conversation = answer.conversation
        result.sandbox = answer.sandbox
        if result.agent_run is not None:
            _warn_sandbox_fallback()
        result.graded = {graded.index: graded for graded in answer.graded}
        result.optimization = answer.optimization
        result.sent_messages = answer.messages
        result.solver_verdict = answer.solver_verdict
        result.loglikelihood = answer.loglikelihood
        result.retrieved_context = answer.retrieved_context
        agent = self.plan.agent
        if result.agent_run is not None and agent and agent.post_process:
            self._post_process(agent.post_process)
        if result.agent_run is not None and not self.plan.latency_only:
            result.agent_verdicts = self._agent_verdicts()
        failures = [graded.failure for graded in answer.graded if graded.failure]
        if failures:
            # No verdict is not a failed verdict: the judges, not the answer, are at fault.
            self._fail(ProviderError("; ".join(failures), "judge"))

    def _take(self) -> Answer | ProviderError:
        """The scheduler's answer for this item, or the provider error it ended with."""
        from .engine.pacing import BudgetExceeded

        skipped: str | None = None
        try:
            return get_runtime(self.config).scheduler().take(self.plan, self.result.workdir)
        except BudgetExceeded as exc:
            skipped = str(exc)
            # A conversation the budget cut short: what was said is kept in the record.
            self.result.conversation = _partial_conversation(exc)
        except ProviderError as exc:
            return exc
        pytest.skip(skipped)

    def _workdir(self) -> Path:
        """The ``workdir`` fixture's folder; one the OS refuses to seed (a ``files:`` path past
        PATH_MAX under a long temporary folder) is the item's ``config`` error, said alone."""
        from .engine.workdirs import WorkdirError

        try:
            folder: Path = self._request.getfixturevalue("workdir")
            return folder
        except WorkdirError as exc:
            error = ProviderError(str(exc), "config")
        self.result.provider_error = error
        pytest.fail(f"llmbench workdir error: {error.message}", pytrace=False)

    def _fail(self, error: ProviderError) -> NoReturn:
        self.result.provider_error = error
        message = get_runtime(self.config).redactor.text(error.message)
        what = ERROR_WORDS.get(error.kind, "provider error")
        pytest.fail(f"llmbench {what}: {message}", pytrace=False)

    def _post_process(self, command: str) -> None:
        """Run the file's ``post_process`` command; its JSON object becomes extra metrics.

        A command that fails or prints no JSON object is the item's error (setup phase).
        """
        from .agent.post import PostProcessError, run_post_process

        result = self.result
        agent = self.plan.agent
        assert result.agent_run is not None and result.workdir is not None and agent is not None
        env_file = get_runtime(self.config).run.env_file
        try:
            result.post_metrics = run_post_process(
                command,
                result.workdir,
                self._post_process_input(),
                eval_dir=self.plan.base_dir,
                mode=agent.sandbox,
                hidden=[env_file] if env_file is not None else [],
            )
        except PostProcessError as exc:
            result.provider_error = ProviderError(str(exc), "post_process")
            pytest.fail(f"llmbench post_process: {exc}", pytrace=False)

    def _post_process_input(self) -> dict[str, Any]:
        run = self.result.agent_run
        assert run is not None
        return {
            "nodeid": self.nodeid,
            "case_id": self.case.id,
            "model": self.model.name,
            "answer": run.answer,
            "workdir": str(self.result.workdir),
            "turns": run.turns,
            "tool_counts": run.tool_counts(),
            "stopped": run.stopped,
            "transcript": list(run.transcript),
        }

    def runtest(self) -> None:
        """The call phase: score the answer fetched in setup."""
        self.score_answer()

    def score_answer(self) -> None:
        """Evaluate every assertion; raise :class:`EvalFailure` below the threshold."""
        from .scoring.assertions import AssertionContext, evaluate, score_verdicts

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
            measures=self._measures(),
            tool_calls=result.completion.tool_calls,
            tool_schemas=self.plan.functions.schemas() if self.plan.functions else None,
        )
        text = result.completion.text
        if result.conversation is not None:
            result.verdicts = self._turn_verdicts(context)
        else:
            result.verdicts = [
                result.agent_verdicts.get(index)
                or self._graded_verdict(index, assertion)
                or evaluate(assertion, text, context)
                for index, assertion in enumerate(self.case.assertions)
            ]
        if result.solver_verdict is not None:
            result.verdicts.append(_solver_verdict(result.solver_verdict))
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
        if result.conversation is not None:
            self._check_turns()
            return
        # Graded checks (judges, similarity, python scores) pass at their own thresholds with a
        # score below 1: a case passes when every assertion passes, or on partial credit when
        # its weighted score reaches the case's threshold.
        if all(verdict.passed for verdict in checked):
            return
        if result.score is not None and result.score < self.case.threshold:
            raise EvalFailure(f"score {result.score:.3f} < threshold {self.case.threshold:g}")

    def _turn_verdicts(self, context: AssertionContext) -> list[Verdict]:
        """A conversation's verdicts: each assertion on the reply to its turn (and that turn's
        prompt and measures), weighted by the turn's weight (:mod:`.scoring.conversation`)."""
        import dataclasses

        from .scoring.assertions import evaluate
        from .scoring.conversation import on_turn

        run = self.result.conversation
        assert run is not None
        verdicts = []
        # Every assertion is on a turn (a simulated user's on each of its turns): in turn order.
        for reply in run.replies:
            turn = run.turns[reply.turn]
            own = dataclasses.replace(
                context,
                prompt=turn.content,
                measures=self._measures(reply.completion),
                tool_calls=reply.completion.tool_calls,  # a turn's checks see its reply's calls
            )
            for index in turn.checks:
                assertion = self.case.assertions[index]
                verdict = self._graded_verdict(index, assertion) or evaluate(
                    assertion, reply.completion.text, own
                )
                verdicts.append(on_turn(verdict, reply.turn + 1, turn.weight))
        return verdicts

    def _check_turns(self) -> None:
        """Raise :class:`EvalFailure` naming the first turn that fails, if any."""
        from .scoring.conversation import failed_turn, failure_headline

        found = failed_turn(self.result.verdicts, self.case.threshold)
        if found is not None:
            turns = self.result.conversation.turns if self.result.conversation else ()
            raise EvalFailure(failure_headline(*found, len(turns)))

    def _measures(self, completion: Completion | None = None) -> CallMeasures:
        """What the call (or ``completion``, one call of a conversation) measured, for the
        latency, cost and tokens checks."""
        from .models.providers.completion import total_usage
        from .scoring.base import CallMeasures

        completion = completion or self.result.completion
        assert completion is not None
        calls = [call for graded in self.result.graded.values() for call in graded.calls]
        judge_cost = total_usage(call.usage for call in calls).cost_usd
        return CallMeasures.of(completion, judge_cost=judge_cost, judge_calls=len(calls))

    def _agent_verdicts(self) -> dict[int, Verdict]:
        """The workdir checks of an agent item, made in its setup (after ``post_process``): a
        command check the sandbox cannot start makes the item an error of kind ``sandbox``."""
        return {
            index: self._agent_verdict(assertion)
            for index, assertion in enumerate(self.case.assertions)
            if assertion.agent_check is not None
        }

    def _agent_verdict(self, assertion: Assertion) -> Verdict:
        from .scoring.agent import AgentOutcome, SandboxFailure, evaluate_agent

        result = self.result
        run, workdir, sandbox = result.agent_run, result.workdir, result.sandbox
        assert run is not None and workdir is not None and sandbox is not None
        check = assertion.agent_check
        assert check is not None
        try:
            check = _with_case_values(check, {**self.case.vars, "expected": self.case.expected})
        except ValueError as exc:  # a {{name}} the case does not have
            from .scoring.base import Verdict

            return Verdict(check.type, False, 0.0, check.weight, f"{check.type}: {exc}")
        try:
            return evaluate_agent(check, AgentOutcome(workdir, run, sandbox))
        except SandboxFailure as exc:  # no verdict: the machine, not the agent, is at fault
            self._fail(ProviderError(f"{self.model.name}: {exc}", "sandbox"))

    def _graded_verdict(self, index: int, assertion: Assertion) -> Verdict | None:
        graded = self.result.graded.get(index) if assertion.engine_graded else None
        return graded.verdict if graded is not None else None

    def repr_failure(  # type: ignore[override]  # as pytest.Function: no style
        self, excinfo: ExceptionInfo[BaseException]
    ) -> str | TerminalRepr:
        """A readable verdict instead of a traceback for low scores; the message alone for a
        provider error (pytest-timeout's expiry in the call phase)."""
        if isinstance(excinfo.value, EvalFailure):
            return self._failure_text(str(excinfo.value))
        if isinstance(excinfo.value, ProviderError):
            return get_runtime(self.config).redactor.text(excinfo.value.message)
        return super().repr_failure(excinfo)

    def expire(self, seconds: float) -> NoReturn:
        """pytest-timeout's ``--timeout`` ran out: the item is an error of kind ``timeout``."""
        message = f"{self.plan.label}: pytest-timeout: the item ran past --timeout {seconds:g} s"
        error = ProviderError(message, "timeout")
        if self.case.conversational:  # a conversation keeps what was said before
            error.partial = get_runtime(self.config).scheduler().said_so_far(self.nodeid)
        self.result.provider_error = error
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
        if self.result.conversation is not None:
            lines[1:2] = self._transcript_lines()
        for verdict in self.result.verdicts:
            mark = "UNCHECKED" if verdict.unchecked else "PASS" if verdict.passed else "FAIL"
            turn = f"turn {verdict.turn}: " if verdict.turn is not None else ""
            lines.append(
                f"  [{mark}] {turn}{verdict.type} (weight {verdict.weight:g}): {verdict.reason}"
            )
        return redactor.text("\n".join(lines))

    def _transcript_lines(self) -> list[str]:
        """A conversation up to the turn that failed (all of it when none did)."""
        from .results.item_record import conversation_entries
        from .scoring.conversation import failed_turn, transcript_lines

        found = failed_turn(self.result.verdicts, self.case.threshold)
        run = self.result.conversation
        last = found[0] if found is not None else len(run.turns if run else ())
        entries = conversation_entries(self.result, self.result.verdicts)
        return transcript_lines(entries, last, _SHOWN)

    def reportinfo(self) -> tuple[Path, int, str]:
        """Point at the case's line in the eval file."""
        return self.path, self.case.line - 1, self.name


class ItemTimeouts:
    """pytest-timeout's ``--timeout`` on eval items: an item error of kind ``timeout``.

    pytest-timeout's own handler prints the stack of every thread (the engine's included) and
    fails the item with an internal error; this one only ends the item. Other items, and the
    ``thread`` method, keep pytest-timeout's behaviour.
    """

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_timeout_set_timer(self, item: pytest.Item, settings: Any) -> bool | None:
        """Arm a SIGALRM timer that ends the eval item cleanly."""
        if not isinstance(item, EvalItem) or settings.method != "signal":
            return None
        if threading.current_thread() is not threading.main_thread():
            return None
        seconds = float(settings.timeout)

        def expire(signum: int, frame: Any) -> None:
            item.expire(seconds)

        signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        item.stash[_TIMER_KEY] = True
        return True

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_timeout_cancel_timer(self, item: pytest.Item) -> bool | None:
        """Disarm the timer set above."""
        if not item.stash.get(_TIMER_KEY, False):
            return None
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        del item.stash[_TIMER_KEY]
        return True


_TIMER_KEY = pytest.StashKey[bool]()
