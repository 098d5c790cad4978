"""``trend.jsonl``: the append-only index of the runs a runs folder held, all a trend needs.

:func:`update_index` walks the runs folder(s) as ``llmbench view`` finds runs (a folder holding
``results.jsonl``, up to three levels deep; hidden folders are passed over) and appends one
line per finished run that the index does not hold yet (keyed by :func:`entry_key`: the run
folder's name, its ``started_at``, its ``finished_at`` and its number of retries), oldest
first. A line (an *entry*) holds::

    {"run": "<folder name>", "folder": "<path as found>", "started_at": "<run.json's>",
     "finished_at": "<run.json's>", "retries": <run.json's retried_errors, counted>,
     "commit": "<run.json's source.git.commit>" | null,
     "items": [{"eval_file", "suite", "model", "model_id", "response_model", "case_id",
                "case_hash", "repeat", "outcome", "score"}, ...]}

``response_model`` is the model version the provider said answered (the record's); a line
written before it was kept lacks it, and reads as None.

Each item's verdict is the effective one (people's labels in the run's folder, and
``--reviews-dir``'s, applied as ``llmbench report`` applies them) at the time the run was
indexed: a line is never rewritten, so a label given later does not reach an indexed run.

``llmbench retry-errors`` completes a run in place: its ``finished_at`` and its retries change,
so the run is indexed again, and :func:`latest_entries` keeps one entry per run (folder name
and ``started_at``), the latest finished, when a trend is computed. Duplicate lines (an index
merged by hand) are counted once that way too. Lines written before ``finished_at`` was kept
lack it: a run of theirs whose folder is still there is indexed once more, and replaces them.

A shard's run (run.json's ``config.shard``) is skipped (listed): its merge holds its items.

A run without ``run.json`` has not finished: it is skipped (listed) and indexed once it has
finished. A folder that is no readable run (broken JSON, a bad record line) and a folder that
holds no run at all (foreign) are skipped and listed with why; neither stops the walk. A broken
line of the index itself is an error naming ``index:line``: the index is all CI keeps. But a
last line without its newline that is no JSON is an append cut short (a job killed while it
wrote): readers pass over it, and :func:`update_index` cuts it off before appending. The update
holds an exclusive lock (``flock``) on the index from its last read to its append, so two
updates at once never append a run twice.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..results_folder import (
    RESULTS_FILE,
    RUN_FILE,
    RUNS_DEPTH,
    ResultsError,
    ResultsFolder,
    object_line,
    run_subfolders,
)
from .trend import SkippedFolder

#: The facts an entry keeps of each item.
ITEM_FIELDS = (
    "eval_file",
    "suite",
    "model",
    "model_id",
    "response_model",
    "case_id",
    "case_hash",
    "repeat",
    "outcome",
    "score",
)
#: Why a folder without any run is skipped.
_FOREIGN = f"foreign: no run in it (no {RESULTS_FILE} at any depth)"
#: The keys every entry has.
_ENTRY_KEYS = ("run", "started_at", "items")
#: Why a shard's run is skipped.
_SHARD = "a shard: index its merge (`llmbench merge`), which holds its items"
#: Why the last line of an index is passed over.
_CUT = "an unfinished last line (an append cut short): passed over"
_CUT_OFF = "an unfinished last line (an append cut short): cut off before appending"
_NL = b"\n"
#: run.json's list of the ``llmbench retry-errors`` passes (``.retry_errors.RETRIES_KEY``; that
#: module imports pytest, which ``llmbench trend`` does not need).
_RETRIES_KEY = "retried_errors"

_Entry = TypeVar("_Entry", bound=Mapping[str, Any])


@dataclass(frozen=True)
class IndexUpdate:
    """What :func:`update_index` did: the index's entries after it, and what it passed over."""

    entries: tuple[dict[str, Any], ...]  #: every entry of the index, in file order
    added: tuple[str, ...]  #: the runs appended this time, oldest first
    skipped: tuple[SkippedFolder, ...]


def entry_key(entry: Mapping[str, Any]) -> tuple[str, str, str, int]:
    """What identifies a run as indexed: its folder's name, ``started_at``, ``finished_at`` and
    retries (a run completed by ``llmbench retry-errors`` finished again, maybe within the
    second ``finished_at`` is given to)."""
    run = (str(entry.get("run")), str(entry.get("started_at")))
    return (*run, *_finish(entry))


def _finish(entry: Mapping[str, Any]) -> tuple[str, int]:
    """When the run last finished, and after how many retries (an older entry has neither)."""
    retries = entry.get("retries")
    return str(entry.get("finished_at") or ""), retries if isinstance(retries, int) else 0


def latest_entries(entries: Iterable[_Entry]) -> list[_Entry]:
    """One entry per run (its folder's name and ``started_at``), in first-seen order: the one
    finished latest (``finished_at``, then retries; an entry without them is the oldest), the
    later one given of equals. A trend counts each run once through this."""
    chosen: dict[tuple[str, str], _Entry] = {}
    for entry in entries:
        run = (str(entry.get("run")), str(entry.get("started_at")))
        held = chosen.get(run)
        if held is None or _finish(entry) >= _finish(held):
            chosen[run] = entry
    return list(chosen.values())


def read_index(path: Path, passed: list[SkippedFolder] | None = None) -> list[dict[str, Any]]:
    """The entries of the index at ``path`` (none when there is no file yet).

    A line that is no entry raises :class:`ResultsError` ``path:line: why``; blank lines are
    passed over, and so is an unfinished last line (told in ``passed`` when given)."""
    if not path.exists():
        return []
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read the trend index: {exc}") from None
    entries, cut = _entries(path, data)
    if cut is not None and passed is not None:
        passed.append(SkippedFolder(f"{path}:{data.count(_NL) + 1}", _CUT))
    return entries


def _entries(path: Path, data: bytes) -> tuple[list[dict[str, Any]], int | None]:
    """The entries in ``data`` (the index at ``path``), and the offset of its unfinished last
    line (None when there is none)."""
    start = data.rfind(b"\n") + 1
    body, tail = (data, b"") if start == len(data) else (data[:start], data[start:])
    try:
        lines = body.decode("utf-8").split("\n")
    except UnicodeDecodeError as exc:
        raise ResultsError(f"{path}: cannot read the trend index: {exc}") from None
    entries = [_entry(path, number, line) for number, line in enumerate(lines, 1) if line.strip()]
    if not tail.strip():
        return entries, None
    try:
        json.loads(tail.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return entries, start  # cut short mid-write: no newline, no whole JSON value
    entries.append(_entry(path, data.count(_NL) + 1, tail.decode("utf-8")))
    return entries, None


def _entry(path: Path, number: int, line: str) -> dict[str, Any]:
    entry = object_line(path, number, line, _ENTRY_KEYS, "a trend entry")
    items = entry["items"]
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ResultsError(f"{path}:{number}: not a trend entry (items is no list of objects)")
    return entry


def update_index(
    roots: Sequence[Path],
    index_path: Path,
    reviews_dir: Path | None = None,
    ignore_reviews: bool = False,
) -> IndexUpdate:
    """Append to the index at ``index_path`` every finished run under ``roots`` it lacks.

    The index is read first (a broken line raises :class:`ResultsError`), so nothing is
    appended to an index that cannot be read. The new entries are appended in ``started_at``
    order, after the index is read again under an exclusive lock (another update may have
    appended some of them meanwhile); the file is made (with its folder) when missing, and an
    unfinished last line is cut off first."""
    passed: list[SkippedFolder] = []
    entries = read_index(index_path, passed)
    update = scan_runs(roots, reviews_dir, ignore_reviews, entries)
    new = update.entries[len(entries) :]
    if new:
        entries, appended = _append(index_path, new)
        added = tuple(str(entry["run"]) for entry in appended)
        update = IndexUpdate((*entries, *appended), added, update.skipped)
        passed = [SkippedFolder(cut.path, _CUT_OFF) for cut in passed]
    skipped = sorted((*update.skipped, *passed), key=lambda folder: folder.path)
    return IndexUpdate(update.entries, update.added, tuple(skipped))


def scan_runs(
    roots: Sequence[Path],
    reviews_dir: Path | None = None,
    ignore_reviews: bool = False,
    entries: Sequence[dict[str, Any]] = (),
) -> IndexUpdate:
    """``entries`` and, after them, an entry for each finished run under ``roots`` that they
    lack (oldest first), without reading or writing any index (a reader that writes nothing,
    such as the viewer, builds its trend from this)."""
    known = {entry_key(entry) for entry in entries}
    skipped: list[SkippedFolder] = []
    new: list[dict[str, Any]] = []
    for folder in run_folders(roots, skipped):
        entry = _run_entry(folder, known, reviews_dir, ignore_reviews, skipped)
        if entry is not None:
            known.add(entry_key(entry))
            new.append(entry)
    new.sort(key=lambda entry: (str(entry["started_at"]), str(entry["run"])))
    skipped.sort(key=lambda folder: folder.path)
    return IndexUpdate((*entries, *new), tuple(str(entry["run"]) for entry in new), tuple(skipped))


def run_entry(
    folder: Path, info: Mapping[str, Any], records: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """The index line of the finished run in ``folder``: ``info`` its run.json, ``records``
    its records with their effective verdicts."""
    return {
        **_run_facts(folder, info),
        "folder": str(folder),
        "commit": _commit(info),
        "items": [{name: record.get(name) for name in ITEM_FIELDS} for record in records],
    }


def _append(
    path: Path, new: Sequence[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Append the ``new`` entries the index at ``path`` still lacks, under an exclusive lock
    from its reading to the write: the index's entries and those appended."""
    import fcntl  # POSIX only, as the package is

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        data = os.pread(fd, size, 0)
        entries, cut = _entries(path, data)
        if cut is not None:
            os.ftruncate(fd, cut)
        known = {entry_key(entry) for entry in entries}
        new = [entry for entry in new if entry_key(entry) not in known]
        text = "".join(json.dumps(entry, ensure_ascii=False, default=str) + "\n" for entry in new)
        if text and cut is None and size and not data.endswith(b"\n"):
            text = "\n" + text  # a whole last line written without its newline
        if text:
            os.write(fd, text.encode("utf-8"))  # one write on an O_APPEND file
            os.fsync(fd)
    finally:
        os.close(fd)  # closing releases the lock
    return entries, new


def run_folders(roots: Sequence[Path], skipped: list[SkippedFolder]) -> list[Path]:
    """The folders holding ``results.jsonl`` under ``roots`` (a root may be a run itself), in
    path order. A root that is no folder, and a folder that holds no run at any depth
    (foreign) beside runs or at a root's top, are added to ``skipped``."""
    found: list[Path] = []
    for root in roots:
        if not root.is_dir():
            skipped.append(SkippedFolder(str(root), "no such folder"))
            continue
        _walk(root, 0, found, skipped)
    return found


def _walk(folder: Path, depth: int, found: list[Path], skipped: list[SkippedFolder]) -> bool:
    """Add the runs under ``folder`` to ``found``; whether there was any, or any broken one."""
    if ResultsFolder(folder).has_results():
        found.append(folder)
        return True
    if ResultsFolder(folder).run_file.is_file():
        skipped.append(SkippedFolder(str(folder), f"broken: {RUN_FILE} without {RESULTS_FILE}"))
        return True
    if depth >= RUNS_DEPTH:
        return False
    try:
        children = run_subfolders(folder)
    except OSError as exc:
        skipped.append(SkippedFolder(str(folder), f"cannot be listed: {exc}"))
        return True
    held = {child: _walk(child, depth + 1, found, skipped) for child in children}
    if depth == 0 or any(held.values()):
        # A folder beside runs, or at the top, that holds none is listed (its own subfolders
        # are not listed again).
        for child, has_run in held.items():
            if not has_run:
                skipped.append(SkippedFolder(str(child), _FOREIGN))
    return any(held.values())


def _run_entry(
    folder: Path,
    known: set[tuple[str, str, str, int]],
    reviews_dir: Path | None,
    ignore_reviews: bool,
    skipped: list[SkippedFolder],
) -> dict[str, Any] | None:
    """The index line of the run in ``folder``; None for a run the index holds (``known``:
    its records are not read again), and (``skipped`` told why) for one that has not finished
    or cannot be read."""
    from .effective import read_labels

    results = ResultsFolder(folder)
    try:
        info = results.read_run_info()
        if info is None:
            reason = f"unfinished: no {RUN_FILE} yet (indexed once the run has finished)"
            skipped.append(SkippedFolder(str(folder), reason))
            return None
        started_at = info.get("started_at")
        if not isinstance(started_at, str) or not started_at:
            raise ResultsError(f"{results.run_file}: no started_at")
        config = info.get("config")
        if isinstance(config, Mapping) and config.get("shard"):
            skipped.append(SkippedFolder(str(folder), _SHARD))
            return None
        if entry_key(_run_facts(folder, info)) in known:
            return None
        records = results.read_records()
        records = read_labels([folder], reviews_dir, ignore_reviews).apply(records).records
    except ResultsError as exc:
        skipped.append(SkippedFolder(str(folder), f"broken: {exc}"))
        return None
    return run_entry(folder, info, records)


def _run_facts(folder: Path, info: Mapping[str, Any]) -> dict[str, Any]:
    """What :func:`entry_key` reads of the run in ``folder`` (``info`` its run.json)."""
    retries = info.get(_RETRIES_KEY)
    return {
        "run": folder.name,
        "started_at": info.get("started_at"),
        "finished_at": info.get("finished_at"),
        "retries": len(retries) if isinstance(retries, list) else 0,
    }


def _commit(info: Mapping[str, Any]) -> str | None:
    source = info.get("source")
    git = source.get("git") if isinstance(source, Mapping) else None
    commit = git.get("commit") if isinstance(git, Mapping) else None
    return str(commit) if commit else None
