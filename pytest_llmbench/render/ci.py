"""Outputs for CI: a Markdown leaderboard in the GitHub step summary and a Prometheus textfile.

Registered on the controller only. At session end, after the recorder has written its files
(``trylast``), it reads the run's records, its summary and the gates' decision from the stash:

- when ``GITHUB_STEP_SUMMARY`` names a file, appends a ``## llmbench leaderboard`` section to it
  (GitHub shows the file on the run's page; every step appends to it, so do we);
- writes ``metrics.prom`` into the results folder in the Prometheus text exposition format, for
  node-exporter's textfile collector (written to a temporary name, then renamed, so the collector
  never reads half a file), and with ``--prom-push URL`` pushes it to a Pushgateway (job
  ``llmbench``);
- writes ``benchmark-bigger.json`` and ``benchmark-smaller.json`` in github-action-benchmark's
  ``customBiggerIsBetter`` and ``customSmallerIsBetter`` formats (pass rate, score and accuracy;
  cost, latency and TTFT per model), for nightly trend charts.

A failure here never changes the run's exit status: it is remembered and printed in red in the
terminal summary. Records are already redacted; the summary text is redacted once more anyway.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..engine import RUNTIME_KEY
from ..results import GATES_KEY, RECORDER_KEY, SUMMARY_KEY
from ..results_folder import BENCHMARK_BIGGER_FILE, BENCHMARK_SMALLER_FILE, METRICS_FILE

if TYPE_CHECKING:
    import pandas as pd

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
#: Upper bounds (seconds) of the latency and TTFT histogram buckets; ``+Inf`` is added.
LATENCY_BUCKETS: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: Outcomes counted for every model, so each series exists even while it is zero.
OUTCOMES: tuple[str, ...] = ("passed", "failed", "error", "skipped")
# Records grouped by model label, models sorted; a sample's labels, in order.
_Models = Sequence[tuple[str, Sequence[Mapping[str, Any]]]]
_Labels = tuple[tuple[str, str], ...]
# Same label as the leaderboard's, for records of tests that called no model.
_NO_MODEL = "(no model)"


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
            self._guard(
                "GitHub step summary",
                lambda: append_step_summary(
                    Path(summary),
                    self._redact(step_summary(records, gates, board, unmeasured)),
                ),
            )
        out_dir = recorder.out_dir
        if out_dir is None:
            return
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
) -> str:
    """The Markdown section: leaderboard table, item counts, failed gates, and the latency and
    cost limits a model could not be judged on (``unmeasured``).

    ``board`` is the run's leaderboard when the caller has it (the session end's summary).
    """
    from .markup import board_markdown, md_cell

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


# -- Prometheus Pushgateway ----------------------------------------------------------------------

PUSH_JOB = "llmbench"
PUSH_TIMEOUT_S = 10.0


def push_url(base: str) -> str:
    """Where to push: ``base`` as given when it names a job (``.../metrics/job/...``), else
    ``base/metrics/job/llmbench``."""
    return base if "/metrics/job/" in base else f"{base.rstrip('/')}/metrics/job/{PUSH_JOB}"


def push_metrics(base: str, text: str) -> None:
    """PUT ``text`` (the exposition format) to the Pushgateway at ``base``: the job's metrics
    are replaced by this run's. Raises on a refused connection or a non-2xx answer."""
    import base64
    import urllib.error
    import urllib.request
    from urllib.parse import urlsplit, urlunsplit

    url = push_url(base)
    parts = urlsplit(url)
    headers = {"Content-Type": "text/plain; version=0.0.4; charset=utf-8"}
    if parts.username is not None:  # user:password@host: basic auth, not part of the URL sent
        secret = f"{parts.username}:{parts.password or ''}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(secret).decode()
        url = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    request = urllib.request.Request(url, data=text.encode(), headers=headers, method="PUT")
    try:
        with urllib.request.urlopen(request, timeout=PUSH_TIMEOUT_S) as answer:
            answer.read()
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"the Pushgateway answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise RuntimeError(f"cannot reach the Pushgateway: {reason}") from None


# -- Prometheus textfile -------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One exposition line: a metric name, its labels in order, a value."""

    name: str
    labels: _Labels
    value: float


@dataclass(frozen=True)
class MetricFamily:
    """A metric with its ``# HELP`` and ``# TYPE`` lines and its samples."""

    name: str
    type: str  # counter, gauge or histogram
    help: str
    samples: tuple[Sample, ...]


def write_metrics(path: Path, records: Sequence[Mapping[str, Any]]) -> str:
    """Write the run's metrics to ``path`` atomically (temporary file, then ``os.replace``);
    return the text written."""
    text = render_metrics(metric_families(records, timestamp=time.time(), info=run_info()))
    handle = tempfile.NamedTemporaryFile(
        "w",
        encoding="utf-8",
        newline="\n",
        dir=path.parent,
        prefix=f".{path.name}.",
        suffix=".tmp",
        delete=False,
    )
    try:
        with handle:
            handle.write(text)
        # mkstemp's 0600 would hide the file from a node-exporter running as another user.
        os.chmod(handle.name, 0o644)
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
    return text


def run_info() -> dict[str, str]:
    """Labels of ``llmbench_run_info``: the versions that produced the run."""
    return {
        "version": _version("pytest-llmbench"),
        "python": sys.version.split()[0],
        "pytest": pytest.__version__,
    }


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"


def metric_families(
    records: Sequence[Mapping[str, Any]], *, timestamp: float, info: Mapping[str, str]
) -> list[MetricFamily]:
    """Every metric family of the run, models in sorted order."""
    by_model: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for record in records:
        by_model[str(record.get("model") or _NO_MODEL)].append(record)
    models = sorted(by_model.items())
    answered = [
        (model, [r for r in own if r.get("outcome") in ("passed", "failed")])
        for model, own in models
    ]
    return [
        _counter(
            "llmbench_requests", "Items finished with a record, by outcome", _requests(models)
        ),
        _counter("llmbench_errors", "Items with an error outcome, by error kind", _errors(models)),
        _counter("llmbench_tokens", "Tokens used: input, output, and judge calls", _tokens(models)),
        _counter("llmbench_cost_usd", "USD spent on model and judge calls", _cost(models)),
        _counter("llmbench_retries", "Provider retries", _retries(models)),
        _histogram(
            "llmbench_latency_seconds", "Total call time of answered items", answered, "latency_s"
        ),
        _histogram(
            "llmbench_ttft_seconds",
            "Time to first token of answered streamed items",
            answered,
            "ttft_s",
        ),
        MetricFamily(
            "llmbench_run_info",
            "gauge",
            "Versions of the run; always 1",
            (Sample("llmbench_run_info", tuple(info.items()), 1),),
        ),
        MetricFamily(
            "llmbench_last_run_timestamp_seconds",
            "gauge",
            "When the run finished, Unix time",
            (Sample("llmbench_last_run_timestamp_seconds", (), timestamp),),
        ),
    ]


def _counter(name: str, help: str, samples: Iterable[tuple[_Labels, float]]) -> MetricFamily:
    total = f"{name}_total"
    return MetricFamily(
        total, "counter", help, tuple(Sample(total, labels, value) for labels, value in samples)
    )


def _requests(models: _Models) -> Iterable[tuple[_Labels, float]]:
    for model, own in models:
        outcomes = Counter(str(record.get("outcome")) for record in own)
        extra = sorted(set(outcomes) - set(OUTCOMES))
        for outcome in (*OUTCOMES, *extra):
            yield (("model", model), ("outcome", outcome)), outcomes[outcome]


def _errors(models: _Models) -> Iterable[tuple[_Labels, float]]:
    for model, own in models:
        kinds = Counter(
            str(record.get("error_kind") or "unknown")
            for record in own
            if record.get("outcome") == "error"
        )
        for kind in sorted(kinds):
            yield (("model", model), ("kind", kind)), kinds[kind]


def _tokens(models: _Models) -> Iterable[tuple[_Labels, float]]:
    fields = (("input", "input_tokens"), ("output", "output_tokens"), ("judge", "judge_tokens"))
    for model, own in models:
        for direction, field in fields:
            yield (("model", model), ("direction", direction)), _sum(own, field)


def _cost(models: _Models) -> Iterable[tuple[_Labels, float]]:
    for model, own in models:
        for source, field in (("model", "cost_usd"), ("judge", "judge_cost")):
            yield (("model", model), ("source", source)), _sum(own, field)


def _retries(models: _Models) -> Iterable[tuple[_Labels, float]]:
    for model, own in models:
        yield (("model", model),), _sum(own, "retries")


def _sum(records: Iterable[Mapping[str, Any]], field: str) -> float:
    """Sum of the known values (a counter has no "unknown"; an unknown cost adds nothing)."""
    return math.fsum(float(r[field]) for r in records if isinstance(r.get(field), (int, float)))


def _histogram(name: str, help: str, models: _Models, field: str) -> MetricFamily:
    samples: list[Sample] = []
    for model, own in models:
        values = [
            float(r[field])
            for r in own
            if isinstance(r.get(field), (int, float)) and math.isfinite(r[field])
        ]
        label = ("model", model)
        for bound in (*LATENCY_BUCKETS, math.inf):
            count = sum(1 for value in values if value <= bound)  # buckets are cumulative
            samples.append(Sample(f"{name}_bucket", (label, ("le", format_value(bound))), count))
        samples.append(Sample(f"{name}_sum", (label,), math.fsum(values)))
        samples.append(Sample(f"{name}_count", (label,), len(values)))
    return MetricFamily(name, "histogram", help, tuple(samples))


def render_metrics(families: Iterable[MetricFamily]) -> str:
    """The text exposition format: per family ``# HELP``, ``# TYPE``, then its samples."""
    lines: list[str] = []
    for family in families:
        lines.append(f"# HELP {family.name} {escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.type}")
        lines.extend(_sample_line(sample) for sample in family.samples)
    return "\n".join(lines) + "\n"


def _sample_line(sample: Sample) -> str:
    labels = ",".join(f'{key}="{escape_label_value(value)}"' for key, value in sample.labels)
    series = f"{sample.name}{{{labels}}}" if labels else sample.name
    return f"{series} {format_value(sample.value)}"


def escape_label_value(value: str) -> str:
    """A label value as the exposition format wants it: ``\\``, ``"`` and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """HELP text: ``\\`` and newline escaped."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """A sample value or bucket bound: integers without ``.0``, ``+Inf``/``-Inf``/``NaN``."""
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    if number.is_integer() and abs(number) < 2**53:
        return str(int(number))
    return repr(number)
