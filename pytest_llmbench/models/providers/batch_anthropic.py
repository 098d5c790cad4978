"""Anthropic's Message Batches: a batch of chat calls sent in one request, answered within
24 hours at half the price (:class:`AnthropicBatches`, a :class:`.batch_backend.BatchBackend`).

litellm 1.106 can read an Anthropic batch but not create or cancel one, so the four calls are
ours, over the lean client's HTTP session (``POST /v1/messages/batches``, ``GET .../{id}``,
``GET .../{id}/results``, ``POST .../{id}/cancel``), with the headers ``x-api-key`` and
``anthropic-version: 2023-06-01``. litellm only translates: each line's ``params`` is the
Messages API body its live path sends for the same call (its ``get_optional_params`` and
``AnthropicConfig.transform_request``, without ``stream``), and each answer is read back by its
``AnthropicConfig.transform_response``, then measured as the litellm client measures a whole
answer, so a batched call's :class:`Completion` equals the live one's but for the batch's own
fields (``batched``, ``batch_id``, ``batch_wait_s``, no latency or TTFT) and its price (the
batch price).

The endpoint is the target's ``api_base``, else ``ANTHROPIC_API_BASE`` or ``ANTHROPIC_BASE_URL``,
else ``https://api.anthropic.com``; the key the profile's, else ``ANTHROPIC_API_KEY``. The key is
sent in a header and never written in any message.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import re
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..item_errors import BatchError, ProviderError
from .batch_backend import (
    CANCELLED,
    COMPLETED,
    EXPIRED,
    IN_PROGRESS,
    BatchBackend,
    BatchLine,
    BatchResults,
    BatchState,
    Results,
)
from .completion import CallTarget, Completion, Timeouts
from .errors import missing_key_error, provider_error
from .litellm_client import use_local_tables
from .openai_compatible import LITELLM_SETTINGS, _checked, _post, _session, proxy_for
from .reasoning_params import adapted

ANTHROPIC_BASE = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
#: Variables that name Anthropic's endpoint, in the order litellm reads them.
BASE_VARIABLES = ("ANTHROPIC_API_BASE", "ANTHROPIC_BASE_URL")
KEY_VARIABLE = "ANTHROPIC_API_KEY"
#: The most requests and bytes one batch may hold (the API's limits; bytes with a 5% margin).
MAX_LINES = 100_000
MAX_BYTES = int(256 * 1024 * 1024 * 0.95)
#: A batch request's params are a live call's body without these (a batch never streams).
_NOT_SENT = frozenset({"stream", "stream_options"})
#: The provider's processing statuses of a batch not yet ended.
_RUNNING = frozenset({"in_progress", "canceling"})


@dataclass(frozen=True)
class Translated:
    """One call as litellm's live path would send it to Anthropic, and what reading its answer
    back needs."""

    params: dict[str, Any]  #: the Messages API body (a batch request's ``params``)
    betas: tuple[str, ...]  #: the ``anthropic-beta`` values the live call would send
    model: str  #: the model name Anthropic knows
    messages: list[dict[str, Any]]  #: the messages as litellm read them
    optional_params: dict[str, Any] = field(default_factory=dict)
    litellm_params: dict[str, Any] = field(default_factory=dict)
    json_mode: bool = False


def base_url(target: CallTarget) -> str:
    """The endpoint ``target``'s batches go to, without a trailing ``/`` or ``/v1``."""
    found = target.api_base or next(
        (os.environ[name] for name in BASE_VARIABLES if os.environ.get(name)), ANTHROPIC_BASE
    )
    base = found.rstrip("/")
    for suffix in ("/v1/messages", "/v1"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base


def translated(
    target: CallTarget, messages: Sequence[dict[str, Any]], params: dict[str, Any]
) -> Translated:
    """``messages`` and ``params`` (over the profile's) as litellm's live path translates them
    into a Messages API body, ``stream`` aside.

    A call whose parameters carry request headers other than ``anthropic-beta`` cannot be
    batched (a batch request has no headers of its own), nor one whose profile passes litellm
    settings (they would change its body in ways not translated here): ValueError."""
    import copy

    if target.extra:
        names = ", ".join(sorted(target.extra))
        raise ValueError(f"{target.name}'s profile passes litellm settings ({names})")

    from .litellm_client import import_litellm

    use_local_tables()  # a no-op once set (AnthropicBatches sets it on the engine's thread)
    litellm = import_litellm()  # its modules are reached through it (the one import)
    get_optional_params = litellm.utils.get_optional_params
    update_request_with_filtered_beta = (
        litellm.anthropic_beta_headers_manager.update_request_with_filtered_beta
    )

    sent, _ = adapted(target.model_id, {**target.params, **params})
    headers = _beta_headers(sent.pop("extra_headers", None))
    kept = LITELLM_SETTINGS - {"drop_params"}
    openai_params = {k: v for k, v in sent.items() if k not in kept and k not in _NOT_SENT}
    model, provider, _, _ = litellm.get_llm_provider(target.model_id)
    config = litellm.AnthropicConfig()
    said = config.translate_developer_role_to_system_role(messages=copy.deepcopy(list(messages)))
    optional = get_optional_params(
        model=model, custom_llm_provider=provider, messages=said, **openai_params
    )
    optional.pop("stream", None)
    json_mode = bool(optional.pop("json_mode", False))
    optional.pop("is_vertex_request", None)
    litellm_params: dict[str, Any] = {}
    if sent.get("drop_params") is not None:
        litellm_params["drop_params"] = sent["drop_params"]
    # The headers the live call sends (its betas); the key here is a stand-in, never sent.
    headers = config.validate_environment(
        headers=headers,
        model=model,
        messages=said,
        optional_params={**optional, "is_vertex_request": False},
        litellm_params=litellm_params,
        api_key="batch-key-stand-in",
        api_base=None,
    )
    body = config.transform_request(
        model=model,
        messages=copy.deepcopy(said),
        optional_params={**copy.deepcopy(optional), "is_vertex_request": False},
        litellm_params=litellm_params,
        headers=headers,
    )
    headers, body = update_request_with_filtered_beta(
        headers=headers, request_data=body, provider=provider
    )
    for name in _NOT_SENT:
        body.pop(name, None)
    betas = tuple(
        part.strip() for part in str(headers.get("anthropic-beta") or "").split(",") if part.strip()
    )
    return Translated(body, betas, model, said, optional, litellm_params, json_mode)


def _beta_headers(extra: Any) -> dict[str, str]:
    """The ``anthropic-beta`` header of a call's ``extra_headers`` (a batch carries no other)."""
    if not extra:
        return {}
    if not isinstance(extra, dict):
        raise ValueError("extra_headers is not a mapping")
    others = sorted(str(name) for name in extra if str(name).lower() != "anthropic-beta")
    if others:
        raise ValueError(
            f"a batch request carries no headers of its own: {', '.join(others)} "
            "(extra_headers) cannot be sent"
        )
    return {"anthropic-beta": ",".join(str(value) for value in extra.values())}


def completion_of(
    line: BatchLine,
    message: dict[str, Any],
    *,
    batch_id: str,
    wait_s: float | None,
) -> Completion:
    """The completion of a batch's answer ``message`` (a Messages API reply) to ``line``: read
    as litellm's live path reads the same reply whole (text, thinking apart, tool calls, finish
    reason, tokens and cache tokens), priced at the batch price of the line's target."""
    import httpx

    from .litellm_client import completion_of, import_litellm, whole_reply

    litellm = import_litellm()
    call = translated(line.target, line.messages, line.params)
    raw = httpx.Response(
        200,
        content=json.dumps(message).encode(),
        headers={"content-type": "application/json"},
        request=httpx.Request("POST", f"{ANTHROPIC_BASE}/v1/messages"),
    )
    response = litellm.AnthropicConfig().transform_response(
        model=call.model,
        raw_response=raw,
        model_response=litellm.ModelResponse(),
        logging_obj=_NoLogging(),
        request_data=call.params,
        messages=call.messages,
        optional_params=call.optional_params,
        litellm_params=call.litellm_params,
        encoding=None,
        json_mode=call.json_mode,
    )
    measured = {"ttft_s": None, "latency_s": 0.0, "retries": 0, "streamed": False}
    batch = {"batched": True, "batch_id": batch_id, "batch_wait_s": wait_s}
    return completion_of(
        litellm, line.target, line.messages, whole_reply(response), **measured, **batch
    )


def batch_requests(lines: Sequence[BatchLine]) -> tuple[list[dict[str, Any]], list[str]]:
    """The ``requests`` of a batch of ``lines`` (each translated by its own target), and the
    ``anthropic-beta`` values any of them needs."""
    requests: list[dict[str, Any]] = []
    betas: list[str] = []
    for line in lines:
        if line.kind != "chat":
            raise ValueError(f"Anthropic batches answer chat calls only, not {line.kind}")
        call = translated(line.target, line.messages, line.params)
        requests.append({"custom_id": line.custom_id, "params": call.params})
        betas += [beta for beta in call.betas if beta not in betas]
    return requests, betas


class _NoLogging:
    """What litellm's response reading logs to: nothing (a batch answer is no live call)."""

    def post_call(self, *args: Any, **kwargs: Any) -> None:
        return None


class AnthropicBatches:
    """Anthropic's Message Batches at one endpoint with one key (:mod:`.batch_backend`).

    Anthropic keeps no metadata with a batch, so :meth:`find` never finds one (None): a run
    killed between sending a batch and writing its id down relies on the engine's journal,
    written before the batch is sent, for that window.
    """

    name = "anthropic"
    max_lines = MAX_LINES
    max_bytes = MAX_BYTES

    def __init__(self, target: CallTarget, limits: Timeouts | None = None) -> None:
        self.target = target
        self.base = base_url(target)
        self.limits = limits or Timeouts()
        #: each batch's results address, as its last poll gave it
        self._results_urls: dict[str, str] = {}

    # -- the five calls ---------------------------------------------------------------------

    async def create(self, lines: Sequence[BatchLine], metadata: Mapping[str, str]) -> str:
        """Send ``lines`` as one batch (each line's params as its live call's body, by its
        own target: model, profile parameters); its id. ``metadata`` is not kept: Anthropic's
        batches have none. ``anthropic-beta`` values a line's call would send go on the batch
        (one header for all its requests)."""
        if not lines or len(lines) > self.max_lines:
            raise ValueError(f"a batch holds 1 to {self.max_lines} lines, not {len(lines)}")
        use_local_tables()
        # about 2 ms of CPU a line: off the event loop, whose live calls are being timed
        requests, betas = await asyncio.to_thread(batch_requests, lines)
        headers = self._headers()
        if betas:
            headers["anthropic-beta"] = ",".join(betas)
        answer = await self._send("POST", "messages/batches", {"requests": requests}, headers)
        batch_id = answer.get("id") if isinstance(answer, dict) else None
        if not isinstance(batch_id, str) or not batch_id:
            raise self._malformed(f"a created batch without an id: {_cut(answer)}")
        self._remember(answer)
        return batch_id

    async def find(self, input_sha256: str) -> str | None:
        """None: Anthropic keeps no metadata with a batch, so none can be found by its input."""
        return None

    async def poll(self, batch_id: str) -> BatchState:
        """The batch's state now (``GET /v1/messages/batches/{id}``)."""
        answer = await self._send("GET", f"messages/batches/{_quoted(batch_id)}")
        if not isinstance(answer, dict):
            raise self._malformed(f"batch {batch_id}: a status that is not an object")
        self._remember(answer)
        return state_of(batch_id, answer)

    async def results(self, state: BatchState, sent: Mapping[str, BatchLine]) -> Results:
        """The answers of an ended batch, one per custom_id of ``sent`` (its results file, in
        any order, read strictly: :func:`read_results`)."""
        if not state.terminal:
            raise ValueError(f"batch {state.batch_id} has not ended ({state.provider_status})")
        url = self._results_urls.get(state.batch_id) or (
            f"{self.base}/v1/messages/batches/{_quoted(state.batch_id)}/results"
        )
        data = await self._download(url, state.batch_id)
        wait = None if state.created_at is None else max(0.0, time.time() - state.created_at)
        secret = self.target.api_key or os.environ.get(KEY_VARIABLE)
        use_local_tables()
        return await asyncio.to_thread(
            read_results, state.batch_id, data, sent, wait_s=wait, secret=secret
        )

    async def cancel(self, batch_id: str) -> None:
        """Ask Anthropic to stop the batch (requests already running may still finish)."""
        answer = await self._send("POST", f"messages/batches/{_quoted(batch_id)}/cancel", {})
        if isinstance(answer, dict):
            self._remember(answer)

    # -- HTTP ------------------------------------------------------------------------------

    def _key(self) -> str:
        key = self.target.api_key or os.environ.get(KEY_VARIABLE)
        if not key:
            raise missing_key_error(self.target.name, self.target.model_id, [KEY_VARIABLE])
        return key

    def _headers(self) -> dict[str, str]:
        return {"x-api-key": self._key(), "anthropic-version": ANTHROPIC_VERSION}

    async def _send(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """``method`` ``path`` (under ``/v1``) and its JSON answer; an HTTP or transport error
        is a :class:`ProviderError` of the live path's kind, without the key."""
        from .routes import Endpoint

        sent_headers = headers or self._headers()
        try:
            if method == "POST":
                endpoint = Endpoint(f"{self.base}/v1", self.target.model_id)
                request = _post(endpoint, path, body or {}, self.limits, sent_headers)
            else:
                request = _get(f"{self.base}/v1/{path}", sent_headers, self.limits)
            async with request as response:
                data = await response.read()
            return json.loads(data)
        except ProviderError:
            raise
        except Exception as exc:
            raise self._failed(exc) from None

    async def _download(self, url: str, batch_id: str) -> bytes:
        try:
            async with _get(url, self._headers(), self.limits) as response:
                return bytes(await response.read())
        except ProviderError:
            raise
        except Exception as exc:
            raise self._failed(exc, f"batch {batch_id} results") from None

    def _failed(self, exc: BaseException, what: str = "") -> ProviderError:
        error = provider_error(exc, self._keyed_target(), 0, self.limits)
        if what:
            error = ProviderError(f"{error.message} ({what})", kind=error.kind)
        return error

    def _keyed_target(self) -> CallTarget:
        """The target with the key actually sent, for :func:`.errors.redacted` to remove."""
        import dataclasses

        key = self.target.api_key or os.environ.get(KEY_VARIABLE)
        return dataclasses.replace(self.target, api_key=key, api_base=self.base)

    def _malformed(self, message: str) -> ProviderError:
        return ProviderError(f"{self.target.name}: {message}", kind="malformed")

    def _remember(self, answer: dict[str, Any]) -> None:
        """Keep a batch's ``results_url``, when it is on this endpoint's host (the key is
        sent to no other)."""
        batch_id, url = answer.get("id"), answer.get("results_url")
        if (
            isinstance(batch_id, str)
            and isinstance(url, str)
            and _origin(url) == _origin(self.base)
        ):
            self._results_urls[batch_id] = url


def _get(url: str, headers: dict[str, str], limits: Timeouts) -> Any:
    """``GET url`` on this loop's session, as :func:`.openai_compatible._post` posts: an error
    status raises :class:`.errors.HTTPStatusError` with the provider's message."""
    import aiohttp

    timeout = aiohttp.ClientTimeout(
        total=None, connect=limits.connect_bound_s, sock_read=limits.call_s
    )
    proxy = proxy_for(url)
    return _checked(_session().get(url, headers=headers, timeout=timeout, proxy=proxy))


def _origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of ``url``, the port made explicit."""
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    default = {"https": 443, "http": 80}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port or default


def _quoted(batch_id: str) -> str:
    return urllib.parse.quote(batch_id, safe="")


def _cut(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + "..."


# -- reading a batch -----------------------------------------------------------------------


def state_of(batch_id: str, answer: Mapping[str, Any]) -> BatchState:
    """A MessageBatch object as the engine reads it.

    ``in_progress`` and ``canceling`` are in progress; ``ended`` is expired when any request
    expired, else cancelled when a cancel was asked for, else completed (each request's own
    outcome is in the results, whatever the batch's). Counts: ``total`` every request,
    ``done`` those that succeeded, ``failed`` those errored, cancelled or expired."""
    status = answer.get("processing_status")
    counts = answer.get("request_counts")
    counts = counts if isinstance(counts, Mapping) else {}
    n = {name: _count(counts.get(name)) for name in _COUNTS}
    if status in _RUNNING:
        ours = IN_PROGRESS
    elif status == "ended":
        if n["expired"] > 0:
            ours = EXPIRED
        elif answer.get("cancel_initiated_at"):
            ours = CANCELLED
        else:
            ours = COMPLETED
    else:
        raise ProviderError(
            f"batch {batch_id}: unknown processing_status {status!r}", kind="malformed"
        )
    return BatchState(
        batch_id=batch_id,
        status=ours,
        provider_status=str(status),
        total=sum(n.values()),
        done=n["succeeded"],
        failed=n["errored"] + n["canceled"] + n["expired"],
        created_at=unix_seconds(answer.get("created_at")),
        expires_at=unix_seconds(answer.get("expires_at")),
    )


_COUNTS = ("processing", "succeeded", "errored", "canceled", "expired")
#: RFC 3339's fraction of a second, which Python before 3.11 reads to 6 digits only.
_FRACTION = re.compile(r"(\.\d{6})\d+")


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def unix_seconds(stamp: Any) -> float | None:
    """An RFC 3339 timestamp (``2024-08-20T18:37:24.100435Z``) as Unix seconds; None for none
    or one that is not a timestamp."""
    if not isinstance(stamp, str) or not stamp:
        return None
    text = _FRACTION.sub(r"\1", stamp.strip())
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.timestamp()


def read_results(
    batch_id: str,
    data: bytes,
    sent: Mapping[str, BatchLine],
    *,
    wait_s: float | None = None,
    secret: str | None = None,
) -> BatchResults:
    """A results file (JSONL, any order) read strictly: each custom_id of ``sent`` gets its
    answer, or a :class:`BatchError` naming the batch and line (errored, canceled, expired, an
    answer that cannot be read, a custom_id seen twice: neither line is trusted), or one saying
    no line came for it. A line that is not JSON, has no custom_id or one not sent belongs to
    no call: its error is in ``problems`` (and named in the errors of calls with no line).
    ``secret`` (the key) is in no message, whatever the provider's words."""
    found = BatchResults()
    first_line: dict[str, int] = {}
    orphans: list[BatchError] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        where = f"batch {batch_id}, results line {number}"
        try:
            entry = json.loads(raw)
        except ValueError as exc:
            orphans.append(BatchError(f"{where}: not JSON ({exc})"))
            continue
        custom_id = entry.get("custom_id") if isinstance(entry, dict) else None
        if not isinstance(custom_id, str) or not custom_id:
            orphans.append(BatchError(f"{where}: no custom_id"))
            continue
        if custom_id not in sent:
            orphans.append(BatchError(f"{where}: custom_id {custom_id} was not sent in it"))
            continue
        if custom_id in first_line:
            found[custom_id] = BatchError(
                f"{where}: custom_id {custom_id} seen twice (first on line "
                f"{first_line[custom_id]}); neither answer is used"
            )
            continue
        first_line[custom_id] = number
        found[custom_id] = _answer(batch_id, where, entry, sent[custom_id], wait_s)
    unread = "; ".join(error.message for error in orphans)
    for custom_id in sent:
        if custom_id not in found:
            also = f" ({unread})" if unread else ""
            found[custom_id] = BatchError(
                f"batch {batch_id}: no results line for custom_id {custom_id}{also}"
            )
    found.problems = tuple(_redacted(error, secret).message for error in orphans)
    for custom_id, result in found.items():
        if isinstance(result, BatchError):
            found[custom_id] = _redacted(result, secret)
    return found


def _redacted(error: BatchError, secret: str | None) -> BatchError:
    if not secret or secret not in error.message:
        return error
    return BatchError(error.message.replace(secret, "[REDACTED]"))


def _answer(
    batch_id: str,
    where: str,
    entry: dict[str, Any],
    line: BatchLine,
    wait_s: float | None,
) -> Completion | BatchError:
    """One results line's answer or error."""
    result = entry.get("result")
    kind = result.get("type") if isinstance(result, dict) else None
    if not isinstance(result, dict):
        return BatchError(f"{where}: no result")
    if kind == "succeeded":
        message = result.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            return BatchError(f"{where}: a succeeded result without a message")
        try:
            return completion_of(line, message, batch_id=batch_id, wait_s=wait_s)
        except Exception as exc:  # litellm's reading of an answer it cannot read
            return BatchError(f"{where}: the answer cannot be read ({type(exc).__name__}: {exc})")
    if kind == "errored":
        return BatchError(f"{where}: the request failed: {_error_words(result.get('error'))}")
    if kind == "canceled":
        return BatchError(f"{where}: the request was cancelled before it was answered")
    if kind == "expired":
        return BatchError(f"{where}: the request expired before it was answered (24 h window)")
    return BatchError(f"{where}: unknown result type {kind!r}")


def _error_words(error: Any) -> str:
    """The provider's words for an errored request: ``invalid_request_error: max_tokens: ...``
    (its error object is ``{"type": "error", "error": {"type", "message"}}``)."""
    inner = error.get("error") if isinstance(error, dict) else None
    shown = inner if isinstance(inner, dict) else error
    if isinstance(shown, dict):
        kind, message = shown.get("type"), shown.get("message")
        if isinstance(message, str):
            return f"{kind}: {message}" if isinstance(kind, str) else message
    return _cut(shown) if shown is not None else "no error given"


__all__ = [
    "ANTHROPIC_BASE",
    "ANTHROPIC_VERSION",
    "MAX_BYTES",
    "MAX_LINES",
    "AnthropicBatches",
    "Translated",
    "base_url",
    "batch_requests",
    "completion_of",
    "read_results",
    "state_of",
    "translated",
    "unix_seconds",
]

if TYPE_CHECKING:  # mypy checks that the class answers the protocol

    def _backend(target: CallTarget) -> BatchBackend:
        return AnthropicBatches(target)
