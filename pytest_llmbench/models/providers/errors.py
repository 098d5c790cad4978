"""What a failed call says: its error kind and one line naming the cause, for both clients.

The lean OpenAI-compatible client and litellm raise different exception types for the same
fault (a refused connection, a timeout, a 429, a body that is not JSON); both end here, so an
item's ``error_kind`` and message do not depend on the path its model takes.
"""

from __future__ import annotations

import json
import re
import socket
import urllib.parse
from collections.abc import Mapping, Sequence

from ..item_errors import ProviderError
from .completion import CallTarget, Timeouts

#: Exception names (httpx, aiohttp) of a connection that could not be opened.
_CONNECT_ERRORS = frozenset({"ConnectError", "ClientConnectorError", "ClientConnectorDNSError"})
#: Exception names (httpx, aiohttp) of a connection that could not be opened in time.
_CONNECT_TIMEOUTS = frozenset({"ConnectTimeout", "ConnectionTimeoutError"})
#: Exception names (httpx, aiohttp) of a connection the server closed mid-answer.
_CLOSED = frozenset(
    {"RemoteProtocolError", "ServerDisconnectedError", "ClientPayloadError", "ClientOSError"}
)
#: The names litellm gives an HTTP status (and so both clients show); any other is ``APIError``.
STATUS_NAMES: Mapping[int, str] = {
    400: "BadRequestError",
    401: "AuthenticationError",
    404: "NotFoundError",
    408: "Timeout",
    422: "BadRequestError",
    429: "RateLimitError",
    500: "InternalServerError",
    502: "BadGatewayError",
    503: "ServiceUnavailableError",
    504: "Timeout",
}
#: litellm's prefix on a provider's own message: ``litellm.RateLimitError: RateLimitError:
#: OpenAIException - `` (``Timeout Error:`` for a timeout's).
_LITELLM_PREFIX = re.compile(
    r"^(?:litellm\.\w+:\s*)?(?:\w+(?: Error)?:\s*)?(?:\w+Exception\s*-\s*)?"
)


class HTTPStatusError(Exception):
    """An answer with an error status: its status, headers and the provider's message."""

    def __init__(self, status_code: int, message: str, headers: Mapping[str, str]) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.headers = headers


def missing_key_error(
    name: str, model_id: str, variables: Sequence[str], host: str | None = None
) -> ProviderError:
    """The error of a model whose key variable is unset, raised before any request:
    ``gpt: OPENAI_API_KEY is not set (needed for openai/gpt-4o-mini)``, and the host the
    request would have gone to when it is not the provider's default."""
    needed = " or ".join(variables)
    verb = "is" if len(variables) == 1 else "are"
    at = f" at {host}, which is not on this machine or a private network" if host else ""
    message = f"{name}: {needed} {verb} not set (needed for {model_id}{at})"
    return ProviderError(message, "missing_key")


def status_name(status: int) -> str:
    """The exception name both clients show for ``status`` (``RateLimitError`` for 429)."""
    return STATUS_NAMES.get(status, "APIError")


def body_message(body: bytes, status: int) -> str:
    """The provider's own words in an error body: ``error.message`` of OpenAI's shape,
    ``message`` of vLLM's, else the body as text (``Error code: N`` when empty)."""
    text = body.decode("utf-8", "replace").strip()
    if not text:
        return f"Error code: {status}"
    try:
        data = json.loads(text)
    except ValueError:
        return text
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return str(data["message"])  # vLLM's shape
    return text


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an exception carries, if it came from an answer."""
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def provider_error(
    exc: BaseException, target: CallTarget, retries: int, limits: Timeouts
) -> ProviderError:
    """The error an item gets: its kind, and one line that says what happened."""
    status = status_of(exc)
    causes = _causes(exc)
    kind = _error_kind(status, causes)
    tries = f" after {retries + 1} attempts" if retries else ""
    described = _described(kind, causes, target, limits)
    if described is not None:
        label, message = described
    elif status is not None and "Connection" not in type(exc).__name__:
        # litellm gives connection failures a made-up 500: only a real answer has a status.
        label = f"{status_name(status)} (HTTP {status})"
        said = _LITELLM_PREFIX.sub("", str(exc).strip(), count=1)
        # litellm passes some providers' error bodies on whole: their words, as the lean
        # client reads them
        message = body_message(said.encode(), status) if said else status_name(status)
    else:
        label, message = type(exc).__name__, str(exc).strip() or type(exc).__name__
    message = redacted(message, target)
    return ProviderError(f"{target.name}: {label}{tries}: {message}", kind=kind, retries=retries)


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, outermost first
    (litellm's ``MidStreamFallbackError`` keeps its cause as ``original_exception``)."""
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in found):
        found.append(current)
        original = getattr(current, "original_exception", None)
        wrapped = original if isinstance(original, BaseException) else None
        current = current.__cause__ or wrapped or current.__context__
    return found


def _error_kind(status: int | None, causes: Sequence[BaseException]) -> str:
    """``timeout``, ``connection`` (could not connect), ``malformed`` (not JSON) or ``provider``."""
    names = {type(cause).__name__ for cause in causes}
    if _timed_out(causes) or status == 408:
        return "timeout"
    if names & _CONNECT_ERRORS or any(
        isinstance(cause, (ConnectionRefusedError, socket.gaierror)) for cause in causes
    ):
        return "connection"
    if any(isinstance(cause, json.JSONDecodeError) for cause in causes):
        return "malformed"
    return "provider"


def _timed_out(causes: Sequence[BaseException]) -> bool:
    """Whether a client-side bound expired (not a server's HTTP 408, which litellm also calls
    ``Timeout``)."""
    return any(
        isinstance(cause, TimeoutError)
        or ("timeout" in type(cause).__name__.lower() and type(cause).__name__ != "Timeout")
        for cause in causes
    )


def _described(
    kind: str, causes: Sequence[BaseException], target: CallTarget, limits: Timeouts
) -> tuple[str, str] | None:
    """(label, message) in our words for what the clients word each their own way."""
    names = {type(cause).__name__ for cause in causes}
    if kind == "timeout" and names & _CONNECT_TIMEOUTS:
        where = _host_port(target, causes)
        return "ConnectTimeout", f"cannot connect to {where} within {limits.connect_s:g} s"
    if kind == "timeout" and _timed_out(causes):
        return "Timeout", f"no complete answer within {limits.call_s:g} s"
    if kind == "connection":
        return "ConnectionError", f"cannot connect to {_host_port(target, causes)}: " + (
            _connect_reason(causes)
        )
    if kind == "malformed":
        error = next(cause for cause in causes if isinstance(cause, json.JSONDecodeError))
        return "MalformedResponse", f"the answer is not valid JSON ({error})"
    if names & _CLOSED and status_of(causes[0]) in (None, 500):
        # litellm words it "Connection error." behind a made-up 500, aiohttp by its own names.
        return "ConnectionClosed", "the server closed the connection before the answer was complete"
    return None


def _host_port(target: CallTarget, causes: Sequence[BaseException]) -> str:
    """``host:port`` the call went to: the profile's api_base, else what the client says."""
    if target.api_base:
        parts = urllib.parse.urlsplit(target.api_base)
        default = 443 if parts.scheme == "https" else 80
        try:
            port = parts.port or default
        except ValueError:
            port = default
        return f"{parts.hostname}:{port}"
    for cause in causes:
        text = str(cause)
        if "Cannot connect to host " in text:
            return text.split("Cannot connect to host ", 1)[1].split(" ", 1)[0]
    return f"{target.model_id}'s endpoint"


def _connect_reason(causes: Sequence[BaseException]) -> str:
    for cause in causes:
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, socket.gaierror):
            return f"host name not resolved ({cause.strerror or cause})"
    return str(causes[-1]).strip() or type(causes[-1]).__name__


def redacted(message: str, target: CallTarget) -> str:
    """``message`` without the target's key."""
    return message.replace(target.api_key, "[REDACTED]") if target.api_key else message


__all__ = [
    "STATUS_NAMES",
    "HTTPStatusError",
    "body_message",
    "provider_error",
    "redacted",
    "status_name",
    "status_of",
]
