"""``llmbench merge DIR ... -o OUT``: the results folders of a run's shards as one run.

The shards' records are concatenated (an item recorded twice is kept once and reported), and
every aggregate, verdict, interval, comparison, leaderboard, CSV and the report are computed
from them as if they came from one run. Shards of different eval files or options are refused,
naming the difference, unless forced; a shard missing or run twice is reported, and fails the
merge unless forced.

The exit status is decided by the code that decides a run's (:func:`.gates.decide`), from the
shards' own states (their status before the gates, failures that are not low scores such as
collection errors, whether ``-x`` cut them short; :func:`gate_inputs` writes them into each
run.json) and the run's gate settings: the shards' own (``--min-pass-rate``,
``--repeat-policy``, ``--baseline``, ``--fail-on-regression`` and every other gate), each
replaced by the merge's option of the same name when it is given. So a suite run whole and the
same suite run as merged shards exit alike and list the same ``gate_failures``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..provenance import merged_source, source_differences
from ..results_folder import RESULTS_FILE, RUN_FILE, ResultsError, ResultsFolder
from .record import utc_now

if TYPE_CHECKING:
    from ..config import RunConfig
    from .effective import RunLabels
    from .gates import GateDecision, RepeatOutcome, RunState
    from .summary import RunSummary

#: Options that differ between the shards of one run by design: the shard, its workers and the
#: places it writes to (``--retry-errors`` names the folder a retry completes).
_PER_SHARD = ("--shard", "--results-dir", "-n", "--numprocesses", "--dist", "--lf", "--ff",
              "--basetemp", "--junitxml", "--junit-xml", "--html", "--report-log",
              "--retry-errors")  # fmt: skip


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
    """Each folder's records and run.json; a folder without results.jsonl is no results folder,
    one without run.json did not finish."""
    shards = []
    for folder in folders:
        results = ResultsFolder(folder)
        if not results.has_results():
            raise ResultsError(f"{folder}: not a results folder (no {RESULTS_FILE})")
        info = results.read_run_info()
        if info is None:
            raise ResultsError(f"{folder}: no {RUN_FILE}: the run did not finish")
        shards.append(Shard(folder, results.read_records(), info))
    return shards


def differences(shards: Sequence[Shard]) -> list[str]:
    """How the shards' eval files and options differ (beyond --shard, -n, --results-dir)."""
    first = shards[0]
    found = _source_differences(shards)
    for shard in shards[1:]:
        for key, mine, theirs in option_differences(first.info, shard.info):
            found.append(f"{key}: {mine!r} in {first.folder}, {theirs!r} in {shard.folder}")
    return found


def option_differences(
    first: Mapping[str, Any], second: Mapping[str, Any]
) -> list[tuple[str, Any, Any]]:
    """Where the options of two runs differ, from their run.json (beyond --shard, -n,
    --results-dir and the other per-shard options): ``(option, first's, second's)``."""
    mine, theirs = _comparable(first), _comparable(second)
    keys = sorted(set(mine) | set(theirs))
    return [
        (key, mine.get(key), theirs.get(key)) for key in keys if mine.get(key) != theirs.get(key)
    ]


def _comparable(info: Mapping[str, Any]) -> dict[str, Any]:
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


def _source_differences(shards: Sequence[Shard]) -> list[str]:
    """How the shards' commits and the eval and dataset files they read differ (run.json's
    ``source``): shards of one run read the same files."""
    first = shards[0]
    return [
        f"{what}: {mine} in {first.folder}, {theirs} in {shard.folder}"
        for shard in shards[1:]
        for what, mine, theirs in source_differences(
            first.info.get("source"), shard.info.get("source")
        )
    ]


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
        # every file the shards read, and their commit (see provenance.merged_source)
        "source": merged_source(s.info.get("source") for s in shards),
    }


# -- the gate -----------------------------------------------------------------------------------

#: RunConfig fields a merge takes from the shards' run.json: plain values (gate thresholds and
#: policies among them), not paths, profiles or tables.
_PLAIN_TYPES = {"float", "int", "str", "bool", "None"}


def merged_state(shards: Sequence[Shard], records: Sequence[Mapping[str, Any]]) -> RunState:
    """The merged run's state before the gates: the worst of the shards' statuses, their
    failures that are not low scores added up, cut short when one was.

    A shard written before run.json carried :data:`GATE_INPUTS` is judged by its records: a
    failed or errored item failed it, an errored one is not a low score.
    """
    from .gates import RunState
    from .recorder import over_budget

    inputs = [shard_inputs(shard) for shard in shards]
    return RunState(
        exitstatus=_worst([int(found["exitstatus"]) for found in inputs]),
        other_failures=sum(int(found["other_failures"]) for found in inputs),
        cut_short=any(bool(found["cut_short"]) for found in inputs),
        over_budget=over_budget(records),
    )


def relabel_shards(shards: Sequence[Shard], labels: RunLabels) -> None:
    """Give each shard's records the verdicts ``labels`` decide (:mod:`.effective`), and its
    gate inputs the exit status pytest would have given them: a shard that failed only on
    verdicts people have passed since passes (a crash or an interrupt stays)."""
    from .recorder import GATE_INPUTS

    for shard in shards:
        shard.records = labels.apply(shard.records).records
        found = shard.info.get(GATE_INPUTS)
        if not isinstance(found, dict) or found.get("exitstatus") not in (0, 1):
            continue
        failed = any(record.get("outcome") in ("failed", "error") for record in shard.records)
        failed = failed or bool(found.get("other_failures"))
        shard.info[GATE_INPUTS] = {**found, "exitstatus": 1 if failed else 0}


def shard_inputs(shard: Shard) -> dict[str, Any]:
    from .recorder import GATE_INPUTS

    found = shard.info.get(GATE_INPUTS)
    if isinstance(found, dict) and {"exitstatus", "other_failures", "cut_short"} <= set(found):
        return found
    outcomes = [record.get("outcome") for record in shard.records]
    status = shard.info.get("exitstatus")
    worse = isinstance(status, int) and status not in (0, 1)
    failed = "failed" in outcomes or "error" in outcomes
    return {
        "exitstatus": status if worse else 1 if failed else 0,
        "other_failures": outcomes.count("error"),
        "cut_short": False,
    }


def _worst(statuses: Sequence[int]) -> int:
    """One status for the shards: a worse one than failed tests (interrupted, internal error)
    first, then failed tests, then OK; no tests collected only when no shard collected any."""
    worse = [status for status in statuses if status not in (0, 1, 5)]
    if worse:
        return max(worse)
    if 1 in statuses:
        return 1
    return 5 if statuses and all(status == 5 for status in statuses) else 0


def gate_settings(shards: Sequence[Shard], given: Mapping[str, Any]) -> RunConfig:
    """The run's settings the gates read: the first shard's (the shards agree unless forced),
    each replaced by a value in ``given`` (the merge's options, by RunConfig field; None: not
    given)."""
    from ..config import RunConfig
    from ..models import ProfileRegistry

    base = RunConfig(models=(), repeat=1, results_dir=None, min_pass_rate=None,
                     request_timeout_s=0.0, max_retries=0,
                     profiles=ProfileRegistry(models={}, sets={}), env_file=None)  # fmt: skip
    config = shards[0].info.get("config") or {}
    plain = {
        item.name: config[item.name]
        for item in dataclasses.fields(RunConfig)
        if item.name in config and set(str(item.type).replace(" ", "").split("|")) <= _PLAIN_TYPES
    }
    if config.get("baseline"):
        plain["baseline"] = Path(str(config["baseline"]))
    plain.update({name: value for name, value in given.items() if value is not None})
    return dataclasses.replace(base, **plain)


def merged_decision(
    shards: Sequence[Shard], summary: RunSummary, settings: RunConfig
) -> tuple[GateDecision, RepeatOutcome]:
    """The merged run's exit status and failed gates, decided by :func:`.gates.decide` as a
    run's are."""
    from .baseline import compare_runs
    from .effective import load_labelled
    from .gates import decide, judge_repeats

    records = list(summary.records)
    repeats = judge_repeats(summary.verdicts, settings.repeat_policy)
    regressed: list[str] = []
    if settings.baseline is not None:
        baseline = load_labelled(settings.baseline, settings.reviews_dir, settings.ignore_reviews)
        results = compare_runs(baseline, records)
        regressed = [result.model for result in results if result.significant_regression]
    decision = decide(
        merged_state(shards, records),
        settings,
        board=summary.board,
        repeats=repeats,
        regressed=regressed,
        baseline=settings.baseline,
        records=records,
    )
    return decision, repeats


def _numbers(values: Sequence[int]) -> str:
    return ", ".join(str(value) for value in values)
