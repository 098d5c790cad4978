"""The runs `llmbench view` shows: results folders found under its roots, and their state.

A run is a folder holding ``results.jsonl``. It is ``finished`` once it wrote ``run.json``,
``running`` while the pytest process named in its ``progress.json`` lives, and ``interrupted``
otherwise. Records are read as they are written: a last line cut mid-write is left for later.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..results_folder import PROGRESS_FILE, RUN_FILE, RUNS_DEPTH, ResultsFolder, run_subfolders

if TYPE_CHECKING:
    from ..results import Labels


@dataclass
class Run:
    """One results folder and what it says of its run."""

    key: str  #: the run's id in URLs: ``<root index>/<folder relative to the root>``
    folder: Path
    records: list[dict[str, Any]]
    info: dict[str, Any] | None  #: run.json, once the run finished
    progress: dict[str, Any] | None  #: progress.json, written while it runs
    #: the labels in force on it (its folder's and --reviews-dir's), read once with it
    labels: Labels | None = None
    #: why they could not be read (a broken labels file: ``path:line: why``)
    labels_error: str = ""
    status: str = field(init=False)

    def __post_init__(self) -> None:
        self.status = _status(self.info, self.progress)

    @property
    def started_at(self) -> str:
        if self.info and self.info.get("started_at"):
            return str(self.info["started_at"])
        starts = [str(r["started_at"]) for r in self.records if r.get("started_at")]
        return min(starts) if starts else ""

    @property
    def models(self) -> list[str]:
        return sorted({str(r.get("model")) for r in self.records if r.get("model")})

    @property
    def suites(self) -> list[str]:
        return sorted({str(r.get("suite")) for r in self.records if r.get("suite")})

    def count(self, outcome: str) -> int:
        return sum(1 for record in self.records if record.get("outcome") == outcome)

    @property
    def pass_rate(self) -> float | None:
        scored = self.count("passed") + self.count("failed")
        return self.count("passed") / scored if scored else None

    @property
    def cost(self) -> float:
        return sum(
            float(value)
            for record in self.records
            for value in (record.get("cost_usd"), record.get("judge_cost_usd"))
            if isinstance(value, (int, float))
        )


def find_runs(roots: Sequence[Path], reviews_dir: Path | None = None) -> list[Run]:
    """Every run under ``roots``, newest first, with people's labels applied (its own and
    ``reviews_dir``'s)."""
    runs = []
    for index, root in enumerate(roots):
        for folder in _result_folders(root):
            key = f"{index}/{folder.relative_to(root).as_posix()}"
            try:
                runs.append(load_run(roots, key, reviews_dir))
            except KeyError:  # gone since it was listed
                continue
    return sorted(runs, key=lambda run: run.started_at, reverse=True)


def load_run(roots: Sequence[Path], key: str, reviews_dir: Path | None = None) -> Run:
    """The run ``key`` names, its records' verdicts the effective ones (people's labels in its
    folder and ``reviews_dir`` applied); KeyError for one outside the roots or without results."""
    index, _, relative = key.partition("/")
    if not index.isdigit() or int(index) >= len(roots):
        raise KeyError(key)
    root = roots[int(index)].resolve()
    folder = (root / relative).resolve()
    if folder != root and root not in folder.parents:
        raise KeyError(key)  # ../ in a URL: nothing outside the roots is served
    results = ResultsFolder(folder)
    if not results.has_results():
        raise KeyError(key)
    records = read_records(results)
    from ..results import ReviewsError, labels_for_run

    try:
        labels = labels_for_run([folder], reviews_dir, False)
    except ReviewsError as exc:  # the review pages name the line; the machine's verdicts show
        return Run(key, folder, records, results.read_json(RUN_FILE),
                   results.read_json(PROGRESS_FILE), labels_error=str(exc))  # fmt: skip
    if labels.files:
        records = labels.apply(records).records
    return Run(key, folder, records, results.read_json(RUN_FILE),
               results.read_json(PROGRESS_FILE), labels=labels.labels)  # fmt: skip


def read_records(folder: ResultsFolder) -> list[dict[str, Any]]:
    """The records written so far; a line still being written (no newline yet) is left out.

    Read again only when the file changed: the runs page, refreshed every few seconds while a
    run goes on, would otherwise parse every run's records on every refresh.
    """
    path = folder.results
    try:
        stat = path.stat()
    except OSError:
        return []
    stamp = (stat.st_mtime_ns, stat.st_size)
    known = _READ.get(path)
    if known is not None and known[0] == stamp:
        return known[1]
    records = folder.read_records_so_far()
    if len(_READ) >= _READ_MAX:
        _READ.clear()
    _READ[path] = (stamp, records)
    return records


#: results.jsonl files read: path -> ((mtime, size), records)
_READ: dict[Path, tuple[tuple[int, int], list[dict[str, Any]]]] = {}
_READ_MAX = 256


def _result_folders(root: Path) -> Iterable[Path]:
    if not root.is_dir():
        return
    pending = [(root, 0)]
    while pending:
        folder, depth = pending.pop()
        if ResultsFolder(folder).has_results():
            yield folder
            continue
        if depth >= RUNS_DEPTH:
            continue
        try:
            pending += [(child, depth + 1) for child in run_subfolders(folder)]
        except OSError:
            continue


def _status(info: dict[str, Any] | None, progress: dict[str, Any] | None) -> str:
    if info is not None:
        return "interrupted" if info.get("exitstatus") == 2 else "finished"  # 2: Ctrl-C
    pid = progress.get("pid") if progress else None
    if isinstance(pid, int) and _alive(pid):
        return "running"
    return "interrupted"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
