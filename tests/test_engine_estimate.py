"""--estimate-cost with --collect-only, and the budget/cache lines of the summary."""

from __future__ import annotations

import json
import re

import pytest
from conftest import Bench, Rule

from pytest_llmbench.engine.estimate import ModelEstimate, format_estimates
from pytest_llmbench.results.gates import BUDGET_EXIT_CODE

CASES = """
model_params: {max_tokens: 16}
cases:
  - {id: a, prompt: "What is the capital of France?", expected: ok}
  - {id: b, prompt: "Name three primary colours, please.", expected_output_tokens: 40, expected: ok}
"""


def _rows(result: pytest.RunResult) -> dict[str, list[str]]:
    lines = result.stdout.str().split("llmbench cost estimate", 1)[1].splitlines()[2:]
    return {line.split()[0]: line.split() for line in lines if line.startswith(("fake", "openai/"))}


def test_estimate_uses_prompt_tokens_output_budget_and_profile_prices(bench: Bench) -> None:
    bench.eval_file("est", CASES)
    result = bench.run(
        "--collect-only", "-q", "--estimate-cost", "--models=fake,fake2", "--repeat=3"
    )
    assert result.ret == 0
    rows = _rows(result)
    assert set(rows) == {"fake", "fake2"}
    for name, (price_in, price_out) in {"fake": (0.001, 0.002), "fake2": (0.01, 0.02)}.items():
        _, items, tokens_in, tokens_out, cost, batch = rows[name]
        assert int(items) == 6
        assert int(tokens_out) == 3 * (16 + 40)  # max_tokens, and expected_output_tokens wins
        assert int(tokens_in) > 6 * 8  # two short prompts, three times
        expected = (int(tokens_in) * price_in + int(tokens_out) * price_out) / 1000
        assert float(cost) == pytest.approx(expected, abs=1e-4)
        # the profiles give no batch price: litellm's rule, half the live price, marked so
        assert batch.startswith("≈")
        assert float(batch[1:]) == pytest.approx(expected / 2, abs=1e-4)
    total = re.search(r"total: ([0-9.]+) USD live, ([0-9.]+) USD batch", result.stdout.str())
    assert total and float(total.group(1)) == pytest.approx(
        float(rows["fake"][4]) + float(rows["fake2"][4]), abs=2e-4
    )
    assert float(total.group(2)) == pytest.approx(float(total.group(1)) / 2, abs=2e-4)
    result.stdout.fnmatch_lines(["≈ half (litellm's rule: no batch price known): fake, fake2"])
    assert bench.server.chat_requests() == []
    assert not bench.out("results.jsonl").exists()


def test_a_loglikelihood_item_is_estimated_as_a_call_per_option(bench: Bench) -> None:
    from pytest_llmbench.models.providers.tokens import prompt_tokens as count_prompt_tokens

    bench.eval_file(
        "mc",
        """
loglikelihood: true
prompt: "Question: Capital of France?\nAnswer:"
cases:
  - {id: a, choices: [Lyon, Paris, Nice], answer: B}
""",
    )
    result = bench.run("--collect-only", "-q", "--estimate-cost", "--models=fake")
    _, items, tokens_in, tokens_out, live, batch = _rows(result)["fake"]
    assert live == batch  # a log-likelihood item's calls stay live under --batch
    result.stdout.fnmatch_lines(["batch $: 1 items priced live (*log-likelihood items*"])
    texts = [f"Question: Capital of France?\nAnswer: {city}" for city in ("Lyon", "Paris", "Nice")]
    counted = sum(
        count_prompt_tokens("openai/fake-model", [{"role": "user", "content": text}])
        for text in texts
    )
    assert (int(items), int(tokens_in), int(tokens_out)) == (1, counted, 3)


def test_estimate_says_unknown_without_a_price(bench: Bench) -> None:
    bench.eval_file("est", CASES)
    result = bench.run("--collect-only", "--estimate-cost", "--models=openai/no-such-model-xyz")
    rows = _rows(result)
    assert rows["openai/no-such-model-xyz"][-2:] == ["unknown", "unknown"]


def test_estimate_prices_a_batch_at_the_maps_batch_keys(bench: Bench) -> None:
    bench.eval_file("est", CASES)
    result = bench.run("--collect-only", "--estimate-cost", "--models=openai/gpt-4o-mini")
    _, items, tokens_in, tokens_out, live, batch = _rows(result)["openai/gpt-4o-mini"]
    assert int(items) == 2
    live_usd = int(tokens_in) * 1.5e-7 + int(tokens_out) * 6e-7
    assert float(live) == pytest.approx(live_usd, abs=1e-4)
    # the map's input_cost_per_token_batches and output_cost_per_token_batches, not marked ≈
    assert float(batch) == pytest.approx(int(tokens_in) * 7.5e-8 + int(tokens_out) * 3e-7, abs=1e-4)
    assert "litellm's rule" not in result.stdout.str()


def test_the_estimate_table_shows_live_and_batch_side_by_side() -> None:
    rows = [
        # gpt-4o-mini: 1000 in + 200 out, live 0.00027, batch 0.000135, 10 items
        ModelEstimate("gpt-4o-mini", 10, 10_000, 2_000, 0.0027, 0.00135),
        ModelEstimate("azure/gpt-4o-mini", 10, 10_000, 2_000, 0.0027, 0.00135, True, 2),
        ModelEstimate("mystery", 1, 5, 5, None, None),
    ]
    lines = format_estimates(rows)
    assert lines[0].split() == "model items input tok output tok live $ batch $".split()
    assert lines[1].split() == ["gpt-4o-mini", "10", "10000", "2000", "0.0027", "0.0014"]
    assert lines[2].split()[-2:] == ["0.0027", "≈0.0014"]
    assert lines[3].split()[-2:] == ["unknown", "unknown"]
    assert lines[4:] == [
        "total: 0.0054 USD live, 0.0027 USD batch (models with a known price)",
        "≈ half (litellm's rule: no batch price known): azure/gpt-4o-mini",
        "batch $: 2 items priced live (conversations, agents, solvers and log-likelihood "
        "items are not batched)",
    ]


def test_summary_reports_cached_answers(
    bench: Bench, tmp_path_factory: pytest.TempPathFactory
) -> None:
    cache = tmp_path_factory.mktemp("cache")
    bench.server.add_rule(Rule(reply="Paris"))
    bench.eval_file("est", CASES)
    bench.run("--models=fake", f"--cache-dir={cache}", "--cache=use")
    again = bench.run("--models=fake", f"--cache-dir={cache}", "--cache=use")
    again.stdout.fnmatch_lines(["*llmbench: 2 answers from the response cache (no call made)*"])
    assert len(bench.server.chat_requests()) == 2


def test_summary_reports_items_skipped_by_the_budget(bench: Bench) -> None:
    bench.pricey_profile()
    bench.eval_file("est", CASES)
    result = bench.run("--models=pricey", "--max-cost=0.5", "--concurrency=1")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        ["*llmbench: --max-cost 0.5 USD reached: 1 items did not run (exit status 6)*"]
    )
    # A run the budget stopped is incomplete: its own exit status, not 0, and run.json says so.
    assert result.ret == BUDGET_EXIT_CODE == 6
    run = json.loads(bench.out("run.json").read_text())
    assert run["max_cost"] == {"limit_usd": 0.5, "reached": True, "items_not_run": 1}
    assert run["exitstatus"] == 6
    skipped = [r for r in bench.records() if r["outcome"] == "skipped"]
    assert skipped and skipped[0]["error_kind"] == "budget"
    assert "--max-cost" in skipped[0]["error"]
    assert len(bench.server.chat_requests()) == 1
