"""OpenAI's Batch API through the lean client: the :class:`~.batch_backend.BatchBackend` of
every OpenAI-protocol endpoint that has one (OpenAI's own, a proxy, a server that implements
``/files`` and ``/batches``).

A batch is four calls: the input file uploaded (``POST /files``, multipart, purpose
``batch``), the batch created from it (``POST /batches``, one endpoint per batch, window
``24h``, our metadata), polled (``GET /batches/{id}``), and its output and error files read
(``GET /files/{id}/content``); ``POST /batches/{id}/cancel`` stops it and
``GET /batches?limit=100`` finds one by its metadata. The requests go over the lean client's
session, proxy and key headers; an HTTP failure is retried as a live call's is and ends as the
same :class:`~..item_errors.ProviderError`, the key never in its message.

Creating a batch is the one request not repeated blindly: when one fails in a way that may have
created the batch (a timeout, a 5xx, a cut connection), the batch is looked for by its input's
hash before it is sent again, so a call is never paid for twice.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..item_errors import ProviderError
from . import routes
from .batch_backend import (
    CANCELLED,
    COMPLETED,
    EXPIRED,
    FAILED,
    IN_PROGRESS,
    BatchLine,
    BatchState,
    Results,
)
from .batch_lines import (
    collected,
    failed_results,
    input_ids,
    input_line,
    input_sha256,
    parse_output,
    url_of,
)
from .completion import CallTarget, Timeouts
from .errors import provider_error, status_of
from .transport_retry import CallTimeout, _is_retryable, backoff_s

if TYPE_CHECKING:
    import aiohttp

#: The most lines and bytes of one batch's input file (OpenAI's limits: 50,000 requests and
#: 200 MB; the bytes with a 5% margin).
MAX_LINES = 50_000
MAX_BYTES = 200 * 1000 * 1000 * 95 // 100
#: The most texts one embeddings batch may embed, across all its lines (OpenAI's limit).
MAX_EMBEDDINGS = 50_000
#: The metadata key that names a batch's input (:meth:`OpenAIBatches.find`).
SHA_KEY = "llmbench_input_sha256"
#: OpenAI's metadata limits: 16 pairs, keys of 64 characters, values of 512.
_META_PAIRS, _META_KEY, _META_VALUE = 16, 64, 512
#: Each provider status as the engine reads it.
_STATUSES: Mapping[str, str] = {
    "validating": IN_PROGRESS,
    "in_progress": IN_PROGRESS,
    "finalizing": IN_PROGRESS,
    "cancelling": IN_PROGRESS,
    "completed": COMPLETED,
    "failed": FAILED,
    "expired": EXPIRED,
    "cancelled": CANCELLED,
}
#: Pages of ``GET /batches`` that :meth:`OpenAIBatches.find` reads at most (100 a page).
_FIND_PAGES = 5
#: Statuses after which a failed create may still have made the batch (the request reached
#: the server): looked for before sending it again.
_SURELY_REFUSED = frozenset({400, 401, 403, 404, 409, 413, 422, 429})


class OpenAIBatches:
    """OpenAI's Batch API at one endpoint (base URL and key)."""

    name = "openai"
    max_lines = MAX_LINES
    max_bytes = MAX_BYTES

    def __init__(
        self,
        endpoint: routes.Endpoint,
        *,
        limits: Timeouts | None = None,
        max_retries: int = 2,
    ) -> None:
        self.endpoint = endpoint
        self.limits = limits or Timeouts(call_s=600.0)
        self.max_retries = max_retries
        host = routes.shown_host(endpoint.base_url)
        #: what errors name (and redact the key of)
        self._target = CallTarget(
            name=f"{self.name} batch API ({host})",
            model_id=self.name,
            api_base=endpoint.base_url,
            api_key=endpoint.api_key,
        )
        #: each batch as last polled, as the API gave it
        self._polled: dict[str, dict[str, Any]] = {}

    def __repr__(self) -> str:
        return f"OpenAIBatches({self.endpoint.base_url!r})"

    # -- the backend's calls --

    async def create(self, lines: Sequence[BatchLine], metadata: Mapping[str, str]) -> str:
        """Upload ``lines`` as an input file and create a batch of it; its id.

        The metadata holds ``llmbench_input_sha256`` (the hash of the input file, unless the
        caller gives its own under that key) and the caller's pairs. All lines must be of one
        kind and one model, for this endpoint (OpenAI's rule: one endpoint and one model per
        batch), with distinct custom_ids, within :attr:`max_lines` and :attr:`max_bytes`."""
        data = self.input_file(lines)
        meta = {SHA_KEY: input_sha256(data), **metadata}
        _check_metadata(meta)
        url = url_of(lines[0].kind)
        file_id = await self._upload(data)
        body = {
            "input_file_id": file_id,
            "endpoint": url,
            "completion_window": "24h",
            "metadata": meta,
        }
        created = await self._create(body, meta[SHA_KEY])
        return created

    def input_file(self, lines: Sequence[BatchLine]) -> bytes:
        """The JSONL input file of ``lines``; ValueError when they cannot be one batch here."""
        if not lines:
            raise ValueError("a batch needs at least one line")
        if len(lines) > self.max_lines:
            raise ValueError(f"{len(lines)} lines: a batch holds at most {self.max_lines}")
        kinds = sorted({line.kind for line in lines})
        if len(kinds) > 1:
            raise ValueError(f"one kind of call per batch, not {', '.join(kinds)}")
        seen: set[str] = set()
        models: set[str] = set()
        parts = []
        for line in lines:
            if line.custom_id in seen:
                raise ValueError(f"custom_id {line.custom_id} is twice in the batch")
            seen.add(line.custom_id)
            at = routes.endpoint(line.target)
            if at.base_url != self.endpoint.base_url:
                raise ValueError(
                    f"{line.target.name} is served at {at.base_url}, not {self.endpoint.base_url}"
                )
            models.add(at.model)
            parts.append(input_line(line, at))
        if len(models) > 1:
            raise ValueError(f"one model per batch, not {', '.join(sorted(models))}")
        inputs = sum(len(line.messages) for line in lines if line.kind == "embed")
        if inputs > MAX_EMBEDDINGS:
            raise ValueError(f"{inputs} texts to embed: a batch embeds at most {MAX_EMBEDDINGS}")
        data = b"".join(parts)
        if len(data) > self.max_bytes:
            raise ValueError(f"{len(data)} bytes: a batch holds at most {self.max_bytes}")
        return data

    async def find(self, input_sha256: str) -> str | None:
        """The newest batch whose metadata names ``input_sha256`` (among the last 500), or None."""
        after: str | None = None
        for _ in range(_FIND_PAGES):
            query = {"limit": "100", **({"after": after} if after else {})}
            page = await self._json("GET", f"batches?{urllib.parse.urlencode(query)}")
            listed = page.get("data") if isinstance(page, dict) else None
            for batch in listed or ():
                meta = batch.get("metadata") if isinstance(batch, dict) else None
                if isinstance(meta, dict) and meta.get(SHA_KEY) == input_sha256:
                    return str(batch["id"])
            if not listed or not page.get("has_more"):
                return None
            after = str(page.get("last_id") or listed[-1].get("id"))
        return None

    async def poll(self, batch_id: str) -> BatchState:
        """The batch's state now."""
        raw = await self._json("GET", f"batches/{_quoted(batch_id)}")
        if not isinstance(raw, dict) or not isinstance(raw.get("status"), str):
            raise ProviderError(f"{self._target.name}: batch {batch_id}: an answer with no status")
        self._polled[batch_id] = raw
        return state_of(batch_id, raw)

    async def results(self, state: BatchState, sent: Mapping[str, BatchLine]) -> Results:
        """Each call of ``sent``'s answer or error, from the output and error files of the
        finished batch (both read, whatever its end: an expired or cancelled batch keeps the
        lines it answered); a failed batch's calls each get its batch-level errors."""
        if not state.terminal:
            raise ValueError(f"batch {state.batch_id} is still {state.provider_status}")
        raw = self._polled.get(state.batch_id)
        if raw is None or raw.get("status") != state.provider_status:
            raw = await self._json("GET", f"batches/{_quoted(state.batch_id)}")
        if state.status == FAILED:
            return await self._failed(state.batch_id, raw, sent)
        read = []
        for key, name in (("output_file_id", "output"), ("error_file_id", "error")):
            file_id = raw.get(key)
            if not file_id:
                continue  # none: e.g. a completed batch whose every line failed has no output
            data = await self._content(str(file_id))
            read.append(
                parse_output(state.batch_id, data, sent, file=name, created_at=state.created_at)
            )
        return collected(state.batch_id, state.provider_status, sent, read)

    async def cancel(self, batch_id: str) -> None:
        """Ask OpenAI to cancel the batch (it is ``cancelling``, then ``cancelled``)."""
        await self._json("POST", f"batches/{_quoted(batch_id)}/cancel", body={})

    # -- the requests --

    async def _failed(
        self, batch_id: str, raw: Mapping[str, Any], sent: Mapping[str, BatchLine]
    ) -> Results:
        errors = _error_data(raw)
        order = None
        file_id = raw.get("input_file_id")
        if file_id and any(isinstance(error.get("line"), int) for error in errors):
            try:
                order = input_ids(await self._content(str(file_id)))
            except ProviderError:
                order = None  # every call is given all the errors
        return failed_results(batch_id, sent, errors, order)

    async def _upload(self, data: bytes) -> str:
        def form() -> aiohttp.FormData:
            import aiohttp

            made = aiohttp.FormData()
            made.add_field("purpose", "batch")
            made.add_field(
                "file", data, filename="llmbench-batch.jsonl", content_type="application/jsonl"
            )
            return made

        answer = await self._json("POST", "files", form=form)
        file_id = answer.get("id") if isinstance(answer, dict) else None
        if not isinstance(file_id, str):
            raise ProviderError(f"{self._target.name}: the uploaded file has no id")
        return file_id

    async def _create(self, body: dict[str, Any], sha: str) -> str:
        async def made_anyway(exc: BaseException) -> str | None:
            # The request may have reached the server and made the batch: look before sending
            # it again or giving up.
            if status_of(exc) in _SURELY_REFUSED or _refused_connection(exc):
                return None
            try:
                return await self.find(sha)
            except ProviderError:
                return None  # not known: the caller's journal has the hash for a later look

        answer = await self._json("POST", "batches", body=body, recover=made_anyway)
        if isinstance(answer, str):
            return answer  # found after a failed attempt
        batch_id = answer.get("id") if isinstance(answer, dict) else None
        if not isinstance(batch_id, str):
            raise ProviderError(f"{self._target.name}: the created batch has no id")
        self._polled[batch_id] = answer
        return batch_id

    async def _content(self, file_id: str) -> bytes:
        async def read(response: Any) -> bytes:
            data: bytes = await response.read()
            return data

        data: bytes = await self._request("GET", f"files/{_quoted(file_id)}/content", read)
        return data

    async def _json(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        form: Callable[[], aiohttp.FormData] | None = None,
        recover: Callable[[BaseException], Awaitable[str | None]] | None = None,
    ) -> Any:
        async def read(response: Any) -> Any:
            return json.loads(await response.read())

        return await self._request(method, path, read, body, form, recover)

    async def _request(
        self,
        method: str,
        path: str,
        read: Callable[[Any], Awaitable[Any]],
        body: dict[str, Any] | None = None,
        form: Callable[[], aiohttp.FormData] | None = None,
        recover: Callable[[BaseException], Awaitable[str | None]] | None = None,
    ) -> Any:
        """One request, retried as a live call is (transient failures, Retry-After);
        ``recover(error)``, asked after each failure, may end the request with an answer of
        its own. A final failure is a :class:`ProviderError` in the live call's words."""
        from .openai_compatible import send

        async def once() -> Any:
            made = form() if form is not None else None
            async with send(
                self.endpoint, method, path, self.limits, body=body, form=made
            ) as response:
                return await read(response)

        retries = 0
        while True:
            try:
                try:
                    return await asyncio.wait_for(once(), self.limits.call_s)
                except asyncio.TimeoutError:
                    raise CallTimeout(
                        f"no complete answer within {self.limits.call_s:g} s"
                    ) from None
            except ProviderError:
                raise
            except Exception as exc:  # each failure is classified as a live call's is
                found = await recover(exc) if recover is not None else None
                if found is not None:
                    return found
                if retries >= self.max_retries or not _is_retryable(exc):
                    raise provider_error(exc, self._target, retries, self.limits) from None
                retries += 1
                await asyncio.sleep(backoff_s(exc, retries))


def state_of(batch_id: str, raw: Mapping[str, Any]) -> BatchState:
    """A Batch object of OpenAI's API as the engine reads it."""
    provider_status = str(raw.get("status"))
    counts = raw.get("request_counts")
    counts = counts if isinstance(counts, dict) else {}
    errors = tuple(
        (f"input line {error['line']}: " if isinstance(error.get("line"), int) else "")
        + (
            ": ".join(str(part) for part in (error.get("code"), error.get("message")) if part)
            or "no reason given"
        )
        for error in _error_data(raw)
    )
    return BatchState(
        batch_id=batch_id,
        status=_STATUSES.get(provider_status, IN_PROGRESS),
        provider_status=provider_status,
        total=_count(counts.get("total")),
        done=_count(counts.get("completed")),
        failed=_count(counts.get("failed")),
        created_at=_seconds(raw.get("created_at")),
        expires_at=_seconds(raw.get("expires_at")),
        errors=errors,
    )


def _error_data(raw: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A batch's batch-level errors (``errors.data``)."""
    errors = raw.get("errors")
    data = errors.get("data") if isinstance(errors, dict) else None
    return [error for error in data or () if isinstance(error, dict)]


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _seconds(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _quoted(name: str) -> str:
    """An id as a path segment."""
    return urllib.parse.quote(name, safe="")


def _refused_connection(exc: BaseException) -> bool:
    """The connection was never opened: the request cannot have reached the server."""
    names = {"ClientConnectorError", "ClientConnectorDNSError", "ConnectionTimeoutError"}
    return type(exc).__name__ in names or isinstance(exc, ConnectionRefusedError)


def _check_metadata(meta: Mapping[str, str]) -> None:
    """Refuse metadata OpenAI would refuse (16 pairs, keys of 64 characters, values of 512)."""
    if len(meta) > _META_PAIRS:
        raise ValueError(f"batch metadata holds at most {_META_PAIRS} pairs, not {len(meta)}")
    for key, value in meta.items():
        if not isinstance(value, str) or len(key) > _META_KEY or len(value) > _META_VALUE:
            raise ValueError(
                f"batch metadata {key!r}: keys of at most {_META_KEY} characters, string "
                f"values of at most {_META_VALUE}"
            )
