"""The peer-comparable scenario's table, notes and targets (issue 24) in RESULTS.md.

Every target is judged on the cells' medians (``--runs 3``) and against the raw floor measured
in the same run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mdtable import DASH, TargetCheck, fmt, fmt_int, md_table, outcomes_cell, ratio, status_cell
from mdtable import verdict as met
from peers import FLOOR, PEER_CONCURRENCIES, PLAIN, PLUGIN
from scenarios import DEFAULT_PEERS_N, MIN_ITEMS_PER_ITEM_CPU, Row, cpu_ms_per_item

if TYPE_CHECKING:
    from report import Section

ONE_ITEM_S = 1.2
TOP_N_S = 4.5
FLOOR_SLACK = 1.3
CPU_MS = 2.0
CPU_MS_STREAMED = 4.0
#: 200 MB (10^6 bytes) per process, in MiB as the sampler reports it.
RSS_MIB = 200e6 / 2**20
NO_EVAL_SLACK_S = 0.1
TARGET_RUNS = 3
TOP = PEER_CONCURRENCIES[-1]


def _rows(section: Section | None, match: Callable[[Row], bool]) -> list[Row]:
    return [row for row in section.rows if match(row)] if section else []


def _one(section: Section | None, match: Callable[[Row], bool]) -> Row | None:
    return next(iter(_rows(section, match)), None)


def _same_workers(row: Row, other: Row) -> bool:
    if row.workers_flag or other.workers_flag:
        return row.workers_flag == other.workers_flag
    return row.workers == other.workers


def plugin_row(
    section: Section | None, workers: str, one_item: bool = False, stream: bool = False
) -> Row:
    """The plugin's cell under ``-n workers``: 1 item with default options, or N items at the
    top concurrency; a placeholder row when it was not measured."""
    want = Row(label="", n=0, workers=int(workers) if workers.isdigit() else 0)
    want.workers_flag = "" if workers.isdigit() else workers

    def match(r: Row) -> bool:
        size = r.n == 1 and r.concurrency is None if one_item else r.n > 1 and r.concurrency == TOP
        return r.client == PLUGIN and r.stream == stream and size and _same_workers(r, want)

    return _one(section, match) or Row(label=f"-n {workers}", n=0, workers=0, status="not run")


def floor_row(section: Section | None, row: Row) -> Row | None:
    """The floor's cell of the same work: as many items, as many in flight, same streaming."""
    return _one(section, lambda r: r.client == FLOOR and r.n == row.n and r.stream == row.stream
                and (row.n == 1 or r.concurrency == row.concurrency))  # fmt: skip


def start_row(section: Section | None, row: Row) -> Row | None:
    """The 1-item cell of the same client and ``-n`` (the start-up that CPU per item drops):
    the one with the same flags (default or not, streaming) when there is one."""

    def same(r: Row) -> bool:
        return r.client == row.client and r.n == 1 and _same_workers(r, row)

    def flags(r: Row) -> tuple[bool, bool]:
        return r.stream, r.concurrency is None

    return _one(section, lambda r: same(r) and flags(r) == flags(row)) or _one(section, same)


def per_item_ms(section: Section | None, row: Row) -> float | None:
    """CPU ms per item past start-up, against the 1-item cell of the same client and ``-n``."""
    start = start_row(section, row)
    return cpu_ms_per_item(row, start.cpu_s if start and start.ok else None)


# -- the table ------------------------------------------------------------------------------------


def _streamed(row: Row) -> str:
    if row.client == PLUGIN and row.concurrency is None:
        return "default (sample)"
    return "yes" if row.stream else "no"


def _cells(row: Row, section: Section) -> tuple[str, ...]:
    base = floor_row(section, row) if row.client == PLUGIN else None
    workers = row.workers_flag or str(row.workers)
    n_flag = DASH if row.client != PLUGIN else workers
    conc = DASH if row.concurrency is None else str(row.concurrency)
    return (
        row.client, n_flag, conc, str(row.n), _streamed(row), fmt(row.wall_s),
        ratio(row.wall_s, base.wall_s if base else None), fmt(row.cpu_s),
        fmt(per_item_ms(section, row)), fmt(row.peak_process_rss_mib, 0),
        fmt(row.peak_rss_mib, 0), fmt_int(row.processes), outcomes_cell(row), status_cell(row),
    )  # fmt: skip


def peers_table(section: Section, sections: dict[str, Section]) -> list[str]:
    """Rows of the peer-comparable scenario."""
    headers = (
        "client", "-n", "C", "N", "streamed", "wall s", "wall / floor", "CPU s",
        "CPU ms/item past start-up", "peak RSS MiB, largest process", "peak RSS MiB, sum",
        "processes", "outcomes", "status",
    )  # fmt: skip
    return md_table(headers, [_cells(row, section) for row in section.rows])


PEERS_NOTES = """\
- **Floor**: `benchmarks/floor.py`, asyncio and aiohttp alone: the same capital-city prompts
  and system prompt, one request each, C in flight, one JSON line per answer, then exit.
  **wall / floor** divides a pytest-llmbench cell by the floor cell of the same N, C and
  streaming, measured minutes apart in the same run.
- pytest-llmbench's cells with a C run `--concurrency=C` with `--stream=off` (non-streamed)
  or `--stream=all` (every answer as 20 SSE chunks, usage included). The cells without one
  run the plugin's defaults, as a user starts them (the default `--stream=sample` streams a
  1-item run's one call). Every plugin cell must leave `results.jsonl` and `report.html` in
  its results folder.
- **CPU ms/item past start-up** = (CPU s - CPU s of the 1-item cell of the same client, `-n`
  and flags) / (N - 1), as in (a). The 1-item cells with a C are there for it: a default
  1-item run streams its call and starts differently, and a difference of 0.1 s in start-up
  moves 400 items' CPU by 0.25 ms each. `-n auto` falls back on its default 1-item cell;
  `-n 2` has no 1-item cell, so no value. CPU s counts the process and the workers it waited
  for.
- **Peak RSS, largest process** is the highest `VmRSS` of any one process (pytest or an
  xdist worker); **sum** adds every process of the run at one sample; **processes** is the
  most at once (under `-n auto`: pytest and the workers it started).
- **pytest, no eval file**: a project with one plain test, a `profiles/` folder and no eval
  file, run with the plugin installed and with `-p no:llmbench`.
"""


# -- the targets ----------------------------------------------------------------------------------


def _caveat(section: Section | None, row: Row) -> str:
    parts = []
    if row.n > 1 and row.n < DEFAULT_PEERS_N:
        parts.append(f"at N={row.n}, not {DEFAULT_PEERS_N}")
    runs = section.settings.get("runs per cell", 1) if section else 1
    if isinstance(runs, int) and runs < TARGET_RUNS:
        parts.append(f"{runs} run{'s' if runs > 1 else ''} per cell, not the median of 3")
    return f" ({'; '.join(parts)}: a reduced run)" if parts else ""


def _unmeasured(target: str, rows: Sequence[Row | None]) -> TargetCheck | None:
    """Why ``rows`` cannot be judged (none given, one missing, failed or without the report),
    or None when they all can."""
    if not rows:
        return TargetCheck(target, DASH, "not measured: no such cell")
    for row in rows:
        if row is None:
            return TargetCheck(target, DASH, "not measured: no such cell")
        if row.status.startswith("not written"):
            return TargetCheck(target, f"{row.label}: {row.status}", "NOT met")
        if not row.ok or row.wall_s is None or row.cpu_s is None:
            return TargetCheck(target, DASH, f"not measured: {row.label}: {row.status}")
    return None


def _one_item_check(section: Section | None) -> TargetCheck:
    target = f"1 item end to end (`-n 0`), results and report written: <= {ONE_ITEM_S} s"
    row = plugin_row(section, "0", one_item=True)
    if (missing := _unmeasured(target, [row])) is not None:
        return missing
    assert row.wall_s is not None
    floor = floor_row(section, row)
    base = f" (floor {floor.wall_s:.2f} s)" if floor and floor.wall_s else ""
    measured = f"wall {row.wall_s:.2f} s{base}{_caveat(section, row)}"
    return TargetCheck(target, measured, met(row.wall_s <= ONE_ITEM_S))


def _top_wall_check(section: Section | None) -> TargetCheck:
    target = f"N = {DEFAULT_PEERS_N}, C = {TOP}, `-n 0`: wall <= {TOP_N_S} s"
    row = plugin_row(section, "0")
    if (missing := _unmeasured(target, [row])) is not None:
        return missing
    assert row.wall_s is not None
    measured = f"wall {row.wall_s:.2f} s{_caveat(section, row)}"
    return TargetCheck(target, measured, met(row.wall_s <= TOP_N_S))


def _floor_check(section: Section | None) -> TargetCheck:
    target = f"N = {DEFAULT_PEERS_N}, C = {TOP}, `-n 0`: wall <= {FLOOR_SLACK} x the raw floor"
    row = plugin_row(section, "0")
    floor = floor_row(section, row)
    if (missing := _unmeasured(target, [row, floor])) is not None:
        return missing
    assert floor is not None and row.wall_s is not None and floor.wall_s is not None
    bound = FLOOR_SLACK * floor.wall_s
    measured = (
        f"wall {row.wall_s:.2f} s vs bound {bound:.2f} s (floor {floor.wall_s:.2f} s; "
        f"x {row.wall_s / floor.wall_s:.2f}){_caveat(section, row)}"
    )
    return TargetCheck(target, measured, met(row.wall_s <= bound))


def _cpu_check(section: Section | None, stream: bool) -> TargetCheck:
    limit = CPU_MS_STREAMED if stream else CPU_MS
    kind = "streamed (20 chunks)" if stream else "non-streamed"
    target = f"CPU per item past start-up, {kind}, `-n 0`: <= {limit:.0f} ms"
    rows = _rows(section, lambda r: r.client == PLUGIN and r.n > 1 and r.stream == stream
                 and r.workers == 0 and not r.workers_flag)  # fmt: skip
    starts = [start_row(section, row) for row in rows]
    if (missing := _unmeasured(target, [*rows, *starts])) is not None:
        return missing
    values = {row.label: per_item_ms(section, row) for row in rows}
    judged = {label: value for label, value in values.items() if value is not None}
    if len(judged) < len(values):
        return TargetCheck(target, DASH, f"not judged: under {MIN_ITEMS_PER_ITEM_CPU} items")
    shown = "; ".join(f"{label}: {value:.2f} ms" for label, value in judged.items())
    return TargetCheck(
        target, f"{shown}{_caveat(section, rows[0])}", met(max(judged.values()) <= limit)
    )


def _rss_check(section: Section | None) -> TargetCheck:
    target = f"peak RSS per process, {DEFAULT_PEERS_N}-item runs: <= 200 MB ({RSS_MIB:.1f} MiB)"
    rows = _rows(section, lambda r: r.client == PLUGIN and r.n > 1)
    if (missing := _unmeasured(target, rows)) is not None:
        return missing
    top = max(rows, key=lambda row: row.peak_process_rss_mib or 0.0)
    if top.peak_process_rss_mib is None:
        return TargetCheck(target, DASH, "not measured: no per-process RSS")
    measured = f"largest {top.peak_process_rss_mib:.0f} MiB ({top.label}){_caveat(section, top)}"
    return TargetCheck(target, measured, met(top.peak_process_rss_mib <= RSS_MIB))


def _no_eval_check(section: Section | None) -> TargetCheck:
    target = f"`pytest` with no eval file within {NO_EVAL_SLACK_S} s of `pytest -p no:llmbench`"
    plugin = _one(section, lambda r: r.client == PLAIN)
    bare = _one(section, lambda r: r.client == f"{PLAIN} -p no:llmbench")
    if (missing := _unmeasured(target, [plugin, bare])) is not None:
        return missing
    assert plugin is not None and bare is not None
    assert plugin.wall_s is not None and bare.wall_s is not None
    extra = plugin.wall_s - bare.wall_s
    measured = f"{plugin.wall_s:.2f} s vs {bare.wall_s:.2f} s ({extra:+.2f} s)"
    measured += _caveat(section, plugin)
    return TargetCheck(target, measured, met(extra <= NO_EVAL_SLACK_S))


def _auto_check(section: Section | None, one_item: bool) -> TargetCheck:
    size = "1 item" if one_item else f"N = {DEFAULT_PEERS_N}, C = {TOP}"
    target = (
        f"`-n auto` never slower than `-n 0` (within {_NOISE:.0%}, the spread of medians of "
        f"one configuration here): {size}"
    )
    auto = plugin_row(section, "auto", one_item)
    zero = plugin_row(section, "0", one_item)
    if (missing := _unmeasured(target, [auto, zero])) is not None:
        return missing
    assert auto.wall_s is not None and zero.wall_s is not None
    measured = f"{auto.wall_s:.2f} s vs {zero.wall_s:.2f} s{_caveat(section, auto)}"
    return TargetCheck(target, measured, met(auto.wall_s <= zero.wall_s * (1 + _NOISE)))


#: How far apart the medians of 3 runs of one configuration land on this machine.
_NOISE = 0.05


def peers_checks(sections: dict[str, Section]) -> list[TargetCheck]:
    """The targets of issue 24, judged on the stored ``peers`` section."""
    section = sections.get("peers")
    return [
        _one_item_check(section),
        _top_wall_check(section),
        _floor_check(section),
        _cpu_check(section, stream=False),
        _cpu_check(section, stream=True),
        _rss_check(section),
        _no_eval_check(section),
        _auto_check(section, one_item=False),
        _auto_check(section, one_item=True),
    ]


# -- issue 37, point 8 ----------------------------------------------------------------------------

#: Issue 37's start-up ratios, written by ``benchmarks/startup_limit.py`` and quoted whole here.
STARTUP_LIMIT_MD = Path(__file__).resolve().parent / "startup-limit.md"

STARTUP_LIMIT_NOTES = """\
- Measured on a wheel install in its own venv (not the editable checkout), with compiled files
  written as usual and with `PYTHONDONTWRITEBYTECODE=1`, as Docker CI images set it.
- pytest marks every module of a `pytest11` distribution for assertion rewriting, and loads a
  rewritten module from its own cache, which `PYTHONDONTWRITEBYTECODE=1` leaves empty: every
  start parsed, rewrote and compiled each module the plugin imported (64 on a plain run). The
  package now takes itself off that list (`pytest_llmbench/__init__.py`, tests/test_startup.py).
  Measured pair by pair on a loaded machine (load average 18 on 2 CPUs), 1 item, with the
  variable set: the run with it 0.73 x the wall time (spread 0.66-0.86) and 0.69 x the CPU time
  (0.60-0.80) of the run before it, 6 pairs.
- The stage restructure of issue 37 (case and judge kinds, stage faces, the config package),
  measured pair by pair against the wheel of 496f84b before it, with the variable set: 1 item
  1.03 x the CPU time (spread 0.87-1.12), 6 pairs; a run with no eval file 0.94 x (0.87-1.44),
  8 pairs. At 496f84b, at load average 18, the table gave wall A / B 1.73 (1 item) and 1.75
  (N=400) with bytecode written, 1.73 and 1.92 without.
- On a loaded machine each process's CPU work stretches while the waits on the server (0.25 s
  to an answer, most of the limit's time on a quiet machine) do not, so wall A / B drifts
  towards CPU A / B. Quote a figure with its load average; the target is judged on a quiet
  machine.
"""


def startup_limit_lines() -> list[str]:
    """Issue 37's start-up ratios, as ``startup_limit.py`` last wrote them."""
    lines = ["## Targets (issue 37, point 8: start-up at the limit of a pytest plugin)", ""]
    if not STARTUP_LIMIT_MD.is_file():
        return [*lines, "Not measured yet: `benchmarks/startup_limit.py --python VENV/bin/python "
                "--out benchmarks/startup-limit.md`.", ""]  # fmt: skip
    text = STARTUP_LIMIT_MD.read_text(encoding="utf-8").rstrip()
    return [*lines, text, "", STARTUP_LIMIT_NOTES]
