"""The peer-comparable speed scenario (issue 24): pytest-llmbench beside the raw floor.

Against one fake server (``--ttft`` 0.25 s, 20-word answers), in one run and in this order, so
that each floor cell runs just before the plugin cells it is compared with:

- ``pytest`` in a project with a plain test and no eval file, with the plugin and with
  ``-p no:llmbench`` (the plugin's cost to a run that has no eval file);
- 1 item: the floor (``floor.py``), pytest-llmbench ``-n 0`` and ``-n auto`` (default options:
  results and report written as in a normal run), and ``-n 0`` with the flags of the N-item
  cells below (their start-up, which CPU per item past start-up subtracts);
- N = 400 at C = 8 and C = 32: the floor, then pytest-llmbench ``-n 0 --stream=off``; at C = 32
  also ``-n 2`` and ``-n auto``;
- N = 400 at C = 32 streamed (20 chunks an answer): the floor ``--stream``, then pytest-llmbench
  ``-n 0 --stream=all``.

Every cell runs ``ctx.runs`` times (3 for the targets) and keeps the run of median wall time.
"""

from __future__ import annotations

import shlex
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from floor import DEFAULT_SYSTEM, capital_prompt
from harness import BENCH_DIR, FakeServer, bench_env, run_bounded, suite_system, write_profile
from scenarios import BenchContext, Row, fresh_suite, measure, measure_command, progress

FLOOR_SCRIPT = BENCH_DIR / "floor.py"
FLOOR = "floor"
PLUGIN = "pytest-llmbench"
PLAIN = "pytest"
PEER_CONCURRENCIES = (8, 32)
#: What a normal run leaves in its results folder; the plugin's cells check both.
RESULT_FILES = ("results.jsonl", "report.html")
_PLAIN_TEST = "def test_plain():\n    assert sum(range(4)) == 6\n"
_PLAIN_FILES = {"pytest.ini", "profiles", "test_plain.py", "__pycache__"}


@dataclass(frozen=True)
class PeerCell:
    """One cell of the scenario: who runs how many items, how."""

    client: str
    """``floor`` or ``pytest-llmbench``."""
    n: int
    concurrency: int | None
    """Calls in flight; None: the plugin's default options (a run as a user starts it)."""
    workers: str = "0"
    """``-n``'s value for the plugin."""
    stream: bool = False

    @property
    def label(self) -> str:
        """How the tables name the cell."""
        who = "raw aiohttp floor" if self.client == FLOOR else f"pytest-llmbench -n {self.workers}"
        size = "1 item" if self.n == 1 else f"N={self.n}"
        conc = "" if self.concurrency is None else f", C={self.concurrency}"
        return f"{who}, {size}{conc}{', streamed' if self.stream else ''}"

    def plugin_flags(self) -> list[str]:
        """pytest-llmbench's flags: none (its defaults), or the concurrency and streaming."""
        if self.concurrency is None:
            return []
        return [f"--concurrency={self.concurrency}", f"--stream={'all' if self.stream else 'off'}"]


def peer_cells(n: int) -> list[PeerCell]:
    """The cells in the order they run."""
    top = PEER_CONCURRENCIES[-1]
    cells = [PeerCell(FLOOR, 1, 1), PeerCell(PLUGIN, 1, None), PeerCell(PLUGIN, 1, None, "auto")]
    cells += [PeerCell(PLUGIN, 1, top), PeerCell(PLUGIN, 1, top, stream=True)]
    for conc in PEER_CONCURRENCIES:
        cells += [PeerCell(FLOOR, n, conc), PeerCell(PLUGIN, n, conc)]
    cells += [PeerCell(PLUGIN, n, top, "2"), PeerCell(PLUGIN, n, top, "auto")]
    cells += [PeerCell(FLOOR, n, top, stream=True), PeerCell(PLUGIN, n, top, stream=True)]
    return cells


def peers(ctx: BenchContext) -> list[Row]:
    """Every cell of the scenario against one fake server."""
    rows = _plain_pair(ctx)
    with FakeServer(ctx.server, ctx.workdir / "server-peers") as server:
        for cell in peer_cells(ctx.peers_n):
            run = _floor if cell.client == FLOOR else _plugin
            rows.append(run(ctx, server, cell))
            progress("peers", rows[-1])
    return rows


def _row(cell: PeerCell) -> Row:
    auto = not cell.workers.isdigit()
    row = Row(label=cell.label, n=cell.n, workers=0 if auto else int(cell.workers))
    row.concurrency, row.client, row.stream = cell.concurrency, cell.client, cell.stream
    row.workers_flag = cell.workers if auto else ""
    return row


def _floor(ctx: BenchContext, server: FakeServer, cell: PeerCell) -> Row:
    row = _row(cell)
    # The same shape of system prompt as the plugin's suites: a fixed text and a unique salt.
    system = suite_system(DEFAULT_SYSTEM, uuid.uuid4().hex)

    def argv(out_dir: Path) -> list[str]:
        flags = [f"--api-base={server.api_base}", f"--n={cell.n}", f"--system={system}"]
        flags += [f"--concurrency={cell.concurrency}", f"--out={out_dir / 'results.jsonl'}"]
        return [sys.executable, str(FLOOR_SCRIPT), *flags, *(["--stream"] if cell.stream else [])]

    measure_command(ctx, row, ctx.workdir, argv, server)
    failed = row.outcomes.get("error", 0)
    if row.ok and failed:
        row.status = f"{failed} of {row.n} calls failed"
    return row


def _plugin(ctx: BenchContext, server: FakeServer, cell: PeerCell) -> Row:
    row = _row(cell)
    root = fresh_suite(ctx, row.label, cell.n, server.api_base, capital_prompt, DEFAULT_SYSTEM)
    return measure(ctx, row, root, cell.plugin_flags(), server, expect=RESULT_FILES)


def _plain_pair(ctx: BenchContext) -> list[Row]:
    """``pytest`` on a project with one plain test, a profile and no eval file: with the plugin,
    then with ``-p no:llmbench``. One unmeasured run first, so neither pays for cold caches."""
    root = ctx.workdir / "suites" / f"plain-{uuid.uuid4().hex[:6]}"
    root.mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (root / "test_plain.py").write_text(_PLAIN_TEST, encoding="utf-8")
    write_profile(root, "http://127.0.0.1:9/v1")
    base = [sys.executable, "-m", "pytest", str(root), "-q", "-p", "no:cacheprovider"]
    run_bounded(base, root, bench_env(), ctx.timeout_s(0, 1))
    rows = []
    for disable in ([], ["-p", "no:llmbench"]):
        row = Row(label=shlex.join(["pytest", *disable]) + ", no eval file", n=0, workers=0)
        row.client = shlex.join([PLAIN, *disable])
        measure_command(ctx, row, root, _fixed([*base, *disable]), None)
        left = sorted(path.name for path in root.iterdir() if path.name not in _PLAIN_FILES)
        if left and not disable:
            row.note = f"files left in the project: {', '.join(left)}"
        rows.append(row)
        progress("peers", row)
    return rows


def _fixed(argv: list[str]) -> Callable[[Path], list[str]]:
    """A command line that does not depend on the results folder."""

    def build(out_dir: Path) -> list[str]:
        return argv

    return build
