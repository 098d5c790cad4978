"""`-n 2` for real: workers produce records, the controller records them, same rows as `-n 0`."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest
from conftest import ARITH, TWO_CAPITALS, Bench, Rule

#: Fields that depend on timing or on which process ran the item.
TIMING_FIELDS = ("ttft_s", "latency_s", "tokens_per_s", "started_at", "worker")
TIMING_COLUMNS = (
    "latency_s_mean", "latency_s_p50", "latency_s_p95",
    "ttft_s_mean", "ttft_s_p50", "ttft_s_p95", "tokens_per_s_mean",
)  # fmt: skip


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _comparable(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    stripped = [{k: v for k, v in r.items() if k not in TIMING_FIELDS} for r in records]
    return sorted(stripped, key=lambda r: r["nodeid"])


def _metrics(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [{k: v for k, v in row.items() if k not in TIMING_COLUMNS} for row in rows]


@pytest.fixture
def two_files(bench: Bench) -> Bench:
    """2 files x 2 cases x 2 models x 2 repeats; fake2 misses Japan and errors on two plus two."""
    bench.server.add_rule(Rule(model="fake-model-2", match="Japan", reply="Kyoto"))
    bench.server.add_rule(Rule(model="fake-model-2", match="two plus two", status=503))
    for match, reply in (
        ("France", "Paris."),
        ("Japan", "Tokyo."),
        ("two plus two", "4"),
        ("three times four", "It is 12"),
    ):
        bench.server.add_rule(Rule(match=match, reply=reply))
    bench.eval_file("capitals", TWO_CAPITALS)
    bench.eval_file("arith", ARITH)
    bench.pytester.makeconftest(REPORT_SPY)
    return bench


#: Logs, on the controller only, what our recorder sees of each report.
REPORT_SPY = """
import json
from pathlib import Path

def pytest_configure(config):
    global SPY
    worker = hasattr(config, "workerinput")
    SPY = None if worker else Path(config.getoption("llmbench_results_dir") + ".reports.jsonl")

def pytest_runtest_logreport(report):
    if SPY is None or report.when == "teardown":
        return
    entry = [report.nodeid, report.when, report.outcome,
             getattr(report, "llmbench_score_failure", False),
             hasattr(report, "llmbench_record")]
    with SPY.open("a") as handle:
        handle.write(json.dumps(entry) + "\\n")
"""


def _spied(path: Path) -> list[list[Any]]:
    return sorted(json.loads(line) for line in path.read_text().splitlines())


@pytest.mark.slow
def test_two_workers_give_the_same_records_and_metrics_as_one_process(two_files: Bench) -> None:
    common = ("--models=@fakes", "--repeat=2", "--max-retries=0")
    serial = two_files.run("-n", "0", "--results-dir=serial", *common)
    serial.assert_outcomes(passed=12, failed=2, errors=2)
    parallel = two_files.run_subprocess("-n", "2", "--results-dir=parallel", *common)
    parallel.assert_outcomes(passed=12, failed=2, errors=2)
    assert serial.ret == parallel.ret == pytest.ExitCode.TESTS_FAILED

    root = two_files.pytester.path
    serial_records = _records(root / "serial" / "results.jsonl")
    parallel_records = _records(root / "parallel" / "results.jsonl")
    assert len(serial_records) == len(parallel_records) == 16
    assert _comparable(parallel_records) == _comparable(serial_records)
    assert {r["worker"] for r in serial_records} == {"main"}
    assert {r["worker"] for r in parallel_records} == {"gw0", "gw1"}
    # Timing fields are measured on the workers too, not lost on the way.
    answered = [r for r in parallel_records if r["outcome"] != "error"]
    assert all(r["latency_s"] and r["started_at"] for r in answered)
    # --stream=sample (the default) streams each model's 20 lowest-hash items: here, all 8.
    assert all(r["streamed"] for r in answered)
    assert all(bool(r["ttft_s"]) == r["streamed"] for r in answered)

    assert _metrics(root / "parallel" / "all_metrics.csv") == _metrics(
        root / "serial" / "all_metrics.csv"
    )
    same = ("leaderboard.csv", "fake/aggregate_metrics.csv", "fake2/aggregate_metrics.csv")
    # Repeat verdicts and the seeded paired bootstrap too: the same with and without xdist.
    same += ("case_verdicts.csv", "comparisons.csv")
    for name in same:
        assert _metrics(root / "parallel" / name) == _metrics(root / "serial" / name), name
    # Reports reach the controller's recorder the same way: score failures stay marked as such.
    spied = _spied(root / "parallel.reports.jsonl")
    assert spied == _spied(root / "serial.reports.jsonl")
    failures = [entry for entry in spied if entry[2] == "failed"]
    assert sorted((when, flag) for _, when, _, flag, _ in failures) == [
        ("call", True),
        ("call", True),
        ("setup", False),
        ("setup", False),
    ]
    assert all(entry[4] for entry in failures)
    run = json.loads((root / "parallel" / "run.json").read_text())
    assert run["records"] == 16 and "-n" in run["args"]
    # One results folder: workers write nothing of their own.
    assert sorted(p.name for p in (root / "parallel").iterdir()) == [
        "all_metrics.csv",
        "benchmark-bigger.json",
        "benchmark-smaller.json",
        "case_verdicts.csv",
        "comparisons.csv",
        "fake",
        "fake2",
        "leaderboard.csv",
        "metrics.prom",
        "report.html",
        "results.jsonl",
        "run.json",
    ]
    assert "llmbench: 16 records in" in parallel.stdout.str()
    assert parallel.stdout.str().count("llmbench leaderboard") == 1
