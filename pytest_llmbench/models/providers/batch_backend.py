"""What a provider's batch API looks like to the engine: the lines sent, the batch's state,
and the five calls every backend answers (:class:`BatchBackend`).

A batch is a set of independent chat calls sent in one request and answered within hours at
about half the price. Each line carries a ``custom_id``: ours is the call's response-cache key
(64 hex digits, which every provider's id rules allow), stable across processes and runs, so
an answer maps back to its call (and its cache entry) by its id alone, and a resumed run finds
the batch that already holds a call instead of paying for it twice.

The backends: :mod:`.batch_openai` (OpenAI's protocol: ``/files`` and ``/batches``, through
the lean client) and :mod:`.batch_anthropic` (Anthropic's Message Batches); which one serves
a target, or why none does (its calls stay live), is :func:`.batch_routes.batch_route`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..item_errors import BatchError
from .completion import CallTarget, Completion

#: A batch's states as the engine reads them (each backend maps its provider's words here).
IN_PROGRESS = "in_progress"  #: validating, in progress, finalizing, cancelling
COMPLETED = "completed"
FAILED = "failed"  #: the batch as a whole was refused (validation): no line was answered
EXPIRED = "expired"  #: the 24 h window passed: answered lines are kept, the rest expired
CANCELLED = "cancelled"
TERMINAL = frozenset({COMPLETED, FAILED, EXPIRED, CANCELLED})


@dataclass(frozen=True)
class BatchLine:
    """One call of a batch: the request a live call would send, and its id."""

    custom_id: str  #: the call's response-cache key
    target: CallTarget
    messages: Sequence[dict[str, Any]]
    params: dict[str, Any]  #: sent on top of the profile's own, as a live call's
    #: ``chat`` (a chat completion) or ``embed`` (the messages' texts embedded); a batch holds
    #: one kind (one endpoint per batch)
    kind: str = "chat"


@dataclass(frozen=True)
class BatchState:
    """A batch as last polled."""

    batch_id: str
    status: str  #: one of IN_PROGRESS, COMPLETED, FAILED, EXPIRED, CANCELLED
    provider_status: str  #: the provider's own word (``validating``, ``ended``...)
    total: int = 0  #: lines in the batch
    done: int = 0  #: lines answered
    failed: int = 0  #: lines that ended without an answer (errored, expired, cancelled)
    created_at: float | None = None  #: Unix seconds
    expires_at: float | None = None  #: Unix seconds
    #: why a batch that failed as a whole failed (the provider's batch-level errors)
    errors: tuple[str, ...] = field(default=())

    @property
    def terminal(self) -> bool:
        """The batch will change no more: its results can be read."""
        return self.status in TERMINAL


class BatchResults(dict[str, "Completion | BatchError"]):
    """What reading a finished batch gives: each custom_id sent, with its answer or its error;
    and ``problems``, the lines of the batch's files that belong to no call sent (not JSON, no
    custom_id, one not sent), each naming the batch and the line: no call may take them."""

    problems: tuple[str, ...] = ()


#: What reading a finished batch gives (the engine reads it as a mapping).
Results = BatchResults


class BatchBackend(Protocol):
    """A provider's batch API at one endpoint with one key."""

    #: the provider's name, as the session header and errors name it (``openai``...)
    name: str
    #: the most lines and bytes one batch may hold
    max_lines: int
    max_bytes: int

    async def create(self, lines: Sequence[BatchLine], metadata: Mapping[str, str]) -> str:
        """Send ``lines`` as one batch (uploading its input first where the API wants a
        file); its id. ``metadata`` is kept with the batch where the API keeps any (its
        ``llmbench_input_sha256`` finds it again: :meth:`find`)."""
        ...

    async def find(self, input_sha256: str) -> str | None:
        """The id of a batch this endpoint holds whose metadata names ``input_sha256``, or
        None (none, or the API keeps no metadata): a run killed between sending a batch and
        writing its id down finds it here instead of sending it again."""
        ...

    async def poll(self, batch_id: str) -> BatchState:
        """The batch's state now."""
        ...

    async def results(self, state: BatchState, sent: Mapping[str, BatchLine]) -> Results:
        """The answers of a finished batch (``state.terminal``), one per custom_id of
        ``sent``: a :class:`~..completion.Completion` (``batched``, ``batch_id``, priced at
        the batch price), or a :class:`~..item_errors.BatchError` naming the batch and, where
        one line was at fault, that line. A line that is not JSON, a custom_id not sent or seen
        twice is an error of its own (named, never attached to another call); a custom_id sent
        and not seen is that call's error."""
        ...

    async def cancel(self, batch_id: str) -> None:
        """Ask the provider to stop the batch (answered lines stay readable)."""
        ...
