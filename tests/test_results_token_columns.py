"""Reasoning and cached input tokens from the record to the aggregates, the leaderboard and the
report (results/aggregation.py owns the token columns); the ``tokens`` assertion's ``which:
reasoning | cached``; a run's cost with them priced apart, the same with both clients and under
``-n 2``, and ``--max-cost-per-item`` on it."""

from __future__ import annotations

import csv
from typing import Any

import pandas as pd
import pytest
from conftest import FAKE_KEY_ENV, Bench, Rule

from pytest_llmbench import results as lb
from pytest_llmbench.results.record import FIELDS, build_record
from pytest_llmbench.results_folder import upgrade_record
from pytest_llmbench.scoring.assertions import AssertionContext, evaluate, parse_assertion
from pytest_llmbench.scoring.base import CallMeasures

THOUGHT = "The user asks for the capital of France. That is Paris, so I answer Paris."


def rec(**values: Any) -> dict[str, Any]:
    values.setdefault("suite", "s")
    values.setdefault("repeat", 0)
    values.setdefault("outcome", "passed")
    values.setdefault("nodeid", f"s::{values['case_id']}[{values['model']}]")
    return build_record(**values)


def test_the_token_columns_have_one_owner_and_their_order() -> None:
    assert lb.TOKEN_FIELDS == (
        "input_tokens",
        "output_tokens",
        "reasoning_tokens",
        "cached_input_tokens",
    )
    at = lb.METRIC_COLUMNS.index("input_tokens_total")
    assert lb.METRIC_COLUMNS[at : at + 8] == (
        *(f"{field}_total" for field in lb.TOKEN_FIELDS),
        *(f"{field}_mean" for field in lb.TOKEN_FIELDS),
    )
    # The record's fields, each beside the count it is a part of.
    at = FIELDS.index("tokens_estimated")
    assert FIELDS[at : at + 5] == (
        "tokens_estimated",
        "reasoning_tokens",
        "reasoning_tokens_estimated",
        "cached_input_tokens",
        "cache_write_tokens",
    )


def test_reasoning_and_cached_tokens_are_summed_and_averaged_none_aware() -> None:
    records = [
        rec(model="thinker", case_id="a", input_tokens=10, output_tokens=50,
            reasoning_tokens=40, cached_input_tokens=4),
        rec(model="thinker", case_id="b", input_tokens=10, output_tokens=30,
            reasoning_tokens=20, cached_input_tokens=0,
            attempts=[{"outcome": "failed", "reasoning_tokens": 7, "cached_input_tokens": 1}]),
        # An error spent its tokens too: in the totals, not the means.
        rec(model="thinker", case_id="c", outcome="error", input_tokens=10, output_tokens=9,
            reasoning_tokens=9),
        rec(model="plain", case_id="a", input_tokens=10, output_tokens=5),
    ]  # fmt: skip
    board = lb.leaderboard(lb.records_frame(records)).set_index("model")
    thinker, plain = board.loc["thinker"], board.loc["plain"]
    assert thinker["reasoning_tokens_total"] == 40 + 20 + 9 + 7
    assert thinker["cached_input_tokens_total"] == 4 + 0 + 1
    assert thinker["reasoning_tokens_mean"] == 30.0
    assert thinker["cached_input_tokens_mean"] == 2.0
    # Parts of the output and input tokens, not added to them.
    assert (thinker["output_tokens_total"], thinker["input_tokens_total"]) == (89, 30)
    # A model that reports none has none: empty, not 0.
    for column in ("reasoning_tokens_total", "cached_input_tokens_total"):
        assert pd.isna(plain[column])
    for column in ("reasoning_tokens_mean", "cached_input_tokens_mean"):
        assert pd.isna(plain[column])
    assert str(board["reasoning_tokens_total"].dtype) == "Int64"


def test_an_older_record_reads_the_new_fields_as_not_measured() -> None:
    old = {"nodeid": "x", "tokens_estimated": False, "reasoning_tokens": None, "output_tokens": 3}
    new = upgrade_record(old)
    assert new["reasoning_tokens_estimated"] is False and new["cache_write_tokens"] is None
    keys = list(new)
    assert keys.index("reasoning_tokens_estimated") == keys.index("reasoning_tokens") + 1
    assert keys.index("cache_write_tokens") == keys.index("cached_input_tokens") + 1


def test_junit_properties_carry_them_when_reported() -> None:
    from pytest_llmbench.results.attach import record_properties

    thought = dict(record_properties(rec(model="m", case_id="a", output_tokens=9,
                                         reasoning_tokens=5, cached_input_tokens=2)))  # fmt: skip
    assert (thought["llmbench_reasoning_tokens"], thought["llmbench_cached_input_tokens"]) == (5, 2)
    plain = dict(record_properties(rec(model="m", case_id="a", output_tokens=9)))
    assert "llmbench_output_tokens" in plain and "llmbench_reasoning_tokens" not in plain


def _check(raw: dict[str, Any], measures: CallMeasures) -> Any:
    return evaluate(parse_assertion(raw), "Paris.", AssertionContext(model="m", measures=measures))


def test_the_tokens_assertion_checks_reasoning_and_cached_tokens() -> None:
    thought = CallMeasures(input_tokens=40, output_tokens=200, reasoning_tokens=150,
                           cached_input_tokens=32)  # fmt: skip
    verdict = _check({"type": "tokens", "max": 150, "which": "reasoning"}, thought)
    assert verdict.passed and verdict.reason == "reasoning tokens 150 <= 150"
    verdict = _check({"type": "tokens", "max": 31, "which": "cached"}, thought)
    assert not verdict.passed and verdict.reason == "cached input tokens 32 > 31"
    counted = CallMeasures(output_tokens=20, reasoning_tokens=12, reasoning_tokens_estimated=True)
    verdict = _check({"type": "tokens", "max": 10, "which": "reasoning"}, counted)
    assert not verdict.passed and verdict.reason == "reasoning tokens (estimated) 12 > 10"
    # None reported: unchecked, never a pass or a fail.
    plain = CallMeasures(input_tokens=40, output_tokens=200)
    for which, reason in (("reasoning", "no reasoning tokens"), ("cached", "no cached input")):
        verdict = _check({"type": "tokens", "max": 10**9, "which": which}, plain)
        assert (verdict.passed, verdict.unchecked) == (False, True)
        assert verdict.reason.startswith(reason)


# -- runs against the fake server --

THINKER = """
models:
  thinker:
    model: openai/fake-thinker
    api_base: {base}
    api_key_env: {key}
    cost_per_1k: {{input: 1.0, output: 2.0, cached_input: 0.5, cache_write: 1.25, reasoning: 3.0}}
"""

CAPITALS = """
cases:
  - id: france
    prompt: Which city is the capital of France, the country in Europe?
    assert:
      - {type: icontains, value: paris}
      - {type: tokens, which: reasoning, max: 100}
      - {type: tokens, which: cached, max: 2}
  - id: spain
    prompt: Which city is the capital of Spain, the country in Europe?
    assert: [{type: icontains, value: madrid}]
"""


def _serve(bench: Bench) -> None:
    """The thinker thinks apart (France: counted, cached; Spain: inline, not counted); fake2
    does not think."""
    server = bench.server
    server.add_rule(Rule(model="fake-thinker", match="France", reply="Paris.", reasoning=THOUGHT,
                         cached_tokens=2, cache_write_tokens=3))  # fmt: skip
    server.add_rule(Rule(model="fake-thinker", match="Spain", reply="<think>Madrid, surely, it is.</think>Madrid."))  # fmt: skip
    server.add_rule(Rule(match="France", reply="Paris."))
    server.add_rule(Rule(match="Spain", reply="Madrid."))
    bench.pytester.makefile(
        ".yaml", **{"profiles/thinker": THINKER.format(base=server.base_url, key=FAKE_KEY_ENV)}
    )
    bench.eval_file("capitals", CAPITALS)


def _board(bench: Bench) -> dict[str, dict[str, str]]:
    with bench.out("leaderboard.csv").open(newline="") as handle:
        return {row["model"]: row for row in csv.DictReader(handle)}


def _by_hand(record: dict[str, Any]) -> float:
    """A record's cost at the thinker's prices, part by part."""
    cached, written = record["cached_input_tokens"] or 0, record["cache_write_tokens"] or 0
    thought = record["reasoning_tokens"] or 0
    return (
        (record["input_tokens"] - cached - written) * 1.0
        + cached * 0.5
        + written * 1.25
        + (record["output_tokens"] - thought) * 2.0
        + thought * 3.0
    ) / 1000


TOKEN_COLUMNS = [f"{field}_{kind}" for kind in ("total", "mean") for field in lb.TOKEN_FIELDS]


def test_a_run_records_prices_and_ranks_reasoning_and_cached_tokens(bench: Bench) -> None:
    _serve(bench)
    bench.run("--models=thinker,fake2").assert_outcomes(passed=4)
    records = {(r["model"], r["case_id"]): r for r in bench.records()}
    france, spain = records["thinker", "france"], records["thinker", "spain"]
    assert (france["reasoning_tokens"], france["reasoning_tokens_estimated"]) == (len(THOUGHT.split()), False)  # fmt: skip
    assert (france["cached_input_tokens"], france["cache_write_tokens"]) == (2, 3)
    assert spain["reasoning"] == "Madrid, surely, it is." and spain["reasoning_tokens_estimated"]
    assert 0 < spain["reasoning_tokens"] <= spain["output_tokens"]
    for record in (france, spain):
        assert record["cost_usd"] == pytest.approx(_by_hand(record), rel=1e-12)
    plain = records["fake2", "france"]
    assert (plain["reasoning_tokens"], plain["cached_input_tokens"]) == (None, None)
    assert plain["reasoning_tokens_estimated"] is False
    # Checked for the thinker; unchecked (not failed) for the model that reported none.
    checks = {a["reason"].split(":")[0]: a for a in plain["assertions"] if a["type"] == "tokens"}
    assert (
        checks["no reasoning tokens"]["unchecked"] and checks["no cached input tokens"]["unchecked"]
    )
    thinker_checks = [a for a in france["assertions"] if a["type"] == "tokens"]
    assert [a["passed"] for a in thinker_checks] == [True, True]
    board = _board(bench)
    thinker, other = board["thinker"], board["fake2"]
    assert int(thinker["reasoning_tokens_total"]) == france["reasoning_tokens"] + spain["reasoning_tokens"]  # fmt: skip
    assert int(thinker["cached_input_tokens_total"]) == 2
    assert float(thinker["reasoning_tokens_mean"]) == pytest.approx(
        (france["reasoning_tokens"] + spain["reasoning_tokens"]) / 2
    )
    assert float(thinker["cost_usd_total"]) == pytest.approx(_by_hand(france) + _by_hand(spain))
    assert [other[column] for column in TOKEN_COLUMNS[2:4] + TOKEN_COLUMNS[6:]] == [""] * 4
    # The model's own summary has them too; the report shows them beside the other columns.
    summary = bench.out("thinker").glob("*.csv")
    assert any("reasoning_tokens_total" in path.read_text() for path in summary)
    report = bench.out("report.html").read_text()
    assert "reasoning tokens/item" in report and "cached input tokens/item" in report


def test_the_report_leaves_out_token_columns_no_model_reported(bench: Bench) -> None:
    bench.eval_file("plain", "cases:\n  - {id: c, prompt: p, expected: ok}\n")
    bench.run("--models=fake").assert_outcomes(passed=1)
    report = bench.out("report.html").read_text()
    assert "tokens/s" in report and "reasoning tokens/item" not in report


def test_the_columns_are_the_same_under_xdist(bench: Bench) -> None:
    _serve(bench)
    boards = []
    for args in ((), ("-n", "2")):
        bench.run_subprocess("--models=thinker,fake2", *args).assert_outcomes(passed=4)
        boards.append(
            {
                model: [row[c] for c in [*TOKEN_COLUMNS, "cost_usd_total"]]
                for model, row in _board(bench).items()
            }
        )
    assert boards[0] == boards[1]
    assert boards[1]["thinker"][2] and not boards[1]["fake2"][2]  # reasoning_tokens_total


@pytest.mark.parametrize("stream", ["off", "all"])
def test_both_clients_record_the_same_tokens_and_cost(bench: Bench, stream: str) -> None:
    """A profile with api_base called by the lean client (client: auto) and by litellm."""
    _serve(bench)
    fields = ("input_tokens", "output_tokens", "reasoning_tokens", "reasoning_tokens_estimated",
              "cached_input_tokens", "cache_write_tokens", "cost_usd", "reasoning", "response")  # fmt: skip
    seen = []
    for client in ("auto", "litellm"):
        bench.run("--models=thinker", f"--client={client}", f"--stream={stream}").assert_outcomes(
            passed=2
        )
        seen.append({r["case_id"]: [r[k] for k in fields] for r in bench.records()})
    assert seen[0] == seen[1]
    assert seen[0]["spain"][3] is True and seen[0]["france"][3] is False


def test_the_cost_gate_sees_the_parts_priced_apart(bench: Bench) -> None:
    """Free cached input and thinking: the thinker's cost per item is its answer's tokens
    alone, under a limit that the same tokens all at the input and output prices exceed."""
    bench.pytester.makefile(
        ".yaml",
        **{
            "profiles/cheap": f"""
models:
  cheap:
    model: openai/fake-thinker
    api_base: {bench.server.base_url}
    api_key_env: {FAKE_KEY_ENV}
    cost_per_1k: {{input: 1.0, output: 1.0, cached_input: 0.0, reasoning: 0.0}}
"""
        },
    )
    bench.server.add_rule(Rule(reply="Paris.", reasoning=THOUGHT, cached_tokens=5))
    bench.eval_file("one", "cases:\n  - {id: c, prompt: Which city is the capital of France in Europe?, expected: Paris}\n")  # fmt: skip
    bench.run("--models=cheap").assert_outcomes(passed=1)
    (record,) = bench.records()
    paid = (
        record["input_tokens"] - 5 + record["output_tokens"] - record["reasoning_tokens"]
    ) / 1000
    assert record["cost_usd"] == pytest.approx(paid)
    whole = (record["input_tokens"] + record["output_tokens"]) / 1000
    between = (paid + whole) / 2
    assert bench.run("--models=cheap", f"--max-cost-per-item={between}").ret == 0
    failed = bench.run("--models=cheap", f"--max-cost-per-item={paid / 2}")
    assert failed.ret == 1
    failed.stdout.fnmatch_lines(["*gate FAILED: cheap: cost per item * USD > --max-cost-per-item*"])
