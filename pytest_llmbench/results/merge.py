"""``llmbench merge DIR ... -o OUT``: the results folders of a run's shards as one run.

The shards' records are concatenated (an item recorded twice is kept once and reported), and
every aggregate, verdict, interval, comparison, leaderboard, CSV and the report are computed
from them as if they came from one run. Shards of different eval files or options are refused,
naming the difference, unless forced; a shard missing or run twice is reported, and fails the
merge unless forced. The exit status gates like a run's: a failed or errored item, a model
below ``--min-pass-rate``, a significant regression against ``--baseline`` with
``--fail-on-regression``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .baseline import RUN_FILE, ResultsError, load_results, load_run_info
from .record import utc_now

#: Options that differ between the shards of one run by design: the shard, its workers and the
#: places it writes to.
_PER_SHARD = ("--shard", "--results-dir", "-n", "--numprocesses", "--dist", "--lf", "--ff",
              "--basetemp", "--junitxml", "--junit-xml", "--html", "--report-log")  # fmt: skip


@dataclass
class Shard:
    """One results folder to merge."""

    folder: Path
    records: list[dict[str, Any]]
    info: dict[str, Any]

    @property
    def position(self) -> tuple[int, int] | None:
        shard = (self.info.get("config") or {}).get("shard")
        if not isinstance(shard, dict):
            return None
        return int(shard["index"]), int(shard["count"])


@dataclass
class Coverage:
    """What the merge found of the shards and their items."""

    count: int | None  #: N, as the shards say
    present: list[int] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)  #: shard numbers nobody brought
    repeated: list[int] = field(default_factory=list)  #: shard numbers brought twice or more
    duplicate_items: list[str] = field(default_factory=list)  #: node ids recorded twice
    short: dict[str, int] = field(default_factory=dict)  #: folder -> items it did not record

    def problems(self) -> list[str]:
        found = []
        if self.missing:
            found.append(f"shard(s) {_numbers(self.missing)} of {self.count} missing")
        if self.repeated:
            found.append(f"shard(s) {_numbers(self.repeated)} given more than once")
        if self.duplicate_items:
            found.append(f"{len(self.duplicate_items)} item(s) recorded twice (kept once)")
        for folder, count in self.short.items():
            found.append(f"{folder}: {count} selected item(s) not recorded (interrupted?)")
        return found


def load_shards(folders: Sequence[Path]) -> list[Shard]:
    """Each folder's records and run.json; a folder without run.json did not finish."""
    shards = []
    for folder in folders:
        info = load_run_info(folder)
        if info is None:
            raise ResultsError(f"{folder}: no {RUN_FILE}: the run did not finish")
        shards.append(Shard(folder, load_results(folder), info))
    return shards


def differences(shards: Sequence[Shard]) -> list[str]:
    """How the shards' eval files and options differ (beyond --shard, -n, --results-dir)."""
    first = shards[0]
    found = []
    for shard in shards[1:]:
        mine, theirs = _comparable(first.info), _comparable(shard.info)
        for key in sorted(set(mine) | set(theirs)):
            if mine.get(key) != theirs.get(key):
                found.append(
                    f"{key}: {mine.get(key)!r} in {first.folder}, {theirs.get(key)!r} in "
                    f"{shard.folder}"
                )
    return found


def _comparable(info: dict[str, Any]) -> dict[str, Any]:
    config = {k: v for k, v in (info.get("config") or {}).items() if k != "shard"}
    # The split budgets are each shard's share: equal for shards of one N.
    return {"arguments": _arguments(info.get("args") or []), **config}


def _arguments(args: Sequence[str]) -> list[str]:
    kept, skip = [], False
    for arg in map(str, args):
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in _PER_SHARD:
            skip = "=" not in arg and name not in ("--lf", "--ff")
            continue
        if arg.startswith("-n") and not arg.startswith("--") and len(arg) > 2:
            continue  # -n2, -nauto
        kept.append(arg)
    return kept


def merged_records(shards: Sequence[Shard]) -> tuple[list[dict[str, Any]], Coverage]:
    """The records of every shard, each item once, and what was missing or repeated."""
    positions = [shard.position for shard in shards]
    counts = {position[1] for position in positions if position is not None}
    count = counts.pop() if len(counts) == 1 else None
    numbers = Counter(position[0] for position in positions if position is not None)
    coverage = Coverage(count=count, present=sorted(numbers))
    if count is not None:
        coverage.missing = [n for n in range(1, count + 1) if n not in numbers]
    coverage.repeated = sorted(n for n, seen in numbers.items() if seen > 1)
    records: list[dict[str, Any]] = []
    seen: set[str] = set()
    for shard in shards:
        selected = shard.info.get("items_selected")
        recorded = [r for r in shard.records if r.get("suite") is not None]
        if isinstance(selected, int) and selected > len(recorded):
            coverage.short[str(shard.folder)] = selected - len(recorded)
        for record in shard.records:
            nodeid = str(record.get("nodeid"))
            if nodeid in seen:
                coverage.duplicate_items.append(nodeid)
                continue
            seen.add(nodeid)
            records.append(record)
    return records, coverage


def merged_info(shards: Sequence[Shard], coverage: Coverage, n_records: int) -> dict[str, Any]:
    """run.json of the merged run: the shards it came from, their coverage, the first shard's
    options."""
    starts = [str(s.info.get("started_at")) for s in shards if s.info.get("started_at")]
    ends = [str(s.info.get("finished_at")) for s in shards if s.info.get("finished_at")]
    first = shards[0].info
    return {
        "started_at": min(starts) if starts else None,
        "finished_at": max(ends) if ends else utc_now(),
        "args": _arguments(first.get("args") or []),
        "merged_from": [
            {
                "folder": str(s.folder),
                "shard": (s.info.get("config") or {}).get("shard"),
                "records": len(s.records),
                "exitstatus": s.info.get("exitstatus"),
            }
            for s in shards
        ],
        "coverage": {
            "shards": coverage.count,
            "present": coverage.present,
            "missing": coverage.missing,
            "repeated": coverage.repeated,
            "duplicate_items": coverage.duplicate_items,
            "short": coverage.short,
        },
        "records": n_records,
        "config": {k: v for k, v in (first.get("config") or {}).items() if k != "shard"},
        "versions": first.get("versions"),
    }


def _numbers(values: Sequence[int]) -> str:
    return ", ".join(str(value) for value in values)
