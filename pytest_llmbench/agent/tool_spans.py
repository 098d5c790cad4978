"""The spans of an agent's tool calls and of the sandbox commands they run, when the run exports
a trace (``--otel``).

The engine owns the run's call spans (``engine.call_spans``), a later stage than this one: it
hands this stage a :class:`SpanNotes` once export is on (:func:`use_span_notes`), and takes it
back at the end. Until then :func:`timed` costs one check and keeps nothing. A tool call's span
is the parent of the commands it runs (:data:`CURRENT_PARENT_SPAN`, inherited by the thread a
tool runs in); a span is kept for the item whose answer is being computed (the engine knows
which). Span dicts are the call spans ``engine.call_spans`` documents.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator
from typing import Any, Protocol

__all__ = ["CURRENT_PARENT_SPAN", "SpanNotes", "span_notes", "timed", "use_span_notes"]

#: The span the calls started now nest under (a tool call's, for its commands); None: the item's.
CURRENT_PARENT_SPAN: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "llmbench_current_parent_span", default=None
)
#: The kinds of span that are the parent of what runs inside them.
_PARENTS = ("tool", "mcp")


class SpanNotes(Protocol):
    """Where this stage's spans go (``engine.call_spans.CallSpans``)."""

    #: ``--otel-content``: spans may carry the data a call saw (arguments, results, commands)
    content: bool

    def note(self, span: dict[str, Any]) -> None:
        """Keep ``span`` for the item whose answer the running task computes."""
        ...

    def new_span_id(self) -> str:
        """A fresh span id."""
        ...


_NOTES: SpanNotes | None = None


def use_span_notes(notes: SpanNotes | None) -> None:
    """Send this process's tool and sandbox spans to ``notes`` (None: keep none)."""
    global _NOTES
    _NOTES = notes


def span_notes() -> SpanNotes | None:
    """Where spans go now, or None when the run exports no trace."""
    return _NOTES


@contextlib.contextmanager
def timed(kind: str, name: str, attributes: dict[str, Any]) -> Iterator[dict[str, Any] | None]:
    """Time the block as a span of ``kind`` named ``name``; the block may add to the
    attributes it is given (its ``error`` key, a str, becomes the span's error; None values
    are left out). Yields None, and keeps nothing, when the run exports no trace."""
    notes = _NOTES
    if notes is None:
        yield None
        return
    span_id, parent = notes.new_span_id(), CURRENT_PARENT_SPAN.get()
    token = CURRENT_PARENT_SPAN.set(span_id) if kind in _PARENTS else None
    said = dict(attributes)
    failure: str | None = None
    started = time.time_ns()
    try:
        yield said
    except BaseException as exc:  # a cancelled call ends its span too
        failure = f"{type(exc).__name__}: {exc}".rstrip(": ")
        raise
    finally:
        ended = time.time_ns()
        if token is not None:
            CURRENT_PARENT_SPAN.reset(token)
        error = said.pop("error", None)
        notes.note(
            {
                "span_id": span_id,
                "parent_id": parent,
                "kind": kind,
                "name": name,
                "start_ns": started,
                "end_ns": ended,
                "error": failure or (error if isinstance(error, str) else None),
                "attributes": {key: value for key, value in said.items() if value is not None},
            }
        )
