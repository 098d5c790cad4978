"""Command-line options, ini keys and the resolved :class:`RunConfig`.

Precedence: command line > ini file > defaults; model details come from profiles. The config is
built on first use (or at configure time when an llmbench option was given), so a pytest run that
never touches an eval file reads no profile and no ``.env`` file.
"""

from __future__ import annotations

import io
import math
import os
import re
from collections import ChainMap
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from .results_folder import DEFAULT_ROOT, METRICS_FILE, RESULTS_FILE, ResultsFolder

if TYPE_CHECKING:
    from dotenv.parser import Binding

    from .models.profiles import ModelProfile, ProfileRegistry

DEFAULT_MODEL = "local/smollm2"
DEFAULT_PATTERN = "*.eval.yaml"
#: The response cache's folder, relative to where pytest is invoked.
DEFAULT_CACHE_DIR = ".llmbench-cache"
RUN_CONFIG_KEY = pytest.StashKey["RunConfig"]()
ALLOWED_PATHS_KEY = pytest.StashKey[tuple[Path, ...]]()

#: (option dest, ini name, help, default). One table drives both the CLI and the ini file.
_SETTINGS: tuple[tuple[str, str, str, str | None], ...] = (
    ("models", "llmbench_models", "Comma list of litellm models, profile names or @sets "
     "(write --models=@set: pytest reads a bare @word as an arguments file; default: "
     f"the embedded model, {DEFAULT_MODEL})", None),
    ("repeat", "llmbench_repeat", "Run every case N times (default 1)", "1"),
    ("limit", "llmbench_limit", "Run only the first N cases of each eval file (after its "
     "dataset's own selection), as lm-eval's --limit", None),
    ("results_dir", "llmbench_results_dir", "Folder for results (default: a new "
     f"timestamped folder under {DEFAULT_ROOT}/)", None),
    ("min_pass_rate", "llmbench_min_pass_rate", "Gate on each model's pass rate (0..1) "
     "instead of on single cases", None),
    ("errors_count_as", "llmbench_errors_count_as", "How an errored item counts in pass rates, "
     "scores and the ranking: fail (default: a failure, score 0) or skip (left out; coverage "
     "shows it)", "fail"),
    ("env_file", "llmbench_env_file", "File of KEY=value lines loaded into the environment "
     "(default: .env when present)", None),
    ("request_timeout", "llmbench_request_timeout", "Seconds one attempt of a model call may "
     "take in all (connecting, waiting and the whole streamed answer) before it times out; each "
     "retry is a new attempt with its own bound (default 60)", "60"),
    ("connect_timeout", "llmbench_connect_timeout", "Seconds to open a connection to a model's "
     "endpoint before the attempt times out (default 10)", "10"),
    ("max_retries", "llmbench_max_retries", "Retries of a failed model call (429, 5xx, "
     "timeouts, dropped connections; default 2)", "2"),
    ("client", "llmbench_client", "Client of models on OpenAI-compatible endpoints: auto (our "
     "lean HTTP client; litellm for every other provider) or litellm (every model)", "auto"),
    ("concurrency", "llmbench_concurrency", "Model calls in flight per model for the whole run, "
     "split between xdist workers (default 8)", "8"),
    ("stream", "llmbench_stream", "Stream all calls, a seeded sample of them (TTFT at low "
     "cost; the default) or none: all, sample, off", "sample"),
    ("cache", "llmbench_cache", "Response cache: off (default), use, refresh, or replay "
     "(no network; a miss is an error)", "off"),
    ("cache_dir", "llmbench_cache_dir", f"Folder of the response cache (default {DEFAULT_CACHE_DIR})",
     DEFAULT_CACHE_DIR),
    ("cache_ttl", "llmbench_cache_ttl", "Age past which a cached answer is stale: called again "
     "under --cache=use, an error under --cache=replay (90s, 30m, 12h, 14d; default: none, "
     "answers never age)", None),
    ("max_cost", "llmbench_max_cost", "Stop starting model calls once the run has spent this "
     "many USD; the rest are skipped", None),
    ("max_latency_p95", "llmbench_max_latency_p95", "Fail the run when a model's 95th "
     "percentile latency over its answered, uncached items is above S seconds", None),
    ("max_ttft_p50", "llmbench_max_ttft_p50", "Fail the run when a model's median time to first "
     "token over its answered, uncached, streamed items is above S seconds", None),
    ("max_cost_per_item", "llmbench_max_cost_per_item", "Fail the run when a model's mean call "
     "cost over its answered items with a known price is above USD (judges not included)",
     None),
    ("rpm", "llmbench_rpm", "Requests per minute per model, for models whose profile sets none",
     None),
    ("tpm", "llmbench_tpm", "Tokens per minute per model, for models whose profile sets none",
     None),
    ("judges", "llmbench_judges", "Judge panel of model-graded assertions that name none: "
     "comma list of profile names, litellm ids or @sets (default: the embedded model)", None),
    ("judge_metrics", "llmbench_judge_metrics", "Extra dimensions every jury scores, comma "
     'list (e.g. "brand voice, empathy")', None),
    ("repeat_policy", "llmbench_repeat_policy", "When a case run several times (--repeat) "
     "passes: all (default), majority, any or at-least:K of its repeats", "all"),
    ("baseline", "llmbench_baseline", "A saved results folder to compare this run with "
     "(regressions listed in the summary)", None),
    ("temperature_variations", "llmbench_temperature_variations", "Add K temperatures around "
     "each configured one, alternately below and above it in steps of half of it (0.4 with 2: 0.2, "
     "0.4, 0.6); results group by temperature", "0"),
    ("optimize_prompts", "llmbench_optimize_prompts", "Rewrite each prompt for each model with "
     "the --optimizer model: only (evaluate the rewrites) or both (original and _optimized "
     "side by side)", None),
    ("shard", "llmbench_shard", "Run shard K of N of the selected items (K/N, e.g. 2/3): a "
     "deterministic split for N CI runners; --rpm, --tpm, --max-cost and --concurrency are "
     "divided by N; `llmbench merge` joins the shards' results", None),
    ("prom_push", "llmbench_prom_push", f"Push the run's {METRICS_FILE} to this Prometheus "
     "Pushgateway at the end of the run (http://host:9091; job llmbench)", None),
    ("optimizer", "llmbench_optimizer", "Model that rewrites prompts for --optimize-prompts "
     "(profile name or litellm id; default: the embedded model)", None),
)  # fmt: skip
#: Flags (store_true options): (option dest, help). Each is also an ini key ``llmbench_<dest>``.
_FLAGS: tuple[tuple[str, str], ...] = (
    ("latency_only", "Only measure the models: TTFT, latency, tokens, throughput and cost; "
     "no assertions or judges (scores empty, eval_type latency; every call streamed)"),
    ("check_models", "Before the run, make one minimal call per model, in parallel, and "
     "report those that cannot be reached"),
    ("skip_unavailable", "With --check-models: leave unreachable models out of the run "
     "instead of failing it"),
)  # fmt: skip

STREAM_MODES = ("all", "sample", "off")
#: ``off``: no cache; ``use``: read, and store misses; ``refresh``: call anyway and overwrite;
#: ``replay``: read only, a miss is an error instead of a call.
CACHE_MODES = ("off", "use", "refresh", "replay")
#: ``--client``: who calls models on OpenAI-compatible endpoints (see models/providers/routes).
CLIENT_CHOICES = ("auto", "litellm")
#: How an errored item counts in pass rates and scores (``--errors-count-as``).
ERRORS_COUNT_AS = ("fail", "skip")


def add_options(parser: pytest.Parser) -> None:
    """Register the llmbench command-line options and ini keys."""
    group = parser.getgroup("llmbench", "LLM evals (pytest-llmbench)")
    for dest, ini, help_text, _default in _SETTINGS:
        flag = "--" + dest.replace("_", "-")
        group.addoption(flag, dest=f"llmbench_{dest}", default=None, help=help_text)
        parser.addini(ini, help_text, default=None)
    group.addoption(
        "--profiles", dest="llmbench_profiles", action="append", default=None,
        help="Folder or file of model profiles (repeatable; default: profiles/)",
    )  # fmt: skip
    parser.addini("llmbench_profiles", "Folders or files of model profiles", type="paths")
    group.addoption(
        "--allow-path", dest="llmbench_allow_path", action="append", default=None, metavar="DIR",
        help="Folder outside the project that paths in eval files may lead into (repeatable; "
        "replaces llmbench_allowed_paths)",
    )  # fmt: skip
    parser.addini(
        "llmbench_allowed_paths",
        "Folders outside the project that paths in eval files may lead into",
        type="paths",
    )
    group.addoption(
        "--rescore", dest="llmbench_rescore", action="store_true", default=None,
        help="Recompute scores from cached responses without calling models",
    )  # fmt: skip
    group.addoption(
        "--fail-on-regression", dest="llmbench_fail_on_regression", action="store_true",
        default=None, help="With --baseline: fail the run on a significant regression",
    )  # fmt: skip
    group.addoption(
        "--estimate-cost", dest="llmbench_estimate_cost", action="store_true", default=None,
        help="With --collect-only: estimate each model's cost from the rendered prompts",
    )  # fmt: skip
    group.addoption(
        "--retry-errors", dest="llmbench_retry_errors", default=None, metavar="DIR",
        help="Run again only the items that ended in an error in the results folder DIR, with "
        "the options of that run, and complete it in place: each new record replaces the "
        "errored one (kept under attempts); the aggregates, report and gates are recomputed",
    )  # fmt: skip
    for dest, help_text in _FLAGS:
        flag = "--" + dest.replace("_", "-")
        group.addoption(flag, dest=f"llmbench_{dest}", action="store_true", default=None,
                        help=help_text)  # fmt: skip
        parser.addini(f"llmbench_{dest}", help_text, type="bool", default=False)
    parser.addini(
        "llmbench_pattern",
        f"Glob of eval file names (default {DEFAULT_PATTERN})",
        default=DEFAULT_PATTERN,
    )


def explicitly_configured(config: pytest.Config) -> bool:
    """True when any llmbench option was given on the command line or in the ini file."""
    names = [f"llmbench_{dest}" for dest, *_ in _SETTINGS]
    names += [
        "llmbench_profiles",
        "llmbench_rescore",
        "llmbench_estimate_cost",
        "llmbench_fail_on_regression",
        *(f"llmbench_{dest}" for dest, _ in _FLAGS),
    ]
    if any(config.getoption(name) is not None for name in names):
        return True
    inis = [ini for _, ini, *_ in _SETTINGS] + [f"llmbench_{dest}" for dest, _ in _FLAGS]
    return any(config.getini(ini) for ini in inis) or bool(config.getini("llmbench_profiles"))


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
    #: a saved results folder to compare with
    baseline: Path | None = None
    fail_on_regression: bool = False
    #: extra temperatures around each configured one (``--temperature-variations K``)
    temperature_variations: int = 0
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
            "baseline": str(self.baseline) if self.baseline else None,
            "fail_on_regression": self.fail_on_regression,
            "temperature_variations": self.temperature_variations,
            "latency_only": self.latency_only,
            "optimize_prompts": self.optimize_prompts,
            "optimizer": self.optimizer.name if self.optimizer else None,
            "check_models": self.check_models,
            "skip_unavailable": self.skip_unavailable,
            "shard": None
            if self.shard is None
            else {"index": self.shard[0], "count": self.shard[1], "split": self.shard_split},
        }


def shard_setting(config: pytest.Config) -> str | None:
    """The raw ``--shard`` (or ``llmbench_shard``) value, read without building the run."""
    return _setting(config, "shard")


def get_run_config(config: pytest.Config) -> RunConfig:
    """The run's config, built and cached on first use."""
    run = config.stash.get(RUN_CONFIG_KEY, None)
    if run is None:
        run = build_run_config(config)
        config.stash[RUN_CONFIG_KEY] = run
    return run


def _setting(config: pytest.Config, dest: str) -> str | None:
    value = config.getoption(f"llmbench_{dest}")
    if value is None:
        ini = next(ini for name, ini, *_ in _SETTINGS if name == dest)
        value = config.getini(ini)
    if value is None:
        value = next(default for name, _, _, default in _SETTINGS if name == dest)
    return None if value is None else str(value).strip()


def build_run_config(config: pytest.Config) -> RunConfig:
    """Resolve options, ini, ``.env`` and profiles; raise ``pytest.UsageError`` when bad."""
    from .models.profile_files import load_profiles
    from .models.profiles import ProfileError

    env_file = _load_env_file(config)
    rescore = bool(config.getoption("llmbench_rescore"))
    try:
        registry = load_profiles(_profile_paths(config))
        models = tuple(registry.resolve(_setting(config, "models") or DEFAULT_MODEL))
    except ProfileError as exc:
        raise pytest.UsageError(f"llmbench: {exc}") from None
    try:
        judges = tuple(registry.resolve(_setting(config, "judges") or DEFAULT_MODEL))
    except ProfileError as exc:
        raise pytest.UsageError(f"llmbench: --judges: {exc}") from None
    optimize = _optimize_mode(config)
    try:
        optimizer = registry.resolve(_setting(config, "optimizer") or DEFAULT_MODEL)[0]
    except ProfileError as exc:
        raise pytest.UsageError(f"llmbench: --optimizer: {exc}") from None
    check_models, skip_unavailable = (
        _flag(config, "check_models"),
        _flag(config, "skip_unavailable"),
    )
    if skip_unavailable and not check_models:
        raise pytest.UsageError("llmbench: --skip-unavailable needs --check-models")
    latency_only = _flag(config, "latency_only")
    if latency_only and (rescore or _setting(config, "cache") in ("use", "replay")):
        raise pytest.UsageError(
            "llmbench: --latency-only measures calls: it does not go with --cache=use, "
            "--cache=replay or --rescore (cached answers carry old latencies)"
        )
    from .shard import parse_shard, split_budgets

    run = RunConfig(
        models=models,
        repeat=_number(config, "repeat", int, minimum=1),
        limit=None if _setting(config, "limit") is None else _number(config, "limit", int, 1),
        prom_push=_push_url(config),
        results_dir=_results_dir(config),
        min_pass_rate=_rate(config),
        errors_count_as=_choice(config, "errors_count_as", ERRORS_COUNT_AS),
        request_timeout_s=_number(config, "request_timeout", float, minimum=0.001),
        connect_timeout_s=_number(config, "connect_timeout", float, minimum=0.001),
        max_retries=_number(config, "max_retries", int, minimum=0),
        client=_choice(config, "client", CLIENT_CHOICES),
        profiles=registry,
        env_file=env_file,
        concurrency=_number(config, "concurrency", int, minimum=1),
        stream=_stream_mode(config, latency_only),
        # --rescore reads answers from the cache only: it is replay under another name.
        cache_mode="replay" if rescore else _choice(config, "cache", CACHE_MODES),
        cache_dir=_path(config, "cache_dir") or config.invocation_params.dir / DEFAULT_CACHE_DIR,
        cache_ttl_s=_cache_ttl(config),
        max_cost=_optional_number(config, "max_cost"),
        max_latency_p95=_optional_number(config, "max_latency_p95", positive=True),
        max_ttft_p50=_optional_number(config, "max_ttft_p50", positive=True),
        max_cost_per_item=_optional_number(config, "max_cost_per_item", positive=True),
        rpm=_optional_number(config, "rpm", positive=True),
        tpm=_optional_number(config, "tpm", positive=True),
        rescore=rescore,
        estimate_cost=bool(config.getoption("llmbench_estimate_cost")),
        judges=judges,
        judge_metrics=_judge_metrics(config),
        repeat_policy=_repeat_policy(config),
        baseline=_baseline(config),
        fail_on_regression=bool(config.getoption("llmbench_fail_on_regression")),
        temperature_variations=_number(config, "temperature_variations", int, minimum=0),
        latency_only=latency_only,
        optimize_prompts=optimize,
        optimizer=optimizer if optimize else None,
        check_models=check_models,
        skip_unavailable=skip_unavailable,
    )
    return split_budgets(run, parse_shard(_setting(config, "shard")))


def _cache_ttl(config: pytest.Config) -> float | None:
    """``--cache-ttl`` in seconds (``90s``, ``30m``, ``12h``, ``14d``), else a ``UsageError``."""
    raw = _setting(config, "cache_ttl")
    if not raw:
        return None
    from .engine.cache import parse_age

    try:
        return parse_age(raw)
    except ValueError as exc:
        raise pytest.UsageError(f"llmbench: --cache-ttl: {exc}") from None


def _push_url(config: pytest.Config) -> str | None:
    """``--prom-push``: an http(s) URL of a Pushgateway, else a ``UsageError``."""
    raw = _setting(config, "prom_push")
    if raw is None:
        return None
    from urllib.parse import urlsplit

    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise pytest.UsageError(
            f"llmbench: --prom-push must be an http(s) URL of a Pushgateway, got {parts.scheme or raw!r}"
        )
    return raw


def shadowed_model_notes(config: pytest.Config) -> list[str]:
    """Lines for the session header: each ``--models``/``--judges`` entry written as a litellm
    id that a profile file turned into a profile (its deployments, its rate limit)."""
    profiles = get_run_config(config).profiles
    notes = []
    for dest in ("models", "judges"):
        selection = _setting(config, dest) or ""
        notes += [f"llmbench: --{dest} {note}" for note in profiles.shadowed_ids(selection)]
    return notes


def allowed_paths(config: pytest.Config) -> tuple[Path, ...]:
    """The folders besides the rootdir that paths in eval files may lead into, resolved:
    ``--allow-path`` (from the invocation folder), else ``llmbench_allowed_paths`` (from the ini
    file's folder). One that is not a folder is a ``UsageError``."""
    known = config.stash.get(ALLOWED_PATHS_KEY, None)
    if known is None:
        given = config.getoption("llmbench_allow_path")
        paths = [config.invocation_params.dir / raw for raw in given or ()]
        source = "--allow-path"
        if not given:
            paths, source = list(config.getini("llmbench_allowed_paths")), "llmbench_allowed_paths"
        missing = [str(path) for path in paths if not path.is_dir()]
        if missing:
            raise pytest.UsageError(f"llmbench: {source}: not a folder: {', '.join(missing)}")
        known = config.stash[ALLOWED_PATHS_KEY] = tuple(path.resolve() for path in paths)
    return known


def _flag(config: pytest.Config, dest: str) -> bool:
    """A store_true option: the command line, else its ini key."""
    given = config.getoption(f"llmbench_{dest}")
    return bool(given) if given is not None else bool(config.getini(f"llmbench_{dest}"))


def _stream_mode(config: pytest.Config, latency_only: bool) -> str:
    """``--stream``; a latency-only run streams every call (TTFT for each) unless told not to."""
    given = config.getoption("llmbench_stream") is not None or config.getini("llmbench_stream")
    if latency_only and not given:
        return "all"
    return _choice(config, "stream", STREAM_MODES)


def _optimize_mode(config: pytest.Config) -> str | None:
    raw = _setting(config, "optimize_prompts")
    if raw is None or raw == "":
        return None
    if raw.lower() not in ("only", "both"):
        raise pytest.UsageError(f"llmbench: --optimize-prompts must be only or both, got {raw!r}")
    return raw.lower()


def _repeat_policy(config: pytest.Config) -> str:
    from .results.stats.repeats import parse_repeat_policy  # llmbench merge's check too

    raw = (_setting(config, "repeat_policy") or "all").lower()
    try:
        return parse_repeat_policy(raw)
    except ValueError as exc:
        raise pytest.UsageError(f"llmbench: {exc}") from None


def _baseline(config: pytest.Config) -> Path | None:
    path = _path(config, "baseline")
    if path is not None and not ResultsFolder(path).has_results():
        raise pytest.UsageError(f"llmbench: --baseline has no {RESULTS_FILE}: {path}")
    if path is None and config.getoption("llmbench_fail_on_regression"):
        raise pytest.UsageError("llmbench: --fail-on-regression needs --baseline DIR")
    return path


def _judge_metrics(config: pytest.Config) -> tuple[str, ...]:
    from .scoring.judged import dimension_key

    raw = _setting(config, "judge_metrics") or ""
    try:
        keys = [dimension_key(name) for name in raw.split(",") if name.strip()]
    except ValueError as exc:
        raise pytest.UsageError(f"llmbench: --judge-metrics: {exc}") from None
    return tuple(dict.fromkeys(keys))


def _choice(config: pytest.Config, dest: str, choices: tuple[str, ...]) -> str:
    raw = (_setting(config, dest) or "").lower()
    if raw not in choices:
        flag = "--" + dest.replace("_", "-")
        raise pytest.UsageError(
            f"llmbench: {flag} must be one of {', '.join(choices)}, got {raw!r}"
        )
    return raw


def _optional_number(config: pytest.Config, dest: str, *, positive: bool = False) -> float | None:
    """An optional budget: absent, or a finite number >= 0 (> 0 when ``positive``)."""
    if _setting(config, dest) is None:
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
    raw = _setting(config, dest)
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
    raw = _setting(config, "min_pass_rate")
    if raw is None:
        return None
    try:
        rate = float(raw)
    except ValueError:
        rate = -1.0
    if not 0.0 <= rate <= 1.0:
        raise pytest.UsageError(f"llmbench: --min-pass-rate must be between 0 and 1, got {raw!r}")
    return rate


def _path(config: pytest.Config, dest: str) -> Path | None:
    raw = _setting(config, dest)
    return None if not raw else config.invocation_params.dir / raw


def _results_dir(config: pytest.Config) -> Path | None:
    """``--results-dir``; whether it can be made is tried at the start of the run, by the
    results folder's owner (``results.recorder.check_results_dir``)."""
    return _path(config, "results_dir")


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


def _load_env_file(config: pytest.Config) -> Path | None:
    raw = _setting(config, "env_file")
    if raw:
        path = config.invocation_params.dir / raw
        if not path.is_file():
            raise pytest.UsageError(f"llmbench: --env-file not found: {path}")
    else:
        path = config.rootpath / ".env"
        if not path.is_file():
            return None
    text = _env_text(path)
    # The real environment wins over the file, as with most tools that read .env.
    for name, value in env_text_values(text, os.environ).items():
        if value is not None and name not in os.environ:
            try:
                os.environ[name] = value
            except ValueError:  # a name with '=' or an empty one: the OS refuses it
                message = f"llmbench: {path}: {name!r} is not a valid variable name"
                raise pytest.UsageError(message) from None
    return path


def _env_text(path: Path) -> str:
    """The text of an env file: UTF-8 (BOM tolerated), without NUL, which no variable can hold."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise pytest.UsageError(f"llmbench: {path}:{line}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise pytest.UsageError(f"llmbench: {path}: cannot read: {exc.strerror}") from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise pytest.UsageError(f"llmbench: {path}:{line}: a NUL character (binary file?)")
    return text


# -- .env files ---------------------------------------------------------------------------------
# python-dotenv's ``dotenv_values`` expands ``${VAR}`` in each value against a new dict holding
# a copy of the whole environment and of every value read before it: a file of n lines costs n
# copies of up to n values (quadratic: 50,000 lines took minutes, benchmarks/envfile.py). Its
# parser is linear, at some 10 to 25 us a line. The file reads the same, faster:
# - a line of the common shapes, NAME=value, NAME="value" or NAME='value' (``export`` and a
#   comment allowed) with no backslash nor line break in the quotes, no space nor '#' in a bare
#   value, or a comment line, is read by one match of _PLAIN at the start of that line:
#   python-dotenv reads such a line into the same name and value, having nothing to unescape;
# - any other statement (quotes, escapes, comments, multi-line values, a line it cannot parse,
#   with its warning) is read by python-dotenv's own parser, from the same place: a quoted value
#   spanning lines is read whole before the next line is looked at;
# - each value's ${NAME} and ${NAME:-default} are expanded by python-dotenv's own expansion,
#   against one view of the values read so far over the environment, looked up in place: one
#   lookup per reference, no copy.

#: A statement python-dotenv reads verbatim, at a line's start: a comment line, or an optional
#: ``export``, a plain name, ``=`` and a value that is double- or single-quoted without a
#: backslash or line break, or unquoted without space, quote, ``#`` or backslash; then spaces
#: and a comment, if any, and the end of the line (any of python-dotenv's line ends) or text.
_PLAIN = re.compile(
    r"""
    (?:
        \#[^\r\n]*
    |
        (?:export[ \t]+)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)=
        (?:
            "(?P<double>[^"\\\r\n]*)"[ \t]*(?:\#[^\r\n]*)?
        |
            '(?P<single>[^'\\\r\n]*)'[ \t]*(?:\#[^\r\n]*)?
        |
            (?P<bare>[^\s'"\#\\]*)(?:[ \t]+(?:\#[^\r\n]*)?)?
        )
    )
    (?P<end>\r\n|\n|\r|\Z)
    """,
    re.VERBOSE,
)


def env_text_values(text: str, environ: Mapping[str, str]) -> dict[str, str | None]:
    """The variables a ``.env`` text sets, as ``dotenv_values(stream=...)`` gives them:
    ``${NAME}`` and ``${NAME:-default}`` expand to the value the file gave ``NAME`` on an
    earlier line, else ``environ``'s, else the default or ``""``; a later line of the same
    name replaces the value (lines after it see the new one); a name without ``=`` is None.
    """
    from dotenv.variables import parse_variables

    values: dict[str, str | None] = {}
    # python-dotenv merges both into a new dict for every line; a view reads them in place
    # (only read: nothing is written through it, so the environment needs no copy).
    earlier_then_environ = ChainMap(values, cast("MutableMapping[str, str | None]", environ))
    for name, value in _env_statements(text):
        if value is not None and "${" in value:
            value = "".join(atom.resolve(earlier_then_environ) for atom in parse_variables(value))
        values[name] = value
    return values


def _env_statements(text: str) -> Iterator[tuple[str, str | None]]:
    """The (name, value) statements of a ``.env`` text in order, as python-dotenv's parser
    gives them: a common line read by one match, anything else by that parser."""
    from dotenv import parser

    reader = parser.Reader(io.StringIO(text))
    string, position, end = reader.string, reader.position, len(reader.string)
    while position.chars < end:
        plain = _PLAIN.match(string, position.chars)
        if plain is None:
            binding = _warned(parser.parse_binding(reader))
            if binding.key is not None:
                yield binding.key, binding.value
            continue
        name, double, single, bare, ending = plain.group("name", "double", "single", "bare", "end")
        position.chars = plain.end()
        position.line += 1 if ending else 0
        if name is not None:  # else a comment line
            yield name, double if double is not None else single if single is not None else bare


def _warned(binding: Binding) -> Binding:
    """``binding``, after python-dotenv's own warning when it could not be parsed."""
    from dotenv.main import with_warn_for_invalid_lines

    (checked,) = with_warn_for_invalid_lines(iter((binding,)))
    return checked
