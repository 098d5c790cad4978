"""Grade one answer with a panel of judges: calls, strict parsing, exclusion, aggregation.

Runs on the engine loop right after the evaluated model answered, so an item's judges are in
flight while pytest reports earlier items. Each judge is called through ``complete`` (the
scheduler's paced, cached, budgeted call); a reply that is not a valid verdict is asked for
again once, with the problem named, and a judge that still fails (or whose provider fails) is
excluded and recorded with its error. Only valid verdicts are aggregated; when none is left the
assertion has no verdict and the item is an error, never a pass.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..models import Completion, ItemError, Usage
from ..scoring import ModelGradedSpec
from .grader import grader_reason
from .jury import jury_reason
from .jury import scaled as jury_scaled
from .prompts import (
    CONVERSATION_DIMENSIONS,
    GRADER_KIND,
    JURY_DIMENSIONS,
    JudgeRequest,
    judge_messages,
    reply_schema,
    retry_messages,
)
from .verdicts import ParsedVerdict, VerdictError, parse_verdict

if TYPE_CHECKING:
    from ..models import ModelProfile
    from ..scoring import Assertion, JudgeSpec, Verdict

#: Attempts per judge: the first, and one more after a malformed verdict.
VERDICT_ATTEMPTS = 2
#: One judge call: (judge, messages, params) -> completion, or ProviderError.
CompleteFn = Callable[["ModelProfile", list[dict[str, str]], dict[str, Any]], Awaitable[Completion]]
#: A panel's reduction: (index, assertion, spec, score keys, every judge's call) -> the verdict.
AggregateFn = Callable[
    [int, "Assertion", "JudgeSpec", Sequence[str], tuple["JudgeCall", ...]], "GradedAssertion"
]


@dataclass(frozen=True)
class JudgeCall:
    """What one judge made of one assertion: its scores, or why it was excluded."""

    assertion: int
    type: str
    judge: str
    model_id: str
    scores: dict[str, float] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    attempts: int = 0
    usage: Usage = field(default_factory=Usage)  #: summed over the attempts
    cached: bool = False
    #: an attempt was answered through a batch API: its cost is the batch price, its time
    #: the batch's wait (the entry's ``latency_s`` is then None)
    batched: bool = False
    #: a RAG metric's per-claim or per-chunk verdicts (the record's ``details``)
    details: tuple[dict[str, Any], ...] = ()
    #: model-graded: the label this judge picked (the record's ``choice``)
    choice: str | None = None

    @property
    def determined(self) -> bool:
        """A valid verdict with a score: a RAG judge that found nothing to count (no claims)
        gave none."""
        return self.error is None and bool(self.scores)

    def to_dict(self) -> dict[str, Any]:
        """The record's judge entry (see :mod:`pytest_llmbench.results.record`); ``details``
        only for a RAG metric's judge."""
        extra: dict[str, Any] = (
            {"details": [dict(item) for item in self.details]} if self.details else {}
        )
        if self.choice is not None:
            extra["choice"] = self.choice
        return {
            "assertion": self.assertion,
            "type": self.type,
            "judge": self.judge,
            "model_id": self.model_id,
            "scores": dict(self.scores),
            "reasons": dict(self.reasons),
            "error": self.error,
            "call_attempts": self.attempts,
            **self.usage.fields(),
            **({"latency_s": None} if self.batched else {}),
            "cached": self.cached,
            "batched": self.batched,
            **extra,
        }


@dataclass(frozen=True)
class GradedAssertion:
    """A model-graded assertion after its calls: the verdict (None if every judge failed)."""

    index: int
    verdict: Verdict | None
    calls: tuple[JudgeCall, ...] = ()
    dimensions: dict[str, float] = field(default_factory=dict)
    #: why there is no verdict, when the failed calls are recorded on another item (a
    #: select-best contest's, on its first contestant)
    failed_elsewhere: str | None = None
    #: the judges of the verdict when its calls are recorded on another item (a select-best
    #: contest's, on its first contestant); else read from ``calls``
    judged_elsewhere: tuple[str, ...] = ()

    @property
    def judges(self) -> tuple[str, ...]:
        """The verdict's judge group: every judge called on it (a failed one included; names
        as configured, else model ids), sorted."""
        if self.judged_elsewhere:
            return self.judged_elsewhere
        return tuple(sorted({call.judge or call.model_id for call in self.calls}))

    @property
    def failure(self) -> str | None:
        """Why there is no verdict: each excluded judge and its error."""
        if self.verdict is not None:
            return None
        if self.failed_elsewhere is not None:
            return f"assertion {self.index + 1}: {self.failed_elsewhere}"
        errors = "; ".join(f"{call.judge}: {call.error}" for call in self.calls)
        return f"assertion {self.index + 1}: every judge failed ({errors or 'no judge'})"


def judge_request(
    assertion: Assertion,
    spec: JudgeSpec,
    *,
    messages: Sequence[dict[str, str]],
    answer: str,
    expected: str | None,
    task: dict[str, Any] | None,
    extra_dimensions: Sequence[str] = (),
    context: Sequence[str] = (),
    grader_prompt: str | None = None,
    reasoning: str | None = None,
    trajectory: str = "",
) -> JudgeRequest:
    """What the judges of ``assertion`` are shown: the question and the ``answer``, or with
    ``scope: conversation`` the transcript (``messages`` then the answer) with roles, and a
    jury's conversation dimensions after the six. A user's grader (model-graded) is shown its
    prompt, rendered: ``grader_prompt``. ``reasoning``: the answer's thinking, shown apart
    (``show_reasoning: true``). With ``scope: trajectory`` the judges see the rendered
    ``trajectory`` instead of the question and the answer, and a built-in rubric's name is
    its text (:func:`.trajectory_judge.trajectory_rubric`)."""
    from .trajectory_judge import trajectory_rubric

    users = [m["content"] for m in messages if m["role"] == "user"]
    systems = [m["content"] for m in messages if m["role"] == "system"]
    whole = spec.whole_conversation
    conversation = _transcript(messages, answer) if whole else ()
    dimensions: tuple[str, ...] = ()
    if spec.kind == "jury":
        standard = (*JURY_DIMENSIONS, *(CONVERSATION_DIMENSIONS if whole else ()))
        dimensions = tuple(dict.fromkeys((*standard, *extra_dimensions, *spec.dimensions)))
    own_reference = spec.kind in ("factuality", "context-recall") and assertion.value
    reference = assertion.value if own_reference else expected
    rubric = assertion.value if spec.kind in ("llm-rubric", "closed-qa") else None
    if spec.whole_trajectory and rubric is not None:
        rubric = trajectory_rubric(rubric)
    if isinstance(spec, ModelGradedSpec):
        return JudgeRequest(
            kind=GRADER_KIND,
            question=users[-1] if users else None,
            answer=answer,
            expected=expected,
            rubric=grader_prompt,
            context=tuple(context),
            grader=spec,
        )
    return JudgeRequest(
        kind=spec.kind,
        question=users[-1] if users else None,
        answer=answer,
        expected=reference,
        rubric=rubric,
        dimensions=dimensions,
        task_type=(task or {}).get("task_type"),
        task_criteria=(task or {}).get("task_criteria"),
        system=systems[0] if systems else None,
        conversation=conversation,
        context=tuple(context),
        reasoning=reasoning,
        trajectory=trajectory if spec.whole_trajectory else "",
    )


def _transcript(messages: Sequence[dict[str, str]], answer: str) -> tuple[dict[str, str], ...]:
    """The conversation a judge of the whole sees: every message but the system prompt (shown
    apart), then the reply judged."""
    said = [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"]
    return (*said, {"role": "assistant", "content": answer})


def judge_params(
    judge: ModelProfile,
    spec: JudgeSpec,
    request: JudgeRequest,
    schema_of: Callable[[JudgeRequest], dict[str, Any]] = reply_schema,
) -> dict[str, Any]:
    """A judge's call parameters: its profile's, at the spec's temperature (0 by default), with
    the verdict's JSON schema (``schema_of`` the request) as structured output when asked for."""
    params: dict[str, Any] = {**judge.params, "temperature": spec.temperature}
    if spec.structured:
        schema = schema_of(request)
        if judge.embedded:  # llama.cpp turns a json_object schema into a grammar
            params["response_format"] = {"type": "json_object", "schema": schema}
        else:
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "verdict", "schema": schema, "strict": True},
            }
    return params


async def grade(
    index: int,
    assertion: Assertion,
    spec: JudgeSpec,
    request: JudgeRequest,
    judges: Sequence[ModelProfile],
    complete: CompleteFn,
    form: PanelForm | None = None,
) -> GradedAssertion:
    """Ask every judge at once; aggregate the valid verdicts into one :class:`Verdict`, as
    ``form`` (the judge kind's) says: the standard form by default."""
    form = form or STANDARD_FORM
    asked = (ask(index, spec, request, judge, complete, form) for judge in judges)
    calls = await asyncio.gather(*asked)
    return form.aggregate(index, assertion, spec, request.score_keys, tuple(calls))


async def ask(
    index: int,
    spec: JudgeSpec,
    request: JudgeRequest,
    judge: ModelProfile,
    complete: CompleteFn,
    form: PanelForm | None = None,
) -> JudgeCall:
    """One judge's verdict on ``request``: asked again once after a malformed reply, then its
    error (a provider error at once), never a score."""
    form = form or STANDARD_FORM
    messages = form.prompt(request)
    params = judge_params(judge, spec, request, form.schema)
    usage = AttemptsUsage()
    problem = "no attempt made"
    for attempt in range(1, VERDICT_ATTEMPTS + 1):
        try:
            completion = await complete(judge, messages, params)
        except ItemError as exc:
            return usage.call(index, spec.kind, judge, attempt, error=exc.message)
        usage.add(completion)
        try:
            parsed = form.parse(request, completion.text)
        except VerdictError as exc:
            problem = f"malformed verdict: {exc}"
            messages = form.retry(messages, completion.text, str(exc), request)
            continue
        call = usage.call(index, spec.kind, judge, attempt, parsed.scores, parsed.reasons)
        if parsed.choice is not None:
            call = replace(call, choice=parsed.choice)
        return replace(call, details=parsed.details) if parsed.details else call
    return usage.call(index, spec.kind, judge, VERDICT_ATTEMPTS, error=problem)


@dataclass
class AttemptsUsage:
    """Tokens, cost and time of one judge's attempts, summed."""

    usage: Usage = field(default_factory=Usage)
    cached: bool = True
    batched: bool = False

    def add(self, completion: Completion) -> None:
        self.usage += completion.usage  # cost_usd: a batched call's at the batch price
        self.cached = self.cached and completion.cached
        self.batched = self.batched or completion.batched

    def call(
        self,
        index: int,
        kind: str,
        judge: ModelProfile,
        attempts: int,
        scores: dict[str, float] | None = None,
        reasons: dict[str, str] | None = None,
        error: str | None = None,
    ) -> JudgeCall:
        made_a_call = self.usage.latency_s is not None
        return JudgeCall(
            assertion=index,
            type=kind,
            judge=judge.name,
            model_id=judge.model,
            scores=dict(scores or {}),
            reasons=dict(reasons or {}),
            error=error,
            attempts=attempts,
            usage=self.usage,
            cached=self.cached and made_a_call,
            batched=self.batched,
        )


# -- aggregation ------------------------------------------------------------------------------


def aggregate(
    index: int,
    assertion: Assertion,
    spec: JudgeSpec,
    keys: Sequence[str],
    calls: tuple[JudgeCall, ...],
) -> GradedAssertion:
    """Combine the valid judges' scores per dimension; the assertion passes when every
    dimension does (LLM-as-a-jury: the mean over judges reaches the threshold by default)."""
    from ..scoring import Verdict

    valid = [call for call in calls if call.error is None]
    if not valid:
        return GradedAssertion(index, None, calls)
    if not any(call.determined for call in valid):
        return _undetermined(index, assertion, valid, calls)
    valid = [call for call in valid if call.determined]
    dimensions: dict[str, float] = {}
    passed: dict[str, bool] = {}
    for key in keys:
        values = [call.scores[key] for call in valid]
        dimensions[key], passed[key] = combine(values, spec.aggregate, spec.threshold)
    ok = all(passed.values())
    verdict = Verdict(
        assertion.type,
        ok,
        _scaled_score(spec, dimensions),
        assertion.weight,
        _reason(spec, dimensions, passed, valid, calls),
    )
    return GradedAssertion(index, verdict, calls, dimensions)


def _undetermined(
    index: int, assertion: Assertion, valid: Sequence[JudgeCall], calls: tuple[JudgeCall, ...]
) -> GradedAssertion:
    """No judge found anything to count (a RAG metric on an answer without claims): the
    verdict is unchecked, with the first judge's reason, never a score."""
    why = next(iter(valid[0].reasons.values()), "nothing to judge")
    return unchecked(index, assertion, why, calls)


def unchecked(
    index: int, assertion: Assertion, why: str, calls: tuple[JudgeCall, ...] = ()
) -> GradedAssertion:
    """An unchecked verdict saying ``why``: left out of the score, never a pass, never a
    silent 0."""
    from ..scoring import Verdict

    reason = f"unchecked: {why}"
    verdict = Verdict(assertion.type, False, 0.0, assertion.weight, reason, unchecked=True)
    return GradedAssertion(index, verdict, calls)


def combine(values: Sequence[float], how: str, threshold: float) -> tuple[float, bool]:
    """One dimension over the judges: (the item's score, whether it passes)."""
    if how == "majority":
        votes = sum(1 for value in values if value >= threshold)
        return statistics.fmean(values), votes * 2 > len(values)
    if how == "median":
        value = float(statistics.median(values))
    elif how == "min":
        value = float(min(values))
    else:
        value = statistics.fmean(values)
    return value, value >= threshold


def _scaled_score(spec: JudgeSpec, dimensions: dict[str, float]) -> float:
    """The assertion's score: its dimensions on 0..1 (jury: 1..5 mapped), averaged."""
    if spec.kind == "jury":
        scaled = [jury_scaled(value) for value in dimensions.values()]
    else:
        scaled = [min(max(value, 0.0), 1.0) for value in dimensions.values()]
    return statistics.fmean(scaled) if scaled else 0.0


def _reason(
    spec: JudgeSpec,
    dimensions: dict[str, float],
    passed: dict[str, bool],
    valid: Sequence[JudgeCall],
    calls: Sequence[JudgeCall],
) -> str:
    if isinstance(spec, ModelGradedSpec):
        key, value = next(iter(dimensions.items()))
        picked = [call.choice for call in valid if call.choice is not None]
        head = grader_reason(spec, key, value, picked, valid[0].reasons.get(key, ""))
    elif spec.kind == "jury":
        head = jury_reason(spec.aggregate, spec.threshold, len(valid), dimensions, passed)
    else:
        key = next(iter(dimensions))
        why = valid[0].reasons.get(key, "")
        head = f"{key} {dimensions[key]:.2f} (pass >= {spec.threshold:g}); {why}".rstrip("; ")
    excluded = [call for call in calls if call.error is not None]
    if excluded:
        head += "; excluded: " + "; ".join(f"{call.judge}: {call.error}" for call in excluded)
    silent = [call for call in calls if call.error is None and not call.determined]
    if silent:  # a RAG judge that found nothing to count, while another did
        head += "; no verdict: " + "; ".join(
            f"{call.judge}: {next(iter(call.reasons.values()), '')}" for call in silent
        )
    return head


@dataclass(frozen=True)
class PanelForm:
    """One judge kind's way with a panel: what each judge is asked (``prompt``, with the reply's
    JSON ``schema`` as structured output), how its reply is read (``parse``; a
    :class:`VerdictError` is asked again with ``retry``), and how the valid verdicts become the
    assertion's (``aggregate``). Registered with the kind in :mod:`.judge_kinds`."""

    prompt: Callable[[JudgeRequest], list[dict[str, str]]]
    schema: Callable[[JudgeRequest], dict[str, Any]]
    parse: Callable[[JudgeRequest, str], ParsedVerdict]
    retry: Callable[[list[dict[str, str]], str, str, JudgeRequest | None], list[dict[str, str]]]
    aggregate: AggregateFn


#: The built-in judge kinds' form: :mod:`.prompts` and :mod:`.verdicts`, read by the request's
#: kind, and :func:`aggregate`.
STANDARD_FORM = PanelForm(judge_messages, reply_schema, parse_verdict, retry_messages, aggregate)
