"""Machine facts, target checks and the Markdown of ``benchmarks/RESULTS.md``.

Measured sections are kept in ``benchmarks/results.json``; a run replaces the sections it
measured and RESULTS.md is rendered from all of them, so single scenarios can be re-run alone.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from mdtable import (
    DASH,
    TargetCheck,
    fmt,
    fmt_int,
    md_table,
    outcomes_cell,
    ratio,
    status_cell,
    verdict,
)
from peers_report import PEERS_NOTES, peers_checks, peers_table, startup_limit_lines
from scenarios import Row, cpu_ms_per_item

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("litellm", "pytest", "pytest-xdist", "openai", "httpx", "aiohttp", "pytest-llmbench")
TITLES = {
    "throughput": "(a) Throughput",
    "startup": "(b) Start-up",
    "collection": "(c) Collection",
    "cached": "(d) Cached re-run",
    "peers": "(f) Peer-comparable speed (issue 24)",
}
#: Wall time may be this many times the physical limit plus start-up (issue 3, section 5).
THROUGHPUT_SLACK = 1.3
CACHED_TARGET_S = 10.0
COLLECT_TARGET_S = 5.0
FULL_N = 2000
FULL_COLLECT_N = 10_000


@dataclass
class Section:
    """One scenario's rows and how they were obtained."""

    name: str
    date: str
    command: str
    quick: bool
    settings: dict[str, Any]
    rows: list[Row]
    load_before: str = ""
    """The 1, 5 and 15 minute load averages when the section started: others' work shows."""
    load_after: str = ""
    revision: str = ""
    """The plugin's git revision when the section was measured."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Section:
        """Rebuild a section stored in results.json."""
        rows = [Row(**row) for row in data.pop("rows")]
        return cls(rows=rows, **data)


def load_average() -> str:
    """``/proc/loadavg``'s three load averages."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def now_iso() -> str:
    """The local time, to the second."""
    return dt.datetime.now().astimezone().replace(microsecond=0).isoformat()


# -- machine facts ------------------------------------------------------------------------------


def _first_line_with(path: str, prefix: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def git_revision() -> str:
    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, timeout=10
        )
        return done.stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--", "pytest_llmbench")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head} + uncommitted changes in pytest_llmbench/" if dirty else head


def machine_facts() -> dict[str, str]:
    """What the numbers depend on: CPUs, memory, Python and package versions, plugin revision."""
    mem_kib = _first_line_with("/proc/meminfo", "MemTotal") or "0 kB"
    facts = {
        "nproc": str(len(os.sched_getaffinity(0))),
        "cpu": _first_line_with("/proc/cpuinfo", "model name") or platform.processor(),
        "memory": f"{int(mem_kib.split()[0]) / 1024**2:.1f} GiB",
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "plugin revision": git_revision(),
    }
    facts.update({name: _version(name) for name in PACKAGES})
    return facts


# -- storage --------------------------------------------------------------------------------------


def load_machine(path: Path) -> dict[str, str] | None:
    """The machine facts stored with the latest measurement, if any."""
    try:
        machine = json.loads(path.read_text(encoding="utf-8")).get("machine")
    except (OSError, ValueError, AttributeError):
        return None
    return machine if isinstance(machine, dict) else None


def load_sections(path: Path) -> dict[str, Section]:
    """Sections stored by earlier runs (none when the file is missing or unreadable)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {name: Section.from_dict(s) for name, s in data.get("sections", {}).items()}
    except (OSError, ValueError, TypeError, KeyError):
        return {}


def save_sections(path: Path, sections: dict[str, Section], machine: dict[str, str]) -> None:
    """Store all sections with the machine facts of the latest run."""
    data = {"machine": machine, "sections": {name: asdict(s) for name, s in sections.items()}}
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


# -- targets --------------------------------------------------------------------------------------


def _find(sections: dict[str, Section], name: str, match: Callable[[Row], bool]) -> Row | None:
    section = sections.get(name)
    return next((row for row in section.rows if match(row)), None) if section else None


def startup_s(sections: dict[str, Section], workers: int) -> float | None:
    """The 1-item wall time under ``-n workers``."""
    row = _find(sections, "startup", lambda r: r.n == 1 and r.workers == workers)
    return row.wall_s if row and row.ok else None


def _size_note(n: int, full: int) -> str:
    return "" if n >= full else f" (at N={n}, not {full}: a reduced run)"


def _throughput_check(
    sections: dict[str, Section], workers: int, conc: int, slack: float = THROUGHPUT_SLACK
) -> TargetCheck:
    target = (
        f"`-n {workers}`, `--concurrency {conc}`: wall <= {slack} x "
        "(physical limit + 1-item start-up)"
    )
    row = _find(sections, "throughput", lambda r: r.workers == workers and r.concurrency == conc)
    start = startup_s(sections, workers)
    if row is None or not row.ok or row.wall_s is None or row.limit_s is None:
        status = row.status if row else "not run"
        return TargetCheck(target, DASH, f"not measured: {status}")
    if start is None:
        return TargetCheck(target, f"wall {row.wall_s:.1f} s", "not judged: no start-up row")
    bound = slack * (row.limit_s + start)
    measured = (
        f"wall {row.wall_s:.1f} s vs bound {bound:.1f} s "
        f"(limit {row.limit_s:.1f} s + start-up {start:.1f} s){_size_note(row.n, FULL_N)}"
    )
    return TargetCheck(target, measured, verdict(row.wall_s <= bound))


def _single_check(
    sections: dict[str, Section],
    name: str,
    target: str,
    limit_s: float,
    full_n: int,
    inclusive: bool = False,
) -> TargetCheck:
    row = _find(sections, name, lambda r: r.label.startswith(("re-run", "--collect-only")))
    if row is None or not row.ok or row.wall_s is None:
        status = row.status if row else "not run"
        return TargetCheck(target, DASH, f"not measured: {status}")
    measured = f"wall {row.wall_s:.2f} s{_size_note(row.n, full_n)}"
    within = row.wall_s <= limit_s if inclusive else row.wall_s < limit_s
    return TargetCheck(target, measured, verdict(within))


def target_checks(sections: dict[str, Section]) -> list[TargetCheck]:
    """The four targets of issue 3, section 5, judged on the stored sections."""
    return [
        _throughput_check(sections, 0, 32),
        _throughput_check(sections, 2, 64),
        _single_check(
            sections,
            "cached",
            f"cached re-run of {FULL_N} items < {CACHED_TARGET_S:.0f} s",
            CACHED_TARGET_S,
            FULL_N,
        ),
        _single_check(
            sections,
            "collection",
            f"{FULL_COLLECT_N:,} items collect in < {COLLECT_TARGET_S:.0f} s",
            COLLECT_TARGET_S,
            FULL_COLLECT_N,
        ),
    ]


#: Issue 24's tighter bounds on the scenarios of issue 3 (sections a, c, d).
ISSUE24_SLACK = 1.15
ISSUE24_CACHED_S = 3.0
ISSUE24_COLLECT_S = 3.0


def issue24_scale_checks(sections: dict[str, Section]) -> list[TargetCheck]:
    """Issue 24's targets on 2000 items, the cached re-run and collection."""
    return [
        _throughput_check(sections, 0, 32, ISSUE24_SLACK),
        _throughput_check(sections, 2, 64, ISSUE24_SLACK),
        _single_check(
            sections,
            "cached",
            f"cached re-run of {FULL_N} items <= {ISSUE24_CACHED_S:.0f} s",
            ISSUE24_CACHED_S,
            FULL_N,
            inclusive=True,
        ),
        _single_check(
            sections,
            "collection",
            f"{FULL_COLLECT_N:,} items collect in <= {ISSUE24_COLLECT_S:.0f} s",
            ISSUE24_COLLECT_S,
            FULL_COLLECT_N,
            inclusive=True,
        ),
    ]


# -- Markdown -------------------------------------------------------------------------------------


def startup_cpu_s(sections: dict[str, Section], workers: int) -> float | None:
    """The 1-item CPU time under ``-n workers``."""
    row = _find(sections, "startup", lambda r: r.n == 1 and r.workers == workers)
    return row.cpu_s if row and row.ok else None


def _throughput_cells(row: Row, sections: dict[str, Section]) -> tuple[str, ...]:
    start = startup_s(sections, row.workers)
    with_start = None if row.limit_s is None or start is None else row.limit_s + start
    conc = "default" if row.concurrency is None else str(row.concurrency)
    per_item = fmt(cpu_ms_per_item(row, startup_cpu_s(sections, row.workers)), 1)
    return (
        str(row.workers), conc, str(row.n), fmt(row.wall_s), fmt(row.limit_s),
        ratio(row.wall_s, row.limit_s), ratio(row.wall_s, with_start), fmt(row.cpu_s, 1),
        per_item, fmt(row.peak_rss_mib, 0), fmt_int(row.max_in_flight), outcomes_cell(row),
        status_cell(row),
    )  # fmt: skip


def throughput_table(section: Section, sections: dict[str, Section]) -> list[str]:
    """Rows of scenario (a)."""
    headers = (
        "-n", "--concurrency", "N", "wall s", "limit s", "wall/limit", "wall/(limit+start-up)",
        "CPU s", "CPU ms/item past start-up", "peak RSS MiB", "server max in flight", "outcomes", "status",
    )  # fmt: skip
    cells = [_throughput_cells(row, sections) for row in section.rows]
    return md_table(headers, cells)


def startup_table(section: Section, sections: dict[str, Section]) -> list[str]:
    """Rows of scenario (b)."""
    headers = ("what", "wall s", "CPU s", "peak RSS MiB", "outcomes", "status")
    return md_table(headers, [_startup_cells(row) for row in section.rows])


def _startup_cells(row: Row) -> tuple[str, ...]:
    return (
        row.label, fmt(row.wall_s), fmt(row.cpu_s), fmt(row.peak_rss_mib, 0),
        outcomes_cell(row), status_cell(row),
    )  # fmt: skip


def _collection_cells(row: Row) -> tuple[str, ...]:
    rate = DASH if not row.wall_s else f"{row.n / row.wall_s:,.0f}"
    return (
        str(row.n), fmt(row.wall_s), fmt(row.collect_s), rate, fmt(row.cpu_s),
        fmt(row.peak_rss_mib, 0), status_cell(row),
    )  # fmt: skip


def collection_table(section: Section, sections: dict[str, Section]) -> list[str]:
    """Rows of scenario (c)."""
    headers = (
        "items", "wall s", "pytest's 'collected in' s", "items/s", "CPU s", "peak RSS MiB", "status",
    )  # fmt: skip
    return md_table(headers, [_collection_cells(row) for row in section.rows])


def _cached_cells(row: Row) -> tuple[str, ...]:
    return (
        row.label, str(row.n), fmt(row.wall_s), fmt(row.cpu_s, 1), fmt_int(row.server_requests),
        fmt(row.peak_rss_mib, 0), outcomes_cell(row), status_cell(row),
    )  # fmt: skip


def cached_table(section: Section, sections: dict[str, Section]) -> list[str]:
    """Rows of scenario (d)."""
    headers = (
        "run", "N", "wall s", "CPU s", "server requests", "peak RSS MiB", "outcomes", "status",
    )  # fmt: skip
    return md_table(headers, [_cached_cells(row) for row in section.rows])


def memory_table(sections: dict[str, Section]) -> list[str]:
    """Scenario (e): the highest peak RSS of each scenario and the cell it came from."""
    cells = []
    for name, section in sections.items():
        measured = [row for row in section.rows if row.peak_rss_mib is not None]
        if not measured:
            cells.append((TITLES.get(name, name), DASH, "no cell measured"))
            continue
        top = max(measured, key=lambda row: row.peak_rss_mib or 0.0)
        cells.append((TITLES.get(name, name), fmt(top.peak_rss_mib, 0), top.label))
    return md_table(("scenario", "peak RSS MiB (highest cell)", "cell"), cells)


TABLES: dict[str, Callable[[Section, dict[str, Section]], list[str]]] = {
    "throughput": throughput_table,
    "startup": startup_table,
    "collection": collection_table,
    "cached": cached_table,
    "peers": peers_table,
}
#: Notes printed under a section's table.
SECTION_NOTES = {"peers": PEERS_NOTES}

_NOTES = """\
How to read this:

- **Physical limit** = N x per-call latency / concurrency: what a client that keeps exactly
  `--concurrency` calls in flight would need against this server (no client overhead, no
  start-up). Rows without `--concurrency` (the plugin's default) use the highest number of
  calls the server saw in flight at once. For `-n 2`, `--concurrency` is the total for the run,
  split between the workers.
- **Start-up** is the 1-item wall time under the same `-n` (scenario b). The target is
  wall <= 1.3 x (limit + start-up). Under `-n 2` one item busies one worker only; the
  "2 items, -n 2" row shows the start-up when both workers call a model (each imports litellm).
- **Wall** is the whole `python -m pytest ...` subprocess, interpreter start included.
- **CPU s** is user + system time of the pytest process and its xdist workers; on 2 CPUs a
  run cannot use more than 2 CPU seconds per wall second, so CPU s close to 2 x wall s means the
  harness, not the endpoint, is the bottleneck. **CPU ms/item past start-up** is
  (CPU s - the 1-item run's CPU s under the same `-n`) / (N - 1): the marginal cost of an item.
  The load averages show other work on the machine.
- **Peak RSS** is the highest sum of `VmRSS` over the pytest process and all its descendants
  (xdist workers), sampled every 50 ms from `/proc`; pages shared between processes count once
  per process.
- **flag not available**: pytest rejected the flag ("unrecognized arguments"): the plugin does
  not have it yet, so nothing was measured.
- Cells that may make one call at a time (the default concurrency, and `--concurrency 1`) run
  at N=200: 2000 such calls take 500 s+.

Where the time goes under `-n 2 --concurrency 64` (profiled with py-spy `--gil` and per-process
CPU sampled from `/proc`; these figures are from profiling runs, not from the tables above):

- Start (about a third of the wall time): the controller starts in 0.75 s; each worker then
  spends about 4 s of CPU on pytest, the plugin, collecting all 2000 items and importing
  litellm (2.2 s, with the garbage collector paused during the import; 2.75 s without).
- Items: each worker is bound by its own GIL at about 8 ms of CPU per item: about 5 ms inside
  litellm and the openai SDK per call (request transform, cost calculated twice, logging,
  aiohttp), about 1.3 ms of pytest's protocol on the main thread, and xdist's report
  serialization. The controller adds about 1 ms per item (execnet, terminal, `results.jsonl`).
  With two workers and the controller on 2 CPUs the run is CPU-bound, not endpoint-bound.
- Tail: xdist's `--dist load` sends a worker a few items at a time near the end (and none while
  its last item took 0.1 s or more), so the last ~135 of each worker's 1000 items ran a few at a
  time and took 4 s. The plugin's scheduler keeps each worker's queue at its look-ahead until
  everything is sent; the tail went from 4 s to none (20.4 s -> 16.0 s in one profiling run).
- End: the controller writes the aggregates, leaderboards and `report.html` in about 1 s, with
  pandas and plotly imported on a background thread while the items run.

The cached re-run (d), `-n 0`, 2000 items (per-phase timestamps and py-spy `--gil`, from
profiling runs): start-up to the first item about 0.65 s (collection 0.3 s), the items about
1.3 s (0.65 ms each, two thirds of it pytest's own protocol), the session end about 0.5 s, of
which importing pandas is 0.35-0.5 s. The imports' background thread starts only once a call is
under way: in a run answered wholly from the cache it shared the interpreter with the items
and cost them 0.6 s (2.0 s for the items where they now take 1.3 s), more than the import
itself costs at the end.

RAG metrics beside Ragas (not measured by `run.py`): [ragas-crosscheck.md](ragas-crosscheck.md),
written by `benchmarks/ragas_crosscheck.py`.
"""


def render(sections: dict[str, Section], machine: dict[str, str]) -> str:
    """The whole of RESULTS.md."""
    lines = [
        "# Benchmark results",
        "",
        f"Rendered {now_iso()} by `benchmarks/run.py` (see `benchmarks/README.md`). "
        "Each section says when and with which command it was measured.",
        "",
        "## Machine",
        "",
        "As recorded by the latest measuring run.",
        "",
        *md_table(("fact", "value"), sorted(machine.items())),
        "",
        "## Targets (issue 3, section 5)",
        "",
        *md_table(
            ("target", "measured", "verdict"),
            [(c.target, c.measured, c.verdict) for c in target_checks(sections)],
        ),
        "",
        *_peers_targets(sections),
        *startup_limit_lines(),
    ]
    for name in TITLES:
        if name != "peers":
            lines += _section_lines(name, sections)
    lines += ["## (e) Peak memory", "", *memory_table(sections), ""]
    lines += [*_section_lines("peers", sections), "## Notes", "", _NOTES]
    return "\n".join(lines)


def _peers_targets(sections: dict[str, Section]) -> list[str]:
    """Issue 24's targets, with the command that measured them."""
    section = sections.get("peers")
    how = (
        f"Medians of section (f), measured {section.date} with `{section.command}`."
        if section
        else "Not measured yet: `.venv/bin/python benchmarks/run.py --peers --runs 3`."
    )
    checks = [(c.target, c.measured, c.verdict) for c in peers_checks(sections)]
    scale = [(c.target, c.measured, c.verdict) for c in issue24_scale_checks(sections)]
    return [
        "## Targets (issue 24, peer-comparable speed)",
        "",
        how,
        "",
        *md_table(("target", "measured", "verdict"), checks),
        "",
        "Issue 24's bounds on sections (a), (c) and (d), each measured with the command its "
        "section names:",
        "",
        *md_table(("target", "measured", "verdict"), scale),
        "",
    ]


def _section_lines(name: str, sections: dict[str, Section]) -> list[str]:
    section = sections.get(name)
    if section is None:
        return [f"## {TITLES[name]}", "", "Not measured yet.", ""]
    size = " (`--quick`: sizes divided by 10)" if section.quick else ""
    settings = ", ".join(f"{key}={value}" for key, value in section.settings.items())
    return [
        f"## {TITLES[name]}",
        "",
        f"Measured {section.date}{size} with `{section.command}`, plugin revision "
        f"{section.revision or 'not recorded (see Machine)'}.",
        "",
        f"Settings: {settings}.",
        "",
        f"Load average (1, 5, 15 min) before: {section.load_before or DASH}; "
        f"after: {section.load_after or DASH}.",
        "",
        *TABLES[name](section, sections),
        "",
        *([SECTION_NOTES[name]] if name in SECTION_NOTES else []),
    ]
