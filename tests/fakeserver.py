"""A local fake OpenAI-compatible chat-completions server for tests.

Runs in a background thread of the test process, bound to 127.0.0.1 on a free
port, and stands in for remote providers.  litellm talks to it as
``openai/<model>`` with ``api_base=server.base_url``.

    with FakeLLMServer([Rule(match="capital", reply="Paris")]) as srv:
        litellm.completion(model="openai/fake-model", api_base=srv.base_url,
                           api_key="sk-test", messages=[...])
        assert srv.requests[-1].body["model"] == "fake-model"

Scripted tool calls: ``Rule(tool_calls=[{"name": "read_file", "arguments": {"path": "a.txt"}}],
times=1)`` answers with an assistant message asking for those calls; an agent loop's next
request ends with the tool's result (role ``tool``), which ``match_last`` can pick out.

Or use the ``fake_llm`` fixture (import it into a conftest.py).

Stdlib only (plus pytest for the fixture).
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = [
    "BatchScript",
    "FakeLLMServer",
    "RecordedRequest",
    "Rule",
    "count_words",
    "fake_llm",
    "peak_in_flight",
]

FAKE_MODELS = ("fake-model",)

_ERROR_KINDS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "bad_request"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "permission_denied"),
    404: ("not_found_error", "model_not_found"),
    408: ("timeout_error", "timeout"),
    409: ("conflict_error", "conflict"),
    413: ("invalid_request_error", "request_too_large"),
    422: ("invalid_request_error", "unprocessable_entity"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    500: ("server_error", "server_error"),
    502: ("server_error", "bad_gateway"),
    503: ("server_error", "service_unavailable"),
    504: ("server_error", "gateway_timeout"),
}

_WORD = re.compile(r"\S+")
#: A text completion's tokens: each word with the spaces before it.
_PIECE = re.compile(r"\s*\S+")


@dataclass
class Rule:
    """How to answer a request.  Rules are checked in order; the first match wins."""

    match: str | None = None  # substring of the LAST user message content; None = anything
    # Substring of the last message's content whatever its role (an agent loop's tool result is
    # a "tool" message, its shim result a user one); None = anything.
    match_last: str | None = None
    match_any: str | None = None  # substring of any message's content (any role); None = anything
    model: str | None = None  # only for this request "model" value; None = any
    reply: str = "ok"
    status: int = 200  # non-200 -> OpenAI-style JSON error body
    error_message: str = "fake failure"
    echo_auth: bool = False  # append the request's Authorization header to error_message
    retry_after: float | None = None  # Retry-After header on errors
    delay_s: float = 0.0  # sleep before the first byte of the response
    times: int | None = None  # apply to the first N matching requests only, then fall through
    cut_stream: bool = False  # streamed: send the role chunk, then close with no answer or [DONE]
    # Answer with these tool calls (finish_reason "tool_calls"): each {"name": ..., "arguments":
    # a dict (sent as its JSON) or a raw string (sent as is, so it may be broken JSON)}. The
    # message content is null unless `reply` was changed from its default "ok".
    tool_calls: list[dict[str, Any]] | None = None
    # Streamed: send the role chunk and this many answer chunks, then close the connection
    # cleanly (end of body) with no finish reason and no [DONE]: a stream cut mid-answer.
    cut_after: int | None = None
    # Answer 200 with this body as is (Content-Type application/json): a malformed answer.
    raw_body: bytes | None = None
    # A reasoning model's thinking, given apart from the answer in the message field (and the
    # streamed deltas' field) `reasoning_field` ("reasoning_content", or "reasoning"), before
    # the answer; its words are counted in the usage's completion_tokens_details.reasoning_tokens.
    reasoning: str | None = None
    reasoning_field: str = "reasoning_content"
    # prompt_tokens_details.cached_tokens in the usage: input tokens read from the prompt cache.
    cached_tokens: int | None = None
    # Top-level fields the request body must hold, with these values (e.g. {"reasoning_effort":
    # "high"}); None = anything.
    body: dict[str, Any] | None = None
    # prompt_tokens_details.cache_write_tokens in the usage: input tokens written to the cache.
    cache_write_tokens: int | None = None
    # False: a reply with `reasoning` reports no completion_tokens_details (a server that does
    # not count its thinking apart).
    reasoning_tokens_reported: bool = True


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]  # lower-case keys
    body: dict[str, Any]  # parsed JSON body ({} when there was none or it was not JSON)
    time: float  # time.time() when the request was received
    method: str = "POST"
    raw_body: bytes = b""
    #: The server's event counter when the request arrived and when its answer was sent (None
    #: while in flight): orders arrivals and answers exactly, whatever the machine's speed.
    arrived: int = 0
    answered: int | None = None


def peak_in_flight(requests: Sequence[RecordedRequest]) -> int:
    """The most of ``requests`` that the server held at once (arrived, not yet answered).

    Counted from the server's own event order, not from timestamps: a loaded machine makes a
    run slower, never changes this number.
    """
    events = sorted(
        [(r.arrived, 1) for r in requests]
        + [(r.answered, -1) for r in requests if r.answered is not None]
    )
    peak = held = 0
    for _, step in events:
        held += step
        peak = max(peak, held)
    return peak


@dataclass
class _RuleState:
    rule: Rule
    used: int = 0


def letter_vector(text: str) -> list[float]:
    """26 letter counts of ``text``: the fake embedding."""
    lowered = text.lower()
    return [float(lowered.count(chr(ord("a") + i))) for i in range(26)]


def count_words(text: str) -> int:
    return len(text.split())


def _content_text(content: Any) -> str:
    """Text of a message content: a string, a list of parts, or None."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
        return " ".join(texts)
    return str(content)


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    msgs = body.get("messages")
    if not isinstance(msgs, list):
        return []
    return [m for m in msgs if isinstance(m, dict)]


def _last_text(body: dict[str, Any]) -> str:
    msgs = _messages(body)
    return _content_text(msgs[-1].get("content")) if msgs else ""


def _any_text(body: dict[str, Any], needle: str) -> bool:
    return any(needle in _content_text(m.get("content")) for m in _messages(body))


def _wire_tool_calls(calls: list[dict[str, Any]], ids: Iterator[int]) -> list[dict[str, Any]]:
    """A rule's tool calls in OpenAI's shape, arguments as a JSON string, with fresh ids."""
    wired = []
    for call in calls:
        arguments = call.get("arguments", {})
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        wired.append(
            {
                "id": f"call_{next(ids)}",
                "type": "function",
                "function": {"name": str(call.get("name", "")), "arguments": arguments},
            }
        )
    return wired


def _tool_call_fragments(calls: list[dict[str, Any]], size: int) -> Iterator[dict[str, Any]]:
    """Streamed tool calls as OpenAI sends them: each call's first fragment carries its index
    in the list, its id, type and name with empty arguments; the next ones carry the same index
    and ``size`` characters more of the arguments (a JSON text cut anywhere)."""
    for index, call in enumerate(calls):
        function = call["function"]
        head = {**function, "arguments": ""}
        yield {"index": index, "id": call["id"], "type": call["type"], "function": head}
        arguments = function["arguments"]
        for start in range(0, len(arguments), size):
            yield {"index": index, "function": {"arguments": arguments[start : start + size]}}


def _last_user_text(body: dict[str, Any]) -> str:
    for msg in reversed(_messages(body)):
        if msg.get("role") == "user":
            return _content_text(msg.get("content"))
    return ""


def _prompt_tokens(body: dict[str, Any]) -> int:
    total = sum(count_words(_content_text(m.get("content"))) for m in _messages(body))
    return max(1, total)


def _truncate_words(text: str, limit: int) -> tuple[str, bool]:
    """Cut ``text`` after ``limit`` words, keeping the original spacing."""
    if limit < 0:
        limit = 0
    words = list(_WORD.finditer(text))
    if len(words) <= limit:
        return text, False
    if limit == 0:
        return "", True
    return text[: words[limit - 1].end()], True


def _limit_error(body: dict[str, Any]) -> str | None:
    """Why a chat request's token limit is refused (400), or None."""
    limit = body.get("max_tokens")
    if limit is None:
        limit = body.get("max_completion_tokens")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
        return "max_tokens must be an integer"
    return None


def _error_payload(status: int, message: str) -> dict[str, Any]:
    """OpenAI's error body for ``status``."""
    etype, code = _ERROR_KINDS.get(
        status, ("server_error" if status >= 500 else "api_error", str(status))
    )
    return {"error": {"message": message, "type": etype, "param": None, "code": code}}


@dataclass
class _ChatAnswer:
    """A chat request's answer (not an error): what a stream or a whole answer carries."""

    cid: str
    created: int
    model: str
    reply: str
    finish_reason: str
    usage: dict[str, Any]
    tool_calls: list[dict[str, Any]] | None
    thinking: str | None
    thinking_field: str

    def whole(self) -> dict[str, Any]:
        """The answer as a ``chat.completion`` body."""
        message: dict[str, Any] = {"role": "assistant", "content": self.reply}
        if self.tool_calls is not None:
            message = {
                "role": "assistant",
                "content": self.reply or None,
                "tool_calls": self.tool_calls,
            }
        if self.thinking:
            message[self.thinking_field] = self.thinking
        choice = {"index": 0, "message": message, "logprobs": None}
        return {
            "id": self.cid,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_fake",
            "choices": [{**choice, "finish_reason": self.finish_reason}],
            "usage": self.usage,
        }


def _embeddings(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """(status, body) of an embeddings request: letter counts (a-z) of each text, so texts with
    the same letters point the same way."""
    texts = body.get("input")
    texts = [texts] if isinstance(texts, str) else texts
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        return 400, _error_payload(400, "input must be a string or a list of strings")
    data = [
        {"object": "embedding", "index": i, "embedding": letter_vector(text)}
        for i, text in enumerate(texts)
    ]
    tokens = sum(count_words(text) for text in texts)
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    model = body.get("model", "fake-embedding")
    return 200, {"object": "list", "data": data, "model": model, "usage": usage}


class _Server(ThreadingHTTPServer):
    # The default backlog of 5 drops connections when many calls start at once.
    request_queue_size = 128
    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, owner: FakeLLMServer) -> None:
        self.owner = owner
        self.open_conns: set[socket.socket] = set()
        self.conns_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:  # pragma: no cover
        # Clients hanging up (or stop() closing connections) are expected; stay quiet.
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, OSError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeLLM/1.0"
    sys_version = ""
    timeout = 30  # idle keep-alive connections go away eventually
    server: _Server

    # -- connection bookkeeping so stop() can close keep-alive connections --
    def setup(self) -> None:
        super().setup()
        with self.server.conns_lock:
            self.server.open_conns.add(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            with self.server.conns_lock:
                self.server.open_conns.discard(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- helpers --
    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            data = bytearray()
            while True:
                line = self.rfile.readline()
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    # trailers until blank line
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _record(self, body: dict[str, Any], raw: bytes) -> RecordedRequest:
        headers = {k.lower(): v for k, v in self.headers.items()}
        return self.server.owner._record(
            RecordedRequest(
                path=self.path,
                headers=headers,
                body=body,
                time=time.time(),
                method=self.command,
                raw_body=raw,
            )
        )

    def _answering(self) -> None:
        """Stamp the request answered before its last bytes go out (once): a client that has
        read the whole answer always finds the stamp set."""
        recorded = getattr(self, "_recorded", None)
        if recorded is not None and recorded.answered is None:
            self.server.owner._answered(recorded)

    def _send_json(
        self, status: int, payload: dict[str, Any], extra_headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra_headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self._answering()
        self.wfile.write(data)

    def _send_error(
        self,
        status: int,
        message: str,
        retry_after: float | None = None,
    ) -> None:
        headers = {}
        if retry_after is not None:
            ra = retry_after
            headers["Retry-After"] = str(int(ra)) if float(ra).is_integer() else str(ra)
        self._send_json(status, _error_payload(status, message), headers)

    def _send_embeddings(self, body: dict[str, Any]) -> None:
        """Embeddings as letter counts (a-z): texts with the same letters point the same way."""
        status, payload = _embeddings(body)
        self._send_json(status, payload)

    def _send_text_completion(self, body: dict[str, Any]) -> None:
        """A text completion that generates the word "next"; with ``echo`` the prompt comes
        back first, its words as tokens, each word's logprob from ``word_logprobs``
        (default -1.0; the first token's None). ``completions`` False: 404, like a chat-only
        API; ``completion_logprobs`` False: the answer carries no logprobs."""
        owner = self.server.owner
        if not owner.completions:
            self._send_error(404, "this model only speaks chat: no /v1/completions")
            return
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            self._send_error(400, "prompt must be a string")
            return
        echo = bool(body.get("echo"))
        pieces = [match.group(0) for match in _PIECE.finditer(prompt)] if echo else []
        pieces.append(" next")
        offsets, start = [], 0
        for piece in pieces:
            offsets.append(start)
            start += len(piece)
        values = [owner.word_logprobs.get(piece.strip(), -1.0) for piece in pieces]
        if echo and values:
            values[0] = None  # nothing before the first token
        text = (prompt if echo else "") + " next"
        choice: dict[str, Any] = {"text": text, "index": 0, "finish_reason": "length"}
        if owner.completion_logprobs and body.get("logprobs") is not None:
            choice["logprobs"] = {
                "tokens": pieces,
                "text_offset": offsets if echo else [len(prompt)],
                "token_logprobs": values,
                "top_logprobs": [
                    None if v is None else {p: v} for p, v in zip(pieces, values, strict=True)
                ],
            }
        words = count_words(prompt)
        usage = {"prompt_tokens": words, "completion_tokens": 1, "total_tokens": words + 1}
        payload = {"id": self.server.owner._next_id(), "object": "text_completion",
                   "created": int(time.time()), "model": body.get("model", "fake-model"),
                   "choices": [choice], "usage": usage}  # fmt: skip
        self._send_json(200, payload)

    # -- routes --
    def _route(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/")
        return path

    def do_GET(self) -> None:
        self._recorded = self._record({}, self._read_body())
        try:
            self._answer_get()
        finally:
            self._answering()

    def _answer_get(self) -> None:
        route = self._route()
        if _batch_route(route):
            self._answer_batch(self.server.owner._batches.get(route, self.path))
            return
        if route in ("/v1/models", "/models"):
            created = int(time.time())
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": m, "object": "model", "created": created, "owned_by": "fake"}
                        for m in FAKE_MODELS
                    ],
                },
            )
        else:
            self._send_error(404, f"no route for GET {route}")

    def do_POST(self) -> None:
        raw = self._read_body()
        try:
            body = json.loads(raw) if raw else {}
            parsed_ok = isinstance(body, dict)
        except (ValueError, UnicodeDecodeError):
            body, parsed_ok = {}, False
        if not isinstance(body, dict):
            body = {}
        self._recorded = self._record(body, raw)
        try:
            self._answer_post(body, parsed_ok)
        finally:
            self._answering()

    def _answer_post(self, body: dict[str, Any], parsed_ok: bool) -> None:

        route = self._route()
        if _batch_route(route):
            owner = self.server.owner
            content_type = self.headers.get("Content-Type", "")
            raw = self._recorded.raw_body
            self._answer_batch(owner._batches.post(route, body, parsed_ok, content_type, raw))
            return
        if route in ("/v1/embeddings", "/embeddings") and parsed_ok:
            self._send_embeddings(body)
            return
        if route in ("/v1/completions", "/completions") and parsed_ok:
            self._send_text_completion(body)
            return
        if route not in ("/v1/chat/completions", "/chat/completions"):
            self._send_error(404, f"no route for POST {route}")
            return
        if not parsed_ok:
            self._send_error(400, "request body is not a JSON object")
            return

        limit_error = _limit_error(body)
        if limit_error is not None:
            self._send_error(400, limit_error)
            return

        owner = self.server.owner
        rule = owner._pick_rule(body)
        if rule is not None and rule.delay_s > 0:
            time.sleep(rule.delay_s)

        if rule is not None and rule.status != 200:
            message = rule.error_message
            if rule.echo_auth:
                message = f"{message} (Authorization: {self.headers.get('Authorization', '')})"
            self._send_error(rule.status, message, rule.retry_after)
            return

        if rule is not None and rule.raw_body is not None:
            self._send_raw(rule.raw_body)
            return
        if rule is not None and rule.cut_after is not None and body.get("stream") is True:
            self._stream_cut_after(body, rule.reply, rule.cut_after)
            return

        answer = owner._chat_answer(body, rule)
        if body.get("stream") is True:
            opts = body.get("stream_options")
            include_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
            include_usage = include_usage and owner.stream_usage
            cut = rule is not None and rule.cut_stream
            self._stream(
                answer.cid,
                answer.created,
                answer.model,
                answer.reply,
                answer.finish_reason,
                answer.usage if include_usage else None,
                cut,
                answer.tool_calls,
                (answer.thinking_field, answer.thinking) if answer.thinking else None,
            )
            return
        self._send_json(200, answer.whole())

    def _answer_batch(self, answer: tuple[int, dict[str, Any] | bytes]) -> None:
        """A files or batches endpoint's answer: JSON, an error, or a file's bytes."""
        status, payload = answer
        if isinstance(payload, bytes):
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self._answering()
            self.wfile.write(payload)
            return
        self._send_json(status, payload)

    def _send_raw(self, data: bytes) -> None:
        """A 200 answer whose body is ``data`` as is (not necessarily JSON)."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self._answering()
        self.wfile.write(data)

    def _stream_cut_after(self, body: dict[str, Any], reply: str, chunks: int) -> None:
        """Stream ``chunks`` pieces of ``reply``, then end the body: no finish reason, no [DONE]."""
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        size = self.server.owner.chunk_size
        answer = [reply[i : i + size] for i in range(0, len(reply), size)]
        pieces = ["", *answer[:chunks]]
        model = body.get("model") if isinstance(body.get("model"), str) else "fake-model"
        for n, piece in enumerate(pieces):
            delta = {"role": "assistant", "content": piece} if n == 0 else {"content": piece}
            obj = {
                "id": "chatcmpl-cut",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
            }
            try:
                self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
                self.wfile.flush()
            except OSError:
                return
        self._answering()

    def _stream(
        self,
        cid: str,
        created: int,
        model: str,
        reply: str,
        finish_reason: str,
        usage: dict[str, Any] | None,
        cut: bool = False,
        tool_calls: list[dict[str, Any]] | None = None,
        thinking: tuple[str, str] | None = None,
    ) -> None:
        owner = self.server.owner
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()

        def chunk(choices: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> None:
            obj: dict[str, Any] = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": choices,
            }
            if extra:
                obj.update(extra)
            self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
            self.wfile.flush()

        def delta_choice(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

        try:
            chunk([delta_choice({"role": "assistant", "content": ""})])
            if cut:
                return  # the connection closes: no answer, no finish reason, no [DONE]
            size = owner.chunk_size
            if thinking is not None:  # the thinking streams first, in its own field
                field, thought = thinking
                for i in range(0, len(thought), size):
                    chunk([delta_choice({field: thought[i : i + size]})])
            pieces = [reply[i : i + size] for i in range(0, len(reply), size)]
            for n, piece in enumerate(pieces):
                if n and owner.token_delay_s > 0:
                    time.sleep(owner.token_delay_s)
                chunk([delta_choice({"content": piece})])
            for fragment in _tool_call_fragments(tool_calls or [], size):
                chunk([delta_choice({"tool_calls": [fragment]})])
            chunk([delta_choice({}, finish_reason)])
            if usage is not None:
                chunk([], {"usage": usage})
            self._answering()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except OSError:
            # client went away mid-stream
            pass


# -- OpenAI's Batch API: files and batches --

#: The endpoints a batch may be made for, and what answers each line.
_BATCH_ENDPOINTS = ("/v1/chat/completions", "/v1/embeddings")
_DAY_S = 24 * 3600
_EXPIRED_MESSAGE = "This request could not be executed before the completion window expired."
_CANCELLED_MESSAGE = "This request was not executed: the batch was cancelled."


@dataclass
class BatchScript:
    """How the fake's batches go (every batch of the server follows it; tests change it between
    batches with ``server.batch = BatchScript(...)``).

    Lines are named by their number in the input file (1-based, as OpenAI's errors name them).
    """

    #: polls (GET /batches/{id}) a batch answers before it ends: validating, in_progress, then
    #: finalizing; the next poll finds it ended (0: the first poll does)
    polls: int = 0
    #: how it ends: "completed", "failed" (batch-level ``failure`` errors, no output) or
    #: "expired" (the first ``answered`` lines answered, the rest not executed)
    end: str = "completed"
    #: expired or cancelled: how many lines (the first ones) were answered
    answered: int = 0
    #: a failed batch's ``errors.data`` (each ``code``, ``message``, ``line``, ``param``)
    failure: list[dict[str, Any]] = field(
        default_factory=lambda: [
            {"code": "invalid_request", "message": "fake batch refused", "line": None}
        ]
    )
    #: expired or cancelled: lines not executed go to the error file (batch_expired /
    #: batch_cancelled, top-level error); False: they are left out of both files
    unexecuted: bool = True
    #: lines whose answer line is left out of the files
    drop: tuple[int, ...] = ()
    #: lines whose answer line is written twice (the second with another answer)
    duplicate: tuple[int, ...] = ()
    #: lines whose answer line is replaced by text that is not JSON
    malformed: tuple[int, ...] = ()
    #: answer lines written for custom_ids that were not sent (``not-sent-1``...)
    unknown: int = 0
    #: lines whose answer line has no custom_id
    no_custom_id: tuple[int, ...] = ()
    #: a line a Rule answers with an error status: "nested" (``response.status_code`` and
    #: ``response.body.error``, as OpenAI writes them) or "top" (``response`` null and a
    #: top-level ``error``, as the spec has it)
    error_shape: str = "nested"
    #: write the files' lines in reverse order (OpenAI's are in any order)
    reverse: bool = False
    #: the batch says it was created this many seconds before it was (its wait)
    created_ago_s: int = 0
    #: the first N create requests make their batch but answer 500 (an answer lost on the
    #: way: the client cannot know the batch exists)
    lost_creates: int = 0


def _batch_route(route: str) -> bool:
    return route.startswith(("/v1/files", "/v1/batches"))


def _multipart(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """A multipart/form-data body's fields: name -> (file name or None, bytes)."""
    found = re.search(r'boundary="?([^";]+)"?', content_type)
    if not content_type.startswith("multipart/form-data") or found is None:
        return {}
    boundary = b"--" + found.group(1).encode()
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in raw.split(boundary)[1:]:
        if part.startswith(b"--"):
            break
        head, _, data = part.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        data = data.removesuffix(b"\r\n")
        text = head.decode("utf-8", "replace")
        name = re.search(r'\bname="([^"]*)"', text)
        filename = re.search(r'filename="([^"]*)"', text)
        if name is not None:
            fields[name.group(1)] = (filename.group(1) if filename else None, data)
    return fields


class _Batches:
    """The fake's files and batches, their counters, and the script they follow."""

    def __init__(self, owner: FakeLLMServer) -> None:
        self.owner = owner
        self.lock = threading.Lock()
        self.files: dict[str, dict[str, Any]] = {}
        self.contents: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.polled: Counter[str] = Counter()
        self.ids = itertools.count(1)

    # -- requests --
    def post(
        self, route: str, body: dict[str, Any], parsed_ok: bool, content_type: str, raw: bytes
    ) -> tuple[int, dict[str, Any] | bytes]:
        if route == "/v1/files":
            return self._upload(content_type, raw)
        if route == "/v1/batches":
            if not parsed_ok:
                return 400, _error_payload(400, "request body is not a JSON object")
            return self._create(body)
        found = re.fullmatch(r"/v1/batches/([^/]+)/cancel", route)
        if found is not None:
            return self._cancel(found.group(1))
        return 404, _error_payload(404, f"no route for POST {route}")

    def get(self, route: str, path: str) -> tuple[int, dict[str, Any] | bytes]:
        import urllib.parse

        if route == "/v1/batches":
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
            return self._list(int(query.get("limit", ["20"])[0]), query.get("after", [None])[0])
        found = re.fullmatch(r"/v1/batches/([^/]+)", route)
        if found is not None:
            return self._poll(found.group(1))
        found = re.fullmatch(r"/v1/files/([^/]+)(/content)?", route)
        if found is not None:
            file_id = found.group(1)
            with self.lock:
                if file_id not in self.files:
                    return 404, _error_payload(404, f"No such File object: {file_id}")
                if found.group(2):
                    return 200, self.contents[file_id]
                return 200, dict(self.files[file_id])
        return 404, _error_payload(404, f"no route for GET {route}")

    def _upload(self, content_type: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        fields = _multipart(content_type, raw)
        purpose = fields.get("purpose", (None, b""))[1].decode()
        if "file" not in fields or fields["file"][0] is None:
            return 400, _error_payload(400, "a multipart 'file' field is required")
        if purpose != "batch":
            return 400, _error_payload(400, f"purpose must be 'batch', not {purpose!r}")
        with self.lock:
            self.owner.uploads += 1
            file_id = self._store(fields["file"][1], fields["file"][0] or "input.jsonl", purpose)
            return 200, dict(self.files[file_id])

    def _store(self, data: bytes, filename: str, purpose: str) -> str:
        file_id = f"file-fake{next(self.ids)}"
        self.files[file_id] = {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
        }
        self.contents[file_id] = data
        return file_id

    def _create(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        file_id = body.get("input_file_id")
        endpoint = body.get("endpoint")
        with self.lock:
            if file_id not in self.files:
                return 404, _error_payload(404, f"No such File object: {file_id}")
            if endpoint not in _BATCH_ENDPOINTS:
                return 400, _error_payload(400, f"endpoint {endpoint!r} is not supported")
            if body.get("completion_window") != "24h":
                return 400, _error_payload(400, "completion_window must be '24h'")
            metadata = body.get("metadata")
            if metadata is not None and not isinstance(metadata, dict):
                return 400, _error_payload(400, "metadata must be an object")
            self.owner.creates += 1
            lines = [line for line in self.contents[str(file_id)].split(b"\n") if line.strip()]
            for line in lines:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict) and isinstance(entry.get("custom_id"), str):
                    self.owner.lines_received[entry["custom_id"]] += 1
            created = int(time.time()) - self.owner.batch.created_ago_s
            batch_id = f"batch_fake{next(self.ids)}"
            self.batches[batch_id] = {
                "id": batch_id,
                "object": "batch",
                "endpoint": endpoint,
                "errors": None,
                "input_file_id": file_id,
                "completion_window": "24h",
                "status": "validating",
                "output_file_id": None,
                "error_file_id": None,
                "created_at": created,
                "in_progress_at": None,
                "expires_at": created + _DAY_S,
                "finalizing_at": None,
                "completed_at": None,
                "failed_at": None,
                "expired_at": None,
                "cancelling_at": None,
                "cancelled_at": None,
                "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                "metadata": metadata,
            }
            if self.owner.creates <= self.owner.batch.lost_creates:
                return 500, _error_payload(500, "The server had an error processing the request.")
            return 200, dict(self.batches[batch_id])

    def _list(self, limit: int, after: str | None) -> tuple[int, dict[str, Any]]:
        with self.lock:
            newest = list(reversed(list(self.batches)))
            if after in self.batches:
                newest = newest[newest.index(str(after)) + 1 :]
            page = [dict(self.batches[batch_id]) for batch_id in newest[:limit]]
            return 200, {
                "object": "list",
                "data": page,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
                "has_more": len(newest) > limit,
            }

    def _poll(self, batch_id: str) -> tuple[int, dict[str, Any]]:
        with self.lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return 404, _error_payload(404, f"No such Batch object: {batch_id}")
            self.owner.polls += 1
            self.polled[batch_id] += 1
            script = self.owner.batch
            now = int(time.time())
            if batch["status"] == "cancelling":
                self._end(batch, "cancelled", script)
            elif batch["status"] not in ("completed", "failed", "expired", "cancelled"):
                count = self.polled[batch_id]
                if count > script.polls:
                    self._end(batch, script.end, script)
                else:
                    steps = ("validating", "in_progress", "finalizing")
                    batch["status"] = steps[min(count - 1, 2)]
                    stamp = {"in_progress": "in_progress_at", "finalizing": "finalizing_at"}
                    if batch["status"] in stamp:
                        batch[stamp[batch["status"]]] = batch[stamp[batch["status"]]] or now
            return 200, dict(batch)

    def _cancel(self, batch_id: str) -> tuple[int, dict[str, Any]]:
        with self.lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return 404, _error_payload(404, f"No such Batch object: {batch_id}")
            self.owner.cancels += 1
            if batch["status"] in ("completed", "failed", "expired", "cancelled"):
                message = f"Cannot cancel a batch with status {batch['status']}."
                return 400, _error_payload(400, message)
            batch["status"] = "cancelling"
            batch["cancelling_at"] = int(time.time())
            return 200, dict(batch)

    # -- the end of a batch --
    def _end(self, batch: dict[str, Any], end: str, script: BatchScript) -> None:
        """Answer ``batch``'s lines as it ends ``end``, and write its output and error files."""
        now = int(time.time())
        data = self.contents[batch["input_file_id"]]
        entries, refused = _validated(data, batch["endpoint"])
        if refused or end == "failed":
            batch.update(status="failed", failed_at=now)
            batch["errors"] = {"object": "list", "data": refused or list(script.failure)}
            return
        executed = len(entries) if end == "completed" else script.answered
        output: list[bytes] = []
        errors: list[bytes] = []
        done = failed = 0
        for number, entry in enumerate(entries, start=1):
            if number <= executed:
                status, answer = self._answer(batch["endpoint"], entry["body"])
                good = status == 200
                line = _output_line(number, entry["custom_id"], status, answer, script)
            elif script.unexecuted:
                good = False
                code = "batch_expired" if end == "expired" else "batch_cancelled"
                said = _EXPIRED_MESSAGE if end == "expired" else _CANCELLED_MESSAGE
                line = {
                    "id": f"batch_req_{number}",
                    "custom_id": entry["custom_id"],
                    "response": None,
                    "error": {"code": code, "message": said},
                }
            else:
                continue
            done, failed = done + good, failed + (not good)
            into = output if good else errors
            into.extend(_scripted(number, line, script))
        for n in range(1, script.unknown + 1):
            body = self._answer(batch["endpoint"], entries[0]["body"])[1]
            response = {"status_code": 200, "request_id": f"req_x{n}", "body": body}
            stray = {"id": f"batch_req_x{n}", "custom_id": f"not-sent-{n}", "error": None}
            output.append(json.dumps({**stray, "response": response}).encode())
        if script.reverse:
            output.reverse()
            errors.reverse()
        if output:
            batch["output_file_id"] = self._store(
                b"\n".join(output) + b"\n", "output.jsonl", "batch_output"
            )
        if errors:
            batch["error_file_id"] = self._store(
                b"\n".join(errors) + b"\n", "errors.jsonl", "batch_output"
            )
        batch["request_counts"] = {"total": len(entries), "completed": done, "failed": failed}
        batch.update(status=end, **{f"{end}_at": now})

    def _answer(self, endpoint: str, body: Any) -> tuple[int, dict[str, Any]]:
        """A line's answer, as the live endpoint gives it (the same rules, counted the same)."""
        if not isinstance(body, dict):
            return 400, _error_payload(400, "request body is not a JSON object")
        if endpoint == "/v1/embeddings":
            return _embeddings(body)
        limit_error = _limit_error(body)
        if limit_error is not None:
            return 400, _error_payload(400, limit_error)
        owner = self.owner
        rule = owner._pick_rule(body)
        if rule is not None and rule.status != 200:
            return rule.status, _error_payload(rule.status, rule.error_message)
        if rule is not None and rule.raw_body is not None:
            try:
                raw = json.loads(rule.raw_body)
            except ValueError:
                raw = rule.raw_body.decode("utf-8", "replace")
            return 200, raw
        return 200, owner._chat_answer(body, rule).whole()


def _validated(data: bytes, endpoint: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the input file's entries, the validation errors that fail the batch), as OpenAI checks
    an input file: JSON lines, each ``POST`` to the batch's endpoint with a body and a
    distinct custom_id, one model for all."""
    entries: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    seen: set[str] = set()
    models: dict[str, Any] = {}

    def refuse(number: int, code: str, message: str) -> None:
        refused.append({"code": code, "message": message, "param": None, "line": number})

    for number, raw in enumerate([line for line in data.split(b"\n") if line.strip()], start=1):
        try:
            entry = json.loads(raw)
        except ValueError:
            refuse(number, "invalid_json_line", "This line is not parseable as valid JSON.")
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("custom_id"), str):
            refuse(number, "missing_required_parameter", "Missing required parameter: custom_id.")
            continue
        if entry["custom_id"] in seen:
            refuse(number, "duplicate_custom_id", "The custom_id for this request is a duplicate.")
        seen.add(entry["custom_id"])
        if entry.get("method") != "POST":
            refuse(number, "invalid_method", "The method must be POST.")
        if entry.get("url") != endpoint:
            refuse(number, "mismatched_endpoint", f"The url must be {endpoint}.")
        body = entry.get("body")
        if not isinstance(body, dict):
            refuse(number, "missing_required_parameter", "Missing required parameter: body.")
            continue
        models.setdefault("first", body.get("model"))
        if body.get("model") != models["first"]:
            refuse(number, "mismatched_model", "All requests in a batch must use one model.")
        entries.append(entry)
    return entries, refused


def _output_line(
    number: int, custom_id: str, status: int, answer: Any, script: BatchScript
) -> dict[str, Any]:
    """A line's answer as an output or error file line."""
    request = {"id": f"batch_req_{number}", "custom_id": custom_id}
    if status != 200 and script.error_shape == "top":
        error = answer.get("error") if isinstance(answer, dict) else None
        said = error if isinstance(error, dict) else {}
        top = {"code": said.get("code") or str(status), "message": said.get("message", "")}
        return {**request, "response": None, "error": top}
    response = {"status_code": status, "request_id": f"req_{number}", "body": answer}
    return {**request, "response": response, "error": None}


def _scripted(number: int, line: dict[str, Any], script: BatchScript) -> list[bytes]:
    """The lines the files hold for input line ``number``, as the script bends them."""
    if number in script.drop:
        return []
    if number in script.malformed:
        return [b'{"custom_id": "' + line["custom_id"].encode() + b'", "response": {']
    if number in script.no_custom_id:
        line = {key: value for key, value in line.items() if key != "custom_id"}
    written = [json.dumps(line).encode()]
    if number in script.duplicate:
        again = json.loads(written[0])
        body = (again.get("response") or {}).get("body")
        choices = body.get("choices") if isinstance(body, dict) else None
        if choices:
            choices[0]["message"]["content"] = "a second, different answer"
        written.append(json.dumps(again).encode())
    return written


class FakeLLMServer:
    """Fake OpenAI-compatible server on 127.0.0.1, served from a daemon thread."""

    def __init__(
        self,
        rules: Sequence[Rule] = (),
        default_reply: str = "ok",
        chunk_size: int = 4,
        token_delay_s: float = 0.0,
        stream_usage: bool = True,
        batch: BatchScript | None = None,
    ) -> None:
        if chunk_size < 1:
            raise ValueError("chunk_size must be >= 1")
        #: False acts like llama-cpp's server: no usage on streams, whatever the request asks.
        self.stream_usage = stream_usage
        #: /v1/completions: answered (False: 404, a chat-only API), with logprobs when asked
        self.completions = True
        self.completion_logprobs = True
        #: a text completion's logprob of each word (default -1.0)
        self.word_logprobs: dict[str, float] = {}
        self.default_reply = default_reply
        #: the chat answers' "model" (whole, streamed, batched): the version a provider says it
        #: served (``gpt-4o-2024-08-06``); None: the request's "model", echoed
        self.served_model: str | None = None
        self.chunk_size = chunk_size
        self.token_delay_s = token_delay_s
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._rules: list[_RuleState] = [_RuleState(r) for r in rules]
        self._ids = itertools.count(1)
        self._call_ids = itertools.count(1)
        self._events = itertools.count(1)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        #: how batches go (OpenAI's Batch API: /v1/files, /v1/batches)
        self.batch = batch or BatchScript()
        #: counters of the batch endpoints: input files uploaded, batches created, polls of a
        #: batch, cancel requests, and each custom_id's lines in the batches created (a
        #: request sent twice counts 2)
        self.uploads = 0
        self.creates = 0
        self.polls = 0
        self.cancels = 0
        self.lines_received: Counter[str] = Counter()
        self._batches = _Batches(self)

    # -- lifecycle --
    def start(self) -> FakeLLMServer:
        if self._server is not None:
            return self
        server = _Server(self)
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"FakeLLMServer:{server.server_address[1]}",
            daemon=True,
        )
        self._server, self._thread = server, thread
        thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        self._server, self._thread = None, None
        server.shutdown()
        with server.conns_lock:
            conns = list(server.open_conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses --
    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeLLMServer is not running; call start() first")
        return int(self._server.server_address[1])

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    # -- rules and records --
    @property
    def rules(self) -> list[Rule]:
        with self._lock:
            return [s.rule for s in self._rules]

    def add_rule(self, rule: Rule) -> None:
        with self._lock:
            self._rules.append(_RuleState(rule))

    def reset(self) -> None:
        with self._lock:
            self._rules.clear()
            self.requests.clear()
        self.uploads = self.creates = self.polls = self.cancels = 0
        self.lines_received.clear()

    def chat_requests(self) -> list[RecordedRequest]:
        """Recorded POSTs to the chat-completions endpoint, in arrival order."""
        with self._lock:
            return [
                r
                for r in self.requests
                if r.method == "POST"
                and r.path.split("?", 1)[0].rstrip("/").endswith("/chat/completions")
            ]

    def chat_messages(self, model: str) -> list[list[dict[str, Any]]]:
        """The messages of each chat request for ``model``, in arrival order."""
        return [r.body["messages"] for r in self.chat_requests() if r.body["model"] == model]

    def _record(self, req: RecordedRequest) -> RecordedRequest:
        with self._lock:
            req.arrived = next(self._events)
            self.requests.append(req)
        return req

    def _answered(self, req: RecordedRequest) -> None:
        with self._lock:
            req.answered = next(self._events)

    def _next_id(self) -> str:
        with self._lock:
            return f"chatcmpl-fake-{next(self._ids)}"

    def _tool_calls(self, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        with self._lock:
            return _wire_tool_calls(calls, self._call_ids)

    def _chat_answer(self, body: dict[str, Any], rule: Rule | None) -> _ChatAnswer:
        """The answer ``rule`` (None: the default reply) gives a chat request ``body``."""
        limit = body.get("max_tokens")
        if limit is None:
            limit = body.get("max_completion_tokens")
        reply = rule.reply if rule is not None else self.default_reply
        tool_calls: list[dict[str, Any]] | None = None
        truncated = False
        if rule is not None and rule.tool_calls is not None:
            tool_calls = self._tool_calls(rule.tool_calls)
            # A tool-calling answer usually has no text; "ok" is only Rule's default.
            reply = "" if rule.reply == "ok" else rule.reply
        elif limit is not None:
            reply, truncated = _truncate_words(reply, limit)
        finish_reason = "tool_calls" if tool_calls else "length" if truncated else "stop"

        prompt_tokens = _prompt_tokens(body)
        thinking = rule.reasoning if rule is not None else None
        thinking_field = rule.reasoning_field if rule is not None else "reasoning_content"
        reasoning_tokens = count_words(thinking) if thinking else 0
        completion_tokens = (
            reasoning_tokens
            + count_words(reply)
            + sum(
                count_words(f"{c['function']['name']} {c['function']['arguments']}")
                for c in tool_calls or []
            )
        )
        usage: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        if thinking is not None and rule is not None and rule.reasoning_tokens_reported:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
        prompt_details = {
            name: count
            for name, count in (
                ("cached_tokens", rule.cached_tokens if rule else None),
                ("cache_write_tokens", rule.cache_write_tokens if rule else None),
            )
            if count is not None
        }
        if prompt_details:
            usage["prompt_tokens_details"] = prompt_details
        model = body.get("model") if isinstance(body.get("model"), str) else "fake-model"
        model = self.served_model or model
        return _ChatAnswer(
            cid=self._next_id(),
            created=int(time.time()),
            model=str(model),
            reply=reply,
            finish_reason=finish_reason,
            usage=usage,
            tool_calls=tool_calls,
            thinking=thinking,
            thinking_field=thinking_field,
        )

    def _pick_rule(self, body: dict[str, Any]) -> Rule | None:
        text = _last_user_text(body)
        last = _last_text(body)
        model = body.get("model")
        with self._lock:
            for state in self._rules:
                rule = state.rule
                if rule.model is not None and rule.model != model:
                    continue
                if rule.match is not None and rule.match not in text:
                    continue
                if rule.match_last is not None and rule.match_last not in last:
                    continue
                if rule.match_any is not None and not _any_text(body, rule.match_any):
                    continue
                if rule.body is not None and any(
                    body.get(key) != value for key, value in rule.body.items()
                ):
                    continue
                if rule.times is not None and state.used >= rule.times:
                    continue
                state.used += 1
                return rule
        return None


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    """A started FakeLLMServer, stopped after the test."""
    server = FakeLLMServer().start()
    try:
        yield server
    finally:
        server.stop()
