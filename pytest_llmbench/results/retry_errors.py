"""``--retry-errors DIR``: run again the items that ended in an error in a results folder, and
complete that run in place.

The items whose record in ``DIR/results.jsonl`` has ``outcome == "error"`` are selected (not the
failures, not the skips); every other item is deselected at collection, on the controller and on
each xdist worker alike (each reads DIR, which nothing writes while the retry runs). The
recorder streams the new records into a new sibling folder of DIR, and at the session end
writes the combined run there through its own code path: each new record in the place of the
errored one, whose fields are kept under the new record's ``attempts``; the aggregates, the
gates, run.json and the report computed from the combined records. Only then does that folder
take DIR's place (:meth:`.ResultsFolder.replace_with`), so a refused, interrupted or failing
retry leaves DIR as it was.

Refused with a usage error, before anything runs: a DIR that is no finished results folder, a
run whose options differ (by :func:`.merge.option_differences`, the comparison of shards), eval
or dataset files whose hashes changed since (run.json's ``source``, compared by
:func:`.provenance.source_differences`), and ``--shard``. A DIR written before run.json carried
``source`` (an older run) is retried with a warning that its files could not be compared, and
one of another git commit with the same files with a warning naming both commits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..results_folder import RESULTS_FILE, RUN_FILE, ResultsError, ResultsFolder
from .record import attempt_fields, utc_now
from .recorder import COMPLETION_KEY, RECORDER_KEY

if TYPE_CHECKING:
    from .gates import RunState

#: run.json's list of the retries that completed the run, oldest first.
RETRIES_KEY = "retried_errors"
#: The sibling folder a retry writes before it takes DIR's place (``.<DIR>.retry-<random>``).
WORK_PURPOSE = "retry"
_OPTION = "--retry-errors"


@dataclass(frozen=True)
class RetrySource:
    """The results folder a retry completes: its records, its run.json and its errored items."""

    folder: ResultsFolder
    records: tuple[dict[str, Any], ...]
    info: dict[str, Any]

    @property
    def errored(self) -> frozenset[str]:
        """The node ids of the items that ended in an error."""
        return frozenset(str(r.get("nodeid")) for r in self.records if r.get("outcome") == "error")


def retry_path(config: pytest.Config) -> Path | None:
    """``--retry-errors DIR`` as a path from where pytest was invoked; None without it."""
    value = config.getoption("llmbench_retry_errors", None)
    return None if not value else config.invocation_params.dir / str(value)


def load_source(path: Path) -> RetrySource:
    """DIR's records and run.json; a usage error naming DIR when it is no finished results
    folder."""
    folder = ResultsFolder(path)
    if not folder.has_results():
        raise pytest.UsageError(
            f"llmbench: {_OPTION} {path} is not a results folder (no {RESULTS_FILE})"
        )
    try:
        info = folder.read_run_info()
        records = folder.read_records()
    except ResultsError as exc:
        raise pytest.UsageError(f"llmbench: {_OPTION}: {exc}") from None
    if info is None:
        raise pytest.UsageError(
            f"llmbench: {_OPTION} {path}: no {RUN_FILE}: that run did not finish, so its options "
            "are unknown; run it again instead"
        )
    return RetrySource(folder, tuple(records), info)


def refusals(config: pytest.Config, source: RetrySource, current: Mapping[str, Any]) -> list[str]:
    """Why this run may not complete ``source``: the options that differ (``current`` is this
    run's run.json so far: its ``args`` and ``config``), the files that changed, ``--shard``
    and a ``--results-dir`` elsewhere. Empty when it may."""
    from .merge import option_differences

    found = [
        f"option {key}: {old!r} in {source.folder.path}, {new!r} now"
        for key, old, new in option_differences(whole_run_info(source.info), current)
    ]
    found += [
        f"{what} changed since that run: sha256 {_short(old)} then, {_short(new)} now"
        for what, old, new in source_changes(config, source)
        if what.startswith("file ")
    ]
    if config.getoption("llmbench_shard", None):
        found.append(f"--shard: {_OPTION} runs every errored item of the folder (leave it out)")
    given = _given_results_dir(config)
    if given is not None and given.resolve() != source.folder.path.resolve():
        found.append(f"--results-dir {given}: {_OPTION} writes into {source.folder.path}")
    return found


def whole_run_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """run.json ``info`` with the budgets a shard had its share of (``--rpm``, ``--tpm``,
    ``--max-cost``, ``--concurrency``) given back their values for the whole run, from the
    shard's account of the split (a merge's, from its first shard's): what the options of a
    retry, which runs unsharded, compare with."""
    config = dict(info.get("config") or {})
    shards = [config.get("shard")] + [m.get("shard") for m in info.get("merged_from") or []]
    shard = next((found for found in shards if isinstance(found, dict)), {})
    for name, values in (shard.get("split") or {}).items():
        if isinstance(values, dict) and "run" in values:
            config[name] = values["run"]
    return {**info, "config": config}


def source_changes(config: pytest.Config, source: RetrySource) -> list[tuple[str, Any, Any]]:
    """How the sources differ now from run.json's ``source``, as
    :func:`.provenance.source_differences` tells two runs' apart: each eval and dataset file
    it lists whose hash differs now (``None``: gone), and the git commit of the rootdir. Empty
    for a run.json without ``source``."""
    from ..provenance import file_hash, git_info, source_differences

    then = source.info.get("source")
    if not isinstance(then, dict):
        return []
    root = config.rootpath
    files = {name: file_hash(root / name) for name in then.get("files") or {}}
    return source_differences(then, {"git": git_info(root), "files": files})


def _short(sha: object) -> str:
    return f"{sha}"[:12] if sha else "(no such file)"


def has_sources(source: RetrySource) -> bool:
    """Whether DIR's run.json lists the hashes of its files (runs before it did not)."""
    return isinstance((source.info.get("source") or {}).get("files"), dict)


def _given_results_dir(config: pytest.Config) -> Path | None:
    from ..config import option_path  # the option's value as a path, as the run config resolves it

    return option_path(config, "results_dir")


def start_retry(config: pytest.Config) -> ErrorRetry | None:
    """Read ``--retry-errors DIR`` and register the retry; on the controller, refuse now (a
    usage error) when this run may not complete DIR. None without the option."""
    path = retry_path(config)
    if path is None:
        return None
    source = load_source(path)
    notes: list[str] = []
    if not hasattr(config, "workerinput"):
        notes = _refuse(config, source)
    retry = ErrorRetry(config, source, notes)
    config.stash[COMPLETION_KEY] = retry  # the recorder writes the combined run
    config.pluginmanager.register(retry, "llmbench-retry-errors")
    return retry


def _refuse(config: pytest.Config, source: RetrySource) -> list[str]:
    """A usage error naming every refusal; else the warnings for the header."""
    from ..config import get_run_config
    from ..engine import get_runtime

    current = {
        "args": list(config.invocation_params.args),
        # redacted as run.json is, so that the two compare and a secret is never shown
        "config": get_runtime(config).redactor.value(get_run_config(config).to_dict()),
    }
    found = refusals(config, source, current)
    if found:
        lines = "\n  ".join(found)
        raise pytest.UsageError(
            f"llmbench: {_OPTION} {source.folder.path} refused, nothing was changed:\n  {lines}"
        )
    return _warnings(config, source)


def _warnings(config: pytest.Config, source: RetrySource) -> list[str]:
    """What could not be compared: no file hashes (an older run), another git commit (files
    other than the eval and dataset files, a solver's module, may differ)."""
    folder = source.folder.path
    if not has_sources(source):
        return [
            f"llmbench: warning: {folder}/{RUN_FILE} has no file hashes (an older run): the "
            "eval files could not be compared with that run's"
        ]
    return [
        f"llmbench: warning: {what} {new} now, {old} in {folder}'s run (the eval and dataset "
        "files are the same)"
        for what, old, new in source_changes(config, source)
        if not what.startswith("file ")
    ]


class ErrorRetry:
    """The retry of one results folder: selects its errored items (every process) and, on the
    controller, gives the recorder the folder to write and the combined run, then swaps it in."""

    def __init__(self, config: pytest.Config, source: RetrySource, notes: list[str]) -> None:
        self.config = config
        self.source = source
        self.notes = notes  #: warnings for the header (controller)
        self.errored = source.errored
        self._old = {str(r.get("nodeid")): r for r in source.records}
        self.work: ResultsFolder | None = None  #: made at the first record
        self.replaced = 0  #: errored records this retry replaced
        self.outcome: str | None = None  #: what happened to DIR, for the terminal summary
        self._started_at = utc_now()

    # -- selection (every process) --------------------------------------------------------------
    def pytest_report_header(self) -> list[str]:
        folder = self.source.folder.path
        lines = [f"llmbench: retrying {len(self.errored)} errored items of {folder}"]
        if not self.errored:
            lines = [f"llmbench: no errored items in {folder}: nothing to retry, nothing changed"]
        return lines + self.notes

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        """Keep the errored items; the others are deselected (as ``--lf`` deselects)."""
        kept = [item for item in items if item.nodeid in self.errored]
        dropped = [item for item in items if item.nodeid not in self.errored]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = kept

    # -- what the recorder writes (controller) ------------------------------------------------
    def work_folder(self) -> Path:
        """The sibling folder the new records stream into (made on first use)."""
        if self.work is None:
            self.work = self.source.folder.make_sibling(WORK_PURPOSE)
        return self.work.path

    def with_attempts(self, record: dict[str, Any]) -> dict[str, Any]:
        """``record`` with the errored record it replaces kept under ``attempts``, after that
        record's own attempts and before this run's reruns."""
        old = self._old.get(str(record.get("nodeid")))
        if old is not None and old.get("outcome") == "error":
            earlier = [*(old.get("attempts") or []), attempt_fields(old)]
            record["attempts"] = earlier + list(record.get("attempts") or [])
        return record

    def combined(self, new: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The run's records: DIR's, each replaced in its place by this run's record of the
        same item; a record of an item DIR did not have comes last."""
        fresh = {str(record.get("nodeid")): record for record in new}
        records = []
        for old in self.source.records:
            record = fresh.pop(str(old.get("nodeid")), old)
            if record is not old and old.get("outcome") == "error":
                self.replaced += 1
            records.append(record)
        return records + list(fresh.values())

    def combined_state(self, state: RunState, records: Sequence[Mapping[str, Any]]) -> RunState:
        """How the combined run went: DIR's failures that are not low scores, less the errors
        replaced, plus this run's; its status recomputed from the combined records, a worse one
        (interrupted, internal error) of either run kept; cut short when either was."""
        from .merge import Shard, shard_inputs

        old = shard_inputs(
            Shard(self.source.folder.path, list(self.source.records), self.source.info)
        )
        other = max(0, int(old["other_failures"]) - self.replaced) + state.other_failures
        worse = [s for s in (int(old["exitstatus"]), state.exitstatus) if s not in (0, 1, 5)]
        failed = any(r.get("outcome") in ("failed", "error") for r in records)
        status = max(worse) if worse else int(failed or other > 0)
        cut_short = bool(old["cut_short"]) or state.cut_short
        return dataclasses.replace(
            state, exitstatus=status, other_failures=other, cut_short=cut_short
        )

    def run_info(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """The combined run's run.json from this run's ``data``: DIR's facts that this run does
        not know (when it started, its command and options, the items it selected, a shard's
        place, a merge's shards) kept, and this retry added to :data:`RETRIES_KEY`."""
        from ..provenance import merged_source

        old = self.source.info
        this = {
            "started_at": self._started_at,
            "finished_at": data.get("finished_at"),
            "args": data.get("args"),
            "items": len(self.errored),
            "replaced": self.replaced,
        }
        return {
            **old,
            **data,
            "started_at": old.get("started_at", data.get("started_at")),
            "args": old.get("args", data.get("args")),
            "items_selected": old.get("items_selected"),
            # the same options (or refused), as DIR holds them: a shard's budget shares kept
            "config": old.get("config", data.get("config")),
            # this run read only the retried items' files: DIR's run read the others
            "source": merged_source([data.get("source"), old.get("source")]),
            RETRIES_KEY: [*(old.get(RETRIES_KEY) or []), this],
        }

    # -- the swap (controller) ------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, None, None]:
        """After the recorder, the report and the CI outputs wrote the combined run into the
        work folder: put it in DIR's place, unless the retry was interrupted or failed."""
        try:
            result = yield
        except BaseException:
            self._keep_original("the session end failed")
            raise
        if hasattr(self.config, "workerinput"):
            return result
        if not self.errored and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            session.exitstatus = pytest.ExitCode.OK  # nothing to retry is no failure
        self._finish(session)
        return result

    def _finish(self, session: pytest.Session) -> None:
        recorder = self.config.stash.get(RECORDER_KEY, None)
        if self.work is None or recorder is None or recorder.out_dir is None:
            return  # no record: nothing was written, DIR is as it was
        why = _not_complete(session, recorder.aggregate_error)
        if why is not None:
            self._keep_original(why)
            return
        try:
            self.source.folder.copy_others(self.work)
            self.source.folder.replace_with(self.work)
        except OSError as exc:
            self._keep_original(f"it could not take its place: {exc}")
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
            return
        recorder.moved(self.work.path, self.source.folder.path)
        self._moved_report()
        still = sum(1 for r in recorder.records if r.get("outcome") == "error")
        self.outcome = (
            f"llmbench: {self.source.folder.path} completed in place: {self.replaced} errored "
            f"records replaced ({still} items still errored)"
        )

    def _moved_report(self) -> None:
        """The report's path as the terminal summary prints it: in DIR, where it now is."""
        writer = self.config.pluginmanager.get_plugin("llmbench-report")
        path = getattr(writer, "path", None)
        if writer is None or self.work is None or not isinstance(path, Path):
            return
        if path.is_relative_to(self.work.path):
            writer.path = self.source.folder.path / path.relative_to(self.work.path)

    def _keep_original(self, why: str) -> None:
        if self.work is None:
            return
        self.outcome = (
            f"llmbench: {self.source.folder.path} left as it was ({why}); this retry's records "
            f"are in {self.work.path}"
        )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Say whether DIR was completed or left as it was, and where the retry's records are."""
        if self.outcome is not None:
            completed = "completed in place" in self.outcome
            terminalreporter.write_line(self.outcome, green=completed, yellow=not completed)


def _not_complete(session: pytest.Session, aggregate_error: str | None) -> str | None:
    """Why the combined run must not replace DIR (None: it may)."""
    status = session.exitstatus
    if status == pytest.ExitCode.INTERRUPTED:
        return "the retry was interrupted"
    if status in (pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
        return f"the retry ended with exit status {int(status)}"
    if aggregate_error is not None:
        return f"its aggregates failed: {aggregate_error}"
    return None
