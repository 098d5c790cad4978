"""An eval item: one case x model x variant x repeat, as pytest runs, scores and records it.

:class:`EvalItem` is a ``pytest.Function`` built with ``callobj=``, so fixtures, markers, ``-k``,
``--lf`` and xdist work through pytest's public machinery. The model call happens in ``setup``
(a provider failure is an *error*), the scoring in the call phase (a low score is a *failure*),
and :meth:`EvalItem.make_record` builds the item's results record.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .config import get_run_config
from .engine.runtime import get_runtime
from .models.providers.completion import Completion, ProviderError
from .results.record import build_record, utc_now, worker_id
from .spec.variants import PLAIN, Variant

if TYPE_CHECKING:
    from _pytest._code.code import ExceptionInfo, TerminalRepr

    from .agent.loop import AgentRun
    from .agent.sandbox import Sandbox
    from .judging.panel import GradedAssertion
    from .models.profiles import ModelProfile
    from .scoring.assertions import Assertion, Verdict
    from .scoring.judged import EmbeddingSpec, JudgeSpec
    from .spec.schema import EvalCase, LoadedEval


class EvalFailure(Exception):
    """A case scored below its threshold."""


@dataclass(frozen=True)
class GradedSpec:
    """A judged assertion of a case: its index, the assertion, its settings and its panel."""

    index: int
    assertion: Assertion
    spec: JudgeSpec | EmbeddingSpec
    judges: tuple[ModelProfile, ...]  #: the panel, or the one embedding model


class SandboxWarning(UserWarning):
    """Agent commands ran without bubblewrap, with resource limits only."""


def _warn_sandbox_fallback() -> None:
    """Say once per process that ``run_command`` fell back to rlimits (no working bwrap)."""
    from .agent.sandbox import fallback_notice

    notice = fallback_notice()
    if notice is not None:
        warnings.warn(notice, SandboxWarning, stacklevel=2)


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


def run_eval_case(request: pytest.FixtureRequest) -> None:
    """The test body of every eval item: score the answer fetched in setup."""
    item = request.node
    assert isinstance(item, EvalItem)
    item.score_answer()


class EvalItem(pytest.Function):
    """One case x model x repeat."""

    def __init__(
        self,
        *,
        loaded: LoadedEval,
        case: EvalCase,
        model: ModelProfile,
        repeat: int,
        graded_assertions: tuple[GradedSpec, ...] = (),
        variant: Variant = PLAIN,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        reparse_node_id(self)
        self.loaded = loaded
        self.case = case
        self.model = model
        self.repeat = repeat
        self.variant = variant
        #: the rewrite of an optimized variant's prompt: status and reason (record field)
        self.optimization: dict[str, Any] | None = None
        #: the messages actually sent (an optimized variant's differ from the case's)
        self.sent_messages: tuple[dict[str, Any], ...] | None = None
        self.graded_assertions = graded_assertions
        self.graded: dict[int, GradedAssertion] = {}
        self.agent_run: AgentRun | None = None
        self.agent_sandbox: Sandbox | None = None
        #: a second model reading free-text replies of a shimmed agent (``tool_shim_model``)
        self.shim_interpreter: ModelProfile | None = None
        self.workdir_path: Path | None = None
        self.post_metrics: dict[str, float] = {}
        self.completion: Completion | None = None
        self.verdicts: list[Verdict] = []
        self.score: float | None = None
        self.started_at: str | None = None
        self.provider_error: ProviderError | None = None

    def setup(self) -> None:
        """Fixtures first, then the model call."""
        super().setup()
        if self.case.files or self.case.include_dirs or self.loaded.agent is not None:
            self.workdir_path = self._request.getfixturevalue("workdir")
        self.started_at = utc_now()
        from .engine.pacing import BudgetExceeded

        try:
            answer = get_runtime(self.config).scheduler().take(self)
        except BudgetExceeded as exc:
            pytest.skip(str(exc))
        except ProviderError as exc:
            # No traceback: it says nothing the message does not, and formatting one parses
            # source while the engine thread may be compiling (a CPython 3.11 ast race).
            self.provider_error = exc
            message = get_runtime(self.config).redactor.text(exc.message)
            pytest.fail(f"llmbench provider error: {message}", pytrace=False)
        self.completion = answer.completion
        self.agent_run = answer.agent
        self.agent_sandbox = answer.sandbox
        if self.agent_run is not None:
            _warn_sandbox_fallback()
        self.graded = {graded.index: graded for graded in answer.graded}
        self.optimization = answer.optimization
        self.sent_messages = answer.messages
        if self.agent_run is not None and self.loaded.agent and self.loaded.agent.post_process:
            self._post_process(self.loaded.agent.post_process)
        failures = [graded.failure for graded in answer.graded if graded.failure]
        if failures:
            # No verdict is not a failed verdict: the judges, not the answer, are at fault.
            self.provider_error = ProviderError("; ".join(failures), "judge")
            message = get_runtime(self.config).redactor.text(self.provider_error.message)
            pytest.fail(f"llmbench judge error: {message}", pytrace=False)

    def _post_process(self, command: str) -> None:
        """Run the file's ``post_process`` command; its JSON object becomes extra metrics.

        A command that fails or prints no JSON object is the item's error (setup phase).
        """
        from .agent.post import PostProcessError, run_post_process

        assert self.agent_run is not None and self.workdir_path is not None
        try:
            self.post_metrics = run_post_process(
                command, self.workdir_path, self._post_process_input()
            )
        except PostProcessError as exc:
            self.provider_error = ProviderError(str(exc), "post_process")
            pytest.fail(f"llmbench post_process: {exc}", pytrace=False)

    def _post_process_input(self) -> dict[str, Any]:
        run = self.agent_run
        assert run is not None
        return {
            "nodeid": self.nodeid,
            "case_id": self.case.id,
            "model": self.model.name,
            "answer": run.answer,
            "workdir": str(self.workdir_path),
            "turns": run.turns,
            "tool_counts": run.tool_counts(),
            "stopped": run.stopped,
            "transcript": list(run.transcript),
        }

    @property
    def judge_profiles(self) -> tuple[ModelProfile, ...]:
        """Every judge this item's model-graded assertions call, once each."""
        seen = {judge.name: judge for graded in self.graded_assertions for judge in graded.judges}
        helpers = [self.shim_interpreter]  # called like judges: their own lanes and targets
        if self.variant.optimized:
            helpers.append(get_run_config(self.config).optimizer)
        for helper in helpers:
            if helper is not None:
                seen.setdefault(helper.name, helper)
        return tuple(seen.values())

    @property
    def params(self) -> dict[str, Any]:
        """The model parameters of this item's call: the profile's, the case's, the variant's."""
        return {**self.model.params, **self.call_params}

    @property
    def call_params(self) -> dict[str, Any]:
        """The parameters sent on top of the profile's: the case's, then the variant's."""
        if self.variant.temperature is None:
            return dict(self.case.model_params)
        return {**self.case.model_params, "temperature": self.variant.temperature}

    @property
    def label(self) -> str:
        """The contestant results rank: the model name with the variant's suffixes."""
        return self.variant.label(self.model.name)

    @property
    def latency_only(self) -> bool:
        """``--latency-only``: the answer is measured, not scored."""
        return get_run_config(self.config).latency_only

    @property
    def prefetchable(self) -> bool:
        """Whether the call may start before this item runs: not for parallel_safe: false
        files, nor for agents (their workdir is made in setup)."""
        return self.loaded.parallel_safe and self.loaded.agent is None

    def score_answer(self) -> None:
        """Evaluate every assertion; raise :class:`EvalFailure` below the threshold."""
        from .scoring.assertions import AssertionContext, evaluate, score_verdicts

        assert self.completion is not None
        if self.latency_only:
            return  # measured, not scored: no verdicts, no score
        context = AssertionContext(
            expected=self.case.expected,
            prompt=self.case.prompt,
            vars=self.case.vars,
            model=self.model.name,
            case_id=self.case.id,
            base_dir=self.path.parent,
            choices=self.case.choices,
            answer_index=self.case.answer_index,
        )
        text = self.completion.text
        self.verdicts = [
            self._agent_verdict(assertion)
            or self._graded_verdict(index, assertion)
            or evaluate(assertion, text, context)
            for index, assertion in enumerate(self.case.assertions)
        ]
        self.score = score_verdicts(self.verdicts)
        # Graded checks (judges, similarity, python scores) pass at their own thresholds with a
        # score below 1: a case passes when every assertion passes, or on partial credit when
        # its weighted score reaches the case's threshold.
        if all(verdict.passed for verdict in self.verdicts):
            return
        if self.score is not None and self.score < self.case.threshold:
            raise EvalFailure(f"score {self.score:.3f} < threshold {self.case.threshold:g}")

    def _agent_verdict(self, assertion: Assertion) -> Verdict | None:
        if assertion.agent_check is None:
            return None
        from .scoring.agent import AgentOutcome, evaluate_agent

        run, workdir, sandbox = self.agent_run, self.workdir_path, self.agent_sandbox
        assert run is not None and workdir is not None and sandbox is not None
        return evaluate_agent(assertion.agent_check, AgentOutcome(workdir, run, sandbox))

    def _graded_verdict(self, index: int, assertion: Assertion) -> Verdict | None:
        graded = self.graded.get(index) if assertion.engine_graded else None
        return graded.verdict if graded is not None else None

    def repr_failure(  # type: ignore[override]  # as pytest.Function: no style
        self, excinfo: ExceptionInfo[BaseException]
    ) -> str | TerminalRepr:
        """A readable verdict instead of a traceback for low scores."""
        if isinstance(excinfo.value, EvalFailure):
            return self._failure_text(str(excinfo.value))
        return super().repr_failure(excinfo)

    def _failure_text(self, headline: str) -> str:
        redactor = get_runtime(self.config).redactor
        answer = self.completion.text if self.completion else ""
        lines = [
            f"{self.loaded.suite}::{self.case.id} on {self.label} (repeat {self.repeat}): {headline}",
            f"  prompt:   {_clip(self.case.prompt or '')}",
            f"  expected: {_clip(self.case.expected or '-')}",
            f"  got:      {_clip(answer)}",
        ]
        for verdict in self.verdicts:
            mark = "PASS" if verdict.passed else "FAIL"
            lines.append(f"  [{mark}] {verdict.type} (weight {verdict.weight:g}): {verdict.reason}")
        return redactor.text("\n".join(lines))

    def reportinfo(self) -> tuple[Path, int, str]:
        """Point at the case's line in the eval file."""
        return self.path, self.case.line - 1, self.name

    def make_record(self, outcome: str, error: str | None) -> dict[str, Any]:
        """The wire record of this item (see :mod:`pytest_llmbench.results.record`)."""
        from .spec.templating import last_user_text

        completion = self.completion
        provider_error = self.provider_error
        runtime = get_runtime(self.config)
        record = build_record(
            nodeid=self.nodeid,
            suite=self.loaded.suite,
            eval_file=str(self.path.relative_to(self.config.rootpath))
            if self.path.is_relative_to(self.config.rootpath)
            else str(self.path),
            case_id=self.case.id,
            model=self.label,
            model_id=self.model.model,
            **self._variant_fields(),
            repeat=self.repeat,
            tags=list(self.case.tags),
            task=dict(self.case.task) if self.case.task else None,
            outcome=outcome,
            score=self.score if outcome in ("passed", "failed") else None,
            threshold=self.case.threshold,
            error=error,
            error_kind=_error_kind(outcome, error, provider_error),
            retries=completion.retries
            if completion
            else (provider_error.retries if provider_error else 0),
            prompt=last_user_text(self.sent_messages) or self.case.prompt,
            messages=[dict(m) for m in self.sent_messages or self.case.messages],
            expected=self.case.expected,
            assertions=[verdict.to_dict() for verdict in self.verdicts],
            **self._judge_fields(),
            **self._agent_fields(),
            params=self.params,
            metrics=dict(self.post_metrics),
            worker=worker_id(self.config),
            started_at=self.started_at,
            **completion_fields(completion),
        )
        return runtime.redactor.value(record)

    def _variant_fields(self) -> dict[str, Any]:
        """The record's matrix fields: profile, prompt variant, temperature, type, tags, ..."""
        temperature = self.params.get("temperature")
        return {
            "profile": self.model.name,
            "prompt_variant": self.variant.prompt_name,
            "temperature": temperature if isinstance(temperature, (int, float)) else None,
            "optimized": self.variant.optimized,
            "optimization": self.optimization,
            "eval_type": "latency" if self.latency_only else "quality",
            "model_tags": dict(self.model.tags),
            "images": _described_images(self.case.images, self.config.rootpath),
            "solver": self.loaded.solver,
            "choice": self._choice(),
        }

    def _choice(self) -> dict[str, Any] | None:
        case, completion = self.case, self.completion
        if case.choices is None or case.answer_index is None or completion is None:
            return None
        if self.latency_only:
            return None
        from .scoring.choices import choice_outcome

        # The prompt shows the options lettered A, B, ... (a dataset's own labels only pick the
        # answer at collection), so the answer is read by letter.
        return choice_outcome(completion.text, case.choices, case.answer_index)

    def _agent_fields(self) -> dict[str, Any]:
        """The record's agent fields: turns, tool calls, why it stopped, the transcript."""
        run = self.agent_run
        if run is None:
            return {"workdir": str(self.workdir_path) if self.workdir_path else None}
        return {
            "turns": run.turns,
            "tool_calls": len(run.tool_calls),
            "tool_counts": run.tool_counts(),
            "stopped": run.stopped,
            "transcript": [dict(message) for message in run.transcript],
            "workdir": str(self.workdir_path) if self.workdir_path else None,
        }

    def _judge_fields(self) -> dict[str, Any]:
        """The record's judge fields: every judge's entry, the dimensions, tokens and cost."""
        calls = [call for graded in self.graded.values() for call in graded.calls]
        # Two assertions grading one dimension (two rubrics, say): the item's value is their mean.
        values: dict[str, list[float]] = {}
        for graded in self.graded.values():
            for key, value in graded.dimensions.items():
                values.setdefault(key, []).append(value)
        dimensions = {key: sum(found) / len(found) for key, found in values.items()}
        costs = [call.cost_usd for call in calls if call.cost_usd is not None]
        tokens = sum((call.input_tokens or 0) + (call.output_tokens or 0) for call in calls)
        return {
            "judges": [call.to_dict() for call in calls],
            "dimensions": dimensions,
            "judge_tokens": tokens,
            "judge_cost": sum(costs) if costs else None,
        }


def _error_kind(
    outcome: str, error: str | None, provider_error: ProviderError | None
) -> str | None:
    if provider_error is not None:
        return provider_error.kind
    if outcome == "skipped":
        return "budget" if error and "--max-cost" in error else None
    return "internal" if error else None


def completion_fields(completion: Completion | None) -> dict[str, Any]:
    """The record fields measured on a completion (empty without one)."""
    if completion is None:
        return {}
    return {
        "response": completion.text,
        "ttft_s": completion.ttft_s,
        "latency_s": completion.latency_s,
        "input_tokens": completion.input_tokens,
        "output_tokens": completion.output_tokens,
        "tokens_estimated": completion.tokens_estimated,
        "tokens_per_s": completion.tokens_per_s,
        "cost_usd": completion.cost_usd,
        "streamed": completion.streamed,
        "cached": completion.cached,
        "rate_limit_wait_s": completion.rate_limit_wait_s,
    }


def _described_images(refs: Sequence[str], root: Path) -> list[str]:
    """Image references as the record shows them: paths from the rootdir, URLs abridged."""
    if not refs:
        return []
    from .spec.images import describe_ref

    return [describe_ref(ref, root=root) for ref in refs]


def _clip(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
