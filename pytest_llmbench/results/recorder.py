"""The controller's recorder: results.jsonl as items finish; summary, gates, run.json at the end.

Registered only on the controller (or the sole process without xdist). Each record arrives on a
``TestReport`` and is appended to ``results.jsonl`` at once and flushed, so an interrupted run
keeps everything that finished. Nothing is written in a run that produced no record.

The plugin registers it in every run: what only a run with records needs (the run's fingerprint,
the summary, the gates) is imported where it is used.
"""

from __future__ import annotations

import platform
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

import pytest

from ..config import get_run_config
from ..engine import get_runtime
from ..results_folder import ResultsFolder, record_line
from .record import attempt_fields, utc_now
from .review_run import LABELS_KEY

if TYPE_CHECKING:
    from ..config import RunConfig
    from .gates import GateFailure, GateNote, RepeatOutcome, RunState
    from .stats import CaseVerdict
    from .summary import RunSummary


#: The controller's recorder, for plugins that read the run's records at the end.
RECORDER_KEY = pytest.StashKey["ResultsRecorder"]()
#: The run's summary, computed once at session end (absent when the aggregates failed).
SUMMARY_KEY = pytest.StashKey["RunSummary"]()


class RunCompletion(Protocol):
    """A run that this one completes (``--retry-errors``, :mod:`.retry_errors`): the recorder writes
    into its folder and records the combined run, by the code that writes every run."""

    def work_folder(self) -> Path:
        """Where the records stream to (not the completed folder itself)."""

    def with_attempts(self, record: dict[str, Any]) -> dict[str, Any]:
        """``record`` with the attempts of the record it replaces."""

    def combined(self, new: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The completed run's records."""

    def combined_state(self, state: RunState, records: Sequence[Mapping[str, Any]]) -> RunState:
        """How the completed run went, from how this one went."""

    def run_info(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """The completed run's run.json, from this run's."""


#: The run this one completes, set by its owner before the recorder starts (absent: none).
COMPLETION_KEY = pytest.StashKey[RunCompletion]()


class ResultsRecorder:
    """Collects records; at the end summarizes them once, writes the results files and lets
    :mod:`.gates` decide the exit status before run.json is written."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        config.stash[RECORDER_KEY] = self
        self.records: list[dict[str, Any]] = []
        self.out_dir: Path | None = None
        self._stream: IO[str] | None = None
        self._other_failures = 0
        self._started_at = utc_now()
        self.gate_failures: list[GateFailure | GateNote] = []
        #: The run's summary (also under :data:`SUMMARY_KEY`); None until the session end, or
        #: when the aggregates failed.
        self.summary: RunSummary | None = None
        #: ``prompt_optimizations.jsonl``, written under --optimize-prompts
        self.optimization_log: Path | None = None
        self.aggregate_error: str | None = None
        #: ``judge_calibration.csv``'s rows (empty: no label on this run's judges)
        self.calibration: list[dict[str, Any]] = []
        self.repeats: RepeatOutcome | None = None
        #: What the gates read besides the records (None until they decided).
        self.gate_state: RunState | None = None
        #: The earlier attempts of items that pytest-rerunfailures runs again, by node id.
        self._attempts: dict[str, list[dict[str, Any]]] = {}
        #: ``--retry-errors DIR``: the run this one completes (see :mod:`.retry_errors`)
        self.retry = config.stash.get(COMPLETION_KEY, None)
        #: run.json's ``reviews`` block: what people's labels did (None: none were read)
        self.reviews: dict[str, Any] | None = None

    # -- as items finish -------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Append the report's record, if it carries one.

        A report that pytest-rerunfailures marked ``rerun`` is an earlier attempt: its record is
        kept for the ``attempts`` of the item's final record, which alone is appended.
        """
        if report.failed and not getattr(report, "llmbench_score_failure", False):
            self._other_failures += 1
        record = getattr(report, "llmbench_record", None)
        if not isinstance(record, dict):
            return
        if str(report.outcome) == "rerun":  # not one of pytest's own outcomes
            self._attempts.setdefault(record["nodeid"], []).append(attempt_fields(record))
            return
        record["attempts"] = self._attempts.pop(record["nodeid"], [])
        if self.retry is not None:
            record = self.retry.with_attempts(record)
        self._append(record)

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport) -> None:
        """An xdist worker died running ``crashitem``: an eval item gets an error record."""
        from ..config import eval_nodeid_matcher
        from .item_record import crash_record

        if not eval_nodeid_matcher(self.config)(crashitem):
            return
        node = getattr(report, "node", None)
        worker = str(getattr(getattr(node, "gateway", None), "id", "main"))
        record = crash_record(crashitem, worker, str(report.longrepr))
        report.llmbench_record = get_runtime(self.config).redactor.value(record)  # type: ignore[attr-defined]

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """Count collection errors: an aggregate gate must not turn them into a pass."""
        if report.failed:
            self._other_failures += 1

    def _append(self, record: dict[str, Any]) -> None:
        if self._stream is None:
            self._stream = self._open_results()
        self._stream.write(record_line(record))
        self._stream.flush()
        self.records.append(record)

    def _open_results(self) -> IO[str]:
        # A retry streams into a new folder beside the run it completes (swapped in at the end).
        out_dir = _results_dir(self.config) if self.retry is None else self.retry.work_folder()
        try:
            # A reused --results-dir holds this run only: the aggregates and run.json describe
            # this run's records, and results.jsonl must agree with them.
            stream = ResultsFolder(out_dir).open_results()
        except OSError as exc:
            # The default folder is made here, at the first record (an explicit one was tried
            # at the start): pytest ends the run as a usage error, not an internal error.
            given = get_run_config(self.config).results_dir is not None
            what = "--results-dir" if given else "the results folder (see --results-dir)"
            raise pytest.UsageError(_cannot_make(out_dir, exc, what)) from None
        self.out_dir = out_dir
        return stream

    # -- at the end ------------------------------------------------------------------------
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Summarize the run once, write the aggregates, decide the gates, write run.json."""
        if self._stream is not None:
            self._stream.close()
        if not self.records or self.out_dir is None:
            return
        labels = self.config.stash.get(LABELS_KEY, None)
        if self.retry is not None:
            # From here on, the run is the completed one: the retried folder's records with
            # this run's in place of the errored ones, written as a run writes them.
            self.records = self.retry.combined(self.records)
            if labels is not None:  # the records carried over get the labels too
                self.records = labels.apply(self.records).records
            ResultsFolder(self.out_dir).write_records(self.records)
        if labels is not None:
            # The records have their effective verdicts already: applying again only counts.
            self.reviews = labels.apply(self.records).block()
        self._write_optimization_log()
        self.summary = self._summarize()
        self._calibrate_judges()
        self._decide_gates(session)
        self._write_run_json(session)

    def _write_optimization_log(self) -> None:
        """``prompt_optimizations.jsonl``: every rewrite, skip and failure of the run."""
        if not get_run_config(self.config).optimize_prompts:
            return
        from ..engine import store_path, write_log

        assert self.out_dir is not None
        redact = get_runtime(self.config).redactor.value
        self.optimization_log = write_log(store_path(self.config), self.out_dir, redact=redact)

    def _summarize(self) -> RunSummary | None:
        """The run's summary, stashed for the plugins that report it, and its CSVs."""
        from .summary import summarize, write_aggregates

        assert self.out_dir is not None
        try:
            summary = summarize(self.records, get_run_config(self.config).errors_count_as)
            self.config.stash[SUMMARY_KEY] = summary
            write_aggregates(self.records, self.out_dir, summary)
        except Exception as exc:  # a broken aggregate must not lose the run's exit status
            self.aggregate_error = f"{type(exc).__name__}: {exc}"
            return None
        return summary

    def _calibrate_judges(self) -> None:
        """``judge_calibration.csv``: the run's judges against the labels that apply to it."""
        from .judge_calibration import run_calibration, write_calibration

        assert self.out_dir is not None
        labels = self.config.stash.get(LABELS_KEY, None)  # none read under --ignore-reviews
        if labels is not None:
            self.calibration = run_calibration(self.records, labels.labels)
        write_calibration(self.calibration, self.out_dir)

    def _decide_gates(self, session: pytest.Session) -> None:
        """Every gate at once (see :mod:`.gates`); session.exitstatus becomes the final one."""
        from .baseline_gate import BASELINE_KEY
        from .gates import GATES_KEY, RunState, decide, judge_repeats

        run = get_run_config(self.config)
        try:
            verdicts = self.summary.verdicts if self.summary else _verdicts(self.records)
            self.repeats = judge_repeats(verdicts, run.repeat_policy)
        except Exception as exc:  # like a broken aggregate: keep the run's exit status
            self.aggregate_error = f"{type(exc).__name__}: {exc}"
        baseline = self.config.stash.get(BASELINE_KEY, None)
        regressed = baseline.compare(self.records) if baseline is not None else []
        state = RunState(
            exitstatus=session.exitstatus,
            other_failures=self._other_failures,
            cut_short=bool(session.shouldfail or session.shouldstop),
            over_budget=over_budget(self.records),
        )
        if self.retry is not None:
            state = self.retry.combined_state(state, self.records)
        self.gate_state = state
        board = self.summary.board if self.summary else None
        decision = decide(
            state,
            run,
            board=board,
            repeats=self.repeats,
            regressed=regressed,
            baseline=run.baseline,
            records=self.records,
        )
        self.config.stash[GATES_KEY] = decision
        self.gate_failures = list(decision.failures)
        session.exitstatus = decision.exitstatus

    def _budget_summary(self) -> dict[str, Any] | None:
        """``--max-cost`` for run.json: the limit, whether it stopped the run, what did not run."""
        limit = get_run_config(self.config).max_cost
        if limit is None:
            return None
        skipped = over_budget(self.records)
        return {"limit_usd": limit, "reached": skipped > 0, "items_not_run": skipped}

    def _write_run_json(self, session: pytest.Session) -> None:
        from ..engine import check_summary
        from ..provenance import run_source

        assert self.out_dir is not None
        runtime = get_runtime(self.config)
        agreement = self.summary.agreement if self.summary else ()
        data = {
            "started_at": self._started_at,
            "finished_at": utc_now(),
            "args": list(self.config.invocation_params.args),
            "rootdir": str(self.config.rootpath),
            "exitstatus": int(session.exitstatus),
            "records": len(self.records),
            # the eval items this run selected (llmbench merge tells a shard cut short by it)
            "items_selected": _items_selected(self.config),
            "gate_failures": [failure.describe() for failure in self.gate_failures],
            # what the gates read, so that `llmbench merge` of shards decides as this run did
            GATE_INPUTS: gate_inputs(self.gate_state) if self.gate_state else None,
            "repeat_policy": self.repeats.summary() if self.repeats else None,
            "judge_agreement": [asdict(row) for row in agreement],
            "judge_gate": self.judge_gate_block(),
            "reviews": self.reviews,
            "prompt_optimizations": optimization_counts(self.records),
            "max_cost": self._budget_summary(),
            "stop_early": stop_early_info(runtime.run, self.records),
            "check_models": check_summary(self.config),
            "config": runtime.run.to_dict(),
            "versions": _versions(),
            # the commit and the eval and dataset files this run read (see fingerprint)
            "source": run_source(self.config),
        }
        if self.retry is not None:
            data = self.retry.run_info(data)
        ResultsFolder(self.out_dir).write_run_info(runtime.redactor.value(data))

    def judge_gate_block(self) -> dict[str, Any] | None:
        """run.json's ``judge_gate`` (see :mod:`.judge_gate`), made once; None without a
        gated verdict."""
        if not hasattr(self, "_judge_gate"):
            from .judge_gate import gate_block, gate_calibrations

            gated = any(
                isinstance(entry, Mapping) and "judge_gate" in entry
                for record in self.records
                for entry in record.get("assertions") or []
            )
            self._judge_gate = (
                gate_block(
                    get_run_config(self.config), self.records, gate_calibrations(self.config)
                )
                if gated
                else None
            )
        return self._judge_gate

    def moved(self, old: Path, new: Path) -> None:
        """The results folder was moved from ``old`` to ``new`` (a retry swapped it in): the
        paths the terminal summary prints follow it."""
        self.out_dir = new
        if self.optimization_log is not None and self.optimization_log.is_relative_to(old):
            self.optimization_log = new / self.optimization_log.relative_to(old)


#: The run.json key of what the gates read besides the records (see :func:`gate_inputs`).
GATE_INPUTS = "gate_inputs"


def gate_inputs(state: RunState) -> dict[str, Any]:
    """What a run's gates read besides its records, for its run.json: a merge of its shards
    decides from them as the run decided (:mod:`.merge`)."""
    return {
        "exitstatus": int(state.exitstatus),
        "other_failures": state.other_failures,
        "cut_short": state.cut_short,
    }


def _items_selected(config: pytest.Config) -> int | None:
    progress = config.pluginmanager.get_plugin("llmbench-progress")
    total = getattr(getattr(progress, "tally", None), "total", None)
    return total if isinstance(total, int) else None


def stop_early_info(run: RunConfig, records: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """``--stop-early`` for run.json: the rule, and the repeats it spared with their estimated
    cost; None without it."""
    if run.stop_early is None:
        return None
    from .stats.stopping import STOPPED_NOTE, rule_name, stopped_summary

    spared = stopped_summary(records)
    return {
        "rule": rule_name(run.stop_early),
        "confidence": run.stop_early,
        "min_repeats": run.stop_early_min,
        "repeats_planned": spared.planned,
        "repeats_not_run": spared.not_run,
        "saved_usd": spared.saved_usd,
        "summary": spared.line(),
        "note": STOPPED_NOTE,
    }


def over_budget(records: Iterable[Mapping[str, Any]]) -> int:
    """The items that did not run because ``--max-cost`` was reached."""
    return sum(1 for record in records if record.get("error_kind") == "budget")


def _verdicts(records: list[dict[str, Any]]) -> list[CaseVerdict]:
    """The case verdicts when the summary failed: the repeat gate still judges them."""
    from .stats import case_verdicts

    return case_verdicts(records)


def optimization_counts(records: list[dict[str, Any]]) -> dict[str, int] | None:
    """Optimized items by the status of their rewrite (None when no prompt was optimized)."""
    statuses = [
        (record.get("optimization") or {}).get("status", "none")
        for record in records
        if record.get("optimized")
    ]
    return dict(sorted(Counter(statuses).items())) if statuses else None


def check_results_dir(config: pytest.Config) -> None:
    """Try ``--results-dir`` (or ``llmbench_results_dir``) at the start of the run, before any
    call: a usage error naming the folder and the OS's reason when it cannot be made or written
    (under ``/proc``, a file in the way, a name too long, no permission). The folders it makes
    to try, and the file it writes, are removed again: a run with no record leaves nothing."""
    from ..config import option_path  # the value as a path, as the run config resolves it

    path = option_path(config, "results_dir")
    if path is None:
        return
    made: list[Path] = []
    try:
        if path.exists() and not path.is_dir():
            raise pytest.UsageError(f"llmbench: --results-dir is not a folder: {path}")
        for folder in reversed([path, *path.parents]):
            if folder.exists() and not folder.is_dir():
                raise pytest.UsageError(f"llmbench: --results-dir is inside a file: {folder}")
            if not folder.exists():
                folder.mkdir()
                made.append(folder)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise pytest.UsageError(_cannot_make(path, exc)) from None
    finally:
        for folder in reversed(made):
            folder.rmdir()


def _cannot_make(path: Path, exc: OSError, what: str = "--results-dir") -> str:
    """The usage error of a results folder the OS refuses, with its reason."""
    where = f"{_clip(exc.filename)}: " if exc.filename and exc.filename != str(path) else ""
    reason = exc.strerror or str(exc)
    return f"llmbench: {what} cannot be made: {_clip(path)} ({where}{reason})"


def _clip(path: object, keep: int = 120) -> str:
    """A path of thousands of characters (one past PATH_MAX), shown by its ends."""
    text = str(path)
    return text if len(text) <= 2 * keep else f"{text[:keep]}...{text[-keep:]}"


def _results_dir(config: pytest.Config) -> Path:
    from ..engine import results_dir

    return results_dir(config)


def _versions() -> dict[str, str | None]:
    names = ("pytest-llmbench", "pytest", "pytest-xdist", "litellm", "llama-cpp-python")
    found: dict[str, str | None] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found
