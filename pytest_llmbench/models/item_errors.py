"""The item errors: why an item ended without a verdict, by the part that failed.

An item error is never a low score: the item is pytest's error (or failure in the call phase)
with the record's ``error_kind`` set to the error's :attr:`ItemError.kind`, the real cause
(``provider``, ``connection``, ``timeout``, ``sandbox``, ``tool``, ``judge``, ...). The class says
which part failed, so a handler catches what it can handle and the message names the part:

- :class:`ProviderError`: a model call that failed after its retries (the model under test's,
  or a judge's, a grader's, an optimizer's: whoever asked);
- :class:`SandboxError`: an agent's sandbox or workdir that cannot be made or run;
- :class:`ToolError`: a tool server (MCP) that could not serve the item;
- :class:`JudgeError`: every judge of a judged assertion failed: no verdict, not a failed one;
- :class:`EnvError`: an agent's stateful tool environment that failed (its module raised on
  import, a tool left a state that cannot be saved or read back, its process died);
- :class:`UserSimError`: the simulated user of a conversation failed (its ``kind`` is the cause:
  ``provider`` for its own model's outage, ``malformed`` for an empty message);
- :class:`SolverError`: a user's solver could not be imported, raised, or answered nothing usable;
- :class:`ItemError` itself: the harness's own reasons (``config``, ``unsupported``,
  ``cache_miss``, ``budget``, ``timeout`` of pytest-timeout, ``post_process``).
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "BatchError",
    "EnvError",
    "ItemError",
    "JudgeError",
    "ProviderError",
    "SandboxError",
    "SolverError",
    "ToolError",
    "UserSimError",
]


class ItemError(Exception):
    """An item that ended without a verdict.

    ``kind`` is the record's ``error_kind``; ``retries`` and ``rate_limit_wait_s`` are what the
    failed call spent before giving up (0 where no call failed). ``partial`` is what the item did
    before the error, when it made calls of its own first (an agent's loop so far, a
    conversation's replies): the record keeps its tokens, cost and transcript.
    """

    #: the ``kind`` when none is given
    default_kind: ClassVar[str] = "internal"
    #: the part that failed, as the failure message names it (``llmbench <part> error: ...``);
    #: empty for the harness's own reasons, which name their kind instead
    part: ClassVar[str] = ""

    def __init__(
        self,
        message: str,
        kind: str | None = None,
        retries: int = 0,
        rate_limit_wait_s: float = 0.0,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind or self.default_kind
        self.retries = retries
        self.rate_limit_wait_s = rate_limit_wait_s
        self.partial: Any = None

    @property
    def words(self) -> str:
        """How a failure message names this error: ``provider error``, ``config error``, ..."""
        return f"{self.part or self.kind.replace('_', ' ')} error"


class ProviderError(ItemError):
    """A model call that failed after retries. ``kind``: ``provider`` (an HTTP error, a dropped
    or cut-off stream), ``connection``, ``timeout``, ``malformed``, ``missing_key``, ``config``,
    ``unsupported``."""

    default_kind = "provider"
    part = "provider"


class SandboxError(ItemError):
    """An agent's sandbox (bubblewrap) or workdir that cannot be made or cannot run a command."""

    default_kind = "sandbox"
    part = "sandbox"


class ToolError(ItemError):
    """A tool server that could not serve the item (it did not start, or went away)."""

    default_kind = "tool"
    part = "tool"


class EnvError(ItemError):
    """A stateful tool environment that could not serve the item: its module raised when
    loaded, a tool left a state that is not JSON or could not be read back (a corrupted state
    file), an expected action failed when replayed, or its process died."""

    default_kind = "environment"
    part = "environment"


class JudgeError(ItemError):
    """No judge of a judged assertion could give a verdict."""

    default_kind = "judge"
    part = "judge"


class UserSimError(ItemError):
    """A conversation's simulated user failed; ``kind`` is its cause."""

    default_kind = "provider"
    part = "simulated user"


class BatchError(ItemError):
    """A call sent through a provider's batch API that got no answer: the batch failed,
    expired, was cancelled or outwaited ``--batch-timeout``, or its output had no usable line
    for the call. The message names the batch id (and the line, where one was at fault)."""

    default_kind = "batch"
    part = "batch"


class SolverError(ItemError):
    """A solver that could not be imported, raised, or returned no usable answer."""

    default_kind = "solver"
    part = "solver"
