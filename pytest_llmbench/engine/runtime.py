"""The per-process runtime: engine, call targets, scheduler and redaction, created on first use.

Stored in ``config.stash`` (:mod:`.lifetime` makes, finds and closes it); the controller (or the only process, without xdist) owns the
embedded server's session directory (:mod:`.session`) and stops the server at unconfigure.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..config import RunConfig, get_run_config
from ..redact import Redactor
from .event_loop import Engine
from .session import batch_asked, results_dir, run_id, session_state
from .targets import Targets

if TYPE_CHECKING:
    from ..models import CallTarget, ModelProfile
    from .plan import CallPlan
    from .request import ConversationRun
    from .scheduler import CallScheduler

__all__ = ["Runtime", "session_state"]


class Runtime:
    """Everything one process needs to call models."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        key_vars = [p.api_key_env for p in self.run.profiles.models.values() if p.api_key_env]
        self.redactor = Redactor.from_environ(os.environ, key_vars)
        self.engine = Engine()
        self.targets = Targets(*session_state(config), client=self.run.client)
        from ..models import use_bundled_tokenizers

        use_bundled_tokenizers()  # here, on the main thread: the engine's may read the env
        self._scheduler: CallScheduler | None = None
        otel = self.run.otel
        if otel is not None:  # the run exports a trace: keep its items' call spans
            from .call_spans import enable, trace_ids

            enable(trace_ids(run_id(config)), otel.content)
        # The llm fixture's acomplete calls the scheduler from several threads at once: one
        # scheduler (one pacer, one set of lanes) for all of them.
        self._scheduler_lock = threading.RLock()

    @property
    def run(self) -> RunConfig:
        """The run's config (``--check-models --skip-unavailable`` may narrow its models)."""
        return get_run_config(self.config)

    def scheduler(self) -> CallScheduler:
        """The call scheduler of this process (created on first use, with the run's plans)."""
        with self._scheduler_lock:
            return self._make_scheduler()

    def _make_scheduler(self) -> CallScheduler:
        if self._scheduler is None:
            from .answer import Answerer
            from .contests import Contests, contest_refusal
            from .optimizer_store import store_path
            from .pacing import CallPacer, PacerSettings
            from .plan import PLANS_KEY, CollectedPlans
            from .scheduler import CallScheduler

            collected = self.config.stash.get(PLANS_KEY, CollectedPlans())
            workerinput = getattr(self.config, "workerinput", None) or {}
            n_workers = int(workerinput.get("workercount", 1))
            worker_index = _worker_index(str(workerinput.get("workerid", "gw0")))
            run = self.run
            state_dir = session_state(self.config)[0]
            folder = results_dir(self.config) if run.batch else None
            settings = PacerSettings.from_run(run, state_dir, run_id(self.config), folder)
            answerer = Answerer(
                CallPacer(
                    settings, n_workers, redact=self.redactor.messages, worker_index=worker_index
                ),
                self.targets.target,
                n_workers,
                judge_metrics=run.judge_metrics,
                optimizer_store=store_path(self.config),
                # a claim older than that was abandoned
                claim_timeout_s=3 * run.request_timeout_s,
                mcp_scratch=self._scratch,
                baseline=run.baseline,  # pairwise assertions judge against its answers
                contests=Contests(
                    collected.contests, contest_refusal(self.config), collected.incomplete
                ),
            )
            self._scheduler = CallScheduler(
                self.engine,
                answerer,
                run,
                n_workers,
                collected.plans,
                notice=terminal_notice(self.config),
                notice_every_s=wait_notice_s(self.config),
                prepare_workdir=self._prepare_workdir,
            )
        return self._scheduler

    def _prepare_workdir(self, plan: CallPlan) -> Path:
        """Make and seed ``plan``'s workdir ahead of its item (an agent's loop starts in it)."""
        from .workdirs import prepare

        name = plan.nodeid.rpartition("::")[2]
        return prepare(self.config, plan.nodeid, name, plan.case.files, plan.case.include_dirs)

    def _scratch(self, name: str) -> Path:
        """A fresh folder ``name*`` beside the items' workdirs (a shared MCP server's)."""
        from .workdirs import scratch

        return scratch(self.config, name)

    def said_so_far(self, nodeid: str) -> ConversationRun | None:
        """What the item ``nodeid`` said before it was cut short (a conversation's turns), or
        None. Never makes the scheduler: pytest-timeout's signal handler asks this on the main
        thread, which may be in the middle of making it (half its modules imported)."""
        scheduler = self._scheduler
        return None if scheduler is None else scheduler.said_so_far(nodeid)

    def activity(self) -> tuple[int, int] | None:
        """Calls in flight and waiting on a rate limit in this process; None before any."""
        scheduler = self._scheduler
        return None if scheduler is None else scheduler.activity()

    def target(self, profile: ModelProfile) -> CallTarget:
        """Resolve where and how to call ``profile``; raise ProviderError when it cannot be."""
        return self.targets.target(profile)

    def close(self) -> None:
        """Cancel pending calls and stop the engine loop of this process."""
        if self._scheduler is not None:
            self._scheduler.close()
        self.engine.close()
        if self.run.otel is not None:
            from .call_spans import disable

            disable()


def terminal_notice(config: pytest.Config) -> Callable[[str], None]:
    """Write a line of its own on pytest's terminal (stderr where there is none)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")

    def write(line: str) -> None:
        if reporter is not None:
            reporter.write_line(line)
            reporter.flush()
        else:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    return write


#: Seconds between two waiting notices under ``--batch``.
BATCH_NOTICE_EVERY_S = 600.0


def wait_notice_s(config: pytest.Config) -> float:
    """The ``llmbench_wait_notice_s`` ini value: seconds between two waiting notices (by
    default :data:`~.scheduler.NOTICE_EVERY_S`; under ``--batch``, whose waits take hours
    and whose progress line says how far the batches are, :data:`BATCH_NOTICE_EVERY_S`)."""
    from .scheduler import NOTICE_EVERY_S

    raw = config.getini("llmbench_wait_notice_s")
    # Read from the options, not the run's config: the controller asks at configure time.
    default = BATCH_NOTICE_EVERY_S if batch_asked(config) else NOTICE_EVERY_S
    try:
        value = float(raw) if raw not in (None, "") else default
    except ValueError:
        raise pytest.UsageError(f"llmbench_wait_notice_s: not a number: {raw!r}") from None
    if not 0 < value < float("inf"):
        raise pytest.UsageError(f"llmbench_wait_notice_s must be positive, got {raw!r}")
    return value


def _worker_index(worker_id: str) -> int:
    """``gw3`` -> 3 (xdist's worker ids); 0 for anything else."""
    digits = worker_id.removeprefix("gw")
    return int(digits) if digits.isdigit() else 0
