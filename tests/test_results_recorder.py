"""The controller's recorder: results.jsonl as items finish, CSVs, run.json, summary and gates."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable
from pathlib import Path

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest
from conftest import ARITH, FAKE_KEY_ENV, Bench, Rule

from pytest_llmbench.results import METRIC_COLUMNS, model_dir_name
from pytest_llmbench.results.record import FIELDS

CAPITALS = """
description: Capitals
model_params: {temperature: 0, max_tokens: 16}
cases:
  - id: france
    prompt: What is the capital of France?
    expected: Paris
    tags: [geo]
    assert: [contains]
  - id: japan
    prompt: What is the capital of Japan?
    expected: Tokyo
    assert:
      - contains
      - {type: not-contains, value: Kyoto, weight: 3}
"""


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _header(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8") as handle:
        return next(csv.reader(handle))


def _right_answers(bench: Bench) -> None:
    for match, reply in (
        ("France", "Paris."),
        ("Japan", "Tokyo."),
        ("two plus two", "4"),
        ("three times four", "It is 12"),
    ):
        bench.server.add_rule(Rule(match=match, reply=reply))


def _cost(tokens_in: int, tokens_out: int, per_1k_in: float, per_1k_out: float) -> float:
    return (tokens_in * per_1k_in + tokens_out * per_1k_out) / 1000


# -- results.jsonl -----------------------------------------------------------------------------


def test_every_record_has_all_fields_with_correct_values(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="France", reply="Paris."))
    bench.server.add_rule(Rule(match="Japan", reply="Kyoto, I think"))
    bench.eval_file("capitals", CAPITALS)
    result = bench.run("--models=fake", "--repeat=2", "--stream=all")
    result.assert_outcomes(passed=2, failed=2)
    lines = bench.out("results.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 4
    for record in records:
        assert tuple(record) == FIELDS  # every field, in order
        assert record["schema"] == 2
        assert record["suite"] == "capitals"
        assert record["eval_file"] == "capitals.eval.yaml"
        assert record["model"] == "fake" and record["model_id"] == "openai/fake-model"
        assert record["threshold"] == 1.0
        assert record["passed"] is (record["outcome"] == "passed")
        assert (
            record["nodeid"] == f"capitals.eval.yaml::{record['case_id']}[fake-r{record['repeat']}]"
        )
        assert record["input_tokens"] == 6  # the fake server counts words
        assert record["tokens_estimated"] is False
        assert record["streamed"] is True
        assert record["ttft_s"] is not None and 0 < record["ttft_s"] <= record["latency_s"]
        assert record["transport_retries"] == 0 and record["tool_call_count"] == 0
        assert record["cached"] is False and record["rate_limit_wait_s"] == 0.0
        assert record["error"] is None and record["error_kind"] is None
        assert record["params"] == {"temperature": 0, "max_tokens": 16}
        assert record["metrics"] == {}
        assert record["worker"] == "main"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", record["started_at"])
        assert record["messages"] == [{"role": "user", "content": record["prompt"]}]
        expected_cost = _cost(record["input_tokens"], record["output_tokens"], 0.001, 0.002)
        assert record["cost_usd"] == pytest.approx(expected_cost)
    rows = {(r["case_id"], r["repeat"]): r for r in records}
    assert set(rows) == {("france", 0), ("france", 1), ("japan", 0), ("japan", 1)}
    france, japan = rows["france", 1], rows["japan", 0]
    assert france["outcome"] == "passed" and france["score"] == 1.0
    assert france["tags"] == ["geo"] and japan["tags"] == []
    assert france["prompt"] == "What is the capital of France?"
    assert france["response"] == "Paris." and france["output_tokens"] == 1
    assert france["expected"] == "Paris"
    assert france["assertions"] == [
        {
            "type": "contains",
            "passed": True,
            "score": 1.0,
            "weight": 1.0,
            "reason": france["assertions"][0]["reason"],
        }
    ]
    assert japan["outcome"] == "failed" and japan["passed"] is False
    assert japan["response"] == "Kyoto, I think" and japan["output_tokens"] == 3
    assert japan["expected"] == "Tokyo"
    assert [(a["type"], a["passed"], a["score"], a["weight"]) for a in japan["assertions"]] == [
        ("contains", False, 0.0, 1.0),
        ("not-contains", False, 0.0, 3.0),
    ]
    assert all(a["reason"] for a in japan["assertions"])
    assert japan["score"] == 0.0


def test_weighted_score_is_recorded(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="Japan", reply="Tokyo, not Kyoto"))
    bench.eval_file("capitals", CAPITALS)
    bench.run("--models=fake", "-k", "japan").assert_outcomes(failed=1)
    (record,) = bench.records()
    assert record["score"] == pytest.approx(0.25)  # contains (1) passes, not-contains (3) fails


def test_records_are_appended_as_items_finish(bench: Bench) -> None:
    bench.pytester.makeconftest(
        """
        from pathlib import Path

        def pytest_runtest_logreport(report):
            if report.when == "call":
                results = Path("out/results.jsonl")
                count = len(results.read_text().splitlines()) if results.exists() else 0
                with open("counts.txt", "a") as handle:
                    handle.write(f"{report.nodeid} {count}\\n")
        """
    )
    _right_answers(bench)
    bench.eval_file("capitals", CAPITALS)
    bench.eval_file("arith", ARITH)
    bench.run("--models=fake").assert_outcomes(passed=4)
    counts = (bench.pytester.path / "counts.txt").read_text().splitlines()
    assert [int(line.rsplit(" ", 1)[1]) for line in counts] == [1, 2, 3, 4]
    assert [line.rsplit(" ", 1)[0] for line in counts] == [r["nodeid"] for r in bench.records()]


def test_interrupted_run_keeps_finished_records_and_writes_aggregates(bench: Bench) -> None:
    bench.pytester.makepyfile(
        stopper="""
        def stop(output, context):
            raise KeyboardInterrupt
        """
    )
    bench.eval_file(
        "steps",
        """
        cases:
          - id: first
            prompt: first step
            assert: [{type: contains, value: ok}]
          - id: second
            prompt: second step
            assert: [{type: python, value: "stopper:stop"}]
          - id: third
            prompt: third step
            assert: [{type: contains, value: ok}]
        """,
    )
    # In-process, but without pytester re-raising the Ctrl-C in this test.
    recorder = bench.pytester.inline_run(
        "-p", "no:cacheprovider", "--results-dir=out", "--models=fake", no_reraise_ctrlc=True
    )
    assert recorder.ret == pytest.ExitCode.INTERRUPTED
    records = bench.records()
    assert [r["case_id"] for r in records] == ["first"]
    assert records[0]["outcome"] == "passed"
    (row,) = _csv(bench.out("all_metrics.csv"))
    assert row["n_items"] == "1" and row["n_passed"] == "1"
    assert bench.out("fake/aggregate_metrics.csv").is_file()
    assert json.loads(bench.out("run.json").read_text())["records"] == 1


def test_exitfirst_keeps_records_and_aggregates(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="France", reply="Lyon"))
    bench.eval_file("capitals", CAPITALS)
    result = bench.run("--models=fake", "-x")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=1)
    assert [r["case_id"] for r in bench.records()] == ["france"]
    (row,) = _csv(bench.out("all_metrics.csv"))
    assert row["n_failed"] == "1" and float(row["pass_rate"]) == 0.0


def test_no_record_no_files(bench: Bench) -> None:
    bench.pytester.makepyfile("def test_plain():\n    assert True\n")
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=1)
    assert not (bench.pytester.path / "out").exists()
    assert "llmbench leaderboard" not in result.stdout.str()


# -- aggregate files ---------------------------------------------------------------------------


def _two_models_two_suites(bench: Bench, *args: str) -> pytest.RunResult:
    """fake answers everything right; fake2 gets Japan wrong and errors on two plus two."""
    bench.server.add_rule(Rule(model="fake-model-2", match="Japan", reply="Kyoto"))
    bench.server.add_rule(Rule(model="fake-model-2", match="two plus two", status=500))
    _right_answers(bench)
    bench.eval_file("capitals", CAPITALS)
    bench.eval_file("arith", ARITH)
    return bench.run("--models=@fakes", "--repeat=2", "--max-retries=0", *args)


def test_all_metrics_has_one_hand_checked_row_per_model_and_suite(bench: Bench) -> None:
    result = _two_models_two_suites(bench)
    result.assert_outcomes(passed=12, failed=2, errors=2)
    path = bench.out("all_metrics.csv")
    assert _header(path) == ["model", "suite", *METRIC_COLUMNS]
    rows = {(r["model"], r["suite"]): r for r in _csv(path)}
    assert list(rows) == [
        ("fake", "arith"),
        ("fake", "capitals"),
        ("fake2", "arith"),
        ("fake2", "capitals"),
    ]
    fake_cap, fake2_cap, fake2_arith = (
        rows["fake", "capitals"],
        rows["fake2", "capitals"],
        rows["fake2", "arith"],
    )
    assert (fake_cap["n_items"], fake_cap["n_cases"], fake_cap["n_repeats"]) == ("4", "2", "2")
    assert float(fake_cap["pass_rate"]) == 1.0 and float(fake_cap["score_mean"]) == 1.0
    assert fake_cap["n_errors"] == "0" and float(fake_cap["error_rate"]) == 0.0
    assert (fake2_cap["n_passed"], fake2_cap["n_failed"], fake2_cap["n_errors"]) == ("2", "2", "0")
    assert float(fake2_cap["pass_rate"]) == 0.5 and float(fake2_cap["score_mean"]) == 0.5
    assert (fake2_arith["n_passed"], fake2_arith["n_failed"], fake2_arith["n_errors"]) == (
        "2",
        "0",
        "2",
    )
    assert float(fake2_arith["error_rate"]) == 0.5
    # The two errors count as failures scored 0 (--errors-count-as=fail, the default).
    assert float(fake2_arith["pass_rate"]) == 0.5 and float(fake2_arith["score_mean"]) == 0.5
    assert float(fake2_arith["coverage"]) == 0.5 and fake2_arith["incomplete"] == "True"
    assert fake_cap["incomplete"] == "False" and float(fake_cap["coverage"]) == 1.0
    # Tokens: 6 prompt words per capitals item, 1-word answers; fake2 pays 10x the price.
    assert fake_cap["input_tokens_total"] == "24" and fake_cap["output_tokens_total"] == "4"
    assert float(fake_cap["cost_usd_total"]) == pytest.approx(4 * _cost(6, 1, 0.001, 0.002))
    assert float(fake2_cap["cost_usd_total"]) == pytest.approx(4 * _cost(6, 1, 0.01, 0.02))
    # The errored items spent no tokens; only the two mul answers count ("It is 12": 3 words).
    assert fake2_arith["input_tokens_total"] == "8" and fake2_arith["output_tokens_total"] == "6"


def test_per_model_aggregates_have_a_row_per_suite_and_a_total(bench: Bench) -> None:
    _two_models_two_suites(bench)
    for model in ("fake", "fake2"):
        path = bench.out(model_dir_name(model)) / "aggregate_metrics.csv"
        assert _header(path) == ["suite", *METRIC_COLUMNS]
        rows = _csv(path)
        assert [r["suite"] for r in rows] == ["arith", "capitals", "__all__"]
        total = rows[-1]
        assert total["n_items"] == "8" and total["n_cases"] == "4"
    fake2_total = _csv(bench.out("fake2/aggregate_metrics.csv"))[-1]
    assert (fake2_total["n_passed"], fake2_total["n_failed"], fake2_total["n_errors"]) == (
        "4",
        "2",
        "2",
    )
    assert float(fake2_total["pass_rate"]) == pytest.approx(4 / 8)
    assert float(fake2_total["error_rate"]) == pytest.approx(2 / 8)
    assert float(fake2_total["score_mean"]) == pytest.approx(4 / 8)
    assert fake2_total["incomplete"] == "True"


@pytest.mark.parametrize("how", ["option", "ini"])
def test_errors_count_as_skip_leaves_errors_out_but_shows_coverage(bench: Bench, how: str) -> None:
    if how == "ini":
        bench.pytester.makeini("[pytest]\nllmbench_errors_count_as = skip\n")
        result = _two_models_two_suites(bench)
    else:
        result = _two_models_two_suites(bench, "--errors-count-as=skip")
    result.assert_outcomes(passed=12, failed=2, errors=2)
    board = {row["model"]: row for row in _csv(bench.out("leaderboard.csv"))}
    fake2 = board["fake2"]
    assert float(fake2["pass_rate"]) == pytest.approx(4 / 6)
    assert float(fake2["score_mean"]) == pytest.approx(4 / 6)
    assert float(fake2["coverage"]) == pytest.approx(6 / 8) and fake2["incomplete"] == "True"
    result.stdout.fnmatch_lines(["*fake2*  6/8 !*", "! incomplete: more than 10% of the items*"])
    run = json.loads(bench.out("run.json").read_text())
    assert run["config"]["errors_count_as"] == "skip"


def test_errors_count_as_is_checked(bench: Bench) -> None:
    bench.eval_file("capitals", CAPITALS)
    result = bench.run("--models=fake", "--errors-count-as=maybe")
    result.stderr.fnmatch_lines(["*--errors-count-as must be one of fail, skip, got 'maybe'*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_model_names_become_safe_directory_names(bench: Bench) -> None:
    bench.pytester.makefile(
        ".yaml",
        **{
            "profiles/odd": f"""
models:
  "team/fake one":
    model: openai/fake-model
    api_base: {bench.server.base_url}
    api_key_env: {FAKE_KEY_ENV}
"""
        },
    )
    bench.eval_file("capitals", CAPITALS)
    bench.server.add_rule(Rule(reply="Paris. Tokyo."))
    bench.run("--models=team/fake one").assert_outcomes(passed=2)
    assert model_dir_name("team/fake one") == "team-fake-one"
    rows = _csv(bench.out("team-fake-one/aggregate_metrics.csv"))
    assert rows[-1]["suite"] == "__all__" and rows[-1]["n_passed"] == "2"
    assert {r["model"] for r in _csv(bench.out("all_metrics.csv"))} == {"team/fake one"}


def test_leaderboard_ranks_the_better_model_first(bench: Bench) -> None:
    bench.server.add_rule(Rule(model="fake-model-2", reply="I do not know"))
    _right_answers(bench)
    bench.eval_file("capitals", CAPITALS)
    result = bench.run("--models=@fakes")
    result.assert_outcomes(passed=2, failed=2)
    path = bench.out("leaderboard.csv")
    assert _header(path) == ["rank", "model", *METRIC_COLUMNS]
    board = _csv(path)
    assert [(r["rank"], r["model"]) for r in board] == [("1", "fake"), ("2", "fake2")]
    # fake2: france scores 0; japan 0.75 (not-contains Kyoto, weight 3, holds) -> mean 0.375.
    assert float(board[0]["score_mean"]) == 1.0
    assert float(board[1]["score_mean"]) == pytest.approx(0.375)
    assert float(board[1]["pass_rate"]) == 0.0
    result.stdout.re_match_lines(
        [
            # Both cases pass: not [1, 1] but the Wilson floor on 2 cases, 2 / (2 + z^2) = 0.34.
            r"1\s+fake\s+1\.00 \[0\.34, 1\.00\]\s+100\.0%.*",
            # Two cases, differences -1 and -0.25: mean -0.625; two cases can never be significant.
            r"2\s+fake2\s+0\.38 \[0\.00, 1\.00\]\s+0\.0%.*-0\.62 p=0\.50 n\.s\.$",
        ]
    )


def test_leaderboard_ranks_by_score_even_when_listed_last(bench: Bench) -> None:
    bench.server.add_rule(Rule(model="fake-model", reply="I do not know"))
    _right_answers(bench)
    bench.eval_file("capitals", CAPITALS)
    bench.run("--models=fake,fake2")
    assert [r["model"] for r in _csv(bench.out("leaderboard.csv"))] == ["fake2", "fake"]


def test_run_json_has_config_and_versions(bench: Bench) -> None:
    _right_answers(bench)
    bench.eval_file("capitals", CAPITALS)
    bench.run("--models=@fakes", "--repeat=2", "--max-retries=1", "--min-pass-rate=0.5")
    data = json.loads(bench.out("run.json").read_text(encoding="utf-8"))
    assert data["records"] == 8
    assert data["exitstatus"] == 0
    assert data["gate_failures"] == []
    assert data["judge_agreement"] == []
    assert "--repeat=2" in data["args"]
    assert data["rootdir"] == str(bench.pytester.path)
    config = data["config"]
    assert [m["name"] for m in config["models"]] == ["fake", "fake2"]
    assert config["models"][0]["model"] == "openai/fake-model"
    assert config["models"][0]["api_key_env"] == FAKE_KEY_ENV
    assert config["repeat"] == 2 and config["max_retries"] == 1
    assert config["min_pass_rate"] == 0.5
    versions = data["versions"]
    assert versions["pytest"] == pytest.__version__
    assert versions["python"].count(".") == 2
    assert versions["pytest-llmbench"]
    assert data["started_at"] <= data["finished_at"]


LONG_NAME = "r" * 300  # past NAME_MAX (255 bytes)
PAST_PATH_MAX = "/".join(["p" * 200] * 25)  # 5,024 characters, past PATH_MAX (4,096)


@pytest.mark.parametrize(
    ("folder", "message"),
    [
        ("/proc/llmbench-results", "/proc/llmbench-results (No such file or directory)"),
        ("/proc/self/no/such", "/proc/self/no/such (/proc/self/no: No such file or directory)"),
        ("taken/sub", "--results-dir is inside a file: */taken"),
        # Shown by their ends (120 characters each).
        (LONG_NAME, f"*/rrr*...{'r' * 120} (File name too long)"),
        (PAST_PATH_MAX, f"*/ppp*...{'p' * 120} (File name too long)"),
    ],
    ids=["proc", "proc-deeper", "file-in-the-way", "name-past-NAME_MAX", "path-past-PATH_MAX"],
)
def test_a_results_dir_that_cannot_be_made_is_a_usage_error_before_any_call(
    bench: Bench, folder: str, message: str
) -> None:
    """Issue 25: `--results-dir` under /proc was an INTERNALERROR at the first record, after
    its call; a name too long was an INTERNALERROR at the start."""
    bench.pytester.path.joinpath("taken").write_text("a file")
    bench.eval_file("capitals", CAPITALS)
    result = bench.pytester.runpytest(
        "-p", "no:cacheprovider", "--models=fake", f"--results-dir={folder}"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    if "inside a file" not in message:
        message = f"--results-dir cannot be made: {message}"
    result.stderr.fnmatch_lines([f"ERROR: llmbench: *{message}"])
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text
    assert bench.server.chat_requests() == []


def test_the_results_dir_of_the_ini_file_is_tried_at_the_start(bench: Bench) -> None:
    bench.pytester.makeini("[pytest]\nllmbench_results_dir = /proc/llmbench-results\n")
    bench.eval_file("capitals", CAPITALS)
    result = bench.pytester.runpytest("-p", "no:cacheprovider", "--models=fake")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--results-dir cannot be made: /proc/llmbench-results (*"])
    assert bench.server.chat_requests() == []


def test_trying_the_results_dir_leaves_nothing_behind_in_a_run_without_records(
    bench: Bench,
) -> None:
    bench.pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    result = bench.pytester.runpytest("-p", "no:cacheprovider", "--results-dir=new/deeper/out")
    result.assert_outcomes(passed=1)
    assert not bench.pytester.path.joinpath("new").exists()
    # Python's bytecode cache is pytest's (unless PYTHONDONTWRITEBYTECODE is set), not ours.
    left = {p.name for p in bench.pytester.path.iterdir()} - {"profiles", "__pycache__"}
    assert sorted(left) == ["test_plain.py"]


def test_a_default_results_folder_that_cannot_be_made_is_a_usage_error(bench: Bench) -> None:
    """The default folder is made at the first record: a file in its place ends the run as a
    usage error naming it, not an internal error."""
    _right_answers(bench)
    bench.pytester.path.joinpath("llmbench-results").write_text("a file in the way")
    bench.eval_file("capitals", CAPITALS)
    result = bench.pytester.runpytest("-p", "no:cacheprovider", "--models=fake")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: llmbench: the results folder (see --results-dir) cannot be made: */llmbench-results/* (Not a directory)"
        ]
    )
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text


@pytest.mark.parametrize("workers", ["0", "2"])
def test_parameters_as_deep_as_a_profile_may_hold_reach_the_record(
    bench: Bench, workers: str
) -> None:
    """The loaders refuse values that hold themselves or nest past 64 levels (yamlguard); what
    they let through, every walker after them handles: the cache key, redaction, the record's
    JSON line and, under xdist, the report's transport."""
    _right_answers(bench)
    deep = "[" * 60 + "1" + "]" * 60  # 63 levels with models, the profile and params
    bench.pytester.makefile(
        ".yaml",
        **{
            "profiles/deep": f"""
models:
  deep:
    model: openai/fake-model
    api_base: {bench.server.base_url}
    api_key_env: {FAKE_KEY_ENV}
    params: {{temperature: 0, tree: {deep}, again: &t [{{a: 1}}], twice: *t}}
"""
        },
    )
    bench.eval_file("capitals", CAPITALS)
    result = bench.run_subprocess("--models=deep", "--cache=use", f"-n{workers}")
    result.assert_outcomes(passed=2)
    records = bench.records()
    tree = records[0]["params"]["tree"]
    for _ in range(59):
        (tree,) = tree
    assert tree == [1] and records[0]["params"]["twice"] == [{"a": 1}]
    again = bench.run_subprocess("--models=deep", "--cache=use", f"-n{workers}")
    again.assert_outcomes(passed=2)
    assert all(record["cached"] for record in bench.records())  # the same cache keys


def test_default_results_dir_is_a_new_timestamped_folder(bench: Bench) -> None:
    _right_answers(bench)
    bench.eval_file("capitals", CAPITALS)
    first = bench.pytester.runpytest("-p", "no:cacheprovider", "--models=fake")
    first.assert_outcomes(passed=2)
    second = bench.pytester.runpytest("-p", "no:cacheprovider", "--models=fake")
    second.assert_outcomes(passed=2)
    base = bench.pytester.path / "llmbench-results"
    folders = sorted(p for p in base.iterdir())
    assert len(folders) == 2
    for folder in folders:
        assert re.fullmatch(r"\d{8}-\d{6}(-\d+)?", folder.name)
        assert len((folder / "results.jsonl").read_text().splitlines()) == 2
        assert (folder / "all_metrics.csv").is_file() and (folder / "run.json").is_file()
        assert (folder / "leaderboard.csv").is_file()
        assert (folder / "fake" / "aggregate_metrics.csv").is_file()
    assert f"llmbench: 2 records in {folders[0]}" in first.stdout.str()
    assert f"llmbench: 2 records in {folders[1]}" in second.stdout.str()


def test_terminal_summary_shows_leaderboard_and_path(bench: Bench) -> None:
    _right_answers(bench)
    bench.eval_file("capitals", CAPITALS)
    result = bench.run("--models=@fakes")
    result.stdout.fnmatch_lines(
        [
            "*= llmbench leaderboard =*",
            "#*model*score ?95% CI?*pass*cost $*p50 s*ttft s*vs #1",
            "1*fake *1.00 ?0.34, 1.00?*100.0%*",
            "2*fake2*1.00 ?0.34, 1.00?*100.0%*+0.00 p=1.00 n.s.",
            f"llmbench: 4 records in {bench.pytester.path / 'out'}",
        ]
    )
    assert "llmbench judges" not in result.stdout.str()
    assert not bench.out("judge_agreement.csv").exists()


# Stands in for judge assertions: adds two judges' scores to each record as it is made.
JUDGES_CONFTEST = """
import pytest

SCORES = {"france": (5, 4), "japan": (3, 3)}


def entry(name, score):
    return {
        "assertion": 0, "type": "jury", "judge": name, "model_id": "openai/" + name,
        "scores": {"correctness": score}, "reasons": {"correctness": "why"}, "error": None,
        "call_attempts": 1, "input_tokens": 5, "output_tokens": 2, "cost_usd": 0.0005,
        "latency_s": 0.1, "cached": False,
    }


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    record = getattr(report, "llmbench_record", None)
    if record is not None:
        first, second = SCORES[record["case_id"]]
        record["judges"] = [entry("j1", first), entry("j2", second)]
        record["dimensions"] = {"correctness": (first + second) / 2}
        record["judge_tokens"], record["judge_cost_usd"] = 14, 0.001
    return report
"""


def test_judges_summary_agreement_file_and_run_json(bench: Bench) -> None:
    _right_answers(bench)
    bench.eval_file("capitals", CAPITALS)
    bench.pytester.makeconftest(JUDGES_CONFTEST)
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=2)
    # Units (5, 4) and (3, 3): D_o = 2 / 4 = 0.5; mean 3.75, squares sum 2.75,
    # D_e = 2 * 2.75 / 3 = 11/6; alpha = 1 - 0.5 / (11/6) = 8/11 = 0.727.
    result.stdout.fnmatch_lines(
        [
            "*= llmbench judges =*",
            "dimension*mean*alpha*units",
            "correctness*3.750*0.727*2",
            "judge errors: 0 (excluded from scores); judge tokens: 28; judge cost: $0.0020",
            "*= llmbench leaderboard =*",
            "#*model*score*",
        ]
    )
    data = json.loads(bench.out("run.json").read_text(encoding="utf-8"))
    (agreement,) = data["judge_agreement"]
    assert agreement.pop("alpha") == pytest.approx(8 / 11)
    assert agreement == {"dimension": "correctness", "units": 2, "judges": 2, "values": 4}
    assert _csv(bench.out("judge_agreement.csv")) == [
        {
            "dimension": "correctness",
            "alpha": "0.727273",
            "units": "2",
            "judges": "2",
            "values": "4",
        }
    ]
    (row,) = _csv(bench.out("all_metrics.csv"))
    assert _header(bench.out("all_metrics.csv"))[-1] == "dim_correctness_mean"
    assert (row["dim_correctness_mean"], row["judge_tokens_total"]) == ("3.75", "28")
    assert float(row["judge_cost_usd_total"]) == pytest.approx(0.002)


# -- gates -------------------------------------------------------------------------------------


def _half_right(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="France", reply="Paris."))
    bench.server.add_rule(Rule(match="Japan", reply="Osaka"))
    bench.eval_file("capitals", CAPITALS)


def test_a_case_below_threshold_fails_the_run(bench: Bench) -> None:
    _half_right(bench)
    result = bench.run("--models=fake")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*capitals::japan on fake (repeat 0): score 0.750 < threshold 1*",
            "*expected: Tokyo*",
            "*got:      Osaka*",
            "*?FAIL? contains (weight 1)*",
        ]
    )
    assert "gate FAILED" not in result.stdout.str()


def test_min_pass_rate_met_passes_the_run(bench: Bench) -> None:
    _half_right(bench)
    result = bench.run("--models=fake", "--min-pass-rate", "0.5")
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.OK
    assert "gate FAILED" not in result.stdout.str()
    assert json.loads(bench.out("run.json").read_text())["exitstatus"] == 0


def test_min_pass_rate_missed_fails_the_run_and_names_the_model(bench: Bench) -> None:
    _half_right(bench)
    result = bench.run("--models=fake", "--min-pass-rate", "0.9")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*llmbench gate FAILED: fake: pass rate 50.0% < --min-pass-rate 90.0%*"]
    )
    data = json.loads(bench.out("run.json").read_text())
    assert data["exitstatus"] == 1
    assert data["gate_failures"] == ["fake: pass rate 50.0% < --min-pass-rate 90.0%"]


def test_min_pass_rate_names_only_the_failing_model(bench: Bench) -> None:
    bench.server.add_rule(Rule(model="fake-model-2", reply="no idea"))
    _right_answers(bench)
    bench.eval_file("capitals", CAPITALS)
    result = bench.run("--models=@fakes", "--min-pass-rate", "0.9")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    gate_lines = [line for line in result.outlines if "gate FAILED" in line]
    assert gate_lines == ["llmbench gate FAILED: fake2: pass rate 0.0% < --min-pass-rate 90.0%"]


def test_min_pass_rate_does_not_hide_provider_errors(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="Japan", status=500))
    bench.server.add_rule(Rule(match="France", reply="Paris."))
    bench.eval_file("capitals", CAPITALS)
    result = bench.run("--models=fake", "--min-pass-rate", "0.5", "--max-retries=0")
    result.assert_outcomes(passed=1, errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "gate FAILED" not in result.stdout.str()


def test_min_pass_rate_does_not_hide_collection_errors(bench: Bench) -> None:
    _half_right(bench)
    bench.eval_file("broken", "cases: [unclosed\n")
    result = bench.run("--models=fake", "--min-pass-rate", "0.5", "--continue-on-collection-errors")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_gate_failure_keeps_the_interrupted_exit_status(bench: Bench) -> None:
    bench.pytester.makepyfile(
        stopper="""
        def stop(output, context):
            raise KeyboardInterrupt
        """
    )
    bench.server.add_rule(Rule(reply="wrong"))
    bench.eval_file(
        "steps",
        """
        cases:
          - id: first
            prompt: first step
            assert: [{type: contains, value: right}]
          - id: second
            prompt: second step
            assert: [{type: python, value: "stopper:stop"}]
        """,
    )
    recorder = bench.pytester.inline_run(
        "-p",
        "no:cacheprovider",
        "--results-dir=out",
        "--models=fake",
        "--min-pass-rate=0.9",
        no_reraise_ctrlc=True,
    )
    assert recorder.ret == pytest.ExitCode.INTERRUPTED
    data = json.loads(bench.out("run.json").read_text())
    assert data["exitstatus"] == int(pytest.ExitCode.INTERRUPTED)
    assert data["gate_failures"] == ["fake: pass rate 0.0% < --min-pass-rate 90.0%"]


def test_reused_results_dir_holds_only_the_latest_run(bench: Bench) -> None:
    _right_answers(bench)
    bench.eval_file("capitals", CAPITALS)
    bench.run("--models=@fakes").assert_outcomes(passed=4)
    assert len(bench.records()) == 4
    bench.run("--models=fake", "-k", "france").assert_outcomes(passed=1)
    records = bench.records()
    assert [(r["model"], r["case_id"]) for r in records] == [("fake", "france")]
    (row,) = _csv(bench.out("all_metrics.csv"))
    assert row["n_items"] == "1"
    assert json.loads(bench.out("run.json").read_text())["records"] == len(records)


# -- plain tests through our fixtures ----------------------------------------------------------


def test_plain_test_with_llm_and_record_score_produces_a_record(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="France", reply="Paris is the capital"))
    bench.pytester.makepyfile(
        test_plain="""
        def test_capital(llm, record_score):
            answer = llm.complete("What is the capital of France?")
            record_score(1.0 if "Paris" in answer.text else 0.0)
            record_score(len(answer.text.split()), name="words")
        """
    )
    result = bench.run("--models=@fakes")
    result.assert_outcomes(passed=2)
    records = {r["model"]: r for r in bench.records()}
    assert set(records) == {"fake", "fake2"}
    record = records["fake"]
    assert tuple(record) == FIELDS
    assert record["nodeid"] == "test_plain.py::test_capital[fake-r0]"
    assert record["suite"] == "test_plain" and record["eval_file"] == "test_plain.py"
    assert record["case_id"] == "test_capital"
    assert record["model_id"] == "openai/fake-model"
    assert record["outcome"] == "passed" and record["score"] == 1.0
    assert record["metrics"] == {"words": 4.0}
    assert record["prompt"] == "What is the capital of France?"
    assert record["response"] == "Paris is the capital"
    assert (record["input_tokens"], record["output_tokens"]) == (6, 4)
    assert record["cost_usd"] == pytest.approx(_cost(6, 4, 0.001, 0.002))
    assert records["fake2"]["cost_usd"] == pytest.approx(_cost(6, 4, 0.01, 0.02))
    (row,) = [r for r in _csv(bench.out("all_metrics.csv")) if r["model"] == "fake"]
    assert row["suite"] == "test_plain" and float(row["score_mean"]) == 1.0


def test_plain_test_sums_tokens_over_calls(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply="one two"))
    bench.pytester.makepyfile(
        test_twice="""
        def test_twice(llm):
            llm.complete("first question")
            llm.complete("second question here")
        """
    )
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert (record["input_tokens"], record["output_tokens"]) == (5, 4)
    assert record["prompt"] == "second question here"
    assert record["score"] is None


def test_plain_test_provider_error_is_an_error_outcome(bench: Bench) -> None:
    bench.server.add_rule(Rule(status=500, error_message="backend down"))
    bench.pytester.makepyfile(
        test_down="""
        def test_down(llm, record_score):
            llm.complete("anything")
            record_score(1.0)
        """
    )
    result = bench.run("--models=fake", "--max-retries=0")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    (record,) = bench.records()
    assert record["outcome"] == "error" and record["error_kind"] == "provider"
    assert "backend down" in record["error"]
    assert record["score"] is None
    (row,) = _csv(bench.out("all_metrics.csv"))
    assert row["n_errors"] == "1" and row["n_failed"] == "0"


def test_unexpected_exception_in_an_eval_item_is_an_error_record(bench: Bench) -> None:
    bench.pytester.makeconftest(
        """
        def pytest_runtest_call(item):
            if getattr(item, "case", None) is not None and item.case.id == "boom":
                raise RuntimeError("scorer crashed")
        """
    )
    bench.eval_file(
        "two", "cases: [{id: boom, prompt: a, expected: ok}, {id: fine, prompt: b, expected: ok}]"
    )
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=1, failed=1)
    by_case = {r["case_id"]: r for r in bench.records()}
    assert by_case["boom"]["outcome"] == "error"
    assert by_case["boom"]["error_kind"] == "internal"
    assert "RuntimeError: scorer crashed" in by_case["boom"]["error"]
    assert by_case["fine"]["outcome"] == "passed"


# -- repeats: verdicts, --repeat-policy, flaky cases -------------------------------------------


def _japan_flaky(bench: Bench) -> None:
    """France always right; Japan wrong on its first call only: 2 of 3 repeats pass."""
    bench.server.add_rule(Rule(match="Japan", reply="Osaka", times=1))
    _right_answers(bench)
    bench.eval_file("capitals", CAPITALS)


def test_case_verdicts_csv_and_flaky_section(bench: Bench) -> None:
    _japan_flaky(bench)
    result = bench.run("--models=fake", "--repeat=3")
    result.assert_outcomes(passed=5, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the default policy is all
    assert _csv(bench.out("case_verdicts.csv")) == [
        {
            "model": "fake",
            "suite": "capitals",
            "case_id": "france",
            "n": "3",
            "passed": "3",
            "errors": "0",
            "pass_rate": "1.0",
            "k": "3",
            "pass_at_k": "1.0",
            "pass_hat_k": "1.0",
            "verdict": "passed",
            "human_verdicts": "0",
            "verdict_source": "machine",
        },
        {
            "model": "fake",
            "suite": "capitals",
            "case_id": "japan",
            "n": "3",
            "passed": "2",
            "errors": "0",
            "pass_rate": "0.666667",
            # k = 3 repeats: pass@3 = 1 - C(1,3)/C(3,3) = 1; pass^3 = C(2,3)/C(3,3) = 0.
            "k": "3",
            "pass_at_k": "1.0",
            "pass_hat_k": "0.0",
            "verdict": "flaky",
            "human_verdicts": "0",
            "verdict_source": "machine",
        },
    ]
    result.stdout.fnmatch_lines(
        [
            "*= llmbench flaky cases =*",
            "fake  capitals::japan  2/3 passed  FAILS under --repeat-policy=all",
            "*= llmbench leaderboard =*",
        ]
    )
    assert "capitals::france" not in "".join(line for line in result.outlines if "passed  " in line)
    summary = json.loads(bench.out("run.json").read_text())["repeat_policy"]
    assert summary == {
        "policy": "all",
        "cases": 2,
        "passed": 1,
        "failed": 0,
        "flaky": 1,
        "error": 0,
        "failing_policy": 1,
    }


@pytest.mark.parametrize(
    ("policy", "passes"),
    [("majority", True), ("any", True), ("at-least:2", True), ("at-least:3", False)],
)
def test_repeat_policy_decides_the_exit_status(bench: Bench, policy: str, passes: bool) -> None:
    _japan_flaky(bench)
    result = bench.run("--models=fake", "--repeat=3", f"--repeat-policy={policy}")
    result.assert_outcomes(passed=5, failed=1)  # the items keep their own outcomes
    expected = pytest.ExitCode.OK if passes else pytest.ExitCode.TESTS_FAILED
    assert result.ret == expected
    verdict = "passes" if passes else "FAILS"
    result.stdout.fnmatch_lines(
        [f"fake  capitals::japan  2/3 passed  {verdict} under --repeat-policy={policy}"]
    )
    data = json.loads(bench.out("run.json").read_text())
    assert data["exitstatus"] == int(expected)
    assert data["repeat_policy"]["failing_policy"] == (0 if passes else 1)
    assert ("case(s) fail --repeat-policy" in result.stdout.str()) is not passes


def test_repeat_policy_fails_a_case_below_it_even_when_every_item_passed(bench: Bench) -> None:
    _right_answers(bench)
    bench.eval_file("capitals", CAPITALS)
    result = bench.run("--models=fake", "--repeat=2", "--repeat-policy=at-least:3")
    result.assert_outcomes(passed=4)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["llmbench: 2 case(s) fail --repeat-policy=at-least:3"])
    assert "llmbench flaky cases" not in result.stdout.str()  # no case is flaky


def test_repeat_policy_keeps_a_case_that_always_fails_failed(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="Japan", reply="Osaka"))
    _right_answers(bench)
    bench.eval_file("capitals", CAPITALS)
    result = bench.run("--models=fake", "--repeat=3", "--repeat-policy=any")
    result.assert_outcomes(passed=3, failed=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "llmbench flaky cases" not in result.stdout.str()
    verdicts = {row["case_id"]: row["verdict"] for row in _csv(bench.out("case_verdicts.csv"))}
    assert verdicts == {"france": "passed", "japan": "failed"}


def test_a_run_cut_short_by_x_is_never_passed_by_the_repeat_policy(bench: Bench) -> None:
    _japan_flaky(bench)
    result = bench.run("--models=fake", "--repeat=3", "--repeat-policy=any", "-x")
    result.stdout.fnmatch_lines(["*stopping after 1 failures*"])
    # What never ran cannot pass a gate: the policy does not turn a stopped run green.
    assert result.ret == pytest.ExitCode.TESTS_FAILED


@pytest.mark.parametrize(
    ("setup", "args", "passed"),
    [
        (_half_right, ("--min-pass-rate", "0.5"), 1),
        (_japan_flaky, ("--repeat=3", "--repeat-policy=majority"), 5),
    ],
    ids=["min-pass-rate", "repeat-policy"],
)
def test_gates_and_policies_do_not_hide_ordinary_test_failures(
    bench: Bench, setup: Callable[[Bench], None], args: tuple[str, ...], passed: int
) -> None:
    setup(bench)  # eval results the option lets through; a failing plain test still counts
    bench.pytester.makepyfile("def test_plain():\n    assert 1 == 2\n")
    result = bench.run("--models=fake", *args)
    result.assert_outcomes(passed=passed, failed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_repeat_policy_does_not_hide_provider_errors(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="France", status=500))
    _japan_flaky(bench)
    result = bench.run("--models=fake", "--repeat=3", "--repeat-policy=majority", "--max-retries=0")
    result.assert_outcomes(passed=2, failed=1, errors=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = json.loads(bench.out("run.json").read_text())["repeat_policy"]
    assert (summary["error"], summary["flaky"], summary["failing_policy"]) == (1, 1, 0)


def test_min_pass_rate_decides_over_the_repeat_policy(bench: Bench) -> None:
    _japan_flaky(bench)
    # Under at-least:3 japan fails, but with an aggregate gate single cases do not fail the run:
    # 5 of 6 items passed, 83% >= 80%.
    result = bench.run(
        "--models=fake", "--repeat=3", "--repeat-policy=at-least:3", "--min-pass-rate=0.8"
    )
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["llmbench: 1 case(s) fail --repeat-policy=at-least:3"])
    bench.server.reset()
    _japan_flaky(bench)
    failed = bench.run(
        "--models=fake", "--repeat=3", "--repeat-policy=majority", "--min-pass-rate=0.9"
    )
    assert failed.ret == pytest.ExitCode.TESTS_FAILED
    assert "llmbench gate FAILED: fake: pass rate 83.3%" in failed.stdout.str()


def test_repeat_ci_columns_are_sane(bench: Bench) -> None:
    _japan_flaky(bench)
    bench.run("--models=fake", "--repeat=3")
    (row,) = _csv(bench.out("leaderboard.csv"))
    assert _header(bench.out("leaderboard.csv"))[-8:] == [
        "score_ci_low",
        "score_ci_high",
        "pass_rate_ci_low",
        "pass_rate_ci_high",
        "n_flaky",
        "pass_at_k",
        "pass_hat_k",
        "k",
    ]
    score, pass_rate = float(row["score_mean"]), float(row["pass_rate"])
    assert 0.0 <= float(row["score_ci_low"]) <= score <= float(row["score_ci_high"]) <= 1.0
    assert 0.0 <= float(row["pass_rate_ci_low"]) <= pass_rate <= float(row["pass_rate_ci_high"])
    assert float(row["pass_rate_ci_low"]) < pass_rate  # the flaky case gives it a width
    assert (row["n_flaky"], row["k"]) == ("1", "3")
    # pass@3: both cases pass at least once; pass^3: only france passes all three.
    assert (float(row["pass_at_k"]), float(row["pass_hat_k"])) == (1.0, 0.5)


EIGHT_CASES = "cases:\n" + "".join(
    f"  - id: q{i}\n    prompt: Question number {i}\n    expected: answer\n    assert: [contains]\n"
    for i in range(8)
)


def test_comparisons_csv_and_vs_top_column(bench: Bench) -> None:
    bench.server.add_rule(Rule(model="fake-model-2", reply="no idea"))
    bench.server.add_rule(Rule(reply="the answer"))
    bench.eval_file("quiz", EIGHT_CASES)
    result = bench.run("--models=fake2,fake")
    result.assert_outcomes(passed=8, failed=8)
    rows = _csv(bench.out("comparisons.csv"))
    assert [(r["model_a"], r["model_b"], r["metric"], r["n_cases"]) for r in rows] == [
        ("fake", "fake2", "score", "8"),
        ("fake", "fake2", "pass_rate", "8"),
    ]
    for row in rows:
        assert float(row["diff"]) == -1.0
        # 8 cases all one way: McNemar 2 / 2^8; the bootstrap's floor 2^(1 - 8) is the same.
        assert float(row["p_value"]) == pytest.approx(2 / 256, abs=1e-6)
        assert row["significant"] == "True"
    result.stdout.re_match_lines(
        [
            r"#\s+model\s+score \[95% CI\]\s+pass.*vs #1$",
            # 8 cases all one way: the Wilson floor, 8 / (8 + z^2) = 0.68 (and 0.32 above 0).
            r"1\s+fake\s+1\.00 \[0\.68, 1\.00\]\s+100\.0%.*",
            r"2\s+fake2\s+0\.00 \[0\.00, 0\.32\]\s+0\.0%.*-1\.00 p<0\.01 \*$",
        ]
    )
