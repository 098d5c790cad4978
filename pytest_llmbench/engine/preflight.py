"""``--check-models``: one minimal call per model before the run; ``--skip-unavailable``.

The check runs on the controller (or the only process) at session start: before collection and
before xdist's ``DSession`` starts the workers (its ``pytest_sessionstart`` is ``trylast``, ours
``tryfirst``). Every model of the run, the judges chosen with ``--judges`` and the optimizer of
``--optimize-prompts`` get one short, unstreamed, unretried call, all at once on the engine loop.

An unavailable model stops the run with a ``pytest.UsageError`` (exit status 4) that lists them,
or, with ``--skip-unavailable``, is left out of the :class:`RunConfig` before anything collects;
the workers learn the models left through their ``workerinput`` (see :func:`worker_input`).
Unavailable judges and optimizers are only reported: the items that need them fail on their own.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from ..config import RUN_CONFIG_KEY, RunConfig, get_run_config
from ..scoring import one_line

if TYPE_CHECKING:
    from ..models import CallTarget, ModelProfile
    from .runtime import Runtime

#: The one-word prompt of every check call.
CHECK_PROMPT = "Hello"
#: One token is enough to prove that the model answers (and costs next to nothing).
CHECK_MAX_TOKENS = 1
#: A check waits at most this long per call, whatever ``--request-timeout`` says.
MAX_CHECK_TIMEOUT_S = 30.0
#: The workerinput key with the names of the models left after ``--skip-unavailable``.
WORKERINPUT_KEY = "llmbench_check_models"
#: Extra time the engine gives a call past litellm's own timeout before giving up on it.
_GRACE_S = 5.0
#: Longer error messages are cut in the terminal (run.json keeps them whole).
_MAX_SHOWN_ERROR = 300
_CHECK_KEY = pytest.StashKey["CheckReport"]()


class UnavailableModelWarning(UserWarning):
    """A model, judge or optimizer failed ``--check-models``."""


@dataclass(frozen=True)
class ModelCheck:
    """The outcome of checking one profile."""

    #: the profile name
    name: str
    #: what the run uses it for: ``model``, ``judge``, ``optimizer`` (one or more)
    roles: tuple[str, ...]
    #: seconds the check call took; None when it failed
    latency_s: float | None = None
    #: why the profile is unavailable (redacted, without the ``name:`` prefix); None when ok
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the check call was answered."""
        return self.error is None

    def label(self) -> str:
        """The name, with its roles when it is not only a model of the run."""
        return self.name if self.roles == ("model",) else f"{self.name} ({', '.join(self.roles)})"


@dataclass(frozen=True)
class CheckReport:
    """Every check of the run and the models ``--skip-unavailable`` left out."""

    checks: tuple[ModelCheck, ...]
    skipped: tuple[str, ...] = ()

    def failed(self, role: str) -> list[ModelCheck]:
        """The unavailable profiles used as ``role``."""
        return [check for check in self.checks if role in check.roles and not check.ok]

    def summary(self) -> dict[str, Any]:
        """JSON-ready, for run.json: names checked, errors, models left out, latencies."""
        return {
            "checked": [check.name for check in self.checks],
            "unavailable": {check.name: check.error for check in self.checks if not check.ok},
            "skipped": list(self.skipped),
            "latency_s": {c.name: c.latency_s for c in self.checks if c.latency_s is not None},
        }


def check_options(run: RunConfig) -> None:
    """Refuse ``--check-models`` with a run that makes no network call."""
    if run.check_models and run.cache_mode == "replay":
        how = "--rescore" if run.rescore else "--cache=replay"
        raise pytest.UsageError(
            f"llmbench: --check-models calls every model, {how} calls none: drop one of them"
        )


class ModelChecker:
    """The controller's plugin that checks the models when the session starts."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Check, report, then stop the run or leave the unavailable models out."""
        from .lifetime import get_runtime

        run = get_run_config(self.config)
        checks = check_profiles(get_runtime(self.config), checked_profiles(self.config, run))
        report = CheckReport(checks)
        self.config.stash[_CHECK_KEY] = report
        _write_section(self.config, report)
        _warn_helpers(self.config, report)
        failed = [check.name for check in report.failed("model")]
        if not failed:
            return
        if not run.skip_unavailable:
            raise pytest.UsageError(_stop_message(report, len(run.models)))
        left = [model.name for model in run.models if model.name not in failed]
        if not left:
            raise pytest.UsageError(_stop_message(report, len(run.models), none_left=True))
        self.config.stash[_CHECK_KEY] = dataclasses.replace(report, skipped=tuple(failed))
        restrict_models(self.config, left)
        _warn(self.config, f"--skip-unavailable: running without {', '.join(failed)}")


def checked_profiles(
    config: pytest.Config, run: RunConfig
) -> list[tuple[ModelProfile, tuple[str, ...]]]:
    """The profiles to check with their roles, each once: models, chosen judges, optimizer.

    The default judge panel (the embedded model) is checked only when it is also a model: it
    needs no network, and starting it for runs that judge nothing would cost seconds.
    """
    judges_chosen = config.getoption("llmbench_judges") is not None or bool(
        config.getini("llmbench_judges")
    )
    wanted: list[tuple[ModelProfile, str]] = [(model, "model") for model in run.models]
    wanted += [(judge, "judge") for judge in run.judges if judges_chosen]
    if run.optimizer is not None:
        wanted.append((run.optimizer, "optimizer"))
    profiles: dict[str, ModelProfile] = {}
    roles: dict[str, list[str]] = {}
    for profile, role in wanted:
        profiles.setdefault(profile.name, profile)
        if role not in roles.setdefault(profile.name, []):
            roles[profile.name].append(role)
    return [(profiles[name], tuple(roles[name])) for name in profiles]


def check_profiles(
    runtime: Runtime, profiles: Sequence[tuple[ModelProfile, tuple[str, ...]]]
) -> tuple[ModelCheck, ...]:
    """Make one check call per profile, all concurrently; never raises for a profile."""
    timeout_s = min(runtime.run.request_timeout_s, MAX_CHECK_TIMEOUT_S)
    targets: list[CallTarget | str] = []
    for profile, _roles in profiles:
        try:  # the embedded model's server starts here, on first use
            targets.append(runtime.target(profile))
        except Exception as exc:  # a missing key, a server that cannot start: unavailable
            targets.append(_message(exc))
    from ..models import route

    if any(not isinstance(target, str) and route(target).client == "litellm" for target in targets):
        from ..models import warmed_up

        warmed_up()  # on this thread: an import on the engine loop would hold up every call
    outcomes = runtime.engine.run(_probe_all(targets, timeout_s))
    checks = []
    for (profile, roles), (latency, error) in zip(profiles, outcomes, strict=True):
        shown = None if error is None else runtime.redactor.text(_unprefixed(error, profile.name))
        checks.append(ModelCheck(profile.name, roles, latency, shown))
    return tuple(checks)


async def _probe_all(
    targets: Sequence[CallTarget | str], timeout_s: float
) -> list[tuple[float | None, str | None]]:
    async def settled(error: str) -> tuple[float | None, str | None]:
        return None, error

    probes = [
        settled(target) if isinstance(target, str) else _probe(target, timeout_s)
        for target in targets
    ]
    return list(await asyncio.gather(*probes))


async def _probe(target: CallTarget, timeout_s: float) -> tuple[float | None, str | None]:
    """One unstreamed call without retries: (latency, None) when answered, else (None, why)."""
    from ..models import acomplete

    messages = [{"role": "user", "content": CHECK_PROMPT}]
    params = {"max_tokens": CHECK_MAX_TOKENS}
    call = acomplete(target, messages, params, stream=False, timeout_s=timeout_s, max_retries=0)
    try:
        completion = await asyncio.wait_for(call, timeout_s + _GRACE_S)
    except asyncio.TimeoutError:
        return None, f"no answer within {timeout_s:g} s"
    except Exception as exc:  # ProviderError, and anything litellm lets through
        return None, _message(exc)
    return completion.latency_s, None


def _message(exc: Exception) -> str:
    from ..models import ItemError

    if isinstance(exc, ItemError):
        return exc.message
    return f"{type(exc).__name__}: {exc}".strip()


def _unprefixed(message: str, name: str) -> str:
    """A provider message without the ``name:`` that the report shows beside it anyway."""
    return message.removeprefix(f"{name}: ")


def restrict_models(config: pytest.Config, names: Sequence[str]) -> None:
    """Keep only the models named ``names`` in this process's RunConfig."""
    run = get_run_config(config)
    kept = tuple(model for model in run.models if model.name in set(names))
    config.stash[RUN_CONFIG_KEY] = dataclasses.replace(run, models=kept)


def worker_input(config: pytest.Config) -> dict[str, Any]:
    """What a worker needs to collect the same models as the controller (empty: all of them)."""
    report = config.stash.get(_CHECK_KEY, None)
    if report is None or not report.skipped:
        return {}
    return {WORKERINPUT_KEY: [model.name for model in get_run_config(config).models]}


def restrict_worker_models(config: pytest.Config) -> None:
    """On an xdist worker: drop the models the controller's check left out."""
    names = (getattr(config, "workerinput", None) or {}).get(WORKERINPUT_KEY)
    if names is not None:
        restrict_models(config, names)


def check_summary(config: pytest.Config) -> dict[str, Any] | None:
    """The check's summary for run.json (see :meth:`CheckReport.summary`); None without one."""
    report = config.stash.get(_CHECK_KEY, None)
    return None if report is None else report.summary()


def _write_section(config: pytest.Config, report: CheckReport) -> None:
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is None:
        return
    terminal.write_sep("=", "llmbench check-models")
    width = max(len(check.label()) for check in report.checks)
    for check in report.checks:
        if check.ok:
            terminal.write_line(f"{check.label():<{width}}  ok  {check.latency_s:.2f} s")
        else:
            shown = one_line(check.error or "", _MAX_SHOWN_ERROR)
            terminal.write_line(f"{check.label():<{width}}  UNAVAILABLE  {shown}", red=True)


def _warn_helpers(config: pytest.Config, report: CheckReport) -> None:
    """One warning for unavailable judges and optimizer: they are reported, never left out."""
    helpers = [c for c in report.checks if "model" not in c.roles and not c.ok]
    if helpers:
        names = ", ".join(check.label() for check in helpers)
        _warn(config, f"unavailable: {names}; the items that need them will fail")


def _warn(config: pytest.Config, text: str) -> None:
    config.issue_config_time_warning(
        UnavailableModelWarning(f"llmbench: --check-models: {text}"), stacklevel=2
    )


def _stop_message(report: CheckReport, total: int, none_left: bool = False) -> str:
    failed = report.failed("model")
    lines = [f"  {check.name}: {one_line(check.error or '', _MAX_SHOWN_ERROR)}" for check in failed]
    if none_left:
        head = f"llmbench: --check-models: no model is available ({len(failed)} checked):"
        advice = "Nothing is left to run with --skip-unavailable."
    else:
        head = f"llmbench: --check-models: {len(failed)} of {total} models unavailable:"
        advice = "Fix them, leave them out of --models, or add --skip-unavailable."
    return "\n".join([head, *lines, advice])
