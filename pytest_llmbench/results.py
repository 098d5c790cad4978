"""The controller's recorder: results.jsonl as items finish, aggregates and gates at the end.

Registered only on the controller (or the sole process without xdist). Each record arrives on a
``TestReport`` and is appended to ``results.jsonl`` at once and flushed, so an interrupted run
keeps everything that finished. Nothing is written in a run that produced no record.
"""

from __future__ import annotations

import datetime as dt
import json
import platform
import sys
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import IO, Any

import pytest

from .config import get_run_config
from .record import utc_now
from .runtime import get_runtime

RESULTS_FILE = "results.jsonl"


@dataclass(frozen=True)
class GateFailure:
    """A model that missed the run's aggregate gate."""

    model: str
    pass_rate: float
    required: float

    def describe(self) -> str:
        """One summary line."""
        return f"{self.model}: pass rate {self.pass_rate:.1%} < --min-pass-rate {self.required:.1%}"


#: The controller's recorder, for plugins that read the run's records at the end.
RECORDER_KEY = pytest.StashKey["ResultsRecorder"]()


class ResultsRecorder:
    """Collects records, writes results files and applies the aggregate gates."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        config.stash[RECORDER_KEY] = self
        self.records: list[dict[str, Any]] = []
        self.out_dir: Path | None = None
        self._stream: IO[str] | None = None
        self._other_failures = 0
        self._started_at = utc_now()
        self.gate_failures: list[GateFailure] = []
        self.leaderboard_lines: list[str] = []
        self.judge_lines: list[str] = []
        self.judge_agreement: list[dict[str, Any]] = []
        self.aggregate_error: str | None = None

    # -- as items finish -------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Append the report's record, if it carries one."""
        if report.failed and not getattr(report, "llmbench_score_failure", False):
            self._other_failures += 1
        record = getattr(report, "llmbench_record", None)
        if isinstance(record, dict):
            self._append(record)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """Count collection errors: an aggregate gate must not turn them into a pass."""
        if report.failed:
            self._other_failures += 1

    def _append(self, record: dict[str, Any]) -> None:
        if self._stream is None:
            self._stream = self._open_results()
        self._stream.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._stream.flush()
        self.records.append(record)

    def _open_results(self) -> IO[str]:
        self.out_dir = _results_dir(self.config)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        # A reused --results-dir holds this run only: the aggregates and run.json describe this
        # run's records, and results.jsonl must agree with them.
        return open(self.out_dir / RESULTS_FILE, "w", encoding="utf-8")

    # -- at the end ------------------------------------------------------------------------
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Write aggregates and run.json; apply ``--min-pass-rate``."""
        if self._stream is not None:
            self._stream.close()
        if not self.records or self.out_dir is None:
            return
        board = self._write_aggregates()
        self._apply_gates(session, board)
        self._write_run_json(session)

    def _write_aggregates(self) -> Any:
        from .judging.agreement import dimension_agreement
        from .leaderboard import (
            format_judges,
            format_leaderboard,
            leaderboard,
            records_frame,
            write_aggregates,
        )

        assert self.out_dir is not None
        try:
            write_aggregates(self.records, self.out_dir)
            frame = records_frame(self.records)
            board = leaderboard(frame)
            self.judge_lines = format_judges(frame)
            self.judge_agreement = [asdict(row) for row in dimension_agreement(self.records)]
        except Exception as exc:  # a broken aggregate must not lose the run's exit status
            self.aggregate_error = f"{type(exc).__name__}: {exc}"
            return None
        self.leaderboard_lines = format_leaderboard(board)
        return board

    def _apply_gates(self, session: pytest.Session, board: Any) -> None:
        required = get_run_config(self.config).min_pass_rate
        if required is None or board is None:
            return
        for row in board.itertuples():
            rate = float(row.pass_rate) if row.pass_rate == row.pass_rate else 0.0
            if rate < required:
                self.gate_failures.append(GateFailure(str(row.model), rate, required))
        if self.gate_failures:
            if session.exitstatus == pytest.ExitCode.OK:  # keep worse: interrupted, internal
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif session.exitstatus == pytest.ExitCode.TESTS_FAILED and self._other_failures == 0:
            # With an aggregate gate, single low-scoring cases do not fail the run by themselves.
            session.exitstatus = pytest.ExitCode.OK

    def _write_run_json(self, session: pytest.Session) -> None:
        assert self.out_dir is not None
        runtime = get_runtime(self.config)
        data = {
            "started_at": self._started_at,
            "finished_at": utc_now(),
            "args": list(self.config.invocation_params.args),
            "rootdir": str(self.config.rootpath),
            "exitstatus": int(session.exitstatus),
            "records": len(self.records),
            "gate_failures": [failure.describe() for failure in self.gate_failures],
            "judge_agreement": self.judge_agreement,
            "config": runtime.run.to_dict(),
            "versions": _versions(),
        }
        text = json.dumps(runtime.redactor.value(data), indent=2, default=str)
        (self.out_dir / "run.json").write_text(text + "\n", encoding="utf-8")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Print the judges' summary, the leaderboard, where the files are, which gate failed."""
        if not self.records:
            return
        write = terminalreporter.write_line
        if self.judge_lines:
            terminalreporter.write_sep("=", "llmbench judges")
            for line in self.judge_lines:
                write(line)
        terminalreporter.write_sep("=", "llmbench leaderboard")
        for line in self.leaderboard_lines:
            write(line)
        if self.aggregate_error:
            write(f"llmbench: aggregates not written: {self.aggregate_error}", red=True)
        write(f"llmbench: {len(self.records)} records in {self.out_dir}")
        over_budget = sum(1 for record in self.records if record.get("error_kind") == "budget")
        if over_budget:
            limit = get_run_config(self.config).max_cost
            write(
                f"llmbench: --max-cost {limit:g} USD reached: {over_budget} items skipped",
                yellow=True,
            )
        cached = sum(1 for record in self.records if record.get("cached"))
        if cached:
            write(f"llmbench: {cached} answers from the response cache (no call made)")
        for failure in self.gate_failures:
            write(f"llmbench gate FAILED: {failure.describe()}", red=True, bold=True)


def _results_dir(config: pytest.Config) -> Path:
    explicit = get_run_config(config).results_dir
    if explicit is not None:
        return explicit
    base = config.invocation_params.dir / "llmbench-results"
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    candidate, counter = base / stamp, 2
    while candidate.exists():
        candidate, counter = base / f"{stamp}-{counter}", counter + 1
    return candidate


def _versions() -> dict[str, str | None]:
    names = ("pytest-llmbench", "pytest", "pytest-xdist", "litellm", "llama-cpp-python")
    found: dict[str, str | None] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found
