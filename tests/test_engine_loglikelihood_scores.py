"""Multiple choice scored by log-likelihood, end to end against the fake server's completions
endpoint: one echo call per option, acc and acc_norm, records, metrics, errors, cache, xdist."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import FAKE_KEY, REPO_ROOT, Bench

from pytest_llmbench.engine.loglikelihood_scores import OptionScores

#: Three options; the fake server scores each word of a continuation (default -1.0 a word).
CAPITALS = """
loglikelihood: true
prompt: "Question: {{question}}\\nAnswer:"
cases:
  - id: france
    vars: {question: What is the capital of France?}
    choices: [Lyon, Paris, Marseille town]
    answer: B
"""


def completion_bodies(bench: Bench) -> list[dict[str, object]]:
    return [r.body for r in bench.server.requests if r.path.rstrip("/").endswith("/completions")
            and not r.path.rstrip("/").endswith("/chat/completions")]  # fmt: skip


def test_each_option_is_scored_after_the_prompt_and_the_likeliest_is_the_answer(
    bench: Bench,
) -> None:
    words = {"Lyon": -2.5, "Paris": -0.5, "Marseille": -1.5, "town": -0.5}
    bench.server.word_logprobs.update(words)
    bench.eval_file("capitals", CAPITALS)
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=1)
    bodies = completion_bodies(bench)
    context = "Question: What is the capital of France?\nAnswer:"
    assert [b["prompt"] for b in bodies] == [
        f"{context} Lyon",
        f"{context} Paris",
        f"{context} Marseille town",
    ]
    assert all(b["echo"] is True and b["logprobs"] == 1 and b["max_tokens"] == 1 for b in bodies)
    assert not bench.server.chat_requests()  # nothing is generated
    (record,) = bench.records()
    scores = record["loglikelihood"]
    # Only the continuation's tokens count: " Marseille" and " town", not the prompt's.
    assert scores["logprobs"] == pytest.approx([-2.5, -0.5, -2.0])
    assert scores["tokens"] == [1, 1, 2]
    assert scores["lengths"] == [4, 5, 14]
    assert (scores["chosen"], scores["chosen_norm"], scores["answer"]) == ("B", "B", "B")
    assert record["metrics"] == {"acc": 1.0, "acc_norm": 1.0}
    # The answer is the chosen option's letter, read by the case's `choice` assertion.
    assert record["response"] == "B"
    assert record["choice"] == {"chosen": "B", "answer": "B", "correct": True}
    assert record["prompt"] == context  # not the lettered options a generated answer gets


def test_acc_and_acc_norm_disagree_and_verdict_picks_which_decides(bench: Bench) -> None:
    # Per character: Lyon -2.0/4 = -0.5, Paris -1.5/5 = -0.3, Marseille town -3.0/14 = -0.21.
    # Raw: Paris (-1.5) wins acc; per character Marseille town wins acc_norm.
    bench.server.word_logprobs.update(
        {"Lyon": -2.0, "Paris": -1.5, "Marseille": -2.0, "town": -1.0}
    )
    bench.eval_file("raw", CAPITALS)
    bench.eval_file(
        "norm", CAPITALS.replace("loglikelihood: true", "loglikelihood: {verdict: acc_norm}")
    )
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=1, failed=1)
    by_suite = {r["suite"]: r for r in bench.records()}
    for record in by_suite.values():
        assert record["loglikelihood"]["chosen"] == "B"
        assert record["loglikelihood"]["chosen_norm"] == "C"
        assert record["metrics"] == {"acc": 1.0, "acc_norm": 0.0}
    assert (by_suite["raw"]["outcome"], by_suite["raw"]["response"]) == ("passed", "B")
    assert (by_suite["norm"]["outcome"], by_suite["norm"]["response"]) == ("failed", "C")
    assert by_suite["norm"]["choice"] == {"chosen": "C", "answer": "B", "correct": False}
    # acc and acc_norm reach the per-model aggregates beside mc_accuracy.
    (row,) = list(csv.DictReader(bench.out("leaderboard.csv").open()))
    assert float(row["metric_acc_mean"]) == 1.0
    assert float(row["metric_acc_norm_mean"]) == 0.0


def test_usage_and_cost_are_the_sum_of_the_option_calls(bench: Bench) -> None:
    bench.eval_file("capitals", CAPITALS)
    bench.run("--models=fake").assert_outcomes(failed=1)
    (record,) = bench.records()
    prompts = [b["prompt"] for b in completion_bodies(bench)]
    words = sum(len(p.split()) for p in prompts)
    assert record["input_tokens"] == words
    assert record["output_tokens"] == 3
    assert record["cost_usd"] == pytest.approx((words * 0.001 + 3 * 0.002) / 1000)


def test_a_chat_only_model_is_an_unsupported_error_once_asked(bench: Bench) -> None:
    bench.server.completions = False
    more = "".join(CAPITALS.split("cases:\n")[1].replace("france", f"again{n}") for n in range(4))
    bench.eval_file("capitals", CAPITALS + more)
    result = bench.run("--models=fake", "--concurrency=4")
    result.assert_outcomes(errors=5)
    records = bench.records()
    assert [r["error_kind"] for r in records] == ["unsupported"] * 5
    assert (
        "fake cannot score log-likelihoods: the endpoint refused it (HTTP 404"
        in records[0]["error"]
    )
    assert "echoes the prompt with its log-probabilities" in records[0]["error"]
    assert all(r["error"] == records[0]["error"] for r in records)
    # Found out once: the other items, started together, made no call.
    assert len(completion_bodies(bench)) == 1
    assert FAKE_KEY not in result.stdout.str()


def test_an_endpoint_that_gives_no_logprobs_says_so(bench: Bench) -> None:
    bench.server.completion_logprobs = False
    bench.eval_file("capitals", CAPITALS)
    bench.run("--models=fake").assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "unsupported"
    assert "the answer carries no log-probabilities" in record["error"]


def test_a_cached_rerun_makes_no_call_and_scores_the_same(bench: Bench) -> None:
    bench.server.word_logprobs.update({"Paris": -0.1})
    bench.eval_file("capitals", CAPITALS)
    bench.run("--models=fake", "--cache=use").assert_outcomes(passed=1)
    first = bench.records()[0]["loglikelihood"]
    calls = len(completion_bodies(bench))
    bench.run("--models=fake", "--cache=use").assert_outcomes(passed=1)
    (again,) = bench.records()
    assert len(completion_bodies(bench)) == calls == 3
    assert again["loglikelihood"] == first and again["cached"] is True


def test_xdist_gives_the_same_scores(bench: Bench) -> None:
    bench.server.word_logprobs.update({"Paris": -0.1, "water": -0.2})
    more = """  - id: fish
    vars: {question: Where do fish live?}
    choices: [air, water]
    answer: 1
"""
    bench.eval_file("capitals", CAPITALS + more)
    bench.run_subprocess("--models=fake", "-n", "0").assert_outcomes(passed=2)
    serial = {r["case_id"]: r["loglikelihood"] for r in bench.records()}
    bench.run_subprocess("--models=fake", "-n", "2").assert_outcomes(passed=2)
    parallel = {r["case_id"]: r["loglikelihood"] for r in bench.records()}
    assert parallel == serial and len(serial) == 2


def test_ties_go_to_the_first_option_as_argmax_does() -> None:
    scores = OptionScores(
        logprobs=(-1.0, -1.0, -2.0), tokens=(1, 1, 1), lengths=(2, 2, 1), answer=1
    )
    assert (scores.chosen, scores.chosen_norm) == (0, 0)
    assert scores.metrics() == {"acc": 0.0, "acc_norm": 0.0}
    assert json.loads(json.dumps(scores.to_record()))["chosen"] == "A"


# -- the shipped sets on the embedded model, beside lm-eval's recorded figures ------------------


@pytest.mark.slow
def test_the_shipped_sets_score_as_lm_eval_does(tmp_path: Path) -> None:
    """ARC-Easy, PIQA, HellaSwag and Winogrande rows (``evals/loglikelihood``) on the embedded
    model, under xdist, beside lm-eval 0.4.13's figures on the same rows
    (``benchmarks/lm_eval_reference.json``, written by ``benchmarks/lm_eval_compare.py``)."""
    reference = json.loads((REPO_ROOT / "benchmarks" / "lm_eval_reference.json").read_text())
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2",
         "evals/loglikelihood", f"--results-dir={tmp_path}", "-o", "addopts="],
        cwd=REPO_ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    records = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(records) == 60, done.stdout[-2000:]
    assert not [r for r in records if r["outcome"] == "error"], done.stdout[-2000:]
    for record in records:
        task = record["suite"]
        expected = reference[task][_row_index(task, record["case_id"])]
        ours = record["loglikelihood"]["logprobs"]
        # Recorded on another CPU: llama.cpp's kernels for other SIMD sets (AVX2, AVX-512)
        # round differently, up to 2.5% of a sum here (an off-by-one token is 10x and more).
        assert ours == pytest.approx(expected["loglikelihoods"], rel=0.05, abs=0.05), record[
            "case_id"
        ]
        for metric in ("acc", "acc_norm") if task != "winogrande" else ("acc",):
            if _margin(expected["loglikelihoods"], record, metric) > _NEAR_TIE:
                assert record["metrics"][metric] == expected[metric], (task, record["case_id"])


#: A pick ahead of the runner-up by less than this may flip on another CPU's kernels.
_NEAR_TIE = 0.1


def _row_index(task: str, case_id: str) -> int:
    lines = (REPO_ROOT / "evals" / "loglikelihood" / "data" / f"{task}.jsonl").read_text()
    for index, line in enumerate(lines.splitlines()):
        row = json.loads(line)
        if case_id in (f"row-{index + 1}", str(row.get("id")), str(row.get("ind"))):
            return index
    raise KeyError(case_id)


def _margin(values: list[float], record: dict[str, Any], metric: str) -> float:
    """How far lm-eval's pick is ahead of the runner-up (a near tie may flip on another CPU)."""
    lengths = record["loglikelihood"]["lengths"]
    scores = values if metric == "acc" else [v / n for v, n in zip(values, lengths, strict=True)]
    top, second = sorted(scores, reverse=True)[:2]
    return top - second
