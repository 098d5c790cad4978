"""Outputs for CI: a Markdown leaderboard in the GitHub step summary and a Prometheus textfile.

Registered on the controller only. At session end, after the recorder has written its files
(``trylast``), it reads the run's records, its summary and the gates' decision from the stash:

- when ``GITHUB_STEP_SUMMARY`` names a file, appends a ``## llmbench leaderboard`` section to it
  (GitHub shows the file on the run's page; every step appends to it, so do we);
- writes ``metrics.prom`` into the results folder in the Prometheus text exposition format, and
  with ``--prom-push URL`` pushes it to a Pushgateway (both in :mod:`.prometheus`);
- writes ``benchmark-bigger.json`` and ``benchmark-smaller.json`` in github-action-benchmark's
  ``customBiggerIsBetter`` and ``customSmallerIsBetter`` formats (pass rate, score and accuracy;
  cost, latency and TTFT per model), for nightly trend charts.

A failure here never changes the run's exit status: it is remembered and printed in red in the
terminal summary. Records are already redacted; the summary text is redacted once more anyway.

The plugin registers :class:`CIOutputs` in every run: the leaderboard's Markdown and the
Prometheus writers load only when the run has records.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..engine import RUNTIME_KEY
from ..results import GATES_KEY, RECORDER_KEY, SUMMARY_KEY
from ..results_folder import BENCHMARK_BIGGER_FILE, BENCHMARK_SMALLER_FILE, METRICS_FILE

if TYPE_CHECKING:
    import pandas as pd

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


class CIOutputs:
    """Writes the step summary and ``metrics.prom`` at session end (controller only)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        #: Why a writer failed, one line each; printed in the terminal summary.
        self.errors: list[str] = []

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Write the CI outputs of a run that produced records."""
        recorder = self.config.stash.get(RECORDER_KEY, None)
        if recorder is None or not recorder.records:
            return  # no eval ran: leave CI files alone
        records = recorder.records
        summary = os.environ.get(STEP_SUMMARY_ENV)
        if summary:
            decision = self.config.stash.get(GATES_KEY, None)
            gates = [failure.describe() for failure in decision.failures] if decision else []
            unmeasured = list(decision.unmeasured) if decision else []
            run_summary = self.config.stash.get(SUMMARY_KEY, None)
            board = run_summary.board if run_summary is not None else None
            efforts = run_summary.efforts if run_summary is not None else None
            self._guard(
                "GitHub step summary",
                lambda: append_step_summary(
                    Path(summary),
                    self._redact(step_summary(records, gates, board, unmeasured, efforts)),
                ),
            )
        out_dir = recorder.out_dir
        if out_dir is None:
            return
        from .prometheus import push_metrics, write_metrics

        written: list[str] = []  # the exposition text, once written: what is pushed
        self._guard(
            METRICS_FILE, lambda: written.append(write_metrics(out_dir / METRICS_FILE, records))
        )
        run_summary = self.config.stash.get(SUMMARY_KEY, None)
        if run_summary is not None and run_summary.board is not None:
            board = run_summary.board
            self._guard("benchmark JSON", lambda: write_benchmarks(out_dir, board))
        push = self._push_url()
        if push is not None and written:
            # The message names the URL; the redactor masks its password when it is printed.
            self._guard(f"push to {push}", lambda: push_metrics(push, written[0]))

    def _push_url(self) -> str | None:
        runtime = self.config.stash.get(RUNTIME_KEY, None)
        return runtime.run.prom_push if runtime is not None else None

    def _guard(self, what: str, write: Callable[[], None]) -> None:
        try:
            write()
        except Exception as exc:  # a CI extra must not lose the run's verdict
            self.errors.append(f"{what} not written: {type(exc).__name__}: {exc}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Say which CI output could not be written."""
        for error in self.errors:
            terminalreporter.write_line(f"llmbench: {self._redact(error)}", red=True)

    def _redact(self, text: str) -> str:
        runtime = self.config.stash.get(RUNTIME_KEY, None)
        return runtime.redactor.text(text) if runtime is not None else text


# -- GitHub step summary -------------------------------------------------------------------------


def append_step_summary(path: Path, text: str) -> None:
    """Append ``text`` to the step summary file at ``path`` (earlier steps' sections stay)."""
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text)


def step_summary(
    records: Sequence[Mapping[str, Any]],
    gates: Sequence[str] = (),
    board: pd.DataFrame | None = None,
    unmeasured: Sequence[str] = (),
    efforts: pd.DataFrame | None = None,
) -> str:
    """The Markdown section: leaderboard table, item counts, each model's reasoning efforts
    side by side (``efforts``, the summary's effort board, when the run had the effort axis),
    failed gates, and the latency and cost limits a model could not be judged on
    (``unmeasured``).

    ``board`` is the run's leaderboard when the caller has it (the session end's summary).
    """
    from .markup import board_markdown, efforts_markdown, md_cell

    if board is None:
        from ..results import leaderboard, records_frame

        board = leaderboard(records_frame(records))
    lines = [
        "",
        "## llmbench leaderboard",
        "",
        board_markdown(board).rstrip("\n"),
        "",
        _counts(records, board),
    ]
    if efforts is not None:
        lines += ["", "**Efforts**", "", efforts_markdown(efforts).rstrip("\n")]
    if gates:
        lines += ["", "**Failed gates**", "", *(f"- {md_cell(gate)}" for gate in gates)]
    if unmeasured:
        lines += ["", "**Gates not applied**", "", *(f"- {md_cell(line)}" for line in unmeasured)]
    return "\n".join(lines) + "\n"


def _counts(records: Sequence[Mapping[str, Any]], board: pd.DataFrame) -> str:
    outcomes = Counter(str(record.get("outcome")) for record in records)
    parts = [f"{outcomes[name]} {label}" for name, label in _COUNT_LABELS if outcomes[name]]
    text = f"{len(records)} items, {len(board)} model(s): " + ", ".join(parts)
    if "n_flaky" in board.columns:
        flaky = int(board["n_flaky"].fillna(0).sum())
        text += f"; {flaky} flaky case(s)" if flaky else ""
    cached = sum(1 for record in records if record.get("cached"))
    return text + (f"; {cached} answers from the response cache" if cached else "") + "."


_COUNT_LABELS = (
    ("passed", "passed"),
    ("failed", "failed"),
    ("error", "errors"),
    ("skipped", "skipped"),
)


# -- github-action-benchmark ---------------------------------------------------------------------

#: (leaderboard column, name, unit, scale) for ``customBiggerIsBetter`` and ``customSmallerIsBetter``.
BIGGER: tuple[tuple[str, str, str, float], ...] = (
    ("pass_rate", "pass rate", "%", 100.0),
    ("score_mean", "score", "score (0-1)", 1.0),
    ("mc_accuracy", "multiple choice accuracy", "%", 100.0),
)
SMALLER: tuple[tuple[str, str, str, float], ...] = (
    ("cost_usd_mean", "cost per item", "USD", 1.0),
    ("latency_s_p50", "latency p50", "s", 1.0),
    ("latency_s_p95", "latency p95", "s", 1.0),
    ("ttft_s_p50", "TTFT p50", "s", 1.0),
)
BENCHMARK_FILES = {"bigger": BENCHMARK_BIGGER_FILE, "smaller": BENCHMARK_SMALLER_FILE}


def benchmark_entries(
    board: pd.DataFrame, metrics: Sequence[tuple[str, str, str, float]]
) -> list[dict[str, Any]]:
    """github-action-benchmark entries (``name``, ``unit``, ``value``, ``extra``): one per model
    and metric the model has (a NaN, as latency-only runs' scores, is left out)."""
    entries = []
    for row in board.to_dict("records"):
        answered = (
            f"{int(row['n_passed']) + int(row['n_failed'])} answered of {int(row['n_items'])}"
        )
        for column, name, unit, scale in metrics:
            value = row.get(column)
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                continue
            entries.append(
                {
                    "name": f"{row['model']}: {name}",
                    "unit": unit,
                    "value": round(float(value) * scale, 6),
                    "extra": answered,
                }
            )
    return entries


def write_benchmarks(out_dir: Path, board: pd.DataFrame) -> None:
    """Write both benchmark files into ``out_dir``."""
    import json

    for kind, metrics in (("bigger", BIGGER), ("smaller", SMALLER)):
        text = json.dumps(benchmark_entries(board, metrics), indent=2) + "\n"
        (out_dir / BENCHMARK_FILES[kind]).write_text(text, encoding="utf-8")
