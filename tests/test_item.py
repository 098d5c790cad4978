"""An eval item's verdict (item.py): a case with nothing to check is never reported as a pass."""

from __future__ import annotations

from conftest import Bench, Rule


def test_an_expected_answer_alone_is_checked_with_icontains(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="France", reply="The capital is paris."))
    bench.server.add_rule(Rule(match="Spain", reply="Lyon"))
    bench.eval_file(
        "capitals",
        "cases:\n"
        "  - {id: france, prompt: Capital of France?, expected: Paris}\n"
        "  - {id: spain, prompt: Capital of Spain?, expected: Madrid}\n",
    )
    bench.run("--models=fake").assert_outcomes(passed=1, failed=1)
    records = {record["case_id"]: record for record in bench.records()}
    ((verdict,),) = {tuple(v["type"] for v in r["assertions"]) for r in records.values()}
    assert verdict == "icontains"
    assert records["spain"]["outcome"] == "failed"


def test_a_case_with_nothing_to_check_is_skipped_not_passed(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply="Anything at all"))
    bench.eval_file("open", "cases:\n  - {id: chat, prompt: Say something.}\n")
    result = bench.run("--models=fake", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*llmbench: nothing to check*expected:*assert:*--latency-only*"])
    (record,) = bench.records()
    assert (record["outcome"], record["error_kind"]) == ("skipped", "unchecked")
    assert record["response"] == "Anything at all" and record["score"] is None
    assert len(bench.server.chat_requests()) == 1  # answered and measured, just not judged
    # Its call was paid for: its tokens and cost count in the totals, not in the rates.
    header, row = bench.out("leaderboard.csv").read_text().splitlines()[:2]
    board = dict(zip(header.split(","), row.split(","), strict=True))
    assert (board["n_skipped"], board["pass_rate"]) == ("1", "")
    assert float(board["input_tokens_total"]) == record["input_tokens"] > 0
    # --latency-only is the way to measure without checks: a measurement, not a skip.
    result = bench.run("--models=fake", "--latency-only")
    result.assert_outcomes(passed=1)
