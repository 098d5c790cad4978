"""Log-likelihood scoring beside lm-eval's, on the same rows and the same embedded model.

    python3 -m venv /tmp/lmeval-venv && /tmp/lmeval-venv/bin/pip install 'lm_eval[api]==0.4.13'
    .venv/bin/python benchmarks/lm_eval_compare.py --lm-eval /tmp/lmeval-venv/bin/lm_eval \\
        --write benchmarks/LM_EVAL.md

Runs the four shipped sets (``evals/loglikelihood``: ARC-Easy, PIQA, HellaSwag and Winogrande
rows in their own JSONL layouts) twice on SmolLM2-135M-Instruct:

- ``pytest evals/loglikelihood`` (this plugin; its own scoring server);
- lm-eval 0.4.x's ``gguf`` model (its llama.cpp client: echo + logprobs on ``/v1/completions``)
  on the same rows, through task files that mirror lm-eval's own arc_easy, piqa, hellaswag and
  winogrande tasks with the data files swapped, against an embedded scoring server started here.

and compares every option's log-likelihood, the options acc and acc_norm pick, and the
accuracies. ``--stock`` adds a third run: lm-eval against llama-cpp-python's own server
(``python -m llama_cpp.server --logits_all true``), whose echoed logprobs are off by one token.
lm-eval is not a dependency of the project: it runs from the interpreter given.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SETS = ROOT / "evals" / "loglikelihood"
TASKS = ("arc_easy", "piqa", "hellaswag", "winogrande")
#: The metrics lm-eval reports per task (Winogrande: acc only).
METRICS = {"arc_easy": ("acc", "acc_norm"), "piqa": ("acc", "acc_norm"),
           "hellaswag": ("acc", "acc_norm"), "winogrande": ("acc",)}  # fmt: skip

_TASK_FILES = {
    "arc_easy": """
task: llmb_arc_easy
dataset_path: json
dataset_kwargs: {{data_files: {{test: "{data}/arc_easy.jsonl"}}}}
output_type: multiple_choice
test_split: test
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{choices.label.index(answerKey)}}}}"
doc_to_choice: "{{{{choices.text}}}}"
metric_list: [{{metric: acc}}, {{metric: acc_norm}}]
""",
    "piqa": """
task: llmb_piqa
dataset_path: json
dataset_kwargs: {{data_files: {{test: "{data}/piqa.jsonl"}}}}
output_type: multiple_choice
test_split: test
doc_to_text: "Question: {{{{goal}}}}\\nAnswer:"
doc_to_target: label
doc_to_choice: "{{{{[sol1, sol2]}}}}"
metric_list: [{{metric: acc}}, {{metric: acc_norm}}]
""",
    "hellaswag": """
task: llmb_hellaswag
dataset_path: json
dataset_kwargs: {{data_files: {{test: "{data}/hellaswag.jsonl"}}}}
output_type: multiple_choice
test_split: test
process_docs: !function utils.hellaswag_docs
doc_to_text: "{{{{query}}}}"
doc_to_target: "{{{{label}}}}"
doc_to_choice: "choices"
metric_list: [{{metric: acc}}, {{metric: acc_norm}}]
""",
    "winogrande": """
task: llmb_winogrande
dataset_path: json
dataset_kwargs: {{data_files: {{test: "{data}/winogrande.jsonl"}}}}
output_type: multiple_choice
test_split: test
doc_to_text: !function utils.winogrande_gold
doc_to_target: !function utils.winogrande_rest
doc_to_choice: !function utils.winogrande_contexts
metric_list: [{{metric: acc}}]
""",
}

#: lm-eval's preprocessing of these tasks, restated (HellaSwag's query; Winogrande's partial
#: scoring: each option completes the text before the blank, the rest is the target).
_UTILS = """
import re


def _clean(text):
    text = text.strip().replace(" [title]", ". ")
    return re.sub("\\\\[.*?\\\\]", "", text).replace("  ", " ")


def hellaswag_docs(dataset):
    def one(doc):
        context = doc["ctx_a"] + " " + doc["ctx_b"].capitalize()
        return {"query": _clean(doc["activity_label"] + ": " + context),
                "choices": [_clean(ending) for ending in doc["endings"]]}
    return dataset.map(one)


def winogrande_gold(doc):
    return {"1": 0, "2": 1}[doc["answer"]]


def winogrande_rest(doc):
    return doc["sentence"][doc["sentence"].index("_") + 1:].strip()


def winogrande_contexts(doc):
    cut = doc["sentence"].index("_")
    return [doc["sentence"][:cut] + option for option in (doc["option1"], doc["option2"])]
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lm-eval", required=True, help="lm_eval executable (its own venv)")
    parser.add_argument("--write", type=Path, help="write the Markdown report here")
    parser.add_argument("--stock", action="store_true", help="also run lm-eval on the stock server")
    parser.add_argument(
        "--reference", type=Path, help="write lm-eval's per-row figures here (a test reads them)"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="llmb-lm-eval-"))
    ours = run_plugin(work / "plugin")
    theirs = run_lm_eval_on_scoring_server(Path(args.lm_eval), work)
    runs = {"lm-eval, embedded scoring server": theirs}
    if args.stock:
        runs["lm-eval, stock llama-cpp-python server"] = run_lm_eval_on_stock(
            Path(args.lm_eval), work
        )
    if args.reference:
        args.reference.write_text(json.dumps(reference(theirs), indent=1) + "\n")
    report = render(ours, runs)
    print(report)
    if args.write:
        args.write.write_text(report)
    return 0


# -- this plugin ------------------------------------------------------------------------------


def run_plugin(out: Path) -> dict[str, list[dict[str, Any]]]:
    """Every shipped row's record, per task, in file order."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(SETS),
               f"--results-dir={out}", "-o", "addopts="]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=False, capture_output=True, text=True)
    print(f"pytest: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    by_task: dict[str, list[dict[str, Any]]] = {task: [] for task in TASKS}
    for record in records:
        by_task[record["suite"]].append(record)
    for task, rows in by_task.items():
        rows.sort(key=lambda r: _row_order(task, r["case_id"]))
    return by_task


def _row_order(task: str, case_id: str) -> int:
    lines = (SETS / "data" / f"{task}.jsonl").read_text().splitlines()
    for index, line in enumerate(lines):
        row = json.loads(line)
        if case_id in (f"row-{index + 1}", str(row.get("id")), str(row.get("ind"))):
            return index
    raise KeyError(f"{task}: no row {case_id!r}")


# -- lm-eval ----------------------------------------------------------------------------------


def run_lm_eval_on_scoring_server(lm_eval: Path, work: Path) -> dict[str, Any]:
    from pytest_llmbench.models.providers.embedded import EmbeddedServer

    server = EmbeddedServer(work / "state", os.getpid(), scoring=True)
    try:
        info = server.ensure_started()
        return run_lm_eval(lm_eval, work / "lm-eval", f"http://127.0.0.1:{info.port}")
    finally:
        server.stop()


def run_lm_eval_on_stock(lm_eval: Path, work: Path) -> dict[str, Any]:
    from pytest_llmbench.models.providers.embedded import find_model_file

    port = 18765
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(find_model_file()),
               "--logits_all", "true", "--n_ctx", "4096", "--port", str(port),
               "--host", "127.0.0.1"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_ready(f"http://127.0.0.1:{port}/v1/models")
        return run_lm_eval(lm_eval, work / "lm-eval-stock", f"http://127.0.0.1:{port}")
    finally:
        process.terminate()
        process.wait(10)


def _wait_ready(url: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} not ready")


def run_lm_eval(lm_eval: Path, out: Path, base_url: str) -> dict[str, Any]:
    """lm-eval's per-task accuracies and per-row samples (each option's log-likelihood)."""
    tasks_dir = out / "tasks"
    tasks_dir.mkdir(parents=True)
    for task, text in _TASK_FILES.items():
        (tasks_dir / f"{task}.yaml").write_text(text.format(data=SETS / "data"))
    (tasks_dir / "utils.py").write_text(_UTILS)
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    command = [str(lm_eval), "--model", "gguf", "--model_args", f"base_url={base_url}",
               "--tasks", ",".join(f"llmb_{task}" for task in TASKS),
               "--include_path", str(tasks_dir), "--log_samples", "--output_path", str(out)]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    print(f"lm-eval: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"lm-eval failed:\n{done.stderr[-3000:]}")
    (results_file,) = out.rglob("results_*.json")
    results = json.loads(results_file.read_text())["results"]
    samples = {}
    for task in TASKS:
        (path,) = out.rglob(f"samples_llmb_{task}_*.jsonl")
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        samples[task] = sorted(rows, key=lambda r: r["doc_id"])
    return {"results": results, "samples": samples}


NOTES = """
## What differs from lm-eval, and why

- **Same figures through the same endpoint.** Both send `context + continuation` to
  `/v1/completions` with `echo`, `logprobs` and `max_tokens: 1` and sum the logprobs of the echoed
  tokens from the context's end; a token that straddles the boundary counts as context.
  lm-eval's Hugging Face backend tokenizes context and continuation apart instead, which can
  split a word differently at the boundary (lm-eval's own API backends share our behaviour).
  Trailing spaces of a context move to its continuation, as lm-eval does.
- **llama-cpp-python's server is wrong here, ours is not.** Its echoed logprobs (0.3.x) score
  each prompt token by the distribution *after* it when the model has no BOS token (SmolLM2), and
  drop the last prompt token; the second table shows what that does to lm-eval's figures. The
  embedded scoring server computes each token's logprob from the logits before it
  (`pytest_llmbench/models/providers/prompt_logprobs.py`); `tests/test_models_prompt_logprobs.py`
  checks that a generated token's logprob equals its logprob read back from an echo.
- **A completion that stops at once.** lm-eval drops the last echoed token as the generated one;
  llama-cpp-python returns none when the model's next token is end-of-text, so lm-eval would drop a
  continuation token. The scoring server then reports the end-of-text token, as OpenAI's API does.
- **HellaSwag.** lm-eval capitalises `ctx_b` and strips WikiHow's `[title]` markers; a prompt
  template does neither, so the shipped rows need neither (real HellaSwag rows: preprocess
  them, or expect small differences on those rows).
- **Winogrande.** Both options are scored on the same text after the blank, so `acc_norm`
  equals `acc`; lm-eval reports `acc` only.
"""


def reference(run: dict[str, Any]) -> dict[str, Any]:
    """lm-eval's figures per task and row: each option's log-likelihood and the metrics."""
    out: dict[str, Any] = {"lm_eval": "0.4.13, model gguf, the embedded scoring server"}
    for task in TASKS:
        out[task] = [
            {
                "doc_id": sample["doc_id"],
                "loglikelihoods": [float(resp[0][0]) for resp in sample["resps"]],
                **{metric: sample[metric] for metric in METRICS[task]},
            }
            for sample in run["samples"][task]
        ]
    return out


# -- the comparison ---------------------------------------------------------------------------


def render(ours: dict[str, list[dict[str, Any]]], runs: dict[str, dict[str, Any]]) -> str:
    lines = ["# Log-likelihood scoring beside lm-eval", "",
             "Same rows (`evals/loglikelihood/data`), same model (SmolLM2-135M-Instruct, Q4_1 "
             "GGUF, llama-cpp-python). Command: `.venv/bin/python benchmarks/lm_eval_compare.py "
             "--lm-eval /tmp/lmeval-venv/bin/lm_eval --stock --write benchmarks/LM_EVAL.md` "
             "(lm_eval 0.4.13 in its own venv).", ""]  # fmt: skip
    for name, run in runs.items():
        lines += [f"## pytest-llmbench vs {name}", "",
                  "| task | rows | metric | pytest-llmbench | lm-eval | rows where the pick "
                  "differs | max abs diff of an option's log-likelihood |",
                  "|---|---:|---|---:|---:|---:|---:|"]  # fmt: skip
        for task in TASKS:
            lines += _task_rows(task, ours[task], run)
        lines.append("")
    return "\n".join(lines) + NOTES


def _task_rows(task: str, records: list[dict[str, Any]], run: dict[str, Any]) -> list[str]:
    samples = run["samples"][task]
    result = run["results"][f"llmb_{task}"]
    if len(samples) != len(records):
        raise RuntimeError(f"{task}: {len(records)} records, {len(samples)} lm-eval samples")
    diffs = []
    for record, sample in zip(records, samples, strict=True):
        theirs = [float(resp[0][0]) for resp in sample["resps"]]
        diffs.append(max(abs(a - b) for a, b in zip(record["loglikelihood"]["logprobs"], theirs,
                                                    strict=True)))  # fmt: skip
    out = []
    for metric in METRICS[task]:
        mine = sum(r["metrics"][metric] for r in records) / len(records)
        theirs = float(result[f"{metric},none"])
        differ = sum(
            r["metrics"][metric] != s[metric] for r, s in zip(records, samples, strict=True)
        )
        out.append(f"| {task} | {len(records)} | {metric} | {mine:.4f} | {theirs:.4f} | "
                   f"{differ} | {max(diffs):.2e} |")  # fmt: skip
    return out


if __name__ == "__main__":
    raise SystemExit(main())
