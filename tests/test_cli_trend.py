"""``llmbench trend``: real runs against the fake server, indexed, followed and gated."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest
from conftest import Bench, Rule

from pytest_llmbench.cli import main

N_CASES = 4
CAPITALS = "cases:\n" + "".join(
    f"""  - id: q{index}
    prompt: "Question {index}: what is the capital of France?"
    expected: Paris
    assert: [contains]
"""
    for index in range(N_CASES)
)
#: q3 asked another way: its hash changes, its earlier runs are no longer comparable.
EDITED = CAPITALS.replace("Question 3: what", "Question 3, briefly: what")


def _call(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _git(folder: Path, *args: str) -> str:
    command = ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    done = subprocess.run([*command, *args], check=True, capture_output=True, text=True)
    return done.stdout.strip()


def _runs(bench: Bench) -> tuple[Path, str, str]:
    """Six runs under ./runs (r1..r6): all pass until r5, q3 edited from r3 on (and committed),
    everything fails in r6. Returns the runs folder and the two commits."""
    root = bench.pytester.path
    bench.eval_file("capitals", CAPITALS)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "first")
    first = _git(root, "rev-parse", "HEAD")
    second = first
    for run in range(1, 7):
        if run == 3:
            bench.eval_file("capitals", EDITED)
            _git(root, "commit", "-q", "-am", "q3 asked briefly")
            second = _git(root, "rev-parse", "HEAD")
        bench.server.reset()
        bench.server.add_rule(Rule(match="France", reply="Paris." if run < 6 else "London."))
        result = bench.run("--models=fake", f"--results-dir=runs/r{run}")
        assert result.ret == (0 if run < 6 else 1)
    return root / "runs", first, second


@pytest.mark.slow
def test_trend_of_real_runs_indexes_follows_gates_and_survives_the_runs(
    bench: Bench, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    runs, first, second = _runs(bench)
    broken = runs / "broken"
    broken.mkdir()
    (broken / "results.jsonl").write_text('{"suite": "capitals", "case_id"\n')
    (broken / "run.json").write_text('{"started_at": "2026-01-01T00:00:00+00:00"}')
    (runs / "notes").mkdir()
    (runs / "notes" / "README.txt").write_text("not a run")

    code, out, err = _call(capsys, "trend", runs)
    assert code == 0 and err == ""
    rows = [
        line.split()
        for line in out.splitlines()
        if line.startswith("  r") and not line.startswith("  run ")
    ]
    assert [row[0] for row in rows] == [f"r{run}" for run in range(1, 7)]
    assert [row[2] for row in rows] == [first[:8]] * 2 + [second[:8]] * 4
    # r1, r2: q3 was asked otherwise then; 3 items counted, 1 left out
    assert [(row[3], row[4]) for row in rows[:2]] == [("3", "100.0%")] * 2
    assert [row[-2:] for row in rows] == [["1", "-"], ["1", "-"], ["0", "commit"],
                                          ["0", "-"], ["0", "-"], ["0", "-"]]  # fmt: skip
    assert rows[5][3:5] == ["4", "0.0%"]
    assert "  2 items left out: their case changed since" in out
    assert "  drift: down at r6, after r5 (Page-Hinkley statistic" in out
    for case in range(N_CASES):
        assert f"  fake capitals.eval.yaml::q{case}: failing since r6, 1 flip" in out
    assert f"  {broken}: broken: {broken / 'results.jsonl'}:1: not valid JSON" in out
    assert f"  {runs / 'notes'}: foreign: no run in it" in out
    index = runs / "trend.jsonl"
    assert len(index.read_text().splitlines()) == 6

    code, _, err = _call(capsys, "trend", runs, "--fail-on-drift")
    assert code == 1
    assert (
        err
        == "llmbench: --fail-on-drift: fake on capitals.eval.yaml: pass rate drifted down at r6 (since r5)\n"
    )
    assert len(index.read_text().splitlines()) == 6  # nothing new: nothing appended

    code, out, _ = _call(capsys, "trend", runs, "--json")
    report = json.loads(out)
    (series,) = report["series"]
    assert [point["left_out"] for point in series["points"]] == [1, 1, 0, 0, 0, 0]
    q3 = next(case for case in report["cases"] if case["case_id"] == "q3")
    assert [verdict for _, verdict in q3["verdicts"]] == [
        "changed",
        "changed",
        "pass",
        "pass",
        "pass",
        "fail",
    ]
    assert q3["state"] == "failing" and q3["since"] == "r6"

    # CI keeps only the index: the trend is the same without the runs.
    kept = tmp_path / "cache" / "trend.jsonl"
    kept.parent.mkdir()
    shutil.copy(index, kept)
    shutil.rmtree(runs)
    code, out, _ = _call(capsys, "trend", "--index", kept, "--json")
    assert code == 0
    again = json.loads(out)
    assert again["series"] == report["series"] and again["cases"] == report["cases"]
    assert again["skipped"] == []
    code, _, _ = _call(capsys, "trend", "--index", kept, "--fail-on-drift")
    assert code == 1


@pytest.mark.slow
def test_a_run_completed_by_retry_errors_replaces_its_errors_in_the_trend(
    bench: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real run whose provider failed on q1, trended, completed in place by --retry-errors,
    trended again: the run is indexed again and only its completed entry counts."""
    bench.eval_file("capitals", CAPITALS)
    options = ("--models=fake", "--max-retries=0", "--results-dir=runs/r1")
    bench.server.add_rule(Rule(match="Question 1:", status=500, error_message="overloaded"))
    bench.server.add_rule(Rule(match="France", reply="Paris."))
    assert bench.run(*options).ret != 0
    capsys.readouterr()  # the run's own output
    runs = bench.pytester.path / "runs"
    code, out, _ = _call(capsys, "trend", runs)
    assert code == 0 and "3 (+1 err)" in out
    assert "  fake capitals.eval.yaml::q1: error since r1" in out
    bench.server.reset()
    bench.server.add_rule(Rule(match="France", reply="Paris."))
    assert bench.run(*options, "--retry-errors=runs/r1").ret == 0
    capsys.readouterr()  # the run's own output
    code, out, _ = _call(capsys, "trend", runs, "--json")
    assert code == 0
    report = json.loads(out)
    assert report["runs"] == ["r1"]
    ((point,),) = [series["points"] for series in report["series"]]
    assert (point["n"], point["passed"], point["errors"]) == (N_CASES, N_CASES, 0)
    assert {case["state"] for case in report["cases"]} == {"passing"}
    assert len((runs / "trend.jsonl").read_text().splitlines()) == 2  # both kept, one counted


def test_a_cut_index_line_and_shards_are_listed_and_the_trend_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    _hand_run(runs / "a", 1, "passed")
    index = runs / "trend.jsonl"
    assert _call(capsys, "trend", runs)[0] == 0
    with open(index, "a", encoding="utf-8") as stream:
        stream.write('{"run": "b", "started_at": "2026-1')  # a job killed while it appended
    shard = runs / "shard-1"
    _hand_run(shard, 2, "failed")
    info = json.loads((shard / "run.json").read_text())
    (shard / "run.json").write_text(json.dumps({**info, "config": {"shard": {"index": 1}}}))
    code, out, _ = _call(capsys, "trend", runs)
    assert code == 0 and out.startswith("trend of 1 run ")
    assert f"  {index}:2: an unfinished last line (an append cut short): passed over" in out
    assert f"  {shard}: a shard: index its merge" in out
    _hand_run(runs / "c", 3, "passed")
    code, out, _ = _call(capsys, "trend", runs)
    assert code == 0 and out.startswith("trend of 2 runs ")
    assert f"  {index}:2: an unfinished last line (an append cut short): cut off" in out
    assert [json.loads(line)["run"] for line in index.read_text().splitlines()] == ["a", "c"]


def _hand_run(folder: Path, day: int, outcome: str, eval_file: str = "qa.eval.yaml") -> None:
    folder.mkdir(parents=True)
    record = {"schema": 2, "suite": "qa", "eval_file": eval_file, "case_id": "x", "case_hash": "h",
              "model": "m", "model_id": "openai/m", "repeat": 0, "outcome": outcome,
              "score": 1.0 if outcome == "passed" else 0.0}  # fmt: skip
    (folder / "results.jsonl").write_text(json.dumps(record) + "\n")
    (folder / "run.json").write_text(json.dumps({"started_at": f"2026-11-{day:02d}T00:00:00Z"}))


def test_the_drift_parameters_are_the_command_s(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for day, outcome in enumerate(["passed"] * 3 + ["failed"], 1):
        _hand_run(tmp_path / "runs" / f"r{day}", day, outcome)
    code, out, _ = _call(capsys, "trend", tmp_path / "runs", "--fail-on-drift")
    assert code == 0 and "drift: none (Page-Hinkley statistic 0.700, threshold 0.4)" in out
    argv = ["trend", tmp_path / "runs", "--fail-on-drift", "--drift-min-runs", "4"]
    code, out, _ = _call(capsys, *argv, "--drift-threshold", "0.5", "--drift-delta", "0")
    assert code == 1 and "drift: down at r4, after r3 (Page-Hinkley statistic 0.750" in out


def test_model_and_eval_file_pick_a_series_and_unknown_ones_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _hand_run(tmp_path / "runs" / "a", 1, "passed")
    _hand_run(tmp_path / "runs" / "b", 2, "failed", eval_file="other.eval.yaml")
    code, out, _ = _call(capsys, "trend", tmp_path / "runs", "--eval-file", "other.eval.yaml")
    assert code == 0 and "m on other.eval.yaml" in out and "m on qa.eval.yaml" not in out
    code, out, err = _call(capsys, "trend", tmp_path / "runs", "--model", "gpt")
    assert code == 2 and out == ""
    assert err == "llmbench: --model gpt: not in the indexed runs (known: m)\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "llmbench: trend: give a runs folder (RUNS_DIR), or --index PATH to read\n"),
        (["--index", "{tmp}/none.jsonl"], "llmbench: --index {tmp}/none.jsonl: no such index\n"),
        (["{tmp}/nowhere"], "llmbench: {tmp}/nowhere: no such runs folder\n"),
        (
            ["{tmp}", "--drift-threshold", "0"],
            "llmbench: trend: drift parameters need delta >= 0, threshold > 0 and min_runs >= 1,"
            " got delta=0.05, threshold=0.0, min_runs=5\n",
        ),
    ],
    ids=["nothing", "missing-index", "missing-runs", "bad-threshold"],
)
def test_usage_errors_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = _call(capsys, "trend", *[arg.format(tmp=tmp_path) for arg in argv])
    assert (code, out, err) == (2, "", message.format(tmp=tmp_path))


def test_a_broken_index_line_exits_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = tmp_path / "trend.jsonl"
    index.write_text('{"run": "a", "started_at": "x", "items": []}\n{"run": \n')
    code, _, err = _call(capsys, "trend", "--index", index)
    assert code == 2 and err.startswith(f"llmbench: {index}:2: not valid JSON")


def test_an_empty_runs_folder_says_so_and_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _call(capsys, "trend", tmp_path)
    assert code == 0
    assert out == f"trend of 0 runs ({tmp_path / 'trend.jsonl'})\nno runs indexed yet\n"
    code, out, _ = _call(capsys, "--help")
    assert "trend" in out


def test_reading_an_index_alone_says_an_append_cut_short(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--index`` without a runs folder passes over a last line cut mid-write, and says so."""
    index = tmp_path / "trend.jsonl"
    whole = '{"run": "a", "started_at": "2026-11-01T00:00:00+00:00", "items": []}\n'
    index.write_text(whole + '{"run": "b", "sta')
    code, out, _ = _call(capsys, "trend", "--index", index)
    assert code == 0
    assert f"{index}:2" in out
