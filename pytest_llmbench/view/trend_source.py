"""What the Trends page of `llmbench view` shows: the trend of the runs under the viewer's roots.

Each root's ``trend.jsonl`` is read when there is one (it may hold runs whose folders are gone),
and the finished runs it lacks are read from their folders, as ``llmbench trend`` does; but
nothing is written under the roots: the index is read, never brought up to date. The trend is
kept until a file it was read from changes (a run added, finished or removed, a label given,
the index updated), so that choosing a filter reads nothing again.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..results import TrendReport
from ..results_folder import (
    RESULTS_FILE,
    REVIEWS_FILE,
    RUN_FILE,
    RUNS_DEPTH,
    TREND_FILE,
    ResultsError,
    ResultsFolder,
    run_subfolders,
)

#: The files whose change makes the trend read again.
_WATCHED = (RESULTS_FILE, RUN_FILE, REVIEWS_FILE, TREND_FILE)

Trend = tuple[TrendReport, dict[str, str], str]
#: The trend last read for each (roots, reviews folder), with the stamp of what it was read from.
_READ: dict[tuple[tuple[Path, ...], Path | None], tuple[tuple[Any, ...], Trend]] = {}


def read_trend(roots: Sequence[Path], reviews_dir: Path | None) -> Trend:
    """The trend of the runs under ``roots``, the viewer's key of each run still there, and a
    line saying what was read; the one read before when no file it was read from changed."""
    key = (tuple(roots), reviews_dir)
    stamp = _stamp(roots, reviews_dir)
    known = _READ.get(key)
    if known is not None and known[0] == stamp:
        return known[1]
    trend = _read(roots, reviews_dir)
    if len(_READ) >= 8:
        _READ.clear()
    _READ[key] = (stamp, trend)
    return trend


def _stamp(roots: Sequence[Path], reviews_dir: Path | None) -> tuple[Any, ...]:
    """The folders under ``roots`` (to the depth runs are found at) and the size and time of
    each file the trend is read from."""
    found: list[Any] = []
    pending = [(root, 0) for root in roots]
    if reviews_dir is not None:
        found.append(_files(reviews_dir))
    while pending:
        folder, depth = pending.pop()
        found.append(_files(folder))
        if depth >= RUNS_DEPTH or (folder / RESULTS_FILE).is_file():
            continue
        try:
            pending += [(child, depth + 1) for child in run_subfolders(folder)]
        except OSError:
            continue
    return tuple(found)


def _files(folder: Path) -> tuple[Any, ...]:
    stamps: list[Any] = [str(folder)]
    for name in _WATCHED:
        try:
            stat = os.stat(folder / name)
        except OSError:
            continue
        stamps.append((name, stat.st_mtime_ns, stat.st_size))
    return tuple(stamps)


def _read(roots: Sequence[Path], reviews_dir: Path | None) -> Trend:
    """The trend read afresh (see the module's docstring); a broken index is named (``path:line``)
    in the line, and left out."""
    from ..results import build_trend, latest_entries, read_index, scan_runs

    indexed: list[dict[str, Any]] = []
    read, problems = [], []
    for path in (root / TREND_FILE for root in roots):
        if not path.is_file():
            continue
        try:
            indexed += read_index(path)
        except ResultsError as exc:
            problems.append(f"{exc} (left out: only the runs' folders are read)")
        else:
            read.append(path)
    update = scan_runs(roots, reviews_dir, entries=indexed)
    entries = latest_entries(update.entries)
    report = build_trend(entries, skipped=update.skipped)
    note = f"{len(report.runs)} finished runs under {', '.join(str(r) for r in roots)}"
    if read:
        added = {id(entry) for entry in update.entries[len(indexed) :]}
        from_index = sum(1 for entry in entries if id(entry) not in added)
        note += f", {from_index} of them from {', '.join(str(path) for path in read)}"
    note = ". ".join([note, *problems]) + "."
    return report, run_links(roots, entries), note


def run_links(roots: Sequence[Path], entries: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The viewer's key of each run whose folder is still under ``roots``, by run id (an
    index may name folders that are gone, or were on another machine)."""
    links: dict[str, str] = {}
    for entry in entries:
        folder = Path(str(entry.get("folder", "")))
        if not folder.is_absolute() or not ResultsFolder(folder).has_results():
            continue
        for index, root in enumerate(roots):
            if root in folder.parents:
                key = f"{index}/{folder.relative_to(root).as_posix()}"
                links.setdefault(str(entry.get("run")), key)
                break
    return links
