"""A local fake of Anthropic's Messages API and Message Batches for tests.

A real HTTP server on 127.0.0.1 (a daemon thread of the test process) that answers, as
Anthropic does:

- ``POST /v1/messages``: a Messages API reply (not streamed), so litellm's live path
  (``anthropic/claude-...`` with ``api_base`` the fake's) can be compared with a batch;
- ``POST /v1/messages/batches``: a batch of ``{"custom_id", "params"}`` (ids checked as the API
  checks them), answered with a MessageBatch;
- ``GET /v1/messages/batches/{id}``: its state: ``in_progress`` until ``Script.polls`` ends it
  (``canceling`` after a cancel, for one poll; the next ends it, unanswered lines cancelled);
- ``GET /v1/messages/batches/{id}/results``: the results JSONL (in reverse order, as the API
  promises no order), scripted by :class:`Script`: errored, canceled, expired, missing,
  duplicated, malformed and unknown lines;
- ``POST /v1/messages/batches/{id}/cancel``.

Every request must carry ``x-api-key`` (the fake's key) and ``anthropic-version: 2023-06-01``,
else a 401 or 400 in Anthropic's error shape. Each request's params are answered by the first
:class:`fakeserver.Rule` that matches them (``match``, ``match_last``, ``match_any``, ``model``,
``body``, ``times``); a rule's ``reply``, ``reasoning`` (a thinking block), ``tool_calls``
(tool_use blocks), ``cached_tokens`` and ``cache_write_tokens`` (the cache reads and writes of
the usage) and ``status`` (an error; in a batch an errored line) shape the reply. Counters:
``creates``, ``polls``, ``cancels``, ``downloads``, ``lines_received`` (per custom_id, over
every batch created).

Stdlib only.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fakeserver import Rule, _any_text, _content_text, _last_text, _last_user_text, count_words

__all__ = ["API_KEY", "FakeAnthropicBatches", "Script"]

API_KEY = "sk-ant-fake-batch-key-0123456789"
VERSION = "2023-06-01"
_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_BATCH_PATH = re.compile(r"^/v1/messages/batches/([^/]+)(/results|/cancel)?$")
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass
class Script:
    """How the next batch created behaves (each batch takes the script current at its
    creation). Sets hold custom_ids; ``"*"`` in ``expired`` or ``canceled`` means every line."""

    #: the poll that ends the batch (2: one poll answers ``in_progress``, the next ``ended``;
    #: 0: it ends as it is created)
    polls: int = 0
    expired: set[str] = field(default_factory=set)
    canceled: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)  #: no results line at all
    duplicated: set[str] = field(default_factory=set)  #: its line twice (different answers)
    extra_lines: list[bytes] = field(default_factory=list)  #: sent as they are, at the end
    succeeded_without_message: set[str] = field(default_factory=set)


@dataclass
class _Batch:
    batch_id: str
    requests: list[dict[str, Any]]
    script: Script
    created_at: dt.datetime
    polls_left: int
    cancel_initiated_at: dt.datetime | None = None
    ended_at: dt.datetime | None = None
    results: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def _stamp(moment: dt.datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class FakeAnthropicBatches:
    """The fake server: start it (or use it as a context manager) and point a target's
    ``api_base`` at :attr:`base_url`."""

    def __init__(
        self, rules: Sequence[Rule] = (), *, api_key: str = API_KEY, default_reply: str = "ok"
    ) -> None:
        self.api_key = api_key
        #: where batches say their results are (None: here); another host must not get the key
        self.results_host: str | None = None
        self.default_reply = default_reply
        self.script = Script()
        self.rules = list(rules)
        self._used: dict[int, int] = {}
        self.batches: dict[str, _Batch] = {}
        self.creates = 0
        self.polls = 0
        self.cancels = 0
        self.downloads = 0
        self.lines_received: Counter[str] = Counter()
        #: the live ``/v1/messages`` bodies, and each batch line's params by custom_id
        self.messages_bodies: list[dict[str, Any]] = []
        self.batch_params: dict[str, dict[str, Any]] = {}
        #: the headers of every request (lower-case names), in order
        self.headers_seen: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeAnthropicBatches:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.owner = self  # type: ignore[attr-defined]
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeAnthropicBatches:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "the fake is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- answers ---------------------------------------------------------------------------

    def _rule(self, params: dict[str, Any]) -> Rule | None:
        text, last = _last_user_text(params), _last_text(params)
        with self._lock:
            for index, rule in enumerate(self.rules):
                if rule.model is not None and rule.model != params.get("model"):
                    continue
                if rule.match is not None and rule.match not in text:
                    continue
                if rule.match_last is not None and rule.match_last not in last:
                    continue
                if rule.match_any is not None and not _any_text(params, rule.match_any):
                    continue
                if rule.body is not None and any(params.get(k) != v for k, v in rule.body.items()):
                    continue
                if rule.times is not None and self._used.get(index, 0) >= rule.times:
                    continue
                self._used[index] = self._used.get(index, 0) + 1
                return rule
        return None

    def reply(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """(status, body) of the Messages API's answer to ``params``."""
        rule = self._rule(params)
        if rule is not None and rule.status != 200:
            return rule.status, _error_body(rule.status, rule.error_message)
        reply = rule.reply if rule is not None else self.default_reply
        content: list[dict[str, Any]] = []
        output = 0
        if rule is not None and rule.reasoning:
            content.append({"type": "thinking", "thinking": rule.reasoning, "signature": "sig"})
            output += count_words(rule.reasoning)
        calls = (rule.tool_calls if rule is not None else None) or []
        stop = "tool_use" if calls else "end_turn"
        if not calls or reply != "ok":
            limit = params.get("max_tokens")
            words = reply.split(" ")
            if isinstance(limit, int) and len(words) > limit:
                reply, stop = " ".join(words[:limit]), "max_tokens"
            content.append({"type": "text", "text": reply})
            output += count_words(reply)
        for number, call in enumerate(calls):
            arguments = call.get("arguments", {})
            if isinstance(arguments, str):
                arguments = json.loads(arguments)
            content.append(
                {
                    "type": "tool_use",
                    # the same for the same reply, live or batched
                    "id": f"toolu_{number:02d}_{call['name']}",
                    "name": call["name"],
                    "input": arguments,
                }
            )
            output += count_words(json.dumps(arguments))
        prompt = sum(
            count_words(_content_text(message.get("content")))
            for message in params.get("messages") or []
            if isinstance(message, dict)
        )
        usage = {
            "input_tokens": max(1, prompt),
            "output_tokens": max(1, output),
            "cache_read_input_tokens": (rule.cached_tokens if rule else None) or 0,
            "cache_creation_input_tokens": (rule.cache_write_tokens if rule else None) or 0,
        }
        return 200, {
            "id": f"msg_{next(self._ids):06d}",
            "type": "message",
            "role": "assistant",
            "model": params.get("model"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }

    # -- batches ---------------------------------------------------------------------------

    def create(self, body: Any) -> tuple[int, dict[str, Any]]:
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not requests:
            return 400, _error_body(400, "requests: at least one request is required")
        ids = [r.get("custom_id") if isinstance(r, dict) else None for r in requests]
        for custom_id in ids:
            if not isinstance(custom_id, str) or not _CUSTOM_ID.match(custom_id):
                return 400, _error_body(400, f"custom_id {custom_id!r} does not match the pattern")
        if len(set(ids)) != len(ids):
            return 400, _error_body(400, "custom_id must be unique within a batch")
        now = dt.datetime.now(dt.timezone.utc)
        with self._lock:
            self.creates += 1
            batch_id = f"msgbatch_fake{next(self._ids):06d}"
            for request in requests:
                self.lines_received[request["custom_id"]] += 1
                self.batch_params[request["custom_id"]] = request["params"]
            batch = _Batch(batch_id, requests, self.script, now, self.script.polls)
            self.batches[batch_id] = batch
        if batch.polls_left == 0:
            self._end(batch)
        return 200, self._object(batch)

    def _end(self, batch: _Batch, cancelled: bool = False) -> None:
        """Answer every request of ``batch`` as its script says (outside the lock: rules)."""
        script = batch.script
        results: list[tuple[str, dict[str, Any]]] = []
        for request in batch.requests:
            custom_id, params = request["custom_id"], request["params"]
            if cancelled or "*" in script.canceled or custom_id in script.canceled:
                result: dict[str, Any] = {"type": "canceled"}
            elif "*" in script.expired or custom_id in script.expired:
                result = {"type": "expired"}
            elif custom_id in script.succeeded_without_message:
                result = {"type": "succeeded"}
            else:
                status, answer = self.reply(params)
                result = (
                    {"type": "succeeded", "message": answer}
                    if status == 200
                    else {"type": "errored", "error": answer}
                )
            results.append((custom_id, result))
        batch.results = results
        batch.ended_at = dt.datetime.now(dt.timezone.utc)

    def _object(self, batch: _Batch) -> dict[str, Any]:
        counts = Counter({"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0})
        counts["expired"] = 0
        if batch.ended_at is None:
            counts["processing"] = len(batch.requests)
            status = "canceling" if batch.cancel_initiated_at else "in_progress"
        else:
            status = "ended"
            for _, result in batch.results:
                counts[result["type"]] += 1
        return {
            "id": batch.batch_id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": dict(counts),
            "created_at": _stamp(batch.created_at),
            "expires_at": _stamp(batch.created_at + dt.timedelta(hours=24)),
            "ended_at": _stamp(batch.ended_at),
            "cancel_initiated_at": _stamp(batch.cancel_initiated_at),
            "archived_at": None,
            "results_url": (
                f"{self.results_host or self.base_url}/v1/messages/batches/{batch.batch_id}/results"
                if batch.ended_at
                else None
            ),
        }

    def poll(self, batch: _Batch) -> dict[str, Any]:
        with self._lock:
            self.polls += 1
            ending = batch.ended_at is None and batch.polls_left <= 1
            batch.polls_left -= 1
        if ending:
            self._end(batch, cancelled=batch.cancel_initiated_at is not None)
        return self._object(batch)

    def cancel(self, batch: _Batch) -> dict[str, Any]:
        with self._lock:
            self.cancels += 1
            if batch.ended_at is None and batch.cancel_initiated_at is None:
                batch.cancel_initiated_at = dt.datetime.now(dt.timezone.utc)
                batch.polls_left = 2  # one poll answers canceling, the next ends it
        return self._object(batch)

    def results_file(self, batch: _Batch) -> bytes:
        with self._lock:
            self.downloads += 1
        script = batch.script
        lines = []
        for custom_id, result in reversed(batch.results):  # any order: not the order sent
            if custom_id in script.missing:
                continue
            lines.append(json.dumps({"custom_id": custom_id, "result": result}).encode())
            if custom_id in script.duplicated:
                other = {"type": "succeeded", "message": {**result.get("message", {})}}
                other["message"]["content"] = [{"type": "text", "text": "another answer"}]
                lines.append(json.dumps({"custom_id": custom_id, "result": other}).encode())
        lines += script.extra_lines
        return b"\n".join(lines) + b"\n"


def _error_body(status: int, message: str) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeAnthropic/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def owner(self) -> FakeAnthropicBatches:
        return self.server.owner  # type: ignore[attr-defined, no-any-return]

    def _send(self, status: int, payload: Any, content_type: str = "application/json") -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _checked_headers(self) -> bool:
        headers = {name.lower(): value for name, value in self.headers.items()}
        with self.owner._lock:
            self.owner.headers_seen.append(headers)
        if headers.get("x-api-key") != self.owner.api_key:
            self._send(401, _error_body(401, "invalid x-api-key"))
            return False
        if headers.get("anthropic-version") != VERSION:
            self._send(400, _error_body(400, "anthropic-version: header is required"))
            return False
        return True

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            return None

    def _batch(self, batch_id: str) -> _Batch | None:
        batch = self.owner.batches.get(batch_id)
        if batch is None:
            self._send(404, _error_body(404, f"batch {batch_id} not found"))
        return batch

    def do_POST(self) -> None:
        body = self._body()
        if not self._checked_headers():
            return
        if self.path == "/v1/messages":
            if not isinstance(body, dict) or body.get("stream"):
                self._send(400, _error_body(400, "this fake answers whole messages only"))
                return
            with self.owner._lock:
                self.owner.messages_bodies.append(body)
            self._send(*self.owner.reply(body))
            return
        if self.path == "/v1/messages/batches":
            self._send(*self.owner.create(body))
            return
        found = _BATCH_PATH.match(self.path)
        if found and found.group(2) == "/cancel":
            batch = self._batch(found.group(1))
            if batch is not None:
                self._send(200, self.owner.cancel(batch))
            return
        self._send(404, _error_body(404, f"no route {self.path}"))

    def do_GET(self) -> None:
        if not self._checked_headers():
            return
        found = _BATCH_PATH.match(self.path)
        if not found or found.group(2) == "/cancel":
            self._send(404, _error_body(404, f"no route {self.path}"))
            return
        batch = self._batch(found.group(1))
        if batch is None:
            return
        if found.group(2) == "/results":
            if batch.ended_at is None:
                self._send(400, _error_body(400, "batch is still processing"))
                return
            data = self.owner.results_file(batch)
            self._send(200, data, "application/binary")
            return
        self._send(200, self.owner.poll(batch))
