"""The timed calls of each item, kept for the run's trace when it exports one (``--otel``).

Every process of a run derives the same ids from the run's id (:func:`trace_ids`), so the
controller, the xdist workers and an app called by an item agree on the trace without a
message: the run's span, and each item's span from its node id (:func:`item_span_id`). While
export is on, the engine notes each model, judge, simulated-user, tool, MCP and sandbox call of
an item in this process's :class:`CallSpans` (:func:`note_call`); the record takes them in its
``trace`` field when the item finishes, and the controller turns records into spans
(``telemetry``). With export off, :func:`active` is None and nothing is timed or kept.

A call span is a plain dict (it crosses xdist inside the record):

- ``span_id`` (str): 16 hex digits, new for the call (:func:`new_span_id`);
- ``parent_id`` (str | None): the span it nests under; None: the item's span;
- ``kind`` (str): ``chat`` (the model under test), ``judge``, ``user_sim`` (a simulated user),
  ``embeddings``, ``tool`` (an agent's tool), ``mcp`` (a tool of an MCP server), ``sandbox`` (a
  command run in the sandbox) or ``solver`` (a solver's own run);
- ``name`` (str): the model's litellm id, the tool's name or the command's program;
- ``start_ns``, ``end_ns`` (int): wall-clock times, nanoseconds since the epoch
  (``time.time_ns()``);
- ``error`` (str | None): why the call failed (redacted), None when it did not;
- ``attributes`` (dict[str, str | int | float | bool]): what the call measured, in our own
  words (``model``, ``model_id``, ``provider``, ``input_tokens``, ``output_tokens``,
  ``reasoning_tokens``, ``cached_input_tokens``, ``cache_write_tokens``, ``ttft_s``,
  ``cache_hit``, ``finish_reason``, ``response_model``, ``cost_usd``, ``tool``, ``call_id``,
  ``exit_code``, ...);
  ``telemetry`` maps them to the GenAI semantic conventions' names. Unknown or None values are
  left out. With ``--otel-content``: ``input`` (the messages sent, JSON) and ``output`` (the
  reply's text), both redacted.

Who notes what: every model call passes :meth:`.pacing.CallPacer.paced` (:mod:`.model_spans`):
``chat``, ``judge``, ``user_sim`` or ``embeddings`` by the request's ``role`` (a shim
interpreter's call is ``chat`` and an optimizer's ``judge``, with a ``role`` attribute), plus
``batched``, ``batch_id``, ``retries`` and ``streamed`` when they apply, and a failed call's
``error_kind``; an answer from the response cache is a span with ``cache_hit`` true and no
``ttft_s``. The agent stage (earlier than this one) notes ``tool`` and ``mcp`` spans of its tool
calls and ``sandbox`` spans of the commands they run (``program``, ``exit_code``,
``timed_out``; ``command``, the whole line, only with content), each command's ``parent_id``
the tool call's span, through the :class:`~pytest_llmbench.agent.tool_spans.SpanNotes` that
:func:`enable` hands it. The engine sets :data:`CURRENT_NODEID` around each item's answer (on
the calling thread, and in the task that answers it, look-ahead or not).
"""

from __future__ import annotations

import contextvars
import hashlib
import secrets
import threading
from dataclasses import dataclass
from typing import Any

from ..models import OUTGOING_TRACEPARENT

__all__ = [
    "CURRENT_NODEID",
    "CallSpans",
    "TraceIds",
    "active",
    "disable",
    "enable",
    "item_span_id",
    "item_trace",
    "item_traceparent",
    "new_span_id",
    "note_call",
    "outgoing_traceparent",
    "trace_ids",
    "traceparent",
]

#: The node id of the item whose answer the running task computes (set by the engine around
#: an item's answer; asyncio tasks it starts inherit it).
CURRENT_NODEID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "llmbench_current_nodeid", default=None
)
#: The ``traceparent`` an outgoing provider request carries (the call span's own), set around
#: the call by the engine and read by the clients (it lives with them, in the models stage).
_OUTGOING: contextvars.ContextVar[str | None] = OUTGOING_TRACEPARENT


@dataclass(frozen=True)
class TraceIds:
    """The ids every process of one run agrees on."""

    trace_id: str  #: 32 hex digits
    run_span_id: str  #: 16 hex digits: the run's span, parent of every item's


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def trace_ids(run_id: str) -> TraceIds:
    """The trace and run span ids of the run named ``run_id`` (:func:`.session.run_id`)."""
    return TraceIds(_digest("trace", run_id)[:32], _digest("run", run_id)[:16])


def item_span_id(trace_id: str, nodeid: str) -> str:
    """The span id of the item ``nodeid`` in the trace ``trace_id``: the same in every process."""
    return _digest("item", trace_id, nodeid)[:16]


def new_span_id() -> str:
    """A fresh random span id (16 hex digits, never all zeros)."""
    while (span_id := secrets.token_hex(8)) == "0" * 16:
        pass
    return span_id


def traceparent(trace_id: str, span_id: str) -> str:
    """The W3C ``traceparent`` header naming ``span_id`` of ``trace_id`` as parent (sampled)."""
    return f"00-{trace_id}-{span_id}-01"


class CallSpans:
    """This process's call spans, by item node id, until the item's record takes them."""

    def __init__(self, ids: TraceIds, content: bool) -> None:
        self.ids = ids
        self.content = content  #: ``--otel-content``: keep the messages and replies
        self._lock = threading.Lock()
        self._by_item: dict[str, list[dict[str, Any]]] = {}

    def add(self, nodeid: str, span: dict[str, Any]) -> None:
        """Keep ``span`` (a call span dict, as documented above) for the item ``nodeid``."""
        with self._lock:
            self._by_item.setdefault(nodeid, []).append(span)

    def note(self, span: dict[str, Any]) -> None:
        """Keep ``span`` for the item whose answer the running task computes (none: dropped)."""
        owner = CURRENT_NODEID.get()
        if owner is not None:
            self.add(owner, span)

    @staticmethod
    def new_span_id() -> str:
        """A fresh span id (:func:`new_span_id`)."""
        return new_span_id()

    def take(self, nodeid: str) -> list[dict[str, Any]]:
        """The item's call spans in start order, forgotten here."""
        with self._lock:
            spans = self._by_item.pop(nodeid, [])
        return sorted(spans, key=lambda span: span["start_ns"])


_ACTIVE: CallSpans | None = None


def enable(ids: TraceIds, content: bool) -> CallSpans:
    """Start keeping call spans in this process (once per run, at configure)."""
    from ..agent import use_span_notes

    global _ACTIVE
    _ACTIVE = CallSpans(ids, content)
    use_span_notes(_ACTIVE)  # the agent's tool calls and sandbox commands
    return _ACTIVE


def disable() -> None:
    """Stop keeping call spans (the run ended)."""
    global _ACTIVE
    if _ACTIVE is None:
        return
    from ..agent import use_span_notes

    _ACTIVE = None
    use_span_notes(None)


def active() -> CallSpans | None:
    """This process's call spans, or None when the run exports no trace."""
    return _ACTIVE


def note_call(nodeid: str | None, span: dict[str, Any]) -> None:
    """Keep ``span`` for ``nodeid`` (else the current task's item) when export is on."""
    spans, owner = _ACTIVE, nodeid or CURRENT_NODEID.get()
    if spans is not None and owner is not None:
        spans.add(owner, span)


def item_trace(nodeid: str, start_ns: int, end_ns: int) -> dict[str, Any] | None:
    """The record's ``trace`` of item ``nodeid``, whose report spans ``start_ns`` to
    ``end_ns`` (its calls, taken from this process's spans, may start before it: look-ahead),
    or None when the run exports no trace."""
    spans = _ACTIVE
    if spans is None:
        return None
    calls = spans.take(nodeid)
    trace_id = spans.ids.trace_id
    return {
        "trace_id": trace_id,
        "span_id": item_span_id(trace_id, nodeid),
        "parent_id": spans.ids.run_span_id,
        "start_ns": min([start_ns, *(call["start_ns"] for call in calls)]),
        "end_ns": max([end_ns, *(call["end_ns"] for call in calls)]),
        "calls": calls,
    }


def item_traceparent(nodeid: str) -> str | None:
    """The ``traceparent`` naming item ``nodeid``'s span (a solver's, for the app's own spans),
    or None when the run exports no trace."""
    spans = _ACTIVE
    if spans is None:
        return None
    trace_id = spans.ids.trace_id
    return traceparent(trace_id, item_span_id(trace_id, nodeid))


def outgoing_traceparent() -> contextvars.ContextVar[str | None]:
    """The variable the clients read for an outgoing request's ``traceparent`` header."""
    return _OUTGOING
