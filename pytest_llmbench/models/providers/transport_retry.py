"""How long a call may take and how it is tried again: one implementation for both clients.

A call is attempted within a whole-call bound (stream included); transient failures (connection
resets, timeouts, cut streams, 408/409/425/429/5xx) are retried with jittered exponential
backoff, or after the provider's ``Retry-After``; anything else fails at once. What the caller
finally gets is a :class:`ProviderError` (:func:`.errors.provider_error`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import email.utils
import json
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..item_errors import ProviderError
from .completion import DEFAULT_CONNECT_TIMEOUT_S, CallTarget, Completion, Timeouts
from .errors import provider_error, status_of

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "BeforeRetry",
    "CallTimeout",
    "IncompleteStreamError",
    "OnRetry",
    "Retrying",
    "Timeouts",
    "backoff_s",
    "cut_stream_message",
    "retried",
    "retry_after_s",
]

#: HTTP statuses worth another try; anything else (400, 401, 404, ...) fails at once.
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
_BACKOFF_BASE_S = 0.5
_BACKOFF_MAX_S = 20.0

#: What a retry loop tells its caller: ``on_retry(status)`` of every retry (429 lets a caller
#: lower its concurrency); ``before_retry()`` is awaited before each new attempt (a rate
#: limiter's turn) and returns the seconds it waited.
OnRetry = Callable[[int | None], None]
BeforeRetry = Callable[[], Awaitable[float]]


class IncompleteStreamError(ConnectionError):
    """A stream whose body ended before the provider's finish reason: the connection was cut.

    What came before is not an answer: the call is retried, and never scored.
    """


class CallTimeout(TimeoutError):
    """One attempt (connection, answer and stream) took longer than ``--request-timeout``."""


@dataclass(frozen=True)
class Retrying:
    """How a call is bounded and tried again: its limits, retries and the caller's hooks."""

    limits: Timeouts = field(default_factory=Timeouts)
    max_retries: int = 2
    on_retry: OnRetry | None = None
    before_retry: BeforeRetry | None = None


def cut_stream_message(received: int) -> str:
    """Why a stream that ended before its finish reason is no answer."""
    if not received:
        return "the stream ended before any answer or finish reason"
    return f"the stream was cut after {received} characters, before its finish reason"


async def retried(
    attempt: Callable[[int], Awaitable[Completion]], target: CallTarget, policy: Retrying
) -> Completion:
    """``attempt(retries)`` within the call bound until it answers, retried as the module says.

    A :class:`ProviderError` the attempt raises is final (passed on as it is); any other
    exception is classified by :func:`.errors.provider_error` once retries are spent.
    """
    limits, max_retries = policy.limits, policy.max_retries
    on_retry, before_retry = policy.on_retry, policy.before_retry
    retries = 0
    rate_limited_s = 0.0
    while True:
        try:
            completion = await _within(attempt(retries), limits)
            if completion.rate_limit_wait_s == rate_limited_s:
                return completion
            return dataclasses.replace(completion, rate_limit_wait_s=rate_limited_s)
        except ProviderError as final:  # the call's own final word
            final.retries, final.rate_limit_wait_s = retries, rate_limited_s
            raise
        except Exception as exc:  # each client raises many types; errors.py classifies them
            if retries >= max_retries or not _is_retryable(exc):
                error = provider_error(exc, target, retries, limits)
                error.rate_limit_wait_s = rate_limited_s
                raise error from None
            retries += 1
            status = status_of(exc)
            if on_retry is not None:
                on_retry(status)
            delay = backoff_s(exc, retries)
            rate_limited_s += delay if status == 429 else 0.0
            await asyncio.sleep(delay)
            if before_retry is not None:
                rate_limited_s += await before_retry()


async def _within(call: Awaitable[Completion], limits: Timeouts) -> Completion:
    """``call``, cancelled when it runs past the whole-call bound (a slow stream included)."""
    try:
        if _timeout is None:  # Python 3.10
            return await asyncio.wait_for(call, limits.call_s)
        async with _timeout(limits.call_s):  # no task of its own, as wait_for makes one
            return await call
    except asyncio.TimeoutError:
        raise CallTimeout(f"no complete answer within {limits.call_s:g} s") from None


#: ``asyncio.timeout`` (Python 3.11 and later).
_timeout: Any = getattr(asyncio, "timeout", None)


def _is_retryable(exc: BaseException) -> bool:
    status = status_of(exc)
    if isinstance(exc, json.JSONDecodeError):
        return True  # a garbled body, as a broken connection gives: try again
    if status is None:
        # Connection resets, timeouts and broken streams carry no status: try again.
        return not isinstance(exc, (ValueError, TypeError, KeyError, AttributeError))
    return status in _RETRYABLE_STATUS


def backoff_s(exc: BaseException, attempt: int) -> float:
    """Seconds to wait before retry number ``attempt``: the provider's Retry-After (capped),
    else jittered exponential backoff."""
    retry_after = retry_after_s(exc)
    if retry_after is not None:
        return min(retry_after, _BACKOFF_MAX_S)
    delay: float = min(_BACKOFF_BASE_S * 2.0 ** (attempt - 1), _BACKOFF_MAX_S)
    return delay * (0.5 + random.random() / 2)


def retry_after_s(exc: BaseException) -> float | None:
    """The wait an error's answer asked for (``retry-after-ms``, ``retry-after``), if any."""
    # litellm re-raises with a synthetic ``response`` whose headers are empty; the provider's
    # real headers are on ``litellm_response_headers``. Ours are on ``headers``.
    for headers in (
        getattr(exc, "headers", None),
        getattr(exc, "litellm_response_headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
    ):
        if headers is None or not hasattr(headers, "get"):
            continue
        seconds = _header_seconds(headers.get("retry-after-ms"), 1000.0)
        if seconds is None:
            seconds = _header_seconds(headers.get("retry-after"), 1.0)
        if seconds is not None:
            return seconds
    return None


def _header_seconds(value: Any, per_second: float) -> float | None:
    """A Retry-After value (seconds, milliseconds or an HTTP date) in seconds."""
    if value is None:
        return None
    try:
        return max(0.0, float(value) / per_second)
    except (TypeError, ValueError):
        pass
    try:
        when = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return max(0.0, (when - dt.datetime.now(dt.timezone.utc)).total_seconds())
