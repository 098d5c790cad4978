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
from collections import Counter
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pytest

from ..config import get_run_config
from ..engine.runtime import get_runtime
from .record import utc_now

if TYPE_CHECKING:
    from .stats import CaseVerdict

RESULTS_FILE = "results.jsonl"
#: The terminal lists at most this many flaky cases (all of them are in case_verdicts.csv).
_MAX_FLAKY_LINES = 50


@dataclass(frozen=True)
class GateFailure:
    """A model that missed the run's aggregate gate."""

    model: str
    pass_rate: float
    required: float

    def describe(self) -> str:
        """One summary line."""
        return f"{self.model}: pass rate {self.pass_rate:.1%} < --min-pass-rate {self.required:.1%}"


@dataclass(frozen=True)
class GateNote:
    """A failed gate described by its owner (``--fail-on-regression``, ``--repeat-policy``)."""

    text: str

    def describe(self) -> str:
        """One summary line."""
        return self.text


@dataclass(frozen=True)
class RepeatOutcome:
    """The run's cases judged across their repeats under ``--repeat-policy``."""

    policy: str
    #: Every case with an answered or error repeat (see :func:`.stats.case_verdicts`).
    verdicts: tuple[CaseVerdict, ...]
    #: The answered cases the policy does not pass (error-only cases are errors, not these).
    failing: tuple[CaseVerdict, ...]

    def summary(self) -> dict[str, Any]:
        """Counts for run.json: cases per verdict and the cases failing the policy."""
        from .stats import VERDICTS

        counts = {name: sum(1 for v in self.verdicts if v.verdict == name) for name in VERDICTS}
        return {
            "policy": self.policy,
            "cases": len(self.verdicts),
            **counts,
            "failing_policy": len(self.failing),
        }

    def flaky_lines(self) -> list[str]:
        """One line per flaky case: model, suite::case_id, passed/n, and the policy's verdict."""
        flaky = [verdict for verdict in self.verdicts if verdict.verdict == "flaky"]
        lines = [
            f"{v.model}  {v.suite}::{v.case_id}  {v.passed}/{v.n} passed  "
            f"{'passes' if v not in self.failing else 'FAILS'} under "
            f"--repeat-policy={self.policy}"
            for v in flaky[:_MAX_FLAKY_LINES]
        ]
        if len(flaky) > _MAX_FLAKY_LINES:
            lines.append(f"... {len(flaky) - _MAX_FLAKY_LINES} more (see case_verdicts.csv)")
        return lines


def judge_repeats(records: list[dict[str, Any]], policy: str) -> RepeatOutcome:
    """The verdict of every case and those that fail ``policy``."""
    from .stats import case_verdicts, policy_passes

    verdicts = tuple(case_verdicts(records))
    failing = tuple(v for v in verdicts if v.n and not policy_passes(v, policy))
    return RepeatOutcome(policy, verdicts, failing)


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
        self.gate_failures: list[GateFailure | GateNote] = []
        self.leaderboard_lines: list[str] = []
        self.judge_lines: list[str] = []
        self.judge_agreement: list[dict[str, Any]] = []
        #: ``prompt_optimizations.jsonl``, written under --optimize-prompts
        self.optimization_log: Path | None = None
        self.aggregate_error: str | None = None
        self.repeats: RepeatOutcome | None = None

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
        self._write_optimization_log()
        self._judge_repeats()
        board = self._write_aggregates()
        self._apply_gates(session, board)
        self._write_run_json(session)

    def _write_optimization_log(self) -> None:
        """``prompt_optimizations.jsonl``: every rewrite, skip and failure of the run."""
        if not get_run_config(self.config).optimize_prompts:
            return
        from ..engine.optimizer import store_path, write_log

        assert self.out_dir is not None
        redact = get_runtime(self.config).redactor.value
        self.optimization_log = write_log(store_path(self.config), self.out_dir, redact=redact)

    def _judge_repeats(self) -> None:
        try:
            self.repeats = judge_repeats(self.records, get_run_config(self.config).repeat_policy)
        except Exception as exc:  # like a broken aggregate: keep the run's exit status
            self.aggregate_error = f"{type(exc).__name__}: {exc}"

    def _write_aggregates(self) -> Any:
        from ..render.terminal import format_judges, format_leaderboard
        from .summary import summarize, write_aggregates

        assert self.out_dir is not None
        try:
            summary = summarize(self.records)
            write_aggregates(self.records, self.out_dir, summary)
            self.judge_lines = format_judges(summary.frame, summary.agreement)
            self.judge_agreement = [asdict(row) for row in summary.agreement]
        except Exception as exc:  # a broken aggregate must not lose the run's exit status
            self.aggregate_error = f"{type(exc).__name__}: {exc}"
            return None
        self.leaderboard_lines = format_leaderboard(summary.board, comparisons=summary.comparisons)
        return summary.board

    def _apply_gates(self, session: pytest.Session, board: Any) -> None:
        """Let ``--min-pass-rate``, else a ``--repeat-policy`` other than ``all``, decide.

        Both only judge low scores: any other failure or error keeps the run failed, and a worse
        status (interrupted, internal error) is kept. With an aggregate gate, single cases do not
        fail the run by themselves, whatever the repeat policy.
        """
        run = get_run_config(self.config)
        if run.min_pass_rate is not None:
            if board is None:
                return
            self._check_pass_rates(board, run.min_pass_rate)
            self._set_failed(session, bool(self.gate_failures))
        elif run.repeat_policy != "all" and self.repeats is not None:
            failing = len(self.repeats.failing)
            if failing:
                self.gate_failures.append(
                    GateNote(f"{failing} case(s) fail --repeat-policy={run.repeat_policy}")
                )
            self._set_failed(session, bool(failing))

    def _check_pass_rates(self, board: Any, required: float) -> None:
        for row in board.itertuples():
            rate = float(row.pass_rate) if row.pass_rate == row.pass_rate else 0.0
            if rate < required:
                self.gate_failures.append(GateFailure(str(row.model), rate, required))

    def _set_failed(self, session: pytest.Session, failed: bool) -> None:
        """Fail an OK run when ``failed``; pass a run failed only by low scores when not."""
        if failed:
            if session.exitstatus == pytest.ExitCode.OK:  # keep worse: interrupted, internal
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif (
            session.exitstatus == pytest.ExitCode.TESTS_FAILED
            and self._other_failures == 0
            # -x / --maxfail cut the run short: what never ran cannot pass a gate
            and not (session.shouldfail or session.shouldstop)
        ):
            session.exitstatus = pytest.ExitCode.OK

    def note_gate(self, session: pytest.Session, text: str) -> None:
        """Record a gate another plugin failed after ours ran; run.json then tells the final
        exit status (the report and CI outputs read it after this)."""
        self.gate_failures.append(GateNote(text))
        if self.out_dir is not None and (self.out_dir / "run.json").exists():
            self._write_run_json(session)

    def _write_run_json(self, session: pytest.Session) -> None:
        from ..engine.preflight import check_summary

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
            "repeat_policy": self.repeats.summary() if self.repeats else None,
            "judge_agreement": self.judge_agreement,
            "prompt_optimizations": _optimization_counts(self.records),
            "check_models": check_summary(self.config),
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
        flaky = self.repeats.flaky_lines() if self.repeats else []
        if flaky:
            terminalreporter.write_sep("=", "llmbench flaky cases")
            for line in flaky:
                write(line, yellow=True)
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
        optimized = _optimization_counts(self.records)
        if optimized:
            counts = ", ".join(f"{count} {status}" for status, count in optimized.items())
            where = self.optimization_log or "(no log)"
            write(f"llmbench: items with an optimized prompt: {counts}; rewrites in {where}")
        cached = sum(1 for record in self.records if record.get("cached"))
        if cached:
            write(f"llmbench: {cached} answers from the response cache (no call made)")
        for failure in self.gate_failures:
            write(f"llmbench gate FAILED: {failure.describe()}", red=True, bold=True)
        run = get_run_config(self.config)
        if self.repeats and self.repeats.failing and run.repeat_policy != "all":
            count = len(self.repeats.failing)
            # With --min-pass-rate the gate decides the exit status; the count is still news.
            write(
                f"llmbench: {count} case(s) fail --repeat-policy={run.repeat_policy}",
                red=run.min_pass_rate is None,
            )


def _optimization_counts(records: list[dict[str, Any]]) -> dict[str, int] | None:
    """Optimized items by the status of their rewrite (None when no prompt was optimized)."""
    statuses = [
        (record.get("optimization") or {}).get("status", "none")
        for record in records
        if record.get("optimized")
    ]
    return dict(sorted(Counter(statuses).items())) if statuses else None


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
