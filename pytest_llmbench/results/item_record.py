"""An eval item's wire record, assembled from its plan and its result.

The fields and their meaning are :mod:`.record`'s contract; this module fills them in from the
:class:`~pytest_llmbench.engine.plan.CallPlan` (what was asked) and the
:class:`~.state.EvalResult` (what came back and how it scored).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..models import total_usage
from .record import REASONING_CHARS, build_record, file_field

if TYPE_CHECKING:
    from ..engine import CallPlan
    from ..models import Completion, ItemError
    from .state import EvalResult

__all__ = [
    "completion_fields",
    "crash_record",
    "eval_record",
]


def eval_record(
    result: EvalResult,
    outcome: str,
    error: str | None,
    *,
    root: Path,
    worker: str,
    samples_planned: int | None = None,
    stopped_early: bool = False,
) -> dict[str, Any]:
    """The record of an eval item that ended with ``outcome`` (not yet redacted): the fields
    every item has, and those its case kind fills (:meth:`~..engine.kinds.CaseKind.record_fields`);
    a repeated case's ``samples_planned`` (``--repeat N``), and whether ``--stop-early`` skipped
    this repeat."""
    from ..engine import kind_of
    from ..spec import last_user_text

    plan, completion, item_error = result.plan, result.completion, result.item_error
    case, kind = plan.case, kind_of(plan)
    return build_record(
        nodeid=plan.nodeid,
        suite=plan.suite,
        eval_file=file_field(plan.path, root),
        case_id=case.id,
        case_hash=case.case_hash,
        model=plan.label,
        model_id=plan.model.model,
        **_variant_fields(result, root),
        repeat=plan.repeat,
        samples_planned=samples_planned,
        stopped_early=stopped_early,
        tags=list(case.tags),
        task=dict(case.task) if case.task else None,
        outcome=outcome,
        score=result.score if outcome in ("passed", "failed") else None,
        threshold=case.threshold,
        error=error,
        error_kind="unchecked"
        if result.unchecked and outcome == "skipped"
        else _error_kind(outcome, error, item_error),
        transport_retries=completion.retries
        if completion
        else (item_error.retries if item_error else 0),
        prompt=last_user_text(result.sent_messages) or case.prompt,
        messages=[dict(m) for m in result.sent_messages or case.messages],
        expected=case.expected,
        context=_context_field(result),
        assertions=[verdict.to_dict() for verdict in result.verdicts],
        **_judge_fields(result),
        workdir=str(result.workdir) if result.workdir else None,
        **kind.record_fields(result),
        params=plan.params,
        metrics={**result.post_metrics, **kind.metrics(result)},
        worker=worker,
        started_at=result.started_at,
        **(completion_fields(completion) or _error_fields(result, item_error)),
    )


def _error_fields(result: EvalResult, error: ItemError | None) -> dict[str, Any]:
    """What a call that failed still spent: the wait for rate limits (429s) before it gave up,
    and the calls its kind made before the error (an agent's turns, a conversation's replies:
    tokens, cost, latency; no answer)."""
    from ..engine import kind_of

    fields = completion_fields(kind_of(result.plan).spent(result))
    fields.pop("response", None)  # the item never answered
    if error is not None:
        fields["rate_limit_wait_s"] = error.rate_limit_wait_s
    return fields


def crash_record(nodeid: str, worker: str, message: str) -> dict[str, Any]:
    """The error record of an eval item whose xdist worker died while running it.

    Only the controller is left, and it never collected the item: the fields come from the node
    id (``<file>::<case>[<model>[-<variant parts>]-r<repeat>]``).
    """
    from ..spec import suite_name
    from .record import utc_now

    path, _, name = nodeid.partition("::")
    case_id, _, param = name.partition("[")
    label, _, repeat = param.removesuffix("]").rpartition("-r")
    return build_record(
        nodeid=nodeid,
        suite=suite_name(Path(path)),
        eval_file=path,
        case_id=case_id,
        model=label or None,
        repeat=int(repeat) if repeat.isdigit() else 0,
        outcome="error",
        error=message,
        error_kind="crashed",
        worker=worker,
        started_at=utc_now(),
    )


def _variant_fields(result: EvalResult, root: Path) -> dict[str, Any]:
    """The record's matrix fields: profile, prompt variant, temperature, type, tags, ..."""
    plan = result.plan
    temperature = plan.params.get("temperature")
    return {
        "profile": plan.model.name,
        "prompt_variant": plan.variant.prompt_name,
        "temperature": temperature if isinstance(temperature, (int, float)) else None,
        "effort": plan.variant.effort,
        "optimized": plan.variant.optimized,
        "optimization": result.optimization,
        "eval_type": "latency" if plan.latency_only else "quality",
        "model_tags": dict(plan.model.tags),
        "images": _described_images(plan.case.images, root),
        "solver": plan.solver,
        "choice": _choice(plan, result.completion),
        "loglikelihood": result.loglikelihood,
    }


def _choice(plan: CallPlan, completion: Completion | None) -> dict[str, Any] | None:
    case = plan.case
    if case.choices is None or case.answer_index is None or completion is None:
        return None
    if plan.latency_only:
        return None
    from ..scoring import choice_outcome

    # The prompt shows the options lettered A, B, ... (a dataset's own labels only pick the
    # answer at collection), so the answer is read by letter.
    return choice_outcome(completion.text, case.choices, case.answer_index)


def _context_field(result: EvalResult) -> dict[str, Any] | None:
    """The context the item's judges read: a solver's when it returned one, else the case's."""
    from ..spec import context_record

    if result.retrieved_context is not None:
        return context_record(result.retrieved_context, "solver")
    return context_record(result.plan.case.context, "case")


def _judge_fields(result: EvalResult) -> dict[str, Any]:
    """The record's judge fields: every judge's entry, the dimensions, tokens and cost."""
    graded = result.graded
    calls = [call for entry in graded.values() for call in entry.calls]
    # Two assertions grading one dimension (two rubrics, say): the item's value is their mean.
    values: dict[str, list[float]] = {}
    for entry in graded.values():
        for key, value in entry.dimensions.items():
            values.setdefault(key, []).append(value)
    dimensions = {key: sum(found) / len(found) for key, found in values.items()}
    usage = total_usage(call.usage for call in calls)
    return {
        "judges": [call.to_dict() for call in calls],
        "dimensions": dimensions,
        "judge_tokens": usage.tokens,
        "judge_cost_usd": usage.cost_usd,
    }


def _error_kind(outcome: str, error: str | None, item_error: ItemError | None) -> str | None:
    if item_error is not None:
        return item_error.kind
    if outcome == "skipped":
        return "budget" if error and "--max-cost" in error else None
    return "internal" if error else None


def completion_fields(completion: Completion | None) -> dict[str, Any]:
    """The record fields measured on a completion (empty without one); a batched one's
    timings are None (the batch's wait says nothing of the model)."""
    if completion is None:
        return {}
    timed = not completion.batched
    return {
        "response": completion.text,
        "reasoning": capped_reasoning(completion.reasoning),
        "reasoning_tokens": completion.reasoning_tokens,
        "reasoning_tokens_estimated": completion.reasoning_tokens_estimated,
        "cached_input_tokens": completion.cached_input_tokens,
        "cache_write_tokens": completion.cache_write_tokens,
        "finish_reason": completion.finish_reason,
        "response_model": completion.response_model,
        "ttft_s": completion.ttft_s if timed else None,
        "latency_s": completion.latency_s if timed else None,
        "input_tokens": completion.input_tokens,
        "output_tokens": completion.output_tokens,
        "tokens_estimated": completion.tokens_estimated,
        "tokens_per_s": completion.tokens_per_s if timed else None,
        "cost_usd": completion.cost_usd,
        "streamed": completion.streamed,
        "cached": completion.cached,
        "batched": completion.batched,
        "batch_id": completion.batch_id,
        "batch_wait_s": completion.batch_wait_s,
        "rate_limit_wait_s": completion.rate_limit_wait_s,
    }


def capped_reasoning(text: str) -> str | None:
    """A reply's thinking as the record keeps it: None for none, at most
    :data:`~.record.REASONING_CHARS` characters, a longer one cut with a note of how much."""
    if not text:
        return None
    if len(text) <= REASONING_CHARS:
        return text
    return f"{text[:REASONING_CHARS]}... [{len(text) - REASONING_CHARS} more characters]"


def _described_images(refs: Sequence[str], root: Path) -> list[str]:
    """Image references as the record shows them: paths from the rootdir, URLs abridged."""
    if not refs:
        return []
    from ..spec import describe_ref

    return [describe_ref(ref, root=root) for ref in refs]
