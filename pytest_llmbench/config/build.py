"""Reading the options into the frozen :class:`~.run_config.RunConfig` of a run.

Precedence: command line > ini file > defaults; model details come from profiles. Loaded when a
run's config is first asked for (:func:`~.resolve.get_run_config`), so a pytest run that never
touches an eval file reads no profile and no ``.env`` file. A bad value is a
``pytest.UsageError`` naming the option.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from ..results_folder import RESULTS_FILE, ResultsFolder
from .envfile import load_env_file
from .option_values import JudgeGate, parse_age, parse_repeat_policy
from .options import (
    CACHE_MODES,
    CLIENT_CHOICES,
    DEFAULT_CACHE_DIR,
    DEFAULT_MODEL,
    ERRORS_COUNT_AS,
    STREAM_MODES,
    flag_setting,
    option_path,
    setting,
)
from .run_config import RunConfig

if TYPE_CHECKING:
    from ..models import ModelProfile, ProfileRegistry
    from .otel import OtelSettings


def build_run_config(config: pytest.Config) -> RunConfig:
    """Resolve options, ini, ``.env`` and profiles; raise ``pytest.UsageError`` when bad."""
    env_file = load_env_file(config)
    rescore = bool(config.getoption("llmbench_rescore"))
    chosen = _chosen_profiles(config)
    _check_flag_pairs(config, rescore)
    latency_only = flag_setting(config, "latency_only")
    from ..shard import parse_shard, split_budgets

    repeat = _number(config, "repeat", int, minimum=1)
    stop_early = _stop_early(config, repeat)
    resume_batch = _resume_batch(config)
    batch = resume_batch is not None or flag_setting(config, "batch")
    if batch and latency_only:
        raise pytest.UsageError(
            "llmbench: --batch does not go with --latency-only (a batch's answers carry no "
            "latency of the model)"
        )
    run = RunConfig(
        models=chosen.models,
        repeat=repeat,
        stop_early=stop_early,
        stop_early_min=_number(config, "stop_early_min", int, minimum=1),
        reviews_dir=option_path(config, "reviews_dir"),
        ignore_reviews=flag_setting(config, "ignore_reviews"),
        judge_gate=_judge_gate(config),
        judge_gate_fail=flag_setting(config, "judge_gate_fail"),
        otel=_otel(config),
        limit=None if setting(config, "limit") is None else _number(config, "limit", int, 1),
        prom_push=_push_url(config),
        results_dir=_results_dir(config),
        min_pass_rate=_rate(config),
        errors_count_as=_choice(config, "errors_count_as", ERRORS_COUNT_AS),
        request_timeout_s=_number(config, "request_timeout", float, minimum=0.001),
        connect_timeout_s=_number(config, "connect_timeout", float, minimum=0.001),
        max_retries=_number(config, "max_retries", int, minimum=0),
        client=_choice(config, "client", CLIENT_CHOICES),
        profiles=chosen.registry,
        env_file=env_file,
        concurrency=_number(config, "concurrency", int, minimum=1),
        stream=_stream_mode(config, latency_only),
        # --rescore reads answers from the cache only: it is replay under another name.
        cache_mode="replay" if rescore else _cache_mode(config, batch, resume_batch),
        cache_dir=option_path(config, "cache_dir")
        or config.invocation_params.dir / DEFAULT_CACHE_DIR,
        cache_ttl_s=_cache_ttl(config),
        max_cost=_optional_number(config, "max_cost"),
        max_latency_p95=_optional_number(config, "max_latency_p95", positive=True),
        max_ttft_p50=_optional_number(config, "max_ttft_p50", positive=True),
        max_cost_per_item=_optional_number(config, "max_cost_per_item", positive=True),
        rpm=_optional_number(config, "rpm", positive=True),
        tpm=_optional_number(config, "tpm", positive=True),
        rescore=rescore,
        estimate_cost=bool(config.getoption("llmbench_estimate_cost")),
        judges=chosen.judges,
        judge_metrics=_judge_metrics(config),
        repeat_policy=_repeat_policy(config),
        baseline=_baseline(config),
        fail_on_regression=bool(config.getoption("llmbench_fail_on_regression")),
        temperature_variations=_number(config, "temperature_variations", int, minimum=0),
        efforts=_efforts(config),
        latency_only=latency_only,
        optimize_prompts=chosen.optimize,
        optimizer=chosen.optimizer if chosen.optimize else None,
        check_models=flag_setting(config, "check_models"),
        skip_unavailable=flag_setting(config, "skip_unavailable"),
        batch=batch,
        batch_timeout_s=_age(config, "batch_timeout"),
        batch_poll_s=_number(config, "batch_poll", float, minimum=0.0, positive=True),
        resume_batch=resume_batch,
    )
    return split_budgets(run, parse_shard(setting(config, "shard")))


@dataclass(frozen=True)
class _ChosenProfiles:
    """The profiles a run resolved: its models, judges and prompt optimizer."""

    registry: ProfileRegistry
    models: tuple[ModelProfile, ...]
    judges: tuple[ModelProfile, ...]
    #: ``only`` or ``both`` (``--optimize-prompts``), None without prompt optimization
    optimize: str | None
    optimizer: ModelProfile


def _chosen_profiles(config: pytest.Config) -> _ChosenProfiles:
    """``--models``, ``--judges`` and ``--optimizer`` resolved against the profile files; a name
    no profile or litellm id answers to is a ``UsageError`` naming its option."""
    from ..models import ProfileError, load_profiles

    try:
        registry = load_profiles(_profile_paths(config))
        models = tuple(registry.resolve(setting(config, "models") or DEFAULT_MODEL))
    except ProfileError as exc:
        raise pytest.UsageError(f"llmbench: {exc}") from None
    try:
        judges = tuple(registry.resolve(setting(config, "judges") or DEFAULT_MODEL))
    except ProfileError as exc:
        raise pytest.UsageError(f"llmbench: --judges: {exc}") from None
    optimize = _optimize_mode(config)
    try:
        optimizer = registry.resolve(setting(config, "optimizer") or DEFAULT_MODEL)[0]
    except ProfileError as exc:
        raise pytest.UsageError(f"llmbench: --optimizer: {exc}") from None
    return _ChosenProfiles(registry, models, judges, optimize, optimizer)


def _check_flag_pairs(config: pytest.Config, rescore: bool) -> None:
    """The flags that need, or refuse, another option."""
    if flag_setting(config, "skip_unavailable") and not flag_setting(config, "check_models"):
        raise pytest.UsageError("llmbench: --skip-unavailable needs --check-models")
    cached = rescore or setting(config, "cache") in ("use", "replay")
    if flag_setting(config, "latency_only") and cached:
        raise pytest.UsageError(
            "llmbench: --latency-only measures calls: it does not go with --cache=use, "
            "--cache=replay or --rescore (cached answers carry old latencies)"
        )


def _cache_ttl(config: pytest.Config) -> float | None:
    """``--cache-ttl`` in seconds (``90s``, ``30m``, ``12h``, ``14d``), else a ``UsageError``."""
    raw = setting(config, "cache_ttl")
    if not raw:
        return None
    try:
        return parse_age(raw)
    except ValueError as exc:
        raise pytest.UsageError(f"llmbench: --cache-ttl: {exc}") from None


def _age(config: pytest.Config, dest: str) -> float:
    """A duration option (``90s``, ``30m``, ``12h``, ``14d``, or seconds) in seconds, else a
    ``UsageError`` naming it."""
    raw = setting(config, dest) or ""
    try:
        seconds = float(raw) if raw.replace(".", "", 1).isdigit() else parse_age(raw)
        if seconds <= 0:
            raise ValueError(f"{raw!r} is not a positive number of seconds")
        return seconds
    except ValueError as exc:
        flag = "--" + dest.replace("_", "-")
        raise pytest.UsageError(f"llmbench: {flag}: {exc}") from None


def _cache_mode(config: pytest.Config, batch: bool, resume: Path | None) -> str:
    """``--cache``; ``--batch`` uses the cache unless told otherwise (a rerun of a batched
    run costs nothing), and ``--resume-batch`` always reads it (its answers are there)."""
    given = config.getoption("llmbench_cache") is not None or config.getini("llmbench_cache")
    mode = _choice(config, "cache", CACHE_MODES)
    if (resume is not None and mode == "off") or (batch and not given):
        return "use"
    return mode


def _resume_batch(config: pytest.Config) -> Path | None:
    """``--resume-batch DIR``: a results folder holding a batch journal, else a
    ``UsageError`` naming it."""
    path = option_path(config, "resume_batch")
    if path is None:
        return None
    from ..results_folder import BATCHES_FILE

    if not (path / BATCHES_FILE).is_file():
        raise pytest.UsageError(
            f"llmbench: --resume-batch: {path} holds no {BATCHES_FILE} (not the results "
            "folder of a --batch run)"
        )
    return path


def _push_url(config: pytest.Config) -> str | None:
    """``--prom-push``: an http(s) URL of a Pushgateway, else a ``UsageError``."""
    raw = setting(config, "prom_push")
    if raw is None:
        return None
    from urllib.parse import urlsplit

    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise pytest.UsageError(
            f"llmbench: --prom-push must be an http(s) URL of a Pushgateway, got {parts.scheme or raw!r}"
        )
    return raw


def _stream_mode(config: pytest.Config, latency_only: bool) -> str:
    """``--stream``; a latency-only run streams every call (TTFT for each) unless told not to."""
    given = config.getoption("llmbench_stream") is not None or config.getini("llmbench_stream")
    if latency_only and not given:
        return "all"
    return _choice(config, "stream", STREAM_MODES)


def _optimize_mode(config: pytest.Config) -> str | None:
    raw = setting(config, "optimize_prompts")
    if raw is None or raw == "":
        return None
    if raw.lower() not in ("only", "both"):
        raise pytest.UsageError(f"llmbench: --optimize-prompts must be only or both, got {raw!r}")
    return raw.lower()


def _judge_gate(config: pytest.Config) -> JudgeGate | None:
    """``--judge-gate`` (and ``--judge-gate-fail``); a bad value is a ``UsageError`` naming it."""
    from .option_values import parse_judge_gate

    raw = setting(config, "judge_gate")
    if raw is None or not raw.strip():
        return None  # --judge-gate-fail alone applies to eval files' own judge_gate:
    try:
        return parse_judge_gate(raw, fail=flag_setting(config, "judge_gate_fail"))
    except ValueError as exc:
        raise pytest.UsageError(f"llmbench: {exc}") from None


def _otel(config: pytest.Config) -> OtelSettings | None:
    """``--otel``, ``--otel-content`` and the ``OTEL_*`` variables (after ``.env`` is read);
    a malformed variable is a ``UsageError`` naming it."""
    import os

    from .otel import otel_settings

    on, content = flag_setting(config, "otel"), flag_setting(config, "otel_content")
    try:
        return otel_settings(on, content, os.environ)
    except ValueError as exc:
        raise pytest.UsageError(f"llmbench: {exc}") from None


def _repeat_policy(config: pytest.Config) -> str:
    raw = (setting(config, "repeat_policy") or "all").lower()
    try:
        return parse_repeat_policy(raw)
    except ValueError as exc:
        raise pytest.UsageError(f"llmbench: {exc}") from None


def _stop_early(config: pytest.Config, repeat: int) -> float | None:
    """``--stop-early[=CONFIDENCE]``: a confidence in (0, 1] (the flag alone: 1, exact), only
    with ``--repeat N`` above 1; anything else is a ``UsageError`` naming the option."""
    raw = setting(config, "stop_early")
    if raw is None or raw.lower() in ("", "false", "no", "off"):
        return None
    if raw.lower() in ("true", "yes", "on", "exact"):
        raw = "1.0"
    try:
        confidence = float(raw)
    except ValueError:
        confidence = math.nan
    if not 0.0 < confidence <= 1.0:  # NaN too
        raise pytest.UsageError(
            f"llmbench: --stop-early takes a confidence in (0, 1] (1: exact, the default), "
            f"written --stop-early=0.95; got {raw!r}"
        )
    if repeat < 2:
        raise pytest.UsageError(
            "llmbench: --stop-early needs --repeat N with N > 1: it stops a case's repeats"
        )
    return confidence


def _baseline(config: pytest.Config) -> Path | None:
    path = option_path(config, "baseline")
    if path is not None and not ResultsFolder(path).has_results():
        raise pytest.UsageError(f"llmbench: --baseline has no {RESULTS_FILE}: {path}")
    if path is None and config.getoption("llmbench_fail_on_regression"):
        raise pytest.UsageError("llmbench: --fail-on-regression needs --baseline DIR")
    return path


_T = TypeVar("_T")


def _comma_list(config: pytest.Config, name: str, parse: Callable[[str], _T]) -> tuple[_T, ...]:
    """The setting ``name``, a comma list, each word parsed by ``parse`` and kept once; a word it
    refuses (``ValueError``) is a ``UsageError`` naming the option."""
    raw = setting(config, name) or ""
    try:
        values = [parse(word) for word in raw.split(",") if word.strip()]
    except ValueError as exc:
        option = "--" + name.replace("_", "-")
        raise pytest.UsageError(f"llmbench: {option}: {exc}") from None
    return tuple(dict.fromkeys(values))


def _efforts(config: pytest.Config) -> tuple[str | int, ...]:
    """``--efforts``: levels or thinking budgets, each once; a bad one is a ``UsageError``."""
    from ..models import parse_effort

    return _comma_list(config, "efforts", parse_effort)


def _judge_metrics(config: pytest.Config) -> tuple[str, ...]:
    from ..scoring import dimension_key

    return _comma_list(config, "judge_metrics", dimension_key)


def _choice(config: pytest.Config, dest: str, choices: tuple[str, ...]) -> str:
    raw = (setting(config, dest) or "").lower()
    if raw not in choices:
        flag = "--" + dest.replace("_", "-")
        raise pytest.UsageError(
            f"llmbench: {flag} must be one of {', '.join(choices)}, got {raw!r}"
        )
    return raw


def _optional_number(config: pytest.Config, dest: str, *, positive: bool = False) -> float | None:
    """An optional budget: absent, or a finite number >= 0 (> 0 when ``positive``)."""
    if setting(config, dest) is None:
        return None
    return float(_number(config, dest, float, minimum=0.0, positive=positive))


#: Upper bounds of the counts whose huge values would only exhaust memory or time at collection.
_MAXIMA: dict[str, int] = {
    "repeat": 100_000,
    "temperature_variations": 100,
    "max_retries": 100,
    "concurrency": 100_000,
}


def _number(
    config: pytest.Config, dest: str, kind: type, minimum: float, *, positive: bool = False
) -> Any:
    """The option as ``kind``: finite, at least ``minimum`` (above it when ``positive``) and at
    most its :data:`_MAXIMA` entry; anything else is a ``UsageError`` naming option and value."""
    raw = setting(config, dest)
    flag = "--" + dest.replace("_", "-")
    try:
        value = kind(raw)
    except (TypeError, ValueError, OverflowError):
        raise pytest.UsageError(f"llmbench: {flag} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise pytest.UsageError(f"llmbench: {flag} must be a finite number, got {raw!r}")
    if value < minimum or (positive and value == minimum):
        bound = f"more than {minimum:g}" if positive else f"at least {minimum:g}"
        raise pytest.UsageError(f"llmbench: {flag} must be {bound}, got {raw}")
    maximum = _MAXIMA.get(dest)
    if maximum is not None and value > maximum:
        raise pytest.UsageError(f"llmbench: {flag} must be at most {maximum:,}, got {raw}")
    return value


def _rate(config: pytest.Config) -> float | None:
    raw = setting(config, "min_pass_rate")
    if raw is None:
        return None
    try:
        rate = float(raw)
    except ValueError:
        rate = -1.0
    if not 0.0 <= rate <= 1.0:
        raise pytest.UsageError(f"llmbench: --min-pass-rate must be between 0 and 1, got {raw!r}")
    return rate


def _results_dir(config: pytest.Config) -> Path | None:
    """``--results-dir``; whether it can be made is tried at the start of the run, by the
    results folder's owner (``results.recorder.check_results_dir``)."""
    return option_path(config, "results_dir")


def _profile_paths(config: pytest.Config) -> list[Path]:
    given = config.getoption("llmbench_profiles")
    if given:
        paths = [config.invocation_params.dir / raw for raw in given]
        missing = [str(path) for path in paths if not path.exists()]
        if missing:
            raise pytest.UsageError(f"llmbench: --profiles path not found: {', '.join(missing)}")
        return paths
    from_ini = config.getini("llmbench_profiles")
    return list(from_ini) if from_ini else [config.rootpath / "profiles"]
