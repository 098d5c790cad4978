"""The run's metrics for Prometheus: ``metrics.prom`` in the text exposition format, and its push.

:func:`write_metrics` writes the file for node-exporter's textfile collector (a temporary name,
then renamed, so the collector never reads half a file); :func:`push_metrics` PUTs the same text
to a Pushgateway (job ``llmbench``). :mod:`.ci` calls both at session end.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

#: Upper bounds (seconds) of the latency and TTFT histogram buckets; ``+Inf`` is added.
LATENCY_BUCKETS: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: Outcomes counted for every model, so each series exists even while it is zero.
OUTCOMES: tuple[str, ...] = ("passed", "failed", "error", "skipped")
# Records grouped by model label, models sorted; a sample's labels, in order.
_Models = Sequence[tuple[str, Sequence[Mapping[str, Any]]]]
_Labels = tuple[tuple[str, str], ...]
# Same label as the leaderboard's, for records of tests that called no model.
_NO_MODEL = "(no model)"


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
        _counter(
            "llmbench_transport_retries",
            "Provider calls retried by the transport",
            _transport_retries(models),
        ),
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
        for source, field in (("model", "cost_usd"), ("judge", "judge_cost_usd")):
            yield (("model", model), ("source", source)), _sum(own, field)


def _transport_retries(models: _Models) -> Iterable[tuple[_Labels, float]]:
    for model, own in models:
        yield (("model", model),), _sum(own, "transport_retries")


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
