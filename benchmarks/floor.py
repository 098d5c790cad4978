"""The raw floor: N chat completions with asyncio and aiohttp alone, C at a time.

    .venv/bin/python benchmarks/floor.py --api-base http://127.0.0.1:PORT/v1 --n 400 \
        --concurrency 32 [--stream] --out /tmp/floor.jsonl

What a hand-written client needs for the work a pytest-llmbench run does against the fake
server: the same capital-city prompts (``capital_prompt``), one request each, one JSON line
per answer in ``--out``, then exit. No retries, no scoring, no report: the "raw aiohttp" row
of the peer-comparable scenario, and the bound the plugin is measured against. ``--stream``
asks for SSE chunks with ``stream_options.include_usage``. Exit status 1 when any call failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import IO, Any

import aiohttp

#: Countries of the capital-city prompts, cycled: case ``i`` asks about ``COUNTRIES[i % len]``.
COUNTRIES = (
    "France", "Japan", "Italy", "Germany", "Egypt", "Canada", "Australia", "Brazil", "Kenya",
    "Norway", "Peru", "India", "Spain", "Chile", "Vietnam", "Poland", "Mexico", "Turkey",
    "Portugal", "Argentina",
)  # fmt: skip
DEFAULT_SYSTEM = "You are a geography quiz assistant. Answer with the name only."


def capital_prompt(i: int) -> str:
    """The user prompt of case ``i`` (unique per case, so no two cases share an answer)."""
    return f"Case {i}: what is the capital of {COUNTRIES[i % len(COUNTRIES)]}?"


def _payload(model: str, system: str, i: int, stream: bool) -> dict[str, Any]:
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": capital_prompt(i)},
    ]
    payload: dict[str, Any] = {"model": model, "messages": messages}
    if stream:
        payload.update(stream=True, stream_options={"include_usage": True})
    return payload


async def _read_stream(resp: aiohttp.ClientResponse, started: float) -> dict[str, Any]:
    """Join an SSE answer: its text, the usage chunk and the time to the first content."""
    parts: list[str] = []
    usage: dict[str, Any] = {}
    ttft: float | None = None
    async for raw in resp.content:
        line = raw.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        for choice in chunk.get("choices") or ():
            text = (choice.get("delta") or {}).get("content")
            if text:
                ttft = time.perf_counter() - started if ttft is None else ttft
                parts.append(text)
        usage = chunk.get("usage") or usage
    return {"answer": "".join(parts), "usage": usage, "ttft_s": ttft}


async def _read_whole(resp: aiohttp.ClientResponse) -> dict[str, Any]:
    body = await resp.json()
    return {"answer": body["choices"][0]["message"]["content"], "usage": body.get("usage", {})}


async def _call(
    session: aiohttp.ClientSession, url: str, payload: dict[str, Any]
) -> dict[str, Any]:
    started = time.perf_counter()
    async with session.post(url, json=payload) as resp:
        resp.raise_for_status()
        if payload.get("stream"):
            got = await _read_stream(resp, started)
        else:
            got = await _read_whole(resp)
    return {**got, "latency_s": time.perf_counter() - started}


async def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Send ``args.n`` requests, ``args.concurrency`` in flight; the number that failed."""
    url = args.api_base.rstrip("/") + "/chat/completions"
    headers = {"Authorization": f"Bearer {args.key}"}
    gate = asyncio.Semaphore(args.concurrency)
    failed = 0
    connector = aiohttp.TCPConnector(limit=args.concurrency)
    timeout = aiohttp.ClientTimeout(total=args.timeout)
    async with aiohttp.ClientSession(connector=connector, headers=headers, timeout=timeout) as s:

        async def one(i: int) -> None:
            nonlocal failed
            record: dict[str, Any] = {"id": f"c{i}"}
            async with gate:
                try:
                    got = await _call(s, url, _payload(args.model, args.system, i, args.stream))
                    record.update(outcome="answered", **got)
                except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, KeyError) as exc:
                    failed += 1
                    record.update(outcome="error", error=f"{type(exc).__name__}: {exc}")
            out.write(json.dumps(record) + "\n")

        await asyncio.gather(*(one(i) for i in range(args.n)))
    return failed


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--api-base", required=True, help="OpenAI-compatible base URL (…/v1)")
    parser.add_argument("--n", type=int, default=400, help="Requests (cases) to send")
    parser.add_argument("--concurrency", type=int, default=32, help="Requests in flight")
    parser.add_argument("--stream", action="store_true", help="SSE answers, usage included")
    parser.add_argument("--out", type=Path, required=True, help="One JSON line per answer")
    parser.add_argument("--model", default="bench", help="The request's model name")
    parser.add_argument("--system", default=DEFAULT_SYSTEM, help="The system prompt")
    parser.add_argument("--key", default="sk-bench", help="Bearer key")
    parser.add_argument("--timeout", type=float, default=60.0, help="Seconds per request")
    args = parser.parse_args(argv)
    if args.n < 0 or args.concurrency < 1:
        parser.error("--n must be >= 0 and --concurrency >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run and write the results file; exit status 1 when any call failed."""
    args = parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as out:
        failed = asyncio.run(run(args, out))
    if failed:
        print(f"floor: {failed} of {args.n} calls failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
