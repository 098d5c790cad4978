"""pytest-llmbench entry point: options, collection of eval files, the report wrapper.

Imports nothing heavy: litellm, pandas and pydantic load only when an eval file is collected
or a fixture of ours is used. A run without either is untouched: no network, no new files.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any

import pytest

from . import config as _config

RECORDER_NAME = "llmbench-recorder"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register options and ini keys."""
    _config.add_options(parser)
    parser.addini(
        "llmbench_wait_notice_s",
        "seconds between two 'llmbench: waiting ...' lines while an item waits on its call "
        "(default 30)",
        default="",
    )
    parser.addini(
        "llmbench_progress_every_s",
        "seconds between two 'llmbench: N/M items ...' progress lines (default 10 in a terminal, "
        "30 in a CI log; 0: none)",
        default="",
    )


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Register our fixtures everywhere and the recorder on the controller only."""
    from . import fixtures

    config.addinivalue_line("markers", "llmbench: an item created from a *.eval.yaml file")
    config.addinivalue_line("markers", "llmbench_files(files): seed the workdir fixture")
    # litellm trips pydantic deprecation warnings in its own code; they are not the user's to fix.
    config.addinivalue_line("filterwarnings", r"ignore::DeprecationWarning:litellm(\..*)?")
    # pydantic warns about litellm's own TypedDicts (ReadOnly items) when it first builds them.
    config.addinivalue_line(
        "filterwarnings", r"ignore:Item .* is using the .ReadOnly. qualifier:UserWarning"
    )
    config.pluginmanager.register(fixtures, "llmbench-fixtures")
    config.pluginmanager.register(ItemTimeouts(), "llmbench-item-timeouts")
    from .engine import Prefetcher, guard_logger_registry

    config.pluginmanager.register(Prefetcher(config), "llmbench-prefetcher")
    # Our threads create loggers while pytest's logging plugin walks the registry of them.
    guard_logger_registry()
    # On every process: a worker hands the files it collected to the controller's run.json.
    config.pluginmanager.register(CollectedSources(config), "llmbench-sources")
    # Bad options fail now, as a usage error.
    _config.allowed_paths(config)
    from .shard import parse_shard

    parse_shard(_config.shard_setting(config))  # a bad --shard is a usage error now
    if not hasattr(config, "workerinput"):
        from .results import check_results_dir

        check_results_dir(config)  # one that cannot be made is a usage error now
    if config.getoption("llmbench_retry_errors", None):
        from .results import start_retry

        # On every process (workers deselect alike); the controller refuses a bad DIR now.
        start_retry(config)
    run = _config.get_run_config(config) if _config.explicitly_configured(config) else None
    if run is not None:
        _load_labels(config, run)
    if run is not None and run.stop_early is not None:
        from .engine import StopEarly
        from .results import StopRule

        rule = StopRule(run.repeat_policy, run.repeat, run.stop_early, run.stop_early_min)
        config.pluginmanager.register(StopEarly(config, rule), "llmbench-stop-early")
    if run is not None and run.judge_gate is not None and not run.latency_only:
        from .results import gate_calibrations

        gate_calibrations(config)  # a broken labels file is a usage error now, on every process
    checking = run is not None and run.check_models
    if hasattr(config, "workerinput"):
        if checking:
            from .engine import restrict_worker_models

            restrict_worker_models(config)
        return
    if run is not None and run.check_models:
        from .engine import ModelChecker, check_options

        check_options(run)
        # Its pytest_sessionstart runs before collection and before xdist starts the workers.
        config.pluginmanager.register(ModelChecker(config), "llmbench-check-models")
    if config.getoption("llmbench_estimate_cost"):
        from .engine import CostEstimator

        config.pluginmanager.register(CostEstimator(), "llmbench-estimate")
    from .report import SessionEndWarmUp
    from .results import ResultsRecorder

    config.pluginmanager.register(SessionEndWarmUp(), "llmbench-warm-up")
    from .render import RunProgress, progress_every_s

    # Lines on the terminal (every_s 0: none) and progress.json for `llmbench view`.
    config.pluginmanager.register(
        RunProgress(config, progress_every_s(config)), "llmbench-progress"
    )
    config.pluginmanager.register(ResultsRecorder(config), RECORDER_NAME)
    _register_trace_export(config, run)
    # The recorder summarizes the run once and decides the gates (asking the baseline plugin);
    # after it (trylast) the report and CI outputs read that summary; the terminal prints it.
    # Each imports its heavy parts (pandas) only when the run has records.
    from .render import CIOutputs, TerminalSummary
    from .report import ReportWriter
    from .results import BaselineGate

    config.pluginmanager.register(TerminalSummary(config), "llmbench-terminal")
    config.pluginmanager.register(ReportWriter(config), "llmbench-report")
    config.pluginmanager.register(CIOutputs(config), "llmbench-ci-outputs")
    config.pluginmanager.register(BaselineGate(config), "llmbench-baseline")
    if config.pluginmanager.hasplugin("html") and config.getoption("htmlpath", None):
        # Only when a pytest-html report is written: the extras cost CPU on every report.
        from .report import HtmlColumns

        config.pluginmanager.register(HtmlColumns(), "llmbench-html")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistBridge(), "llmbench-xdist")
        if config.getoption("dist", "no") != "no":
            config.pluginmanager.register(_worker_watch(config), "llmbench-worker-watch")


def _load_labels(config: pytest.Config, run: Any) -> None:
    """Read people's labels once on each process (a broken file is a usage error now): the
    controller's from the run's results folder and ``--reviews-dir``, a worker's from the files
    the controller named."""
    from .results import load_run_labels

    folder = None
    if not hasattr(config, "workerinput") and not run.ignore_reviews:
        from .engine import results_dir

        folder = results_dir(config)
    load_run_labels(config, folder, run.reviews_dir, run.ignore_reviews)
    if folder is not None:
        from .results import gate_reviews

        # Before this run rewrites the folder's records: the gate pairs labels kept without a
        # machine verdict with them (its workers get what the controller paired).
        gate_reviews(config)


#: The variables that turn span export on without ``--otel`` (:mod:`.config.otel`).
_OTEL_ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def _register_trace_export(config: pytest.Config, run: Any) -> None:
    """The controller's span export, when the run exports a trace (``RunConfig.otel``). With
    llmbench options given the run's config is read now; without, only an endpoint variable
    can turn export on, and the exporter reads the config from the first traced record (a run
    without eval files builds none)."""
    import os

    if run is not None and run.otel is None:
        return
    if run is None and not any(os.environ.get(name, "").strip() for name in _OTEL_ENDPOINT_VARS):
        return
    from .telemetry import TraceExport, missing_extra

    if run is not None and (missing := missing_extra()) is not None:
        raise pytest.UsageError(missing)
    config.pluginmanager.register(
        TraceExport(config, None if run is None else run.otel), "llmbench-trace-export"
    )


def _worker_watch(config: pytest.Config) -> Any:
    """The controller's notices of items that wait long on the workers."""
    from .engine import WorkerWatch, terminal_notice, wait_notice_s

    def models() -> list[str]:
        return [model.name for model in _config.get_run_config(config).models]

    return WorkerWatch(models, terminal_notice(config), wait_notice_s(config))


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Say, before anything runs, how many workers ``-n auto`` started, when a litellm id
    on the command line is a profile, and under ``--batch`` which models are batched."""
    if hasattr(config, "workerinput"):
        return []
    from .workers import AUTO_KEY

    lines = [config.stash[AUTO_KEY]] if AUTO_KEY in config.stash else []
    if _config.explicitly_configured(config):
        lines += _config.shadowed_model_notes(config)
    from .engine import batch_asked

    if batch_asked(config):  # here, not at collection: the xdist controller collects nothing
        from .engine import batch_lines

        judges = bool(config.getoption("llmbench_judges") or config.getini("llmbench_judges"))
        lines += batch_lines(_config.get_run_config(config), judges)
    return lines


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` on a run of eval files only: no worker (see :mod:`.workers`)."""
    from .workers import auto_workers

    return auto_workers(config, _config.eval_pattern(config))


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop the engine; the controller also stops the embedded server."""
    from .engine import shutdown

    shutdown(config)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Collect files matching ``llmbench_pattern`` (``*.eval.yaml``)."""
    if not file_path.match(_config.eval_pattern(parent.config)):
        return None
    from .collect import EvalFile

    return EvalFile.from_parent(parent, path=file_path)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> Generator[None, None, None]:
    """``--shard K/N``: keep this shard's part of the selected items, after every other
    plugin selected (-k, -m, --lf): what a wrapper does after its yield comes last."""
    result = yield
    from .shard import parse_shard, select

    shard = parse_shard(_config.shard_setting(config))
    if shard is not None:
        select(config, items, shard, _contest_of(config))
    return result


def _contest_of(config: pytest.Config) -> Callable[[pytest.Item], str | None]:
    """What keeps items together in one shard: an eval item's select-best contest."""
    from .engine import eval_files_collected

    if not eval_files_collected(config):
        return lambda item: None
    from .collect import contest_of

    return contest_of


def pytest_deselected(items: Sequence[pytest.Item]) -> None:
    """Remember the eval items left out of the run (``-k``, ``-m``, ``--lf``, ``--deselect``):
    a select-best contest that lost some of its contestants is not held
    (:func:`~pytest_llmbench.collect.stash_plans`)."""
    if not items:
        return
    from .engine import DESELECTED_KEY, eval_files_collected

    config = items[0].config
    if eval_files_collected(config):
        config.stash.setdefault(DESELECTED_KEY, []).extend(items)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Stash the plans of the collected eval items for the engine (its prefetcher reads them)."""
    from .engine import eval_files_collected

    if not eval_files_collected(session.config):
        return  # a plain run loads none of the engine
    from .collect import stash_plans

    stash_plans(session)
    _say_clients(session.config)


def _say_clients(config: pytest.Config) -> None:
    """The session header's line of which client calls each model (the controller's)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or hasattr(config, "workerinput") or config.option.verbose < 0:
        return
    from .engine import clients_line

    judges = bool(config.getoption("llmbench_judges") or config.getini("llmbench_judges"))
    reporter.write_line(clients_line(_config.get_run_config(config), judges))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Attach the item's record to its report (it crosses xdist with the report)."""
    report = yield
    from .results import attach_record

    attach_record(item, call, report)
    return report


class _XdistBridge:
    """Hands every worker the embedded server's session directory and the models to collect,
    and schedules items so that each worker has enough queued to keep its calls in flight."""

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        from .engine import dist_mode, session_state, worker_input

        state_dir, owner = session_state(node.config)
        node.workerinput["llmbench_state_dir"] = str(state_dir)
        node.workerinput["llmbench_owner_pid"] = owner
        if _config.get_run_config(node.config).batch:
            from .engine import results_dir

            # Every worker journals its batches in the run's results folder.
            node.workerinput["llmbench_results_dir"] = str(results_dir(node.config))
        # How items are sent to workers: a select-best contest needs a case's in one.
        node.workerinput["llmbench_dist"] = dist_mode(node.config)
        # The models --check-models --skip-unavailable left out, checked before nodes start.
        node.workerinput.update(worker_input(node.config))
        from .results import gate_worker_input, labels_worker_input

        # The labels files the controller read: every worker applies the same labels, and the
        # judge gate rules on the labels the controller paired.
        node.workerinput.update(labels_worker_input(node.config))
        node.workerinput.update(gate_worker_input(node.config))

    @pytest.hookimpl(optionalhook=True, wrapper=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """xdist's ``--dist load`` scheduler becomes one that keeps every worker's queue as deep
        as its look-ahead; any other (another mode, another plugin's) is kept."""
        from .engine import make_scheduler

        chosen = yield
        return make_scheduler(config, log, chosen)


class ItemTimeouts:
    """pytest-timeout's ``--timeout`` on eval items: an item error of kind ``timeout``.

    pytest-timeout's own handler prints the stack of every thread (the engine's included) and
    fails the item with an internal error; this one only ends the item. Other items, and the
    ``thread`` method, keep pytest-timeout's behaviour. Under ``--batch`` no timer is armed
    for an eval item (by either method): its answer may wait hours on its batch, a wait that
    ``--batch-timeout`` bounds instead.
    """

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_timeout_set_timer(self, item: pytest.Item, settings: Any) -> bool | None:
        """Arm a SIGALRM timer that ends the eval item cleanly."""
        if not _is_eval_item(item):
            return None
        if _config.get_run_config(item.config).batch:
            item.stash[_UNTIMED_KEY] = True
            return True  # handled: no timer (--batch-timeout bounds the wait)
        if settings.method != "signal":
            return None
        if threading.current_thread() is not threading.main_thread():
            return None
        seconds = float(settings.timeout)
        eval_item: Any = item

        def expire(signum: int, frame: Any) -> None:
            eval_item.expire(seconds)

        signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        item.stash[_TIMER_KEY] = True
        return True

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_timeout_cancel_timer(self, item: pytest.Item) -> bool | None:
        """Disarm the timer set above."""
        if item.stash.get(_UNTIMED_KEY, False):
            return True
        if not item.stash.get(_TIMER_KEY, False):
            return None
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        del item.stash[_TIMER_KEY]
        return True


_TIMER_KEY = pytest.StashKey[bool]()
_UNTIMED_KEY = pytest.StashKey[bool]()


def _is_eval_item(item: pytest.Item) -> bool:
    """Whether ``item`` is an eval item; none is before its module is loaded (by the first eval
    file collected), and a run without one never loads it."""
    from .engine import eval_files_collected

    if not eval_files_collected(item.config):
        return False
    from .item import EvalItem

    return isinstance(item, EvalItem)


#: The ``workeroutput`` key under which an xdist worker hands its collected files over.
WORKER_OUTPUT_KEY = "llmbench_sources"


class CollectedSources:
    """The eval files and dataset files of the collected eval items, on every process.

    A worker hands its list to the controller in ``workeroutput``; the controller (or the sole
    process without xdist) keeps the union in the stash, where run.json's ``source`` reads it
    (:func:`~pytest_llmbench.provenance.run_source`).
    """

    def __init__(self, config: pytest.Config) -> None:
        from .provenance import SOURCES_KEY

        self.paths: set[Path] = set()
        config.stash[SOURCES_KEY] = self.paths

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The files of this process's eval items (none unless an eval file was collected)."""
        from .engine import eval_files_collected

        if not eval_files_collected(session.config):
            return
        for item in session.items:
            plan = getattr(item, "plan", None)
            case = getattr(plan, "case", None)
            if case is not None:
                self.paths.add(plan.path)  # type: ignore[union-attr]
                self.paths.update(case.sources)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """A worker hands its files to the controller."""
        output = getattr(session.config, "workeroutput", None)
        if output is not None:
            output[WORKER_OUTPUT_KEY] = sorted(str(path) for path in self.paths)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """The controller keeps the files each worker collected."""
        found = getattr(node, "workeroutput", None) or {}
        self.paths.update(Path(path) for path in found.get(WORKER_OUTPUT_KEY, ()))
