"""A reasoning model's records, shape by shape, and the leaderboard with its reasoning tokens.

    .venv/bin/python benchmarks/reasoning_records.py [--keep DIR]

Runs two eval files against the tests' fake OpenAI-compatible server (tests/fakeserver.py, on
127.0.0.1), as one profile, ``thinker``, priced per part (cached input and reasoning at their own
rates), then prints each record's reasoning fields, ``leaderboard.csv`` and ``by_effort.csv``:

- thinking given apart (``reasoning_content``), and inline in ``<think>`` tags;
- a reply cut by ``max_tokens`` inside its thinking (skipped as unchecked, not failed);
- a prompt read from the provider's cache (``cached_tokens``);
- the effort axis: ``effort: [low, high]``, each answered as the request's ``reasoning_effort`` asks.

It checks, last, that the profile's API key is in no file of the results folder.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from fakeserver import FakeLLMServer, Rule

THOUGHT = "The user asks for the capital of France. France's capital is Paris."
KEY = "sk-demo-not-a-real-key"
SHAPES = """
cases:
  - {id: apart, prompt: Capital of France?,
     assert: [{type: equals, value: Paris.}, {type: finish-reason, value: stop}]}
  - {id: inline-tags, prompt: Capital of Spain?, assert: [{type: equals, value: Madrid.}]}
  - {id: cut-off, prompt: Capital of Italy?, model_params: {max_tokens: 6},
     assert: [{type: icontains, value: rome}]}
  - {id: cached, prompt: Capital of Japan?,
     assert: [{type: icontains, value: tokyo}, {type: tokens, which: cached, max: 100}]}
"""
EFFORT = """
effort: [low, high]
cases:
  - {id: peru, prompt: Capital of Peru?,
     assert: [{type: icontains, value: lima}, {type: tokens, which: reasoning, max: 40}]}
"""
FIELDS = (
    "case_id", "model", "effort", "outcome", "error_kind", "response", "reasoning",
    "finish_reason", "input_tokens", "output_tokens", "reasoning_tokens",
    "reasoning_tokens_estimated", "cached_input_tokens", "cost_usd",
)  # fmt: skip
COLUMNS = (
    "rank", "model", "effort", "n_items", "pass_rate", "score_mean", "output_tokens_total",
    "reasoning_tokens_total", "reasoning_tokens_mean", "cached_input_tokens_total",
    "cost_usd_total", "cost_usd_mean",
)  # fmt: skip


def _rules(server: FakeLLMServer) -> None:
    long_thought = "Peru, in South America: its capital is Lima. " * 4
    for rule in (
        Rule(match="France", reply="Paris.", reasoning=THOUGHT),
        Rule(match="Spain", reply="<think>Spain: Madrid, no doubt.</think>Madrid."),
        Rule(match="Italy", reply="<think>Italy. The capital is Rome, not Milan, so"),
        Rule(match="Japan", reply="Tokyo.", reasoning="Japan: Tokyo.", reasoning_field="reasoning",
             cached_tokens=2),
        Rule(match="Peru", body={"reasoning_effort": "high"}, reply="Lima.", reasoning=long_thought),
        Rule(match="Peru", body={"reasoning_effort": "low"}, reply="Lima.", reasoning="Lima."),
    ):  # fmt: skip
        server.add_rule(rule)


def _project(work: Path, base_url: str) -> None:
    (work / "profiles").mkdir(parents=True)
    (work / "profiles" / "demo.yaml").write_text(f"""
models:
  thinker:
    model: openai/fake-model
    api_base: {base_url}
    api_key_env: DEMO_KEY
    params: {{temperature: 0}}
    effort: reasoning_effort
    cost_per_1k: {{input: 0.001, output: 0.004, cached_input: 0.00025, reasoning: 0.004}}
""")
    (work / "shapes.eval.yaml").write_text(SHAPES)
    (work / "effort.eval.yaml").write_text(EFFORT)


def _table(path: Path) -> None:
    rows = list(csv.DictReader(path.open()))
    columns = [name for name in COLUMNS if rows and name in rows[0]]
    print(f"\n{path.name}:\n" + ",".join(columns))
    for row in rows:
        print(",".join(row[name] for name in columns))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="run in this (new) folder and keep it")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="llmbench-reasoning-"))
    with FakeLLMServer() as server:
        _rules(server)
        _project(work, server.base_url)
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
             "--models=thinker", "--results-dir=out", "."],
            cwd=work, env={**os.environ, "DEMO_KEY": KEY}, capture_output=True, text=True,
            check=False,
        )  # fmt: skip
    print(run.stdout[-1500:])
    out = work / "out"
    for line in (out / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        print(json.dumps({name: record[name] for name in FIELDS}))
    _table(out / "leaderboard.csv")
    _table(out / "by_effort.csv")
    leaked = [p for p in out.rglob("*") if p.is_file() and KEY in p.read_text(errors="ignore")]
    print(f"\nthe API key in a results file: {[str(p) for p in leaked] or 'none'}")
    return 1 if leaked or run.returncode not in (0,) else 0


if __name__ == "__main__":
    raise SystemExit(main())
