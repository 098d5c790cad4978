"""The resolved settings of one run (:class:`RunConfig`), as :mod:`.resolve` builds them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .options import DEFAULT_CACHE_DIR

if TYPE_CHECKING:
    from ..models import ModelProfile, ProfileRegistry
    from .option_values import JudgeGate
    from .otel import OtelSettings


@dataclass(frozen=True)
class RunConfig:
    """The resolved settings of one run."""

    models: tuple[ModelProfile, ...]
    repeat: int
    results_dir: Path | None
    min_pass_rate: float | None
    request_timeout_s: float
    max_retries: int
    profiles: ProfileRegistry
    env_file: Path | None
    concurrency: int = 8
    stream: str = "sample"
    cache_mode: str = "off"
    cache_dir: Path = Path(DEFAULT_CACHE_DIR)
    max_cost: float | None = None
    rpm: float | None = None
    tpm: float | None = None
    rescore: bool = False
    estimate_cost: bool = False
    #: the judge panel of judged assertions that name no judges
    judges: tuple[ModelProfile, ...] = ()
    #: extra jury dimensions from --judge-metrics (normalised keys)
    judge_metrics: tuple[str, ...] = ()
    #: when a repeated case passes: all, majority, any or at-least:K
    repeat_policy: str = "all"
    #: ``--stop-early``: the confidence a case's repeats stop at (1.0: exact curtailment);
    #: None: every repeat runs
    stop_early: float | None = None
    #: ``--stop-early-min``: answered repeats every case takes before it may stop
    stop_early_min: int = 2
    #: a saved results folder to compare with
    baseline: Path | None = None
    fail_on_regression: bool = False
    #: extra temperatures around each configured one (``--temperature-variations K``)
    temperature_variations: int = 0
    #: reasoning efforts every case runs under (``--efforts``), replacing eval files' ``effort:``
    efforts: tuple[str | int, ...] = ()
    #: measure latency, tokens and cost only: no assertions, no judges
    latency_only: bool = False
    #: ``only`` or ``both`` (``--optimize-prompts``), ``None`` without prompt optimization
    optimize_prompts: str | None = None
    #: the model that rewrites prompts for ``--optimize-prompts``
    optimizer: ModelProfile | None = None
    #: one minimal call per model before the run (``--check-models``)
    check_models: bool = False
    #: leave models that fail the check out of the run
    skip_unavailable: bool = False
    #: seconds to open a connection (``--connect-timeout``)
    connect_timeout_s: float = 10.0
    #: ``--client``: ``auto`` or ``litellm`` (every model through litellm)
    client: str = "auto"
    #: ``fail``: an errored item is a failure scored 0; ``skip``: it is left out of the rates
    errors_count_as: str = "fail"
    #: the first N cases of each eval file only (``--limit``); None: all
    limit: int | None = None
    #: a Prometheus Pushgateway to push metrics.prom to at the end (``--prom-push``)
    prom_push: str | None = None
    #: ``(K, N)``: this run is shard K of N (``--shard``); its budgets are its share
    shard: tuple[int, int] | None = None
    #: each divided budget: ``{"run": value, "shard": share}``
    shard_split: dict[str, Any] | None = None
    #: gate on each model's p95 latency, seconds (``--max-latency-p95``); None: no gate
    max_latency_p95: float | None = None
    #: gate on each model's median TTFT, seconds (``--max-ttft-p50``); None: no gate
    max_ttft_p50: float | None = None
    #: gate on each model's mean call cost, USD (``--max-cost-per-item``); None: no gate
    max_cost_per_item: float | None = None
    #: seconds after which a cached answer is stale (``--cache-ttl``); None: never
    cache_ttl_s: float | None = None
    #: send batchable calls through the providers' batch APIs (``--batch``)
    batch: bool = False
    #: the longest wait on one batch, seconds (``--batch-timeout``)
    batch_timeout_s: float = 25 * 3600.0
    #: seconds between the first polls of a batch (``--batch-poll``)
    batch_poll_s: float = 15.0
    #: the results folder whose batches this run resumes (``--resume-batch``)
    resume_batch: Path | None = None
    #: the shared folder of people's labels (``--reviews-dir``), read beside the results folder's
    reviews_dir: Path | None = None
    #: ``--ignore-reviews``: every verdict is the machine's
    ignore_reviews: bool = False
    #: ``--judge-gate``: the gate on judges against people's labels; None: no gate (an eval
    #: file's ``judge_gate:`` may still set one for its items)
    judge_gate: JudgeGate | None = None
    #: ``--judge-gate-fail``: a judge below an eval file's own gate fails the run
    judge_gate_fail: bool = False
    #: ``--otel`` or the ``OTEL_EXPORTER_OTLP_*`` variables: where the run's spans go; None:
    #: no export (nothing of OpenTelemetry is imported, no span is timed)
    otel: OtelSettings | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary for run.json: names of key variables only, never values."""
        return {
            "models": [profile.model_dump(mode="json") for profile in self.models],
            "repeat": self.repeat,
            "limit": self.limit,
            "min_pass_rate": self.min_pass_rate,
            "errors_count_as": self.errors_count_as,
            "request_timeout_s": self.request_timeout_s,
            "connect_timeout_s": self.connect_timeout_s,
            "max_retries": self.max_retries,
            "env_file": str(self.env_file) if self.env_file else None,
            "concurrency": self.concurrency,
            "stream": self.stream,
            "cache": self.cache_mode,
            "cache_dir": str(self.cache_dir),
            "cache_ttl_s": self.cache_ttl_s,
            "batch": self.batch,
            "batch_timeout_s": self.batch_timeout_s,
            "batch_poll_s": self.batch_poll_s,
            "resume_batch": str(self.resume_batch) if self.resume_batch else None,
            "max_cost": self.max_cost,
            "max_latency_p95": self.max_latency_p95,
            "max_ttft_p50": self.max_ttft_p50,
            "max_cost_per_item": self.max_cost_per_item,
            "rpm": self.rpm,
            "tpm": self.tpm,
            "rescore": self.rescore,
            "judges": [profile.name for profile in self.judges],
            "judge_metrics": list(self.judge_metrics),
            "repeat_policy": self.repeat_policy,
            "stop_early": self.stop_early,
            "stop_early_min": self.stop_early_min if self.stop_early is not None else None,
            "reviews_dir": str(self.reviews_dir) if self.reviews_dir else None,
            "ignore_reviews": self.ignore_reviews,
            "judge_gate": self.judge_gate.to_dict() if self.judge_gate else None,
            "otel": self.otel.to_dict() if self.otel else None,
            "baseline": str(self.baseline) if self.baseline else None,
            "fail_on_regression": self.fail_on_regression,
            "temperature_variations": self.temperature_variations,
            "efforts": list(self.efforts),
            "latency_only": self.latency_only,
            "optimize_prompts": self.optimize_prompts,
            "optimizer": self.optimizer.name if self.optimizer else None,
            "check_models": self.check_models,
            "skip_unavailable": self.skip_unavailable,
            "shard": None
            if self.shard is None
            else {"index": self.shard[0], "count": self.shard[1], "split": self.shard_split},
        }
