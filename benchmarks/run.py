"""Benchmark pytest-llmbench against a fake OpenAI-compatible server; write RESULTS.md.

    .venv/bin/python benchmarks/run.py --all             # every scenario, full size
    .venv/bin/python benchmarks/run.py --all --quick     # every scenario, sizes / 10
    .venv/bin/python benchmarks/run.py --startup --collection
    .venv/bin/python benchmarks/run.py --peers --runs 3   # issue 24's targets

Scenarios (issue 3, section 5): ``--throughput`` (a), ``--startup`` (b), ``--collection`` (c),
``--cached`` (d); peak memory (e) is measured in every cell. Issue 24: ``--peers`` (f), the
peer-comparable speed scenario beside the raw aiohttp floor (``floor.py``). Each selected
scenario replaces its section in ``benchmarks/results.json``, and ``benchmarks/RESULTS.md`` is
rendered from all stored sections. Every subprocess is bounded by a timeout and stopped on
Ctrl-C.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from harness import BENCH_DIR, ServerOptions
from peers import peers
from report import (
    Section,
    git_revision,
    load_average,
    load_machine,
    load_sections,
    machine_facts,
    now_iso,
    render,
    save_sections,
)
from scenarios import (
    DEFAULT_PEERS_N,
    BenchContext,
    Row,
    cached,
    collection,
    startup,
    throughput,
)

SCENARIOS: dict[str, Callable[[BenchContext], list[Row]]] = {
    # Start-up first: the throughput targets are judged against it.
    "startup": startup,
    "collection": collection,
    "throughput": throughput,
    "cached": cached,
    "peers": peers,
}
DEFAULT_N = 2000
DEFAULT_SEQ_N = 200
DEFAULT_COLLECT_N = 10_000
QUICK_FACTOR = 10


def _int_list(raw: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in raw.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a comma list of integers, got {raw!r}"
        ) from None
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"expected non-negative integers, got {raw!r}")
    return values


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description="Benchmark pytest-llmbench; write RESULTS.md")
    pick = parser.add_argument_group("scenarios (at least one, or --all)")
    pick.add_argument("--all", action="store_true", help="Every scenario")
    for name in SCENARIOS:
        pick.add_argument(f"--{name}", action="store_true", help=f"Scenario: {name}")
    size = parser.add_argument_group("sizes")
    size.add_argument("--quick", action="store_true", help="Divide default sizes by 10 (smoke)")
    size.add_argument("--n", type=int, help=f"Items per throughput/cached run ({DEFAULT_N})")
    size.add_argument("--seq-n", type=int, help=f"Items for one-at-a-time cells ({DEFAULT_SEQ_N})")
    size.add_argument("--collect-n", type=int, help=f"Items to collect ({DEFAULT_COLLECT_N})")
    size.add_argument("--peers-n", type=int, help=f"Items per --peers run ({DEFAULT_PEERS_N})")
    size.add_argument("--concurrency", type=_int_list, default=(1, 8, 32, 64), help="1,8,32,64")
    size.add_argument("--workers", type=_int_list, default=(0, 2), help="-n values: 0,2")
    srv = parser.add_argument_group("fake server")
    srv.add_argument("--ttft", type=float, default=0.25, help="Seconds to the first byte")
    srv.add_argument("--token-delay", type=float, default=0.0, help="Seconds between chunks")
    srv.add_argument("--tokens", type=int, default=20, help="Words per answer")
    srv.add_argument("--fault-rate", type=float, default=0.0, help="Probability of a fault")
    srv.add_argument("--faults", default="429,500,timeout,drop,malformed", help="Fault kinds")
    srv.add_argument("--seed", type=int, default=1, help="Seed of the fault dice")
    srv.add_argument("--rpm-limit", type=int, default=0, help="Server-enforced requests/min")
    out = parser.add_argument_group("runs and output")
    out.add_argument(
        "--pytest-arg", action="append", default=[], help="Extra pytest flag (repeatable)"
    )
    out.add_argument("--timeout-cap", type=float, default=1800.0, help="Max seconds per run")
    out.add_argument(
        "--runs", type=int, default=1,
        help="Run every cell this many times and keep the run of median wall time (default 1)",
    )  # fmt: skip
    out.add_argument("--results-md", type=Path, default=BENCH_DIR / "RESULTS.md")
    out.add_argument("--results-json", type=Path, default=BENCH_DIR / "results.json")
    out.add_argument("--no-write", action="store_true", help="Print only; write no file")
    out.add_argument("--keep-workdir", action="store_true", help="Keep the temporary folder")
    out.add_argument("--render", action="store_true", help="Only re-render RESULTS.md from JSON")
    args = parser.parse_args(argv)
    if not args.render and not args.all and not any(getattr(args, name) for name in SCENARIOS):
        parser.error(
            "choose scenarios (--throughput, --startup, --collection, --cached, --peers) or --all"
        )
    return args


def _size(explicit: int | None, default: int, quick: bool) -> int:
    """An explicit size wins; ``--quick`` divides only the defaults."""
    if explicit is not None:
        return explicit
    return max(1, default // QUICK_FACTOR) if quick else default


def build_context(args: argparse.Namespace, workdir: Path) -> BenchContext:
    """Sizes and settings from the command line."""
    server = ServerOptions(
        ttft_s=args.ttft,
        token_delay_s=args.token_delay,
        tokens=args.tokens,
        fault_rate=args.fault_rate,
        faults=args.faults,
        seed=args.seed,
        rpm_limit=args.rpm_limit,
    )
    n = _size(args.n, DEFAULT_N, args.quick)
    return BenchContext(
        quick=args.quick,
        n=n,
        seq_n=min(n, _size(args.seq_n, DEFAULT_SEQ_N, args.quick)),
        collect_n=_size(args.collect_n, DEFAULT_COLLECT_N, args.quick),
        concurrencies=args.concurrency,
        workers=args.workers,
        server=server,
        extra=tuple(args.pytest_arg),
        workdir=workdir,
        timeout_cap_s=args.timeout_cap,
        runs=max(1, args.runs),
        peers_n=_size(args.peers_n, DEFAULT_PEERS_N, args.quick),
    )


def _settings(ctx: BenchContext, name: str) -> dict[str, object]:
    server = ctx.server
    settings: dict[str, object] = {
        "runs per cell": ctx.runs,
        "ttft_s": server.ttft_s,
        "token_delay_s": server.token_delay_s,
        "tokens": server.tokens,
    }
    if server.fault_rate:
        settings.update(fault_rate=server.fault_rate, faults=server.faults)
    if server.rpm_limit:
        settings["rpm_limit"] = server.rpm_limit
    if name in ("throughput", "cached"):
        settings["N"] = ctx.n
    if name == "throughput":
        settings["N one-at-a-time"] = ctx.seq_n
    if name == "collection":
        settings["N"] = ctx.collect_n
    if name == "peers":
        settings["N"] = ctx.peers_n
    if ctx.extra:
        settings["extra pytest flags"] = " ".join(ctx.extra)
    return settings


def run_scenarios(args: argparse.Namespace, ctx: BenchContext) -> dict[str, Section]:
    """Run the selected scenarios in order; each gives one section."""
    command = ".venv/bin/python benchmarks/run.py " + shlex.join(sys.argv[1:])
    sections: dict[str, Section] = {}
    for name, scenario in SCENARIOS.items():
        if not (args.all or getattr(args, name)):
            continue
        print(f"== {name}", file=sys.stderr, flush=True)
        date, load_before = now_iso(), load_average()
        rows = scenario(ctx)
        section = Section(name, date, command, ctx.quick, _settings(ctx, name), rows)
        section.load_before, section.load_after = load_before, load_average()
        section.revision = git_revision()
        sections[name] = section
    return sections


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    # SIGTERM takes the Ctrl-C path, so every finally block stops what it started.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Run, store, render and print."""
    args = parse_args(argv)
    if args.render:
        return write_results(args, {})
    signal.signal(signal.SIGTERM, _raise_interrupt)
    workdir = Path(tempfile.mkdtemp(prefix="llmbench-bench-"))
    try:
        measured = run_scenarios(args, build_context(args, workdir))
    except KeyboardInterrupt:
        print("interrupted: every started process was stopped", file=sys.stderr)
        return 130
    finally:
        if args.keep_workdir:
            print(f"work folder kept: {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return write_results(args, measured)


def write_results(args: argparse.Namespace, measured: dict[str, Section]) -> int:
    """Merge ``measured`` into results.json, render RESULTS.md and print it."""
    stored = None if measured else load_machine(args.results_json)
    machine = stored or machine_facts()
    if args.no_write:
        print(render(measured, machine))
        return 0
    sections = load_sections(args.results_json)
    sections.update(measured)
    ordered = {name: sections[name] for name in SCENARIOS if name in sections}
    save_sections(args.results_json, ordered, machine)
    text = render(ordered, machine)
    args.results_md.write_text(text, encoding="utf-8")
    print(text)
    print(f"wrote {args.results_md} and {args.results_json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
