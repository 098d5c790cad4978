"""The ``traceparent`` header of an outgoing model call, when the run exports a trace.

The engine sets :data:`OUTGOING_TRACEPARENT` around each call it times (the call span's own
W3C ``traceparent``); both clients read it when they send the request, so a model endpoint that
traces (an app behind an OpenAI-compatible URL, a proxy) nests its spans under the call. Unset
(export off, or a call outside the engine), no header is added. It is never part of a call's
parameters, so it never reaches the response cache's key.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping

__all__ = ["OUTGOING_TRACEPARENT", "with_traceparent"]

#: The ``traceparent`` the request being sent carries (None: none).
OUTGOING_TRACEPARENT: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "llmbench_outgoing_traceparent", default=None
)


def with_traceparent(headers: Mapping[str, str] | None) -> dict[str, str] | None:
    """``headers`` with the outgoing ``traceparent`` added when one is set; else ``headers``
    as given (None stays None: nothing to send)."""
    parent = OUTGOING_TRACEPARENT.get()
    if parent is None:
        return None if headers is None else dict(headers)
    return {**(headers or {}), "traceparent": parent}
