"""The llmbench options: one table of command-line options and ini keys, registered with pytest
(:func:`add_options`) and read back (:func:`setting`) with the precedence command line > ini
file > default. The ``llmbench`` command takes the flags it shares with a run from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest

from ..results_folder import DEFAULT_ROOT, METRICS_FILE

DEFAULT_MODEL = "local/smollm2"
DEFAULT_PATTERN = "*.eval.yaml"
#: The response cache's folder, relative to where pytest is invoked.
DEFAULT_CACHE_DIR = ".llmbench-cache"


@dataclass(frozen=True)
class Setting:
    """An option that takes a value: ``--<dest>`` on the command line (``-`` for ``_``),
    ``llmbench_<dest>`` in the ini file."""

    dest: str
    help: str
    #: the value when neither the command line nor the ini file gives one (a string, as typed)
    default: str | None = None
    #: the value of the option given without one (``--stop-early``); None: it needs a value
    const: str | None = None

    @property
    def flag(self) -> str:
        return "--" + self.dest.replace("_", "-")

    @property
    def name(self) -> str:
        """The ini key, and the option's dest on pytest's namespace."""
        return f"llmbench_{self.dest}"


@dataclass(frozen=True)
class Flag:
    """A store_true option, ``--<dest>``; also an ini key ``llmbench_<dest>`` (a bool)."""

    dest: str
    help: str

    @property
    def flag(self) -> str:
        return "--" + self.dest.replace("_", "-")

    @property
    def name(self) -> str:
        return f"llmbench_{self.dest}"


#: The options with a value. One table drives both the command line and the ini file.
SETTINGS: tuple[Setting, ...] = (
    Setting("models", "Comma list of litellm models, profile names or @sets "
        "(write --models=@set: pytest reads a bare @word as an arguments file; default: "
        f"the embedded model, {DEFAULT_MODEL})", None),
    Setting("repeat", "Run every case N times (default 1)", "1"),
    Setting("limit", "Run only the first N cases of each eval file (after its "
        "dataset's own selection), as lm-eval's --limit", None),
    Setting("results_dir", "Folder for results (default: a new "
        f"timestamped folder under {DEFAULT_ROOT}/)", None),
    Setting("min_pass_rate", "Gate on each model's pass rate (0..1) "
        "instead of on single cases", None),
    Setting("errors_count_as", "How an errored item counts in pass rates, "
        "scores and the ranking: fail (default: a failure, score 0) or skip (left out; coverage "
        "shows it)", "fail"),
    Setting("env_file", "File of KEY=value lines loaded into the environment "
        "(default: .env when present)", None),
    Setting("request_timeout", "Seconds one attempt of a model call may "
        "take in all (connecting, waiting and the whole streamed answer) before it times out; each "
        "retry is a new attempt with its own bound (default 60)", "60"),
    Setting("connect_timeout", "Seconds to open a connection to a model's "
        "endpoint before the attempt times out (default 10)", "10"),
    Setting("max_retries", "Retries of a failed model call (429, 5xx, "
        "timeouts, dropped connections; default 2)", "2"),
    Setting("client", "Client of models on OpenAI-compatible endpoints: auto (our "
        "lean HTTP client; litellm for every other provider) or litellm (every model)", "auto"),
    Setting("concurrency", "Model calls in flight per model for the whole run, "
        "split between xdist workers (default 8)", "8"),
    Setting("stream", "Stream all calls, a seeded sample of them (TTFT at low "
        "cost; the default) or none: all, sample, off", "sample"),
    Setting("cache", "Response cache: off (default), use, refresh, or replay "
        "(no network; a miss is an error)", "off"),
    Setting("cache_dir", f"Folder of the response cache (default {DEFAULT_CACHE_DIR})",
     DEFAULT_CACHE_DIR),
    Setting("cache_ttl", "Age past which a cached answer is stale: called again "
        "under --cache=use, an error under --cache=replay (90s, 30m, 12h, 14d; default: none, "
        "answers never age)", None),
    Setting("batch_timeout", "With --batch: the longest wait on a batch (90s, 30m, "
        "12h; default 25h, the providers' 24h window and an hour to spare); calls still "
        "unanswered then are errors of kind batch, and the batch keeps running", "25h"),
    Setting("batch_poll", "With --batch: seconds between the first polls of a batch; "
        "1.5 times longer after each poll without progress, at most 300 (default 15)", "15"),
    Setting("resume_batch", "Resume the batches of the run whose results folder is DIR "
        "(its batch journal): their answers are collected, nothing is sent twice; implies "
        "--batch and --cache=use", None),
    Setting("max_cost", "Stop starting model calls once the run has spent this "
        "many USD; the rest are skipped", None),
    Setting("max_latency_p95", "Fail the run when a model's 95th "
        "percentile latency over its answered, uncached items is above S seconds", None),
    Setting("max_ttft_p50", "Fail the run when a model's median time to first "
        "token over its answered, uncached, streamed items is above S seconds", None),
    Setting("max_cost_per_item", "Fail the run when a model's mean call "
        "cost over its answered items with a known price is above USD (judges not included)",
     None),
    Setting("rpm", "Requests per minute per model, for models whose profile sets none",
     None),
    Setting("tpm", "Tokens per minute per model, for models whose profile sets none",
     None),
    Setting("judges", "Judge panel of model-graded assertions that name none: "
        "comma list of profile names, litellm ids or @sets (default: the embedded model)", None),
    Setting("judge_metrics", "Extra dimensions every jury scores, comma "
     'list (e.g. "brand voice, empathy")', None),
    Setting("repeat_policy", "When a case run several times (--repeat) "
        "passes: all (default), majority, any or at-least:K of its repeats", "all"),
    Setting("stop_early", "With --repeat N: stop running a case's repeats once its verdict "
        "under --repeat-policy cannot change: --stop-early (exact: never a different verdict) "
        "or --stop-early=0.95 (a different verdict with chance at most 0.05 per case, fewer "
        "repeats); give a value with =", None, const="1.0"),
    Setting("stop_early_min", "With --stop-early: answered repeats every case takes before "
        "it may stop (default 2; pass@k is computed for k = the fewest taken)", "2"),
    Setting("reviews_dir", "A folder of people's labels (its labels file) shared by every run, "
        "e.g. committed in the repository: a label overrides the machine's verdict on the same "
        "case, model, repeat and answer; read beside the results folder's own", None),
    Setting("judge_gate", "Gate on judges against people's labels: min_kappa=K,min_labels=N "
        "(defaults 0.6 and 50): a judge with N labels or more whose Cohen's kappa is below K "
        "has its verdicts demoted to unchecked (--judge-gate-fail: fails the run); an eval "
        "file's judge_gate: overrides it for that file", None),
    Setting("baseline", "A saved results folder to compare this run with "
        "(regressions listed in the summary)", None),
    Setting("temperature_variations", "Add K temperatures around "
        "each configured one, alternately below and above it in steps of half of it (0.4 with 2: 0.2, "
        "0.4, 0.6); results group by temperature", "0"),
    Setting("efforts", "Comma list of reasoning efforts each case runs under, "
        "replacing eval files' effort: none, minimal, low, medium, high, xhigh, max, or a thinking "
        "budget in tokens (low,high,8000); results group by effort", None),
    Setting("optimize_prompts", "Rewrite each prompt for each model with "
        "the --optimizer model: only (evaluate the rewrites) or both (original and _optimized "
        "side by side)", None),
    Setting("shard", "Run shard K of N of the selected items (K/N, e.g. 2/3): a "
        "deterministic split for N CI runners; --rpm, --tpm, --max-cost and --concurrency are "
        "divided by N; `llmbench merge` joins the shards' results", None),
    Setting("prom_push", f"Push the run's {METRICS_FILE} to this Prometheus "
        "Pushgateway at the end of the run (http://host:9091; job llmbench)", None),
    Setting("optimizer", "Model that rewrites prompts for --optimize-prompts "
        "(profile name or litellm id; default: the embedded model)", None),
)  # fmt: skip
FLAGS: tuple[Flag, ...] = (
    Flag("latency_only", "Only measure the models: TTFT, latency, tokens, throughput and cost; "
        "no assertions or judges (scores empty, eval_type latency; every call streamed)"),
    Flag("batch", "Send the independent calls (plain items, judges, graders, RAG metrics, "
        "embeddings) through the providers' batch APIs (about half the price, answered within "
        "hours); the rest, and models without a batch API, stay live (the header says why)"),
    Flag("otel", "Send the run's spans to an OpenTelemetry collector over OTLP/HTTP (the "
        "standard OTEL_EXPORTER_OTLP_* variables say where; needs the otel extra)"),
    Flag("otel_content", "With --otel: put prompts and answers on the spans, secrets redacted"),
    Flag("ignore_reviews", "Leave people's labels out: every verdict is the machine's "
        "(the labels stay on disk)"),
    Flag("judge_gate_fail", "With --judge-gate: a judge below the gate fails the run "
        "(its verdicts stand) instead of having its verdicts demoted"),
    Flag("check_models", "Before the run, make one minimal call per model, in parallel, and "
        "report those that cannot be reached"),
    Flag("skip_unavailable", "With --check-models: leave unreachable models out of the run "
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
    for option in SETTINGS:
        if option.const is None:
            group.addoption(option.flag, dest=option.name, default=None, help=option.help)
        else:
            group.addoption(
                option.flag, dest=option.name, default=None, help=option.help, nargs="?",
                const=option.const, metavar="VALUE",
            )  # fmt: skip
        parser.addini(option.name, option.help, default=None)
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
    for flag in FLAGS:
        group.addoption(flag.flag, dest=flag.name, action="store_true", default=None,
                        help=flag.help)  # fmt: skip
        parser.addini(flag.name, flag.help, type="bool", default=False)
    parser.addini(
        "llmbench_pattern",
        f"Glob of eval file names (default {DEFAULT_PATTERN})",
        default=DEFAULT_PATTERN,
    )


def explicitly_configured(config: pytest.Config) -> bool:
    """True when any llmbench option was given on the command line or in the ini file."""
    names = [option.name for option in SETTINGS]
    names += [
        "llmbench_profiles",
        "llmbench_rescore",
        "llmbench_estimate_cost",
        "llmbench_fail_on_regression",
        *(flag.name for flag in FLAGS),
    ]
    if any(config.getoption(name) is not None for name in names):
        return True
    inis = [option.name for option in SETTINGS] + [flag.name for flag in FLAGS]
    return any(config.getini(ini) for ini in inis) or bool(config.getini("llmbench_profiles"))


#: Each option with a value by its dest.
OPTIONS: dict[str, Setting] = {option.dest: option for option in SETTINGS}


def setting(config: pytest.Config, dest: str) -> str | None:
    """The option's value, stripped: the command line, else the ini file, else its default."""
    option = OPTIONS[dest]
    value = config.getoption(option.name)
    if value is None:
        value = config.getini(option.name)
    if value is None:
        value = option.default
    return None if value is None else str(value).strip()


def flag_setting(config: pytest.Config, dest: str) -> bool:
    """A store_true option: the command line, else its ini key."""
    given = config.getoption(f"llmbench_{dest}")
    return bool(given) if given is not None else bool(config.getini(f"llmbench_{dest}"))


def shard_setting(config: pytest.Config) -> str | None:
    """The raw ``--shard`` (or ``llmbench_shard``) value, read without building the run."""
    return setting(config, "shard")


def option_path(config: pytest.Config, dest: str) -> Path | None:
    raw = setting(config, dest)
    return None if not raw else config.invocation_params.dir / raw


def eval_pattern(config: pytest.Config) -> str:
    """The glob of eval file names: ``llmbench_pattern`` or :data:`DEFAULT_PATTERN`."""
    return str(config.getini("llmbench_pattern") or DEFAULT_PATTERN)


def eval_nodeid_matcher(config: pytest.Config) -> Callable[[str], bool]:
    """Whether a node id is an item of an eval file (its file matches :func:`eval_pattern`)."""
    pattern = eval_pattern(config)
    files: dict[str, bool] = {}  # a run has few files and many items

    def is_eval(nodeid: str) -> bool:
        path = nodeid.split("::", 1)[0]
        found = files.get(path)
        if found is None:
            found = files[path] = PurePosixPath(path).match(pattern)
        return found

    return is_eval
