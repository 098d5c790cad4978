"""The results folder: the one owner of its file names and of their readers and writers.

A run leaves one folder behind (pytest-benchmark's storage object is the model): the records,
one JSON object a line, in ``results.jsonl``; the run's facts in ``run.json``; the CSVs of its
aggregates; ``report.html``; ``progress.json`` while it runs; ``prompt_optimizations.jsonl`` and
``metrics.prom`` when asked for. The recorder, ``llmbench merge``, the baseline, the viewer, the
report and the CSV writers name these files and read or write them only through this module.

Shared by every stage (the engine writes the optimization log, render the progress file), so it
imports nothing of the package and nothing heavier than ``json``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

#: Where a run's results folder is made without --results-dir (a timestamped folder in it), and
#: where `llmbench view` looks by default; searches for eval files never enter it.
DEFAULT_ROOT = "llmbench-results"
#: One record per line, written as each item finishes.
RESULTS_FILE = "results.jsonl"
#: The run's facts, written last: a folder without it did not finish.
RUN_FILE = "run.json"
#: The self-contained HTML report.
REPORT_FILE = "report.html"
#: What `llmbench view` reads while the run goes on.
PROGRESS_FILE = "progress.json"
#: Every prompt rewrite of ``--optimize-prompts``.
OPTIMIZATIONS_FILE = "prompt_optimizations.jsonl"
#: The journal of the run's provider batches (--batch): created, ended, recovered.
BATCHES_FILE = "batches.jsonl"
#: People's labels of items and judged assertions (``llmbench view``, ``llmbench reviews``).
REVIEWS_FILE = "reviews.jsonl"
#: `llmbench trend`'s append-only index of runs: one line per run folder it read, so that CI
#: keeps the index instead of every run.
TREND_FILE = "trend.jsonl"
#: The run's metrics in the Prometheus text format.
METRICS_FILE = "metrics.prom"
#: The aggregate CSVs: the leaderboard, every metric, per-case verdicts, model comparisons,
#: judge agreement, and each model's aggregate (in the model's own folder).
LEADERBOARD_FILE = "leaderboard.csv"
ALL_METRICS_FILE = "all_metrics.csv"
CASE_VERDICTS_FILE = "case_verdicts.csv"
COMPARISONS_FILE = "comparisons.csv"
JUDGE_AGREEMENT_FILE = "judge_agreement.csv"
#: Each judge group against people's labels (a run with labels only).
JUDGE_CALIBRATION_FILE = "judge_calibration.csv"
#: Each model's reasoning efforts side by side (a run with the effort axis only).
BY_EFFORT_FILE = "by_effort.csv"
AGGREGATE_FILE = "aggregate_metrics.csv"
#: github-action-benchmark's inputs: the metrics where bigger is better, and smaller.
BENCHMARK_BIGGER_FILE = "benchmark-bigger.json"
BENCHMARK_SMALLER_FILE = "benchmark-smaller.json"
#: Every fixed name above, the default root too (tests/test_layout.py keeps them out of other modules).
FILE_NAMES = (DEFAULT_ROOT, RESULTS_FILE, RUN_FILE, REPORT_FILE, PROGRESS_FILE, OPTIMIZATIONS_FILE,
              BATCHES_FILE, REVIEWS_FILE, TREND_FILE, METRICS_FILE, LEADERBOARD_FILE, ALL_METRICS_FILE, CASE_VERDICTS_FILE,
              COMPARISONS_FILE, JUDGE_AGREEMENT_FILE, JUDGE_CALIBRATION_FILE, BY_EFFORT_FILE, AGGREGATE_FILE, BENCHMARK_BIGGER_FILE,
              BENCHMARK_SMALLER_FILE)  # fmt: skip
#: How deep under a root results folders are looked for (root/llmbench-results/<stamp>), by
#: ``llmbench view`` and ``llmbench trend`` alike.
RUNS_DEPTH = 3
#: The files `llmbench view` serves from a run's folder.
SERVED_FILES = (REPORT_FILE, RESULTS_FILE, LEADERBOARD_FILE, RUN_FILE)

#: How a record becomes a line of results.jsonl (one encoder: ``json.dumps`` with options
#: builds one per call).
_LINE = json.JSONEncoder(ensure_ascii=False, default=str)
# Record keys without which a line cannot be counted or paired with another run's.
_REQUIRED_KEYS = ("suite", "case_id", "outcome")

#: The record schema this version writes (``results.record.SCHEMA_VERSION``); older records are
#: read as this one (:func:`upgrade_record`).
RECORD_SCHEMA = 2
#: Schema 1's record fields that schema 2 renamed, old -> new, in the order they are renamed
#: (``tool_calls``, a count, becomes ``tool_call_count`` before ``function_calls``, the list,
#: takes its name).
_RENAMED_FIELDS: tuple[tuple[str, str], ...] = (
    ("tool_calls", "tool_call_count"),
    ("function_calls", "tool_calls"),
    ("turns", "agent_steps"),
    ("stopped", "agent_stopped"),
    ("retries", "transport_retries"),
    ("judge_cost", "judge_cost_usd"),
)
#: The same renames inside the entries of a record's lists.
_RENAMED_IN_ENTRIES: dict[str, tuple[tuple[str, str], ...]] = {
    "conversation": (("function_calls", "tool_calls"),),
    "timeline": (("turn", "step"),),
    "attempts": (("retries", "transport_retries"), ("judge_cost", "judge_cost_usd")),
    "judges": (("attempts", "call_attempts"),),
}


class ResultsError(Exception):
    """A results folder that cannot be read; the message names the folder or file (and line)."""


def grouped_csv_name(column: str) -> str:
    """The leaderboard grouped by ``column`` (a folder-safe name): ``by_<column>.csv``."""
    return f"by_{column}.csv"


def record_line(record: Mapping[str, Any]) -> str:
    """``record`` as one line of results.jsonl, newline included."""
    return _LINE.encode(record) + "\n"


@dataclass(frozen=True)
class ResultsFolder:
    """One results folder and its files."""

    path: Path

    def file(self, name: str) -> Path:
        """The path of file ``name`` (one of :data:`FILE_NAMES`, or a grouped CSV)."""
        return self.path / name

    @property
    def results(self) -> Path:
        return self.path / RESULTS_FILE

    @property
    def run_file(self) -> Path:
        return self.path / RUN_FILE

    @property
    def report(self) -> Path:
        return self.path / REPORT_FILE

    @property
    def progress(self) -> Path:
        return self.path / PROGRESS_FILE

    def model_aggregate(self, dir_name: str) -> Path:
        """``<model folder>/aggregate_metrics.csv``."""
        return self.path / dir_name / AGGREGATE_FILE

    def has_results(self) -> bool:
        """Whether this folder holds a run's records (what makes it a results folder)."""
        return self.results.is_file()

    # -- reading ------------------------------------------------------------------------------
    def read_records(self) -> list[dict[str, Any]]:
        """The records of results.jsonl, in file order.

        Raises :class:`ResultsError` for a folder that is none or holds no results.jsonl, and
        for a line that is not a JSON record (``path:line: why``). Blank lines are skipped (an
        interrupted write); a folder whose file holds no record is an empty run, an error.
        """
        if not self.path.is_dir():
            raise ResultsError(f"{self.path}: no such results folder")
        if not self.has_results():
            raise ResultsError(f"{self.results}: no such file (not a results folder?)")
        try:
            text = self.results.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ResultsError(f"{self.results}: cannot read: {exc}") from None
        records = parse_records(self.results, text)
        if not records:
            raise ResultsError(f"{self.results}: no records (an empty run)")
        return records

    def read_records_so_far(self) -> list[dict[str, Any]]:
        """The records a run has written so far, as the viewer shows them: a last line still
        being written (no newline yet) and lines that are no JSON object are left out, and a
        file that cannot be read is no record yet."""
        try:
            text = self.results.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        return parse_records(self.results, text, live=True)

    def read_run_info(self) -> dict[str, Any] | None:
        """run.json, or None when the run wrote none; :class:`ResultsError` when it is no JSON
        object."""
        if not self.run_file.is_file():
            return None
        return self._json(self.run_file)

    def read_json(self, name: str) -> dict[str, Any] | None:
        """File ``name`` (run.json, progress.json) as a JSON object, or None when it is missing
        or unreadable (a reader that must not fail: the viewer, the report)."""
        try:
            return self._json(self.path / name)
        except ResultsError:
            return None

    def _json(self, path: Path) -> dict[str, Any]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ResultsError(f"{path}: not a JSON file: {exc}") from None
        if not isinstance(data, dict):
            raise ResultsError(f"{path}: not a JSON object")
        return data

    # -- writing ------------------------------------------------------------------------------
    def open_results(self) -> IO[str]:
        """results.jsonl opened for a new run's records (the folder is made; a reused folder's
        file is replaced: it holds this run only). OSError when the OS refuses."""
        self.path.mkdir(parents=True, exist_ok=True)
        return open(self.results, "w", encoding="utf-8")

    def write_records(self, records: Iterable[Mapping[str, Any]]) -> Path:
        """results.jsonl holding ``records`` (a merged run's, written at once)."""
        with self.open_results() as stream:
            for record in records:
                stream.write(record_line(record))
        return self.results

    def write_progress(self, state: Mapping[str, Any]) -> None:
        """progress.json holding ``state``, replaced at once (a reader never sees half a file);
        OSError when the OS refuses."""
        partial = self.path / f"{PROGRESS_FILE}.tmp"
        partial.write_text(json.dumps(state), encoding="utf-8")
        partial.replace(self.progress)

    def remove_progress(self) -> None:
        """The run is over: its progress file (and one left half-written) goes."""
        for path in (self.progress, self.path / f"{PROGRESS_FILE}.tmp"):
            path.unlink(missing_ok=True)

    def write_run_info(self, info: Mapping[str, Any]) -> Path:
        """run.json holding ``info`` (already redacted by the caller)."""
        text = json.dumps(info, indent=2, default=str)
        self.run_file.write_text(text + "\n", encoding="utf-8")
        return self.run_file

    # -- completing a run in another folder, then swapping it in ------------------------------
    def make_sibling(self, purpose: str) -> ResultsFolder:
        """A new empty folder beside this one, ``.<name>.<purpose>-<random>``, where a run
        that completes this one is written before it takes this one's place. OSError when the
        OS refuses."""
        import tempfile

        prefix = f".{self.path.name}.{purpose}-"
        return ResultsFolder(Path(tempfile.mkdtemp(prefix=prefix, dir=self.path.parent)))

    def copy_others(self, dest: ResultsFolder) -> None:
        """Copy into ``dest`` what a run does not write here (files a user or another tool
        left in the folder), so that replacing this folder with ``dest`` loses none of them.
        A run's own files (:data:`FILE_NAMES`, the grouped CSVs, the model folders' aggregates)
        are left out: ``dest`` holds the completed run's."""
        import shutil

        def written(folder: str, names: list[str]) -> list[str]:
            return [name for name in names if _written_by_a_run(name)]

        shutil.copytree(self.path, dest.path, ignore=written, dirs_exist_ok=True)

    def replace_with(self, done: ResultsFolder) -> None:
        """Put folder ``done`` in this one's place, in two renames: this folder is moved aside,
        ``done`` takes its name, then the old one is removed. When the second rename fails the
        old folder is moved back, so the path always holds a whole run. OSError when the OS
        refuses."""
        import os
        import shutil

        aside = self.make_sibling("replaced")
        os.replace(self.path, aside.path)  # onto the new empty folder: one rename
        try:
            os.replace(done.path, self.path)
        except OSError:
            os.replace(aside.path, self.path)
            raise
        shutil.rmtree(aside.path, ignore_errors=True)


def upgrade_record(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` as the current schema has it: a schema-1 record (no ``schema``, or 1) gets
    schema 2's field names, in its lists' entries too (conversation, timeline, attempts, judges),
    and an agent loop's ``max_turns`` ending and model-call role are named as steps (``record``
    itself is left as it was). A record of another schema is returned as it is. Every reader of
    results.jsonl reads records through this."""
    if record.get("schema", 1) != 1:
        return record
    upgraded = _renamed({"schema": RECORD_SCHEMA, **record}, _RENAMED_FIELDS)
    upgraded["schema"] = RECORD_SCHEMA
    for field, after, value in _ADDED_FIELDS:
        upgraded = _added(upgraded, field, after, value)
    if upgraded.get("agent_stopped") == "max_turns":
        upgraded["agent_stopped"] = "max_steps"
    for field, renames in _RENAMED_IN_ENTRIES.items():
        entries = upgraded.get(field)
        if isinstance(entries, list):
            upgraded[field] = [
                _renamed(entry, renames) if isinstance(entry, dict) else entry for entry in entries
            ]
    timeline = upgraded.get("timeline")
    if isinstance(timeline, list):
        upgraded["timeline"] = [
            {**step, "role": "step"} if isinstance(step, dict) and step.get("role") == "turn"
            else step
            for step in timeline
        ]  # fmt: skip
    return upgraded


#: The fields schema 2 added, each with the field it follows and its value in an older record
#: (null: not measured).
_ADDED_FIELDS: tuple[tuple[str, str, Any], ...] = (
    ("reasoning_tokens", "tokens_estimated", None),
    ("reasoning_tokens_estimated", "reasoning_tokens", False),
    ("cached_input_tokens", "reasoning_tokens_estimated", None),
    ("cache_write_tokens", "cached_input_tokens", None),
    ("finish_reason", "streamed", None),
    ("reasoning", "response", None),
    ("effort", "temperature", None),
    ("batched", "cached", False),
    ("batch_id", "batched", None),
    ("batch_wait_s", "batch_id", None),
    ("samples_planned", "repeat", None),
    ("stopped_early", "samples_planned", False),
    # people's labels (results/effective.py): an older record's verdicts are the machine's
    ("verdict_source", "passed", "machine"),
    ("machine_outcome", "verdict_source", None),
    ("machine_score", "machine_outcome", None),
    ("review", "machine_score", None),
    # the item's OpenTelemetry spans (--otel); an older run exported none
    ("trace", "started_at", None),
    # the model version the provider said answered; an older run kept none
    ("response_model", "model_id", None),
    # an agent's stateful environment (issue 42): an older run had none
    ("state", "tool_calls", None),
)


def _added(record: dict[str, Any], field: str, after: str, value: Any = None) -> dict[str, Any]:
    """``record`` with ``field`` (``value``) placed after ``after`` (at the end without it),
    unless it has it already."""
    if field in record:
        return record
    if after not in record:
        return {**record, field: value}
    placed: dict[str, Any] = {}
    for key, kept in record.items():
        placed[key] = kept
        if key == after:
            placed[field] = value
    return placed


def _renamed(entry: dict[str, Any], renames: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """``entry`` with each old key of ``renames`` given its new name, in the order given, each
    in its place."""
    for old, new in renames:
        if old in entry:
            entry = {new if key == old else key: value for key, value in entry.items()}
    return entry


def _written_by_a_run(name: str) -> bool:
    """Whether a run writes file ``name`` in its results folder (or in a model's folder) anew.
    The batch journal is not: a run that completes this one (``--retry-errors``) appends to
    it, and it keeps the earlier batches' events."""
    grouped = grouped_csv_name("")
    return (
        (name in FILE_NAMES and name != BATCHES_FILE)
        or name == f"{PROGRESS_FILE}.tmp"
        or (name.startswith(grouped[:-4]) and name.endswith(grouped[-4:]))
    )


def parse_records(path: Path, text: str, *, live: bool = False) -> list[dict[str, Any]]:
    """The records of results.jsonl's ``text`` (read from ``path``, named in errors), each in
    the current schema (:func:`upgrade_record`).

    Strict (the default): a line that is no JSON record is a :class:`ResultsError`
    ``path:line: why``. ``live`` (a run still writing): such lines and a last line without its
    newline are left out.
    """
    if live:
        lines = text.split("\n")[:-1] if not text.endswith("\n") else text.splitlines()
        return [record for line in lines if (record := _live_record(line)) is not None]
    return [_record(path, number, line) for number, line in enumerate(text.splitlines(), 1)
            if line.strip()]  # fmt: skip


def _live_record(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return upgrade_record(value) if isinstance(value, dict) else None


def _record(path: Path, number: int, line: str) -> dict[str, Any]:
    return upgrade_record(object_line(path, number, line, _REQUIRED_KEYS, "a record"))


def object_line(
    path: Path, number: int, line: str, required: Sequence[str], what: str
) -> dict[str, Any]:
    """Line ``number`` of the JSON-lines file at ``path``: a JSON object holding every key of
    ``required``, else :class:`ResultsError` ``path:line: why`` (``what`` names what it should
    be: ``a record``)."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path}:{number}: not valid JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise ResultsError(f"{path}:{number}: not a JSON object")
    missing = [key for key in required if key not in value]
    if missing:
        raise ResultsError(f"{path}:{number}: not {what} (no {', '.join(missing)})")
    return value


def run_subfolders(folder: Path) -> list[Path]:
    """The folders under ``folder`` a search for runs enters, in name order: not hidden, not
    symlinks (a link could loop, or lead outside the root). Raises ``OSError`` when ``folder``
    cannot be listed."""
    return sorted(
        child
        for child in folder.iterdir()
        if child.is_dir() and not child.is_symlink() and not child.name.startswith(".")
    )
