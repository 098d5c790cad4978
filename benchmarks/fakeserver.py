"""A fast fake OpenAI-compatible chat-completions server for benchmarks, on 127.0.0.1.

One process, one asyncio loop (aiohttp): 64+ concurrent slow requests cost no threads, so the
server is never the bottleneck the benchmark measures.

    python benchmarks/fakeserver.py --port 0 --ttft 0.25 --token-delay 0 --tokens 20 \
        --fault-rate 0.0 --faults 429,500,timeout,drop,malformed --seed 1 --rpm-limit 0 \
        --port-file PATH

Every reply is ``--tokens`` words; its first byte leaves after ``--ttft`` seconds, then
``--token-delay`` seconds pass between stream chunks (one word per chunk). With probability
``--fault-rate`` a request gets one of ``--faults`` instead:

- ``429``: HTTP 429 with ``Retry-After: 0.05``; ``500``: HTTP 500;
- ``timeout``: no answer until the client gives up (the handler ends when the client hangs up);
- ``drop``: the connection is closed abruptly (mid-stream for streams);
- ``malformed``: HTTP 200 with a body that is not JSON (a broken SSE event for streams).

``--rpm-limit N`` makes the server enforce N requests per sliding 60 s window itself: a request
beyond it gets a 429 and counts as a violation. ``GET /stats`` returns
``{requests, by_status, faults, violations, max_in_flight, in_flight}``; ``POST /stats/reset``
zeroes the counters. SIGTERM or SIGINT stops the server.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

FAULT_KINDS = ("429", "500", "timeout", "drop", "malformed")
RATE_WINDOW_S = 60.0
#: How often a "timeout" handler checks whether its client has hung up.
HANGUP_POLL_S = 0.25
TIMEOUT_FAULT_S = 3600.0


@dataclass(frozen=True)
class ServerSettings:
    """How the fake server answers."""

    ttft_s: float = 0.25
    """Seconds before the first byte of every reply."""
    token_delay_s: float = 0.0
    """Seconds between stream chunks (and per extra word of a non-streamed reply)."""
    tokens: int = 20
    """Words in every reply."""
    fault_rate: float = 0.0
    """Probability that a request gets a fault instead of an answer."""
    faults: tuple[str, ...] = FAULT_KINDS
    """Fault kinds to choose from, uniformly."""
    seed: int = 1
    """Seed of the fault dice."""
    rpm_limit: int = 0
    """Requests allowed per sliding 60 s window; 0 means no limit."""


@dataclass
class ServerStats:
    """Counters served at ``GET /stats``."""

    requests: int = 0
    by_status: collections.Counter[str] = field(default_factory=collections.Counter)
    faults: collections.Counter[str] = field(default_factory=collections.Counter)
    violations: int = 0
    in_flight: int = 0
    max_in_flight: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON body of ``GET /stats``."""
        return {
            "requests": self.requests,
            "by_status": dict(self.by_status),
            "faults": dict(self.faults),
            "violations": self.violations,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
        }


class RateWindow:
    """Admits at most ``limit`` requests per sliding window of ``window_s`` seconds."""

    def __init__(self, limit: int, window_s: float = RATE_WINDOW_S) -> None:
        self.limit = limit
        self.window_s = window_s
        self._admitted: collections.deque[float] = collections.deque()

    def admit(self, now: float) -> float | None:
        """None when admitted; else the seconds until a slot frees up."""
        if self.limit <= 0:
            return None
        while self._admitted and self._admitted[0] <= now - self.window_s:
            self._admitted.popleft()
        if len(self._admitted) >= self.limit:
            return self._admitted[0] + self.window_s - now
        self._admitted.append(now)
        return None


class FakeChatServer:
    """The request handlers and their shared state."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self.stats = ServerStats()
        self.rate = RateWindow(settings.rpm_limit)
        self._dice = random.Random(settings.seed)
        self._ids = 0
        self.words = [f"w{i}" for i in range(settings.tokens)]

    def app(self) -> web.Application:
        """The aiohttp application with every route."""
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/chat/completions", self.chat)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/stats", self.get_stats)
        app.router.add_post("/stats/reset", self.reset_stats)
        return app

    async def models(self, request: web.Request) -> web.Response:
        """``GET /v1/models``: one model, for clients that probe."""
        return web.json_response({"object": "list", "data": [{"id": "bench", "object": "model"}]})

    async def get_stats(self, request: web.Request) -> web.Response:
        """``GET /stats``."""
        return web.json_response(self.stats.to_dict())

    async def reset_stats(self, request: web.Request) -> web.Response:
        """``POST /stats/reset``: zero the counters (the rate window is kept)."""
        in_flight = self.stats.in_flight
        self.stats = ServerStats(in_flight=in_flight, max_in_flight=in_flight)
        return web.json_response(self.stats.to_dict())

    async def chat(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/chat/completions``: an answer, a fault, or a rate-limit 429."""
        stats = self.stats
        stats.requests += 1
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            response, label = await self._answer(request)
        finally:
            stats.in_flight -= 1
        stats.by_status[label] += 1
        return response

    async def _answer(self, request: web.Request) -> tuple[web.StreamResponse, str]:
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return _error(400, "request body is not a JSON object"), "400"
        wait = self.rate.admit(time.monotonic())
        if wait is not None:
            self.stats.violations += 1
            return _error(429, "rate limit exceeded", retry_after=wait), "429"
        fault = self._roll_fault()
        if fault is not None:
            self.stats.faults[fault] += 1
            return await self._fault(request, body, fault)
        await asyncio.sleep(self.settings.ttft_s)
        if body.get("stream") is True:
            return await self._stream(request, body), "200"
        await asyncio.sleep(self.settings.token_delay_s * max(0, len(self.words) - 1))
        return web.json_response(self._completion(body)), "200"

    def _roll_fault(self) -> str | None:
        faults = self.settings.faults
        if not faults or self._dice.random() >= self.settings.fault_rate:
            return None
        return self._dice.choice(faults)

    async def _fault(
        self, request: web.Request, body: dict[str, Any], fault: str
    ) -> tuple[web.StreamResponse, str]:
        if fault == "429":
            return _error(429, "injected rate limit", retry_after=0.05), "429"
        if fault == "500":
            return _error(500, "injected server error"), "500"
        if fault == "timeout":
            await _wait_for_hangup(request, TIMEOUT_FAULT_S)
            return web.Response(status=504), "timeout"
        await asyncio.sleep(self.settings.ttft_s)
        streamed = body.get("stream") is True
        if fault == "drop":
            return await self._drop(request, body, streamed), "drop"
        return await self._malformed(request, body, streamed), "malformed"

    async def _drop(
        self, request: web.Request, body: dict[str, Any], streamed: bool
    ) -> web.StreamResponse:
        response = web.StreamResponse()
        if streamed:
            response = await self._open_stream(request)
            head = self._base(body, "chat.completion.chunk")
            await _send_event(response, self._chunk(head, {"role": "assistant", "content": ""}))
            for word in self.words[: len(self.words) // 2]:
                await _send_event(response, self._chunk(head, {"content": word + " "}))
        if request.transport is not None:
            request.transport.abort()
        return response

    async def _malformed(
        self, request: web.Request, body: dict[str, Any], streamed: bool
    ) -> web.StreamResponse:
        if not streamed:
            text = '{"id": "chatcmpl-broken", "choices": [{"message": {"content": "w0'
            return web.Response(status=200, text=text, content_type="application/json")
        response = await self._open_stream(request)
        head = self._base(body, "chat.completion.chunk")
        await _send_event(response, self._chunk(head, {"role": "assistant", "content": ""}))
        await response.write(b'data: {"choices": [{"delta": {"content": "w0\n\n')
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _open_stream(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        return response

    async def _stream(self, request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        response = await self._open_stream(request)
        head = self._base(body, "chat.completion.chunk")
        try:
            await _send_event(response, self._chunk(head, {"role": "assistant", "content": ""}))
            for n, word in enumerate(self.words):
                if n and self.settings.token_delay_s > 0:
                    await asyncio.sleep(self.settings.token_delay_s)
                text = word if n == 0 else " " + word
                await _send_event(response, self._chunk(head, {"content": text}))
            await _send_event(response, self._chunk(head, {}, finish="stop"))
            options = body.get("stream_options")
            if isinstance(options, dict) and options.get("include_usage"):
                usage = {**head, "choices": [], "usage": self._usage(body)}
                await _send_event(response, usage)
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except ConnectionError:
            pass  # the client went away mid-stream
        return response

    def _next_id(self) -> str:
        self._ids += 1
        return f"chatcmpl-bench-{self._ids}"

    def _base(self, body: dict[str, Any], kind: str) -> dict[str, Any]:
        model = body.get("model")
        return {
            "id": self._next_id(),
            "object": kind,
            "created": int(time.time()),
            "model": model if isinstance(model, str) else "bench",
            "system_fingerprint": "fp_bench",
        }

    def _usage(self, body: dict[str, Any]) -> dict[str, int]:
        prompt = max(1, sum(len(str(m.get("content", "")).split()) for m in _messages(body)))
        completion = len(self.words)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        message = {"role": "assistant", "content": " ".join(self.words)}
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
        return {
            **self._base(body, "chat.completion"),
            "choices": [choice],
            "usage": self._usage(body),
        }

    def _chunk(
        self, head: dict[str, Any], delta: dict[str, Any], finish: str | None = None
    ) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**head, "choices": [choice]}


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []


def _error(status: int, message: str, retry_after: float | None = None) -> web.Response:
    kind = "rate_limit_error" if status == 429 else "server_error"
    headers = {} if retry_after is None else {"Retry-After": f"{max(0.0, retry_after):.3g}"}
    payload = {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}
    return web.json_response(payload, status=status, headers=headers)


async def _send_event(response: web.StreamResponse, payload: dict[str, Any]) -> None:
    await response.write(b"data: " + json.dumps(payload).encode() + b"\n\n")


async def _wait_for_hangup(request: web.Request, limit_s: float) -> None:
    """Sleep up to ``limit_s`` seconds, ending early once the client has hung up."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        transport = request.transport
        if transport is None or transport.is_closing():
            return
        await asyncio.sleep(HANGUP_POLL_S)


def _write_port_file(path: Path, port: int) -> None:
    """Write the port atomically, so a reader never sees a partial file."""
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(f"{port}\n", encoding="utf-8")
    tmp.replace(path)


async def serve(settings: ServerSettings, port: int, port_file: Path | None) -> None:
    """Serve on 127.0.0.1 until SIGTERM or SIGINT."""
    server = FakeChatServer(settings)
    runner = web.AppRunner(server.app(), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=1024)
    await site.start()
    bound = int(runner.addresses[0][1])
    if port_file is not None:
        _write_port_file(port_file, bound)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def _fault_list(raw: str) -> tuple[str, ...]:
    kinds = tuple(part.strip() for part in raw.split(",") if part.strip())
    unknown = [kind for kind in kinds if kind not in FAULT_KINDS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown fault kinds {unknown}; known: {FAULT_KINDS}")
    return kinds


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=0, help="Port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--ttft", type=float, default=0.25, help="Seconds to the first byte")
    parser.add_argument("--token-delay", type=float, default=0.0, help="Seconds between chunks")
    parser.add_argument("--tokens", type=int, default=20, help="Words per answer")
    parser.add_argument("--fault-rate", type=float, default=0.0, help="Fault probability")
    parser.add_argument("--faults", type=_fault_list, default=FAULT_KINDS, help="Fault kinds")
    parser.add_argument("--seed", type=int, default=1, help="Seed of the fault dice")
    parser.add_argument("--rpm-limit", type=int, default=0, help="Requests per 60 s (0: none)")
    parser.add_argument("--port-file", type=Path, default=None, help="Write the bound port here")
    args = parser.parse_args(argv)
    if not 0.0 <= args.fault_rate <= 1.0:
        parser.error("--fault-rate must be between 0 and 1")
    if args.tokens < 1:
        parser.error("--tokens must be at least 1")
    return args


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and serve."""
    args = parse_args(argv)
    settings = ServerSettings(
        ttft_s=args.ttft,
        token_delay_s=args.token_delay,
        tokens=args.tokens,
        fault_rate=args.fault_rate,
        faults=args.faults,
        seed=args.seed,
        rpm_limit=args.rpm_limit,
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(settings, args.port, args.port_file))


if __name__ == "__main__":
    main()
