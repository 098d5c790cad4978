"""ResultsRecorder in-process (results/recorder.py): reports handed to it one by one, as pytest
hands them over, and its session end called by the test; no pytest session runs.

The config is a real one of the plugin (``pytester.parseconfigure``), so the recorder reads the
run's options as in a run; what it wrote is read back from the results folder.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest

from pytest_llmbench.results import summary as summary_module
from pytest_llmbench.results.gates import RunState
from pytest_llmbench.results.record import attempt_fields, build_record
from pytest_llmbench.results.recorder import (
    COMPLETION_KEY,
    RECORDER_KEY,
    SUMMARY_KEY,
    ResultsRecorder,
)
from pytest_llmbench.results_folder import ResultsFolder, record_line

SUITE = "quiz.eval.yaml"


def record(case: str, outcome: str = "passed", *, repeat: int = 0, **fields: Any) -> dict[str, Any]:
    """The record of item ``case`` of the quiz on ``fake``."""
    return build_record(
        nodeid=f"{SUITE}::{case}[fake-r{repeat}]",
        suite="quiz",
        eval_file=SUITE,
        case_id=case,
        model="fake",
        model_id="openai/fake-model",
        repeat=repeat,
        outcome=outcome,
        score=None if outcome == "error" else float(outcome == "passed"),
        threshold=1.0,
        latency_s=0.5,
        **fields,
    )


def report(
    nodeid: str, outcome: str = "passed", when: str = "call", **attributes: Any
) -> pytest.TestReport:
    """A report as pytest (or pytest-rerunfailures, outcome ``rerun``) hands it over."""
    made = pytest.TestReport(nodeid, (SUITE, 0, nodeid), {}, "passed", None, when)
    made.outcome = outcome  # type: ignore[assignment]  (rerun is not one of pytest's own)
    for name, value in attributes.items():
        setattr(made, name, value)
    return made


def reported(made: dict[str, Any], outcome: str | None = None) -> pytest.TestReport:
    """The call report carrying ``made``, its outcome the record's, a score's failure marked."""
    failed = made["outcome"] == "failed"
    return report(
        made["nodeid"],
        outcome or made["outcome"],
        llmbench_record=made,
        llmbench_score_failure=failed,
    )


@dataclass
class Run:
    """A configured run of the plugin whose results go to ``out``."""

    config: pytest.Config
    out: Path

    @property
    def recorder(self) -> ResultsRecorder:
        return self.config.stash[RECORDER_KEY]

    def lines(self) -> list[str]:
        return (self.out / "results.jsonl").read_text(encoding="utf-8").splitlines(True)

    def finish(
        self, exitstatus: int = 0, recorder: ResultsRecorder | None = None, **state: Any
    ) -> SimpleNamespace:
        """The recorder's session end, as pytest calls it (``state``: the session's flags)."""
        session = SimpleNamespace(exitstatus=exitstatus, shouldfail=False, shouldstop=False)
        vars(session).update(state)
        (recorder or self.recorder).pytest_sessionfinish(cast(pytest.Session, session), exitstatus)
        return session

    def run_json(self) -> dict[str, Any]:
        info = ResultsFolder(self.out).read_run_info()
        assert info is not None
        return info

    def csv(self, name: str) -> list[dict[str, str]]:
        with (self.out / name).open(newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle))


@pytest.fixture
def configure(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Configure a run with ``args``: the plugin alone, without the installed ones (xdist,
    pytest-html, ...) nor pytest's check of unraisable exceptions, which collects garbage
    twice as a config ends (0.7 s a test)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")

    def make(*args: str) -> Run:
        out = pytester.path / "out"
        plugins = ("-p", "pytest_llmbench.plugin", "-p", "no:unraisableexception")
        config = pytester.parseconfigure(*plugins, "-p", "no:cacheprovider", f"--results-dir={out}", *args)  # fmt: skip
        return Run(config, out)

    return make


# -- as items finish -------------------------------------------------------------------------


def test_each_record_is_on_disk_the_moment_it_arrives(configure: Any) -> None:
    run = configure()
    made = [record("a"), record("b", "failed"), record("c", "error", error="HTTP 503")]
    run.recorder.pytest_runtest_logreport(report("test_plain.py::test_other"))  # no record
    assert not run.out.exists()  # a folder is made at the first record, not before
    for count, each in enumerate(made, start=1):
        run.recorder.pytest_runtest_logreport(reported(each))
        assert run.lines() == [record_line(r) for r in made[:count]]
    assert run.recorder.records == made
    assert run.recorder.out_dir == run.out


def test_a_run_cut_short_keeps_every_finished_record(configure: Any) -> None:
    run = configure()
    made = [record("a"), record("b", "failed")]
    for each in made:
        run.recorder.pytest_runtest_logreport(reported(each))
    # Ctrl-C here: what another reader (llmbench view) finds is every finished record, whole.
    assert ResultsFolder(run.out).read_records() == made
    run.finish(pytest.ExitCode.INTERRUPTED, shouldstop="KeyboardInterrupt")
    info = run.run_json()
    assert (info["records"], info["exitstatus"]) == (2, pytest.ExitCode.INTERRUPTED)
    assert info["gate_inputs"] == {"exitstatus": 2, "other_failures": 0, "cut_short": True}
    (row,) = run.csv("all_metrics.csv")
    assert (row["n_items"], row["n_passed"], row["n_failed"]) == ("2", "1", "1")


def test_a_run_without_records_writes_nothing(configure: Any) -> None:
    run = configure()
    run.recorder.pytest_runtest_logreport(report("test_plain.py::test_one"))
    run.finish()
    assert not run.out.exists()
    assert run.recorder.summary is None and SUMMARY_KEY not in run.config.stash


def test_reruns_are_attempts_of_the_one_final_record(configure: Any) -> None:
    run = configure()
    first, second = record("a", "failed", response="no"), record("a", "error", error="503")
    for earlier in (first, second):
        run.recorder.pytest_runtest_logreport(reported(earlier, "rerun"))
    assert not run.out.exists()  # an earlier attempt is no record of its own
    final, other = record("a", response="yes"), record("b")
    run.recorder.pytest_runtest_logreport(reported(final))
    run.recorder.pytest_runtest_logreport(reported(other))
    kept = ResultsFolder(run.out).read_records()
    assert [r["case_id"] for r in kept] == ["a", "b"]
    assert kept[0]["attempts"] == [attempt_fields(first), attempt_fields(second)]
    assert [a["outcome"] for a in kept[0]["attempts"]] == ["failed", "error"]
    assert kept[1]["attempts"] == []


def test_a_reused_results_folder_holds_this_run_only(configure: Any) -> None:
    run = configure()
    run.out.mkdir()
    (run.out / "results.jsonl").write_text(record_line(record("old")) * 3)
    run.recorder.pytest_runtest_logreport(reported(record("new")))
    assert run.lines() == [record_line(record("new"))]


def test_a_results_folder_the_os_refuses_is_a_usage_error(configure: Any) -> None:
    run = configure()
    run.out.write_text("a file where the folder goes")  # tried at the start, gone since
    with pytest.raises(pytest.UsageError) as raised:
        run.recorder.pytest_runtest_logreport(reported(record("a")))
    assert str(raised.value) == f"llmbench: --results-dir cannot be made: {run.out} (File exists)"


def crash(run: Run, nodeid: str, worker: str = "gw1") -> pytest.TestReport:
    """The report xdist makes of an item whose worker died, handed to the recorder."""
    node = SimpleNamespace(gateway=SimpleNamespace(id=worker))
    made = report(nodeid, "failed", node=node, longrepr="worker 'gw1' crashed while running")
    run.recorder.pytest_handlecrashitem(nodeid, made)
    return made


def test_a_crashed_workers_eval_item_gets_an_error_record(configure: Any) -> None:
    run = configure()
    made = crash(run, f"{SUITE}::b[fake-r1]")
    got = made.llmbench_record  # type: ignore[attr-defined]
    assert {name: got[name] for name in ("outcome", "error_kind", "worker", "repeat")} == {
        "outcome": "error",
        "error_kind": "crashed",
        "worker": "gw1",
        "repeat": 1,
    }
    assert (got["case_id"], got["model"], got["suite"]) == ("b", "fake", "quiz")
    assert got["error"] == "worker 'gw1' crashed while running"
    run.recorder.pytest_runtest_logreport(made)
    assert [r["nodeid"] for r in ResultsFolder(run.out).read_records()] == [f"{SUITE}::b[fake-r1]"]
    plain = crash(run, "test_plain.py::test_one")
    assert not hasattr(plain, "llmbench_record")  # not an eval item: pytest's own error


# -- at the end ------------------------------------------------------------------------------


def test_the_session_end_writes_the_runs_files(configure: Any) -> None:
    run = configure()
    for each in (record("a"), record("b", "failed"), record("a", repeat=1)):
        run.recorder.pytest_runtest_logreport(reported(each))
    run.finish(pytest.ExitCode.TESTS_FAILED)
    written = sorted(str(p.relative_to(run.out)) for p in run.out.rglob("*") if p.is_file())
    assert written == [
        "all_metrics.csv",
        "case_verdicts.csv",
        "comparisons.csv",
        "fake/aggregate_metrics.csv",
        "leaderboard.csv",
        "results.jsonl",
        "run.json",
    ]
    assert run.config.stash[SUMMARY_KEY] is run.recorder.summary
    assert {(r["case_id"], r["verdict"]) for r in run.csv("case_verdicts.csv")} == {
        ("a", "passed"),
        ("b", "failed"),
    }
    info = run.run_json()
    assert (info["records"], info["exitstatus"], info["gate_failures"]) == (3, 1, [])


def test_the_gates_decide_the_exit_status_before_run_json(configure: Any) -> None:
    run = configure("--max-latency-p95=0.2")
    for case in ("a", "b"):  # both pass, each in 0.5 s
        run.recorder.pytest_runtest_logreport(reported(record(case)))
    session = run.finish(pytest.ExitCode.OK)
    assert session.exitstatus == pytest.ExitCode.TESTS_FAILED
    described = [failure.describe() for failure in run.recorder.gate_failures]
    assert described == [
        "fake: latency p95 0.5 s > --max-latency-p95 0.2 s (over 2 uncached answers)"
    ]
    info = run.run_json()
    assert (info["exitstatus"], info["gate_failures"]) == (1, described)
    assert info["gate_inputs"]["exitstatus"] == 0  # what pytest said, for a merge to decide


def test_failures_outside_the_scores_reach_the_gates(configure: Any) -> None:
    run = configure("--min-pass-rate=0.5")
    recorder = run.recorder
    recorder.pytest_runtest_logreport(reported(record("a")))
    recorder.pytest_runtest_logreport(reported(record("b", "failed")))  # a score: the gate's
    recorder.pytest_runtest_logreport(report("test_plain.py::test_one", "failed"))
    recorder.pytest_runtest_logreport(report("test_plain.py::test_two", "failed", when="setup"))
    collect = pytest.CollectReport("broken.eval.yaml", "failed", "bad YAML", [])
    recorder.pytest_collectreport(collect)
    session = run.finish(pytest.ExitCode.TESTS_FAILED)
    assert recorder.gate_state == RunState(
        exitstatus=pytest.ExitCode.TESTS_FAILED, other_failures=3, cut_short=False
    )
    # The pass rate is met, but the other failures keep the run failed.
    assert recorder.gate_failures == [] and session.exitstatus == pytest.ExitCode.TESTS_FAILED
    assert run.run_json()["gate_inputs"]["other_failures"] == 3


def test_a_broken_aggregate_keeps_the_runs_exit_status_and_run_json(
    configure: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(records: Sequence[Mapping[str, Any]], errors_count_as: str = "fail") -> Any:
        raise RuntimeError("no aggregate today")

    monkeypatch.setattr(summary_module, "summarize", broken)
    run = configure()
    run.recorder.pytest_runtest_logreport(reported(record("a")))
    session = run.finish(pytest.ExitCode.OK)
    assert run.recorder.aggregate_error == "RuntimeError: no aggregate today"
    assert run.recorder.summary is None and session.exitstatus == pytest.ExitCode.OK
    assert run.run_json()["records"] == 1
    assert run.run_json()["repeat_policy"]["passed"] == 1  # the verdicts without a summary


def test_items_the_budget_stopped_are_counted_in_run_json(configure: Any) -> None:
    run = configure("--max-cost=0.5")
    run.recorder.pytest_runtest_logreport(reported(record("a")))
    for case in ("b", "c"):
        stopped = record(case, "skipped", error_kind="budget", error="--max-cost 0.5 USD reached")
        run.recorder.pytest_runtest_logreport(reported(stopped))
    run.finish(pytest.ExitCode.OK)
    assert run.run_json()["max_cost"] == {"limit_usd": 0.5, "reached": True, "items_not_run": 2}


@dataclass
class Completing:
    """A run that this one completes (``--retry-errors``): what the recorder asks of it."""

    folder: Path
    earlier: list[dict[str, Any]]
    asked: list[str] = field(default_factory=list)

    def work_folder(self) -> Path:
        return self.folder

    def with_attempts(self, made: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(f"attempts of {made['case_id']}")
        return {**made, "attempts": [{"outcome": "error"}]}

    def combined(self, new: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return [*self.earlier, *new]

    def combined_state(self, state: RunState, records: Sequence[Mapping[str, Any]]) -> RunState:
        self.asked.append(f"state of {len(records)}")
        return state

    def run_info(self, data: Mapping[str, Any]) -> dict[str, Any]:
        return {**data, "completes": "the earlier run"}


def test_a_run_that_completes_another_writes_the_combined_run(configure: Any) -> None:
    run = configure()
    completing = Completing(run.out.parent / "work", [record("kept")])
    run.config.stash[COMPLETION_KEY] = completing
    recorder = ResultsRecorder(run.config)  # as the run makes it, once the retry is set up
    recorder.pytest_runtest_logreport(reported(record("retried")))
    streamed = ResultsFolder(completing.folder).read_records()
    assert [(r["case_id"], r["attempts"]) for r in streamed] == [
        ("retried", [{"outcome": "error"}])
    ]
    run.finish(recorder=recorder)
    combined = ResultsFolder(completing.folder)
    assert [r["case_id"] for r in combined.read_records()] == ["kept", "retried"]
    info = combined.read_run_info()
    assert info is not None and (info["records"], info["completes"]) == (2, "the earlier run")
    assert completing.asked == ["attempts of retried", "state of 2"]
    recorder.moved(completing.folder, run.out)
    assert recorder.out_dir == run.out
