"""CPU per model call inside litellm and the openai SDK, past start-up (issue 17's question).

    .venv/bin/python benchmarks/fakeserver.py --port 18999 --ttft 0.25 &
    .venv/bin/python benchmarks/percall.py --port 18999 --calls 400

Makes ``--calls`` calls of the plugin's own call path (``acomplete``: litellm's ``acompletion``)
at concurrency 32 against the fake server, non-streamed and streamed (20 chunks an answer), and
prints the process's CPU per call. No pytest, no records: what the provider layer alone costs.
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


async def _calls(port: int, n: int, stream: bool) -> tuple[float, float]:
    from pytest_llmbench.models.providers.completion import CallTarget
    from pytest_llmbench.models.providers.litellm_adapter import acomplete

    target = CallTarget("bench", "openai/bench", f"http://127.0.0.1:{port}/v1", "sk-bench",
                        cost_per_1k_input=0.0, cost_per_1k_output=0.0)  # fmt: skip
    gate = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        async with gate:
            messages = [{"role": "user", "content": f"q{i}"}]
            await acomplete(target, messages, {}, stream=stream, max_retries=0)

    await asyncio.gather(*(one(i) for i in range(20)))  # first-use work out of the clocks
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return (time.process_time() - cpu) / n * 1000, time.perf_counter() - wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--calls", type=int, default=400)
    args = parser.parse_args()
    from pytest_llmbench.models.providers.litellm_adapter import warmed_up

    warmed_up()
    for stream in (False, True):
        ms, wall = asyncio.run(_calls(args.port, args.calls, stream))
        kind = "streamed" if stream else "non-streamed"
        print(f"{kind}: {args.calls} calls in {wall:.2f} s, {ms:.2f} ms CPU per call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
