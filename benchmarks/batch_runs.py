"""A large run live and through a batch API: HTTP requests, cost and wall time, side by side.

    .venv/bin/python benchmarks/batch_runs.py [--items 2000] [--judged 200] [--keep DIR]

Runs one project twice against the tests' fake OpenAI-compatible server (tests/fakeserver.py, on
127.0.0.1, which also serves OpenAI's ``/files`` and ``/batches``): once live, once with
``--batch``. The model is ``openai/gpt-4o-mini`` at the fake's address, so both runs are priced
by litellm's price map (live 1.5e-7 / 6e-7 USD per input / output token; batch 7.5e-8 / 3e-7).
``--items`` plain cases are checked by ``icontains``; ``--judged`` more are judged by an
``llm-rubric`` whose judge is the same model (a second wave of batch calls: the judges read the
answers). Both runs use ``--cache=off`` so neither reads the other's answers.

For each run it prints the HTTP requests the fake received (chat calls live; uploads, creates,
polls and downloads batched), the calls answered in batches (each custom_id once), the cost the
records add up to against the cost computed by hand from each record's tokens and the map's
prices, the outcome counts and the wall time of the pytest process. The fake answers a batch
after ``--polls`` polls (``--batch-poll`` apart): a real batch takes minutes to hours, so the
batched wall time here measures our overhead, not a provider's queue.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from fakeserver import BatchScript, FakeLLMServer, Rule

KEY = "sk-batch-demo-not-a-real-key"
#: USD per token (litellm's map, gpt-4o-mini): live and batch
LIVE = (1.5e-7, 6e-7)
BATCH = (7.5e-8, 3e-7)


def _project(work: Path, base_url: str, items: int, judged: int) -> None:
    (work / "profiles").mkdir(parents=True)
    (work / "profiles" / "bench.yaml").write_text(f"""
models:
  mini:
    model: openai/gpt-4o-mini
    api_base: {base_url}
    api_key_env: BATCH_DEMO_KEY
    params: {{temperature: 0}}
    batch: true
""")
    plain = "\n".join(
        f"  - {{id: q{i:05d}, prompt: 'Question {i}: say ok.', assert: [{{type: icontains, value: ok}}]}}"
        for i in range(items)
    )
    (work / "plain.eval.yaml").write_text(f"cases:\n{plain}\n")
    if judged:
        rubric = "\n".join(
            f"  - {{id: j{i:05d}, prompt: 'Essay {i}: say ok.', "
            "assert: [{type: llm-rubric, value: RUBRIC the answer says ok, judges: [mini]}]}"
            for i in range(judged)
        )
        (work / "judged.eval.yaml").write_text(f"cases:\n{rubric}\n")


def _run(work: Path, server: FakeLLMServer, label: str, extra: list[str]) -> dict[str, Any]:
    server.requests.clear()
    server.uploads = server.creates = server.polls = server.cancels = 0
    server.lines_received.clear()
    out = work / f"out-{label}"
    started = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         "--models=mini", "--cache=off", f"--results-dir={out}", *extra, "."],
        cwd=work, env={**os.environ, "BATCH_DEMO_KEY": KEY}, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    wall = time.perf_counter() - started
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    paths = Counter(request.path.split("?")[0].rsplit("/", 1)[0] for request in server.requests)
    rates = BATCH if "--batch" in extra else LIVE
    by_hand = 0.0
    for record in records:
        by_hand += (record["input_tokens"] or 0) * rates[0] + (
            record["output_tokens"] or 0
        ) * rates[1]
        for judge in record.get("judges") or ():
            tokens = (judge.get("input_tokens") or 0, judge.get("output_tokens") or 0)
            by_hand += tokens[0] * rates[0] + tokens[1] * rates[1]
    leaked = [str(p) for p in out.rglob("*") if p.is_file() and KEY in p.read_text(errors="ignore")]
    return {
        "label": label,
        "exit": run.returncode,
        "tail": run.stdout.strip().splitlines()[-1:] if run.stdout else [],
        "wall_s": wall,
        "http_requests": len(server.requests),
        "by_path": dict(paths),
        "uploads": server.uploads,
        "creates": server.creates,
        "polls": server.polls,
        "batched_lines": sum(server.lines_received.values()),
        "lines_sent_twice": sum(1 for n in server.lines_received.values() if n > 1),
        "items": len(records),
        "outcomes": dict(Counter(record["outcome"] for record in records)),
        "batched_items": sum(1 for record in records if record.get("batched")),
        "cost_records": sum(_cost(record) for record in records),
        "cost_by_hand": by_hand,
        "key_in_results": leaked,
    }


def _cost(record: dict[str, Any]) -> float:
    """The item's cost: its answer's and its judges'."""
    return float(record.get("cost_usd") or 0.0) + float(record.get("judge_cost_usd") or 0.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--judged", type=int, default=200)
    parser.add_argument("--polls", type=int, default=3, help="polls before a batch ends")
    parser.add_argument("--batch-poll", default="0.5", help="seconds between first polls")
    parser.add_argument("--keep", type=Path, help="run in this (new) folder and keep it")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="llmbench-batch-"))
    rules = [
        Rule(match_any="RUBRIC", reply='{"score": 1, "reason": "it says ok"}'),
        Rule(reply="ok"),
    ]
    with FakeLLMServer(rules, batch=BatchScript(polls=args.polls)) as server:
        _project(work, server.base_url, args.items, args.judged)
        live = _run(work, server, "live", [])
        batched = _run(work, server, "batch", ["--batch", f"--batch-poll={args.batch_poll}"])
    failed = False
    for result in (live, batched):
        print(json.dumps(result, indent=1, default=str))
        failed |= result["exit"] != 0 or bool(result["key_in_results"])
        failed |= abs(result["cost_records"] - result["cost_by_hand"]) > 1e-9
    failed |= (
        batched["lines_sent_twice"] > 0 or batched["batched_items"] != args.items + args.judged
    )
    print(
        f"\nlive: {live['http_requests']} requests, {live['cost_records']:.6f} USD, "
        f"{live['wall_s']:.1f} s; batch: {batched['http_requests']} requests "
        f"({batched['batched_lines']} calls in {batched['creates']} batches), "
        f"{batched['cost_records']:.6f} USD, {batched['wall_s']:.1f} s; "
        f"cost ratio batch/live {batched['cost_records'] / max(live['cost_records'], 1e-12):.3f}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
