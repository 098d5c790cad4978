"""A model call's span: the pacer's door (:meth:`.pacing.CallPacer.paced`) timed, when the run
exports a trace.

Loaded only then. Each call through the pacer (the model under test's, a judge's or grader's, a
simulated user's, an embedding, a shim interpreter's) becomes one call span of the item whose
answer the task computes (:data:`.call_spans.CURRENT_NODEID`, else the request's own item), as
:mod:`.call_spans` documents it: its kind from the request's ``role``, what the completion
measured as attributes, a failure's message and kind. An answer from the response cache is a
span too (``cache_hit``). While the call is in flight its ``traceparent`` is the outgoing one,
which both clients send as a header. With ``--otel-content`` the span carries the messages sent
(already redacted by the pacer) and the reply's text, through the redactor.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..models import ItemError
from .call_spans import CURRENT_NODEID, CallSpans, new_span_id, outgoing_traceparent, traceparent

if TYPE_CHECKING:
    from ..models import Completion
    from .request import Request

__all__ = ["note_cached", "span_kind", "traced"]

#: The span kind of each request role (an embedding's is ``embeddings`` whatever its role).
_KINDS = {
    "chat": "chat",
    "interpreter": "chat",
    "judge": "judge",
    "optimizer": "judge",
    "user_sim": "user_sim",
}


def span_kind(request: Request) -> str:
    """The kind of ``request``'s span: ``chat``, ``judge``, ``user_sim`` or ``embeddings``."""
    return "embeddings" if request.embed else _KINDS.get(request.role, "chat")


async def traced(
    spans: CallSpans,
    request: Request,
    call: Callable[[Request], Awaitable[Completion]],
    shown: Callable[[Completion], str],
) -> Completion:
    """``call(request)`` timed as a call span kept in ``spans``, its ``traceparent`` the
    outgoing one while it runs; ``shown`` is the reply's text as a span may carry it."""
    span_id = new_span_id()
    owner = CURRENT_NODEID.get() or request.nodeid
    outgoing = outgoing_traceparent()
    token = outgoing.set(traceparent(spans.ids.trace_id, span_id))
    started = time.time_ns()
    try:
        completion = await call(request)
    except BaseException as exc:
        span = _span(spans, request, span_id, started)
        span["error"] = exc.message if isinstance(exc, ItemError) else _described(exc)
        kind = exc.kind if isinstance(exc, ItemError) else type(exc).__name__
        span["attributes"]["error_kind"] = kind
        spans.add(owner, span)
        raise
    finally:
        outgoing.reset(token)
    span = _span(spans, request, span_id, started)
    span["attributes"].update(_measured(completion, spans.content, shown))
    spans.add(owner, span)
    return completion


def note_cached(
    spans: CallSpans, request: Request, completion: Completion, shown: Callable[[Completion], str]
) -> None:
    """Keep the span of ``request`` answered from the response cache on the calling thread."""
    span = _span(spans, request, new_span_id(), time.time_ns())
    span["attributes"].update(_measured(completion, spans.content, shown))
    spans.add(CURRENT_NODEID.get() or request.nodeid, span)


def _span(spans: CallSpans, request: Request, span_id: str, started: int) -> dict[str, Any]:
    """The span of ``request`` started at ``started`` and ending now, before its outcome."""
    kind = span_kind(request)
    model_id = request.target.model_id
    attributes: dict[str, Any] = {"model": request.model_name, "model_id": model_id}
    provider, _, rest = model_id.partition("/")
    if rest:
        attributes["provider"] = provider
    if _KINDS.get(request.role, request.role) != request.role:
        attributes["role"] = request.role  # a shim interpreter's chat, an optimizer's judge
    if spans.content:
        attributes["input"] = json.dumps(list(request.messages), ensure_ascii=False, default=str)
    return {
        "span_id": span_id,
        "parent_id": None,
        "kind": kind,
        "name": model_id,
        "start_ns": started,
        "end_ns": max(started, time.time_ns()),
        "error": None,
        "attributes": attributes,
    }


def _measured(
    completion: Completion, content: bool, shown: Callable[[Completion], str]
) -> dict[str, Any]:
    """What ``completion`` measured, in the call spans' words (unknown values left out)."""
    measured: dict[str, Any] = {
        "model_id": completion.model_id or None,
        "input_tokens": completion.input_tokens,
        "output_tokens": completion.output_tokens,
        "reasoning_tokens": completion.reasoning_tokens,
        "cached_input_tokens": completion.cached_input_tokens,
        "cache_write_tokens": completion.cache_write_tokens,
        "ttft_s": None if completion.cached else completion.ttft_s,
        "cache_hit": completion.cached,
        "finish_reason": completion.finish_reason,
        "response_model": completion.response_model,
        "cost_usd": completion.cost_usd,
        "batched": completion.batched or None,
        "batch_id": completion.batch_id,
        "retries": completion.retries or None,
        "streamed": completion.streamed or None,
    }
    if content:
        measured["output"] = shown(completion)
    return {name: value for name, value in measured.items() if value is not None}


def _described(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
