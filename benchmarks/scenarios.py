"""The benchmark scenarios of issue 3, section 5: each returns the rows it measured.

- throughput: N items at 250 ms per call under ``-n 0`` / ``-n 2``, without ``--concurrency``
  (today's default) and with ``--concurrency`` 1, 8, 32, 64;
- start-up: ``import litellm``, pytest with no eval file, and 1 item;
- collection: ``--collect-only`` of 10,000 items;
- cached: a fully cached re-run of N items (``--cache=use`` twice, the second one timed).

Peak memory and CPU time are measured in every row. Cells that may run one call at a time (the
plugin's default concurrency, and ``--concurrency 1``) use ``seq_n`` items (200), since 2000
sequential calls take 500 s+. Issue 24's peer-comparable scenario lives in ``peers.py`` and
measures its cells with ``measure`` and ``measure_command`` from here.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import (
    FakeServer,
    ProcessRun,
    ServerOptions,
    bench_env,
    count_records,
    numbered_prompt,
    pytest_argv,
    run_bounded,
    write_profile,
    write_suite,
)

#: Base seconds granted to every run (interpreter, imports, xdist start), before the calls.
_TIMEOUT_BASE_S = 90.0
_TIMEOUT_FACTOR = 3.0
_UNUSED_API_BASE = "http://127.0.0.1:9/v1"
#: Runs with fewer items give no marginal CPU per item: start-up noise would swamp it.
MIN_ITEMS_PER_ITEM_CPU = 100
#: Items per run of the peer-comparable scenario (issue 24).
DEFAULT_PEERS_N = 400


@dataclass
class Row:
    """One measured cell of a scenario table."""

    label: str
    n: int
    workers: int
    concurrency: int | None = None
    status: str = "ok"
    wall_s: float | None = None
    peak_rss_mib: float | None = None
    cpu_s: float | None = None
    records: int | None = None
    outcomes: dict[str, int] = field(default_factory=dict)
    server_requests: int | None = None
    max_in_flight: int | None = None
    limit_s: float | None = None
    collect_s: float | None = None
    note: str = ""
    peak_process_rss_mib: float | None = None
    """The highest RSS of a single process (``peak_rss_mib`` sums the process tree)."""
    processes: int | None = None
    """The most processes the run had at once (pytest and its xdist workers)."""
    workers_flag: str = ""
    """``-n``'s value when it is not a number (``auto``; ``workers`` is then 0)."""
    client: str = ""
    """What ran the cell in the peer-comparable scenario: ``floor``, ``pytest-llmbench``, or
    ``pytest`` (no eval file); empty in the other scenarios."""
    stream: bool = False
    """Whether every call streamed its answer."""

    @property
    def ok(self) -> bool:
        """Whether the cell ran and produced what it should."""
        return self.status == "ok"


@dataclass(frozen=True)
class BenchContext:
    """Sizes and settings shared by the scenarios."""

    quick: bool
    n: int
    seq_n: int
    collect_n: int
    concurrencies: tuple[int, ...]
    workers: tuple[int, ...]
    server: ServerOptions
    extra: tuple[str, ...]
    workdir: Path
    timeout_cap_s: float
    #: runs per cell; the cell keeps the run of median wall time (the machine's speed varies)
    runs: int = 1
    #: items per run of the peer-comparable scenario
    peers_n: int = DEFAULT_PEERS_N

    def timeout_s(self, n: int, concurrency: int) -> float:
        """A generous bound for a run of ``n`` calls, ``concurrency`` at a time."""
        expected = n * self.server.latency_s / max(1, concurrency)
        return min(self.timeout_cap_s, _TIMEOUT_BASE_S + _TIMEOUT_FACTOR * expected)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


def cpu_ms_per_item(row: Row, start_cpu_s: float | None) -> float | None:
    """CPU ms per item past start-up: (the row's CPU s - a 1-item run's CPU s) / (N - 1), the
    marginal cost of an item; None for runs too small to tell it from start-up noise."""
    if row.cpu_s is None or start_cpu_s is None or row.n < MIN_ITEMS_PER_ITEM_CPU:
        return None
    return 1000 * (row.cpu_s - start_cpu_s) / (row.n - 1)


def progress(scenario: str, row: Row) -> None:
    """One line on stderr per measured cell."""
    wall = "-" if row.wall_s is None else f"{row.wall_s:.2f} s"
    rss = "-" if row.peak_rss_mib is None else f"{row.peak_rss_mib:.0f} MiB"
    print(f"[{scenario}] {row.label}: {row.status}, {wall}, {rss}", file=sys.stderr, flush=True)


def _status(run: ProcessRun, n: int, records: int | None, collect_only: bool) -> str:
    if run.timed_out:
        return f"timeout after {run.wall_s:.0f} s"
    flags = run.unavailable_flags()
    if flags:
        return f"flag not available ({', '.join(flags)})"
    if collect_only:
        collected = run.collected()
        ok = run.returncode == 0 and collected is not None and collected[0] == n
        return "ok" if ok else f"exit {run.returncode}, collected {collected}"
    if run.returncode not in (0, 1):
        return f"exit {run.returncode}"
    if records != n:
        return f"{records} of {n} records"
    return "ok"


def measure(
    ctx: BenchContext,
    row: Row,
    root: Path,
    extra: list[str],
    server: FakeServer | None,
    collect_only: bool = False,
    expect: tuple[str, ...] = (),
) -> Row:
    """Run pytest on ``root`` ``ctx.runs`` times and fill ``row`` with the run of median wall
    time (every run's wall time goes into the note when there are several)."""
    workers = row.workers_flag or row.workers

    def argv(out_dir: Path) -> list[str]:
        return pytest_argv(root, out_dir, workers, [*extra, *ctx.extra])

    return measure_command(ctx, row, root, argv, server, collect_only, expect)


def measure_command(
    ctx: BenchContext,
    row: Row,
    cwd: Path,
    argv: Callable[[Path], list[str]],
    server: FakeServer | None,
    collect_only: bool = False,
    expect: tuple[str, ...] = (),
) -> Row:
    """Run ``argv(results folder)`` in ``cwd`` ``ctx.runs`` times and fill ``row`` with the run
    of median wall time; ``expect`` names files the run must leave in its results folder."""
    attempts = [_attempt(ctx, row, cwd, argv, server) for _ in range(ctx.runs)]
    attempts.sort(key=lambda attempt: attempt[0].wall_s)
    run, out_dir, stats = attempts[len(attempts) // 2]
    # CPU time varies apart from wall time (a run's wall is often the server's): its median is
    # taken on its own, not read from the run of median wall time.
    cpus = sorted(attempt[0].cpu_s for attempt in attempts if attempt[0].cpu_s is not None)
    if len(attempts) > 1:
        walls = ", ".join(f"{attempt[0].wall_s:.1f}" for attempt in attempts)
        shown = ", ".join(f"{cpu:.2f}" for cpu in cpus)
        row.note = _join(
            row.note, f"median of {len(attempts)} runs (wall s: {walls}; CPU s: {shown})"
        )
    records, outcomes = (None, {}) if collect_only else count_records(out_dir)
    row.status = _status(run, row.n, records, collect_only)
    if row.status.startswith("flag not available"):
        return row  # nothing was measured: pytest stopped at its argument parser
    missing = [name for name in expect if not (out_dir / name).is_file()]
    if row.ok and missing:
        row.status = f"not written: {', '.join(missing)}"
    row.wall_s, row.peak_rss_mib = run.wall_s, run.peak_rss_mib
    row.cpu_s = cpus[len(cpus) // 2] if len(cpus) == len(attempts) else run.cpu_s
    row.peak_process_rss_mib, row.processes = run.peak_process_rss_mib, run.processes
    row.records, row.outcomes = records, outcomes
    collected = run.collected()
    row.collect_s = collected[1] if collected else None
    if stats is not None:
        row.server_requests, row.max_in_flight = stats["requests"], stats["max_in_flight"]
    if not row.ok:
        print(f"--- output tail of {row.label}:\n{run.tail()}", file=sys.stderr, flush=True)
    return row


def _attempt(
    ctx: BenchContext,
    row: Row,
    cwd: Path,
    argv: Callable[[Path], list[str]],
    server: FakeServer | None,
) -> tuple[ProcessRun, Path, dict[str, Any] | None]:
    """One bounded run: the run, its results folder and the server's counters."""
    out_dir = ctx.workdir / "out" / f"{_slug(row.label)}-{uuid.uuid4().hex[:6]}"
    if server is not None:
        server.reset_stats()
    timeout = ctx.timeout_s(row.n, row.concurrency or max(1, row.workers))
    run = run_bounded(argv(out_dir), cwd, bench_env(), timeout)
    return run, out_dir, server.stats() if server is not None else None


def fresh_suite(
    ctx: BenchContext,
    name: str,
    n: int,
    api_base: str,
    prompt: Callable[[int], str] = numbered_prompt,
    system: str = "Benchmark run.",
) -> Path:
    """A fresh suite; a unique system prompt keeps any response cache from answering it."""
    root = ctx.workdir / "suites" / f"{_slug(name)}-{uuid.uuid4().hex[:6]}"
    write_suite(root, n, api_base, salt=uuid.uuid4().hex, prompt=prompt, system=system)
    return root


# -- (a) throughput -----------------------------------------------------------------------------


def throughput(ctx: BenchContext) -> list[Row]:
    """Wall time against the physical limit N x latency / concurrency, per ``-n`` and concurrency."""
    rows: list[Row] = []
    with FakeServer(ctx.server, ctx.workdir / "server-throughput") as server:
        for workers in ctx.workers:
            for concurrency in (None, *ctx.concurrencies):
                rows.append(_throughput_cell(ctx, server, workers, concurrency))
                progress("throughput", rows[-1])
    return rows


def _throughput_cell(
    ctx: BenchContext, server: FakeServer, workers: int, concurrency: int | None
) -> Row:
    # The plugin's default concurrency is not ours to know: such a cell runs at the sequential
    # size, and its limit uses the concurrency the server saw.
    sequential = concurrency is None or concurrency == 1
    n = ctx.seq_n if sequential else ctx.n
    flag = f"--concurrency={concurrency}" if concurrency else "default concurrency"
    row = Row(label=f"-n {workers}, {flag}", n=n, workers=workers, concurrency=concurrency)
    if sequential and n != ctx.n:
        row.note = f"run at N={n}"
    root = fresh_suite(ctx, row.label, n, server.api_base)
    extra = [f"--concurrency={concurrency}"] if concurrency else []
    measure(ctx, row, root, extra, server)
    effective = concurrency or row.max_in_flight
    if concurrency is None and effective:
        row.note = _join(row.note, f"limit at the concurrency the server saw ({effective})")
    if effective:
        row.limit_s = n * ctx.server.latency_s / effective
    if row.ok and row.server_requests is not None and row.server_requests < n:
        row.note = _join(row.note, f"only {row.server_requests} requests reached the server")
    return row


def _join(*parts: str) -> str:
    return "; ".join(part for part in parts if part)


# -- (b) start-up -------------------------------------------------------------------------------


def startup(ctx: BenchContext) -> list[Row]:
    """Fixed costs: ``import litellm``, pytest with the plugin and no eval file, and 1 item."""
    rows = [_import_litellm(ctx), _no_eval_file(ctx)]
    progress("startup", rows[0])
    progress("startup", rows[1])
    with FakeServer(ctx.server, ctx.workdir / "server-startup") as server:
        for workers in ctx.workers:
            rows.append(_items_run(ctx, server, 1, workers))
            if workers > 1:
                # With one item only one worker calls a model; here each worker does.
                rows.append(_items_run(ctx, server, workers, workers, "one per worker"))
    return rows


def _items_run(ctx: BenchContext, server: FakeServer, n: int, workers: int, note: str = "") -> Row:
    row = Row(label=f"{n} item{'s' if n > 1 else ''}, -n {workers}", n=n, workers=workers)
    row.note = note
    measure(ctx, row, fresh_suite(ctx, row.label, n, server.api_base), [], server)
    progress("startup", row)
    return row


def _import_litellm(ctx: BenchContext) -> Row:
    row = Row(label="python -c 'import litellm'", n=0, workers=0, note="the import alone")
    argv = [sys.executable, "-c", "import litellm"]
    run = run_bounded(argv, ctx.workdir, bench_env(), ctx.timeout_s(0, 1))
    row.status = "ok" if run.returncode == 0 else f"exit {run.returncode}"
    row.wall_s, row.peak_rss_mib, row.cpu_s = run.wall_s, run.peak_rss_mib, run.cpu_s
    return row


def _no_eval_file(ctx: BenchContext) -> Row:
    row = Row(label="pytest, no eval file", n=0, workers=0, note="pytest + plugin, no item")
    root = ctx.workdir / "suites" / f"empty-{uuid.uuid4().hex[:6]}"
    root.mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    write_profile(root, _UNUSED_API_BASE)
    out_dir = ctx.workdir / "out" / root.name
    run = run_bounded(pytest_argv(root, out_dir, 0, []), root, bench_env(), ctx.timeout_s(0, 1))
    # Exit code 5: no tests collected, which is what this row measures.
    row.status = "ok" if run.returncode == 5 else f"exit {run.returncode}"
    row.wall_s, row.peak_rss_mib, row.cpu_s = run.wall_s, run.peak_rss_mib, run.cpu_s
    return row


# -- (c) collection -----------------------------------------------------------------------------


def collection(ctx: BenchContext) -> list[Row]:
    """``--collect-only -q`` of ``collect_n`` items (no model is called)."""
    row = Row(label=f"--collect-only, {ctx.collect_n} items", n=ctx.collect_n, workers=0)
    root = fresh_suite(ctx, "collect", ctx.collect_n, _UNUSED_API_BASE)
    measure(ctx, row, root, ["--collect-only"], None, collect_only=True)
    progress("collection", row)
    return [row]


# -- (d) cached re-run ---------------------------------------------------------------------------


def cached(ctx: BenchContext) -> list[Row]:
    """Fill the response cache with N items, then time a fully cached re-run."""
    with FakeServer(ctx.server, ctx.workdir / "server-cached") as server:
        root = fresh_suite(ctx, "cached", ctx.n, server.api_base)
        fill = _cache_fill(ctx, server, root)
        progress("cached", fill)
        rerun = Row(label="re-run: --cache=use", n=ctx.n, workers=0)
        if fill.ok:
            measure(ctx, rerun, root, ["--cache=use"], server)
            if rerun.server_requests:
                rerun.note = f"{rerun.server_requests} requests reached the server (expected 0)"
        else:
            rerun.status = f"not run: the fill run gave {fill.status}"
        progress("cached", rerun)
    return [fill, rerun]


def _cache_fill(ctx: BenchContext, server: FakeServer, root: Path) -> Row:
    # Once: a second fill of the same cache would be a cached run itself.
    ctx = dataclasses.replace(ctx, runs=1)
    concurrency = 32
    fill = Row(label=f"fill: --cache=use --concurrency={concurrency}", n=ctx.n, workers=0)
    fill.concurrency = concurrency
    measure(ctx, fill, root, ["--cache=use", f"--concurrency={concurrency}"], server)
    if fill.status == "flag not available (--concurrency)":
        # The cache exists without the concurrency flag: fill it one call at a time.
        fill = Row(label="fill: --cache=use (one call at a time)", n=ctx.n, workers=0)
        measure(ctx, fill, root, ["--cache=use"], server)
    return fill
