"""CPU per model call of the provider layer, past start-up, for each client (issues 17, 24).

    .venv/bin/python benchmarks/fakeserver.py --port 18999 --ttft 0.25 &
    .venv/bin/python benchmarks/percall.py --port 18999 --calls 400

Makes ``--calls`` calls of the plugin's own call path (``calls.acomplete``) at concurrency 32
against the fake server, through the lean OpenAI-compatible client and through litellm
(``client="litellm"``), non-streamed and streamed (20 chunks an answer), and prints the
process's CPU per call. No pytest, no records: what the provider layer alone costs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


async def _calls(port: int, n: int, stream: bool, client: str) -> tuple[float, float]:
    from pytest_llmbench.models.providers.calls import acomplete
    from pytest_llmbench.models.providers.completion import CallTarget
    from pytest_llmbench.models.providers.openai_compatible import close_sessions

    target = CallTarget("bench", "openai/bench", f"http://127.0.0.1:{port}/v1", "sk-bench",
                        cost_per_1k_input=0.0, cost_per_1k_output=0.0, client=client)  # fmt: skip
    gate = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        async with gate:
            messages = [{"role": "user", "content": f"q{i}"}]
            await acomplete(target, messages, {}, stream=stream, max_retries=0)

    await asyncio.gather(*(one(i) for i in range(20)))  # first-use work out of the clocks
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    spent = (time.process_time() - cpu) / n * 1000, time.perf_counter() - wall
    await close_sessions()
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--client", choices=("auto", "litellm", "both"), default="both")
    args = parser.parse_args()
    clients = ("auto", "litellm") if args.client == "both" else (args.client,)
    for client in clients:
        if client == "litellm":
            from pytest_llmbench.models.providers.litellm_client import warmed_up

            warmed_up()
        for stream in (False, True):
            ms, wall = asyncio.run(_calls(args.port, args.calls, stream, client))
            kind = "streamed" if stream else "non-streamed"
            path = "lean" if client == "auto" else client
            print(f"{path}, {kind}: {args.calls} calls in {wall:.2f} s, {ms:.2f} ms CPU per call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
