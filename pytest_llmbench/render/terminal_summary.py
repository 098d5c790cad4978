"""The ``llmbench`` sections at the end of a run on the terminal: flaky cases, judges,
leaderboard, where the files are, and which gate failed.

The plugin registers :class:`TerminalSummary` in every run; the tables' formatting
(:mod:`.terminal`, with the summary's statistics) loads only when the run has records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from ..config import get_run_config
from ..results import (
    BUDGET_EXIT_CODE,
    GATES_KEY,
    RECORDER_KEY,
    optimization_counts,
    over_budget,
    reviews_line,
    stop_early_info,
)
from ..results_folder import CASE_VERDICTS_FILE

if TYPE_CHECKING:
    from ..results import RepeatOutcome, ResultsRecorder

#: The terminal lists at most this many flaky cases (all of them are in case_verdicts.csv).
MAX_FLAKY_LINES = 50


class TerminalSummary:
    """Prints the run's summary at the end (controller only): flaky cases, judges, leaderboard,
    where the files are and which gate failed. It reads what the recorder computed."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """The ``llmbench`` sections and lines of a run that produced records."""
        recorder = self.config.stash.get(RECORDER_KEY, None)
        if recorder is None or not recorder.records:
            return
        from .terminal import format_judges, format_leaderboard

        write = terminalreporter.write_line
        summary = recorder.summary
        flaky = flaky_lines(recorder.repeats) if recorder.repeats else []
        if flaky:
            terminalreporter.write_sep("=", "llmbench flaky cases")
            for line in flaky:
                write(line, yellow=True)
        judges = format_judges(summary.frame, summary.agreement) if summary else []
        if judges:
            terminalreporter.write_sep("=", "llmbench judges")
            for line in judges:
                write(line)
        terminalreporter.write_sep("=", "llmbench leaderboard")
        if summary is not None:
            for line in format_leaderboard(summary.board, comparisons=summary.comparisons):
                write(line)
        if recorder.aggregate_error:
            write(f"llmbench: aggregates not written: {recorder.aggregate_error}", red=True)
        write(f"llmbench: {len(recorder.records)} records in {recorder.out_dir}")
        for line, colour in self._notes(recorder):
            write(line, **colour)

    def _notes(self, recorder: ResultsRecorder) -> list[tuple[str, dict[str, bool]]]:
        """The closing lines: budget, optimized prompts, cache, batches, failed gates, repeat
        policy."""
        records, run = recorder.records, get_run_config(self.config)
        notes: list[tuple[str, dict[str, bool]]] = []
        skipped = over_budget(records)
        if skipped:
            text = (
                f"llmbench: --max-cost {run.max_cost:g} USD reached: {skipped} items did not run "
                f"(exit status {BUDGET_EXIT_CODE})"
            )
            notes.append((text, {"red": True, "bold": True}))
        optimized = optimization_counts(records)
        if optimized:
            counts = ", ".join(f"{count} {status}" for status, count in optimized.items())
            where = recorder.optimization_log or "(no log)"
            text = f"llmbench: items with an optimized prompt: {counts}; rewrites in {where}"
            notes.append((text, {}))
        stopped = stop_early_info(run, records)
        if stopped is not None:
            text = f"llmbench: {stopped['summary']} ({stopped['rule']} stopping rule)"
            notes.append((text, {}))
        cached = sum(1 for record in records if record.get("cached"))
        if cached:
            notes.append((f"llmbench: {cached} answers from the response cache (no call made)", {}))
        batched = sum(1 for record in records if record.get("batched"))
        if batched:
            text = (
                f"llmbench: {batched} answers through a batch API: their latency and TTFT are "
                "unchecked and left out of the latency columns and gates"
            )
            notes.append((text, {}))
        from ..results import gate_lines

        for line in gate_lines(recorder.judge_gate_block()):
            notes.append((f"llmbench: {line}", {"yellow": "demoted" in line}))
        reviewed = reviews_line(recorder.reviews) if recorder.reviews else None
        if reviewed:
            notes.append((f"llmbench: {reviewed}", {}))
        for failure in recorder.gate_failures:
            text = f"llmbench gate FAILED: {failure.describe()}"
            notes.append((text, {"red": True, "bold": True}))
        decision = self.config.stash.get(GATES_KEY, None)
        for line in decision.unmeasured if decision else ():
            notes.append((f"llmbench gate: {line}", {"yellow": True}))
        repeats = recorder.repeats
        if repeats and repeats.failing and run.repeat_policy != "all":
            text = (
                f"llmbench: {len(repeats.failing)} case(s) fail --repeat-policy={run.repeat_policy}"
            )
            # With --min-pass-rate the gate decides the exit status; the count is still news.
            notes.append((text, {"red": run.min_pass_rate is None}))
        return notes


def flaky_lines(repeats: RepeatOutcome) -> list[str]:
    """One line per flaky case: model, suite::case_id, passed/n, and the policy's verdict."""
    flaky = [verdict for verdict in repeats.verdicts if verdict.verdict == "flaky"]
    lines = [
        f"{v.model}  {v.suite}::{v.case_id}  {v.passed}/{v.n} passed  "
        f"{'passes' if v not in repeats.failing else 'FAILS'} under "
        f"--repeat-policy={repeats.policy}"
        for v in flaky[:MAX_FLAKY_LINES]
    ]
    if len(flaky) > MAX_FLAKY_LINES:
        lines.append(f"... {len(flaky) - MAX_FLAKY_LINES} more (see {CASE_VERDICTS_FILE})")
    return lines
