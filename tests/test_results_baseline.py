"""``--baseline DIR`` and ``--fail-on-regression``: a run gated against a saved run."""

from __future__ import annotations

import json
from pathlib import Path

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest
from conftest import Bench, Rule

from pytest_llmbench.results.baseline import compare_runs, load_results
from pytest_llmbench.results.baseline_gate import BaselineGate
from pytest_llmbench.results_folder import ResultsFolder

N_CASES = 6
# Two assertions, threshold 0.5: "Paris" alone scores 0.5 and still passes, so the score can
# regress while every test passes; "London" fails both.
CAPITALS = "threshold: 0.5\ncases:\n" + "".join(
    f"""  - id: q{index}
    prompt: "Question {index}: what is the capital of France?"
    expected: Paris
    assert: [contains, {{type: icontains, value: capital}}]
"""
    for index in range(N_CASES)
)
GOOD, HALF, BAD = "Paris is the capital.", "Paris.", "London."


def _project(bench: Bench) -> None:
    bench.eval_file("capitals", CAPITALS)


def _reply(bench: Bench, text: str) -> None:
    bench.server.reset()
    bench.server.add_rule(Rule(match="France", reply=text))


def _baseline_run(bench: Bench) -> None:
    _project(bench)
    _reply(bench, GOOD)
    bench.run("--models=fake", "--results-dir=out1").assert_outcomes(passed=N_CASES)


def _regressed_lines(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines() if line.strip().startswith("regressed:")]


def test_fail_on_regression_fails_a_run_whose_score_dropped(bench: Bench) -> None:
    _baseline_run(bench)
    _reply(bench, HALF)
    result = bench.run("--models=fake", "--baseline=out1", "--fail-on-regression")
    result.assert_outcomes(passed=N_CASES)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*= llmbench baseline =*",
            f"baseline: *out1 ({N_CASES} records)",
            f"fake: {N_CASES} cases: 0 regressed, 0 improved",
            "  score      -0.500 [[]-0.500, -0.500[]] p=0.0312 significant (n=6)",
            "  pass rate  +0.000 [[]+0.000, +0.000[]] p=1 n.s. (n=6)",
            "llmbench baseline FAILED: significant regression: fake",
        ]
    )
    # run.json (and the report built from it) tell the final exit status and the gate.
    run = json.loads(bench.out("run.json").read_text())
    assert run["exitstatus"] == 1
    assert any("--fail-on-regression: fake regressed" in gate for gate in run["gate_failures"])


def test_a_run_whose_items_all_error_is_a_regression_not_no_change(bench: Bench) -> None:
    _baseline_run(bench)
    bench.server.reset()
    bench.server.add_rule(Rule(status=401))  # every call fails at once
    result = bench.run("--models=fake", "--baseline=out1", "--fail-on-regression")
    result.assert_outcomes(errors=N_CASES)
    result.stdout.fnmatch_lines(
        [
            f"fake: 0 cases: 0 regressed, 0 improved, {N_CASES} no longer answered*",
            "  not answered now: capitals::*",
            "llmbench baseline FAILED: significant regression: fake",
        ]
    )


def test_without_fail_on_regression_the_exit_code_follows_the_tests(bench: Bench) -> None:
    _baseline_run(bench)
    _reply(bench, HALF)
    result = bench.run("--models=fake", "--baseline=out1")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["*= llmbench baseline =*", "llmbench: significant regression: fake"]
    )
    assert "FAILED" not in result.stdout.str()


def test_regressed_cases_are_listed(bench: Bench) -> None:
    _baseline_run(bench)
    _reply(bench, BAD)
    result = bench.run("--models=fake", "--baseline=out1", "--fail-on-regression")
    result.assert_outcomes(failed=N_CASES)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    expected = [f"regressed: capitals::q{index} score 1.00 -> 0.00" for index in range(N_CASES)]
    assert _regressed_lines(result.stdout.str()) == expected
    result.stdout.fnmatch_lines(
        [f"fake: {N_CASES} cases: {N_CASES} regressed, 0 improved", "*FAILED: *regression: fake"]
    )


@pytest.mark.slow
def test_gate_fails_a_run_that_the_pass_rate_gate_lets_through(bench: Bench) -> None:
    # --min-pass-rate=0 turns failed cases into an OK run; the regression gate runs after it.
    _baseline_run(bench)
    _reply(bench, BAD)
    args = ("--models=fake", "--baseline=out1", "--min-pass-rate=0")
    assert bench.run(*args).ret == pytest.ExitCode.OK
    assert bench.run(*args, "--fail-on-regression").ret == pytest.ExitCode.TESTS_FAILED


def test_no_regression_passes_and_says_so(bench: Bench) -> None:
    _baseline_run(bench)
    result = bench.run("--models=fake", "--baseline=out1", "--fail-on-regression")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["*= llmbench baseline =*", f"fake: {N_CASES} cases: 0 regressed*", "  score *+0.000*n.s.*"]
    )
    assert "significant regression" not in result.stdout.str()
    assert len(load_results(bench.pytester.path / "out")) == N_CASES


def test_a_model_missing_from_the_baseline_is_named(bench: Bench) -> None:
    _baseline_run(bench)
    result = bench.run("--models=fake,fake2", "--baseline=out1", "--fail-on-regression")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["fake: 6 cases*", "fake2: not in the baseline"])


def test_missing_baseline_is_a_usage_error(bench: Bench) -> None:
    _project(bench)
    result = bench.run("--models=fake", "--baseline=nowhere")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*llmbench: --baseline has no results.jsonl: *nowhere"])
    assert not bench.server.chat_requests()


def test_corrupt_baseline_is_a_usage_error_naming_file_and_line(bench: Bench) -> None:
    _baseline_run(bench)
    path = bench.pytester.path / "out1" / "results.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join([lines[0], "{broken", *lines[1:]]) + "\n", encoding="utf-8")
    bench.server.reset()
    result = bench.run("--models=fake", "--baseline=out1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*llmbench: --baseline: {path}:2: not valid JSON*"])
    assert not bench.server.chat_requests()


def test_gate_is_inert_without_baseline(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfig()
    gate = BaselineGate(config)
    gate.pytest_configure(config)
    assert gate.baseline_dir is None and gate.baseline == []
    assert json.dumps(gate.results) == "[]"


# -- pairing by case hash ------------------------------------------------------------------------


def _strip_hashes(folder: Path) -> None:
    """Make ``folder`` a run of an older version: records without ``case_hash``."""
    records = [
        {key: value for key, value in record.items() if key != "case_hash"}
        for record in load_results(folder)
    ]
    ResultsFolder(folder).write_records(records)


def test_an_edited_expected_answer_is_changed_not_a_regression(bench: Bench) -> None:
    _baseline_run(bench)
    # Same ids, a new expected answer: "Paris is the capital." now scores 0.5 on every case.
    bench.eval_file("capitals", CAPITALS.replace("expected: Paris", "expected: Lyon"))
    result = bench.run("--models=fake", "--baseline=out1", "--fail-on-regression")
    result.assert_outcomes(passed=N_CASES)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "fake: 0 cases: 0 regressed, 0 improved",
            "  score      no case answered in both runs",
            f"  {N_CASES} cases changed since the baseline: not compared",
            "    changed: capitals::q0",
        ]
    )
    assert "significant regression" not in result.stdout.str()
    hashes = {r["case_id"]: r["case_hash"] for r in bench.records()}
    old = {r["case_id"]: r["case_hash"] for r in load_results(bench.pytester.path / "out1")}
    assert all(hashes[case] != old[case] for case in old)


def test_a_baseline_without_hashes_warns_and_compares_by_id(bench: Bench) -> None:
    _baseline_run(bench)
    _strip_hashes(bench.pytester.path / "out1")
    bench.eval_file("capitals", CAPITALS.replace("expected: Paris", "expected: Lyon"))
    result = bench.run("--models=fake", "--baseline=out1", "--fail-on-regression")
    result.assert_outcomes(passed=N_CASES)
    # Paired by id, the edit reads as a score regression: the gate fails.
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "llmbench: warning: the baseline has no case hashes (a run of an older version): "
            "its cases are paired by id*",
            f"fake: {N_CASES} cases: 0 regressed, 0 improved",
            "  score      -0.500 * significant (n=6)",
            "llmbench baseline FAILED: significant regression: fake",
        ]
    )
    assert "changed since the baseline" not in result.stdout.str()


def test_an_unchanged_suite_pairs_every_case(bench: Bench) -> None:
    _baseline_run(bench)
    result = bench.run("--models=fake", "--baseline=out1", "--fail-on-regression")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"fake: {N_CASES} cases: 0 regressed*", "  score *(n=6)"])
    output = result.stdout.str()
    assert "not compared" not in output and "warning" not in output
    (comparison,) = compare_runs(load_results(bench.pytester.path / "out1"), bench.records())
    assert (comparison.changed, comparison.added, comparison.removed) == ((), (), ())
    assert len(comparison.changes) == N_CASES and not comparison.by_id


def test_added_and_removed_cases_are_listed_apart_and_do_not_gate(bench: Bench) -> None:
    _baseline_run(bench)
    # q5 leaves the suite, q9 joins it; q0..q4 are unchanged.
    edited = CAPITALS.replace("id: q5", "id: q9").replace("Question 5", "Question 9")
    bench.eval_file("capitals", edited)
    result = bench.run("--models=fake", "--baseline=out1", "--fail-on-regression")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "fake: 5 cases: 0 regressed, 0 improved",
            "  1 case added since the baseline: not compared",
            "    added: capitals::q9",
            "  1 case not in the new run (removed or not selected): not compared",
            "    removed: capitals::q5",
        ]
    )
    assert "no longer answered" not in result.stdout.str()


def test_llmbench_compare_lists_changed_cases_and_warns_on_an_old_baseline(
    bench: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_llmbench.cli import main

    _baseline_run(bench)
    bench.eval_file("capitals", CAPITALS.replace("expected: Paris", "expected: Lyon"))
    bench.run("--models=fake", "--results-dir=out2").assert_outcomes(passed=N_CASES)
    root = bench.pytester.path
    assert main(["compare", str(root / "out1"), str(root / "out2")]) == 0
    captured = capsys.readouterr()
    assert f"  {N_CASES} cases changed since the baseline: not compared" in captured.out
    assert "llmbench: no significant regression" in captured.out and not captured.err
    _strip_hashes(root / "out1")
    assert main(["compare", str(root / "out1"), str(root / "out2")]) == 1
    captured = capsys.readouterr()
    assert "llmbench: warning: the baseline has no case hashes" in captured.err
    assert "llmbench: significant regression: fake" in captured.out


def test_llmbench_merge_with_an_old_baseline_warns(
    bench: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_llmbench.cli import main

    _baseline_run(bench)
    root = bench.pytester.path
    bench.run("--models=fake", "--results-dir=out2").assert_outcomes(passed=N_CASES)
    merge = ["merge", str(root / "out2"), "--baseline", str(root / "out1"), "-o"]
    capsys.readouterr()
    assert main([*merge, str(root / "merged")]) == 0
    assert "no case hashes" not in capsys.readouterr().err
    _strip_hashes(root / "out1")
    assert main([*merge, str(root / "merged2")]) == 0
    assert "llmbench merge: warning: the baseline has no case hashes" in capsys.readouterr().err


def _record(case_id: str, case_hash: str | None, outcome: str = "passed") -> dict[str, object]:
    score = {"passed": 1.0, "failed": 0.0}.get(outcome)
    return {"suite": "s", "case_id": case_id, "case_hash": case_hash, "model": "m",
            "outcome": outcome, "score": score, "repeat": 0}  # fmt: skip


def test_a_record_without_a_hash_pairs_by_id_and_a_crash_is_still_lost() -> None:
    """A crashed worker's record (no hash: the controller never collected the item) pairs with
    the baseline's case, so the case is lost, not changed; a plain test (no hash on either
    side) pairs by id."""
    baseline = [_record("a", "1"), _record("b", "2"), _record("plain", None)]
    new = [_record("a", None, "error"), _record("b", "3"), _record("plain", None, "failed")]
    (result,) = compare_runs(baseline, new)
    assert result.lost == ("s::a",) and result.changed == ("s::b",)
    assert [change.case_id for change in result.changes] == ["plain"]
    assert result.significant_regression and not result.by_id
