"""Start-up at the limit of a pytest plugin (issue 37, point 8), measured pair by pair.

    .venv/bin/python benchmarks/startup_limit.py --python /tmp/wheel-venv/bin/python \
        [--pairs 6] [--out benchmarks/startup-limit.md]

The limit of a pytest plugin is pytest's own start-up on one plain test plus the raw aiohttp
client (``floor.py``) making the same calls: whole processes, against one fake server (0.25 s to
the first token, 20-word answers). Two cells, as in the peers scenario: 1 item with the plugin's
default options, and N = 400 at C = 32 with ``--stream=off``. Each runs with compiled files
written as usual and with ``PYTHONDONTWRITEBYTECODE=1`` (as Docker CI images set it; pytest's
cached rewritten modules are deleted first, since such an image never has them).

A and B run in turn, A B A B ..., after one unmeasured pair, and A / B is taken pair by pair (the
machine's speed drifts); the table gives the median of the ratios and their spread:

- A: ``python -m pytest SUITE -q -p no:cacheprovider --models=bench --results-dir=OUT -n 0``;
- B: ``python -m pytest PLAIN -q -p no:cacheprovider -p no:llmbench`` (one plain test), then
  ``python floor.py`` with the same N, C, prompts and system prompt; B's figures are the sum.

``--python`` names the interpreter whose pytest-llmbench is measured: a wheel installed in its
own venv (the issue measures that, not an editable checkout). The public equivalent of one pair
is ``/usr/bin/time -v`` around A, then around B's two commands.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from floor import DEFAULT_SYSTEM, capital_prompt
from harness import (
    BENCH_DIR,
    MODEL_NAME,
    FakeServer,
    ProcessRun,
    ServerOptions,
    bench_env,
    run_bounded,
    suite_system,
    write_profile,
    write_suite,
)
from report import git_revision, load_average, now_iso

FLOOR_SCRIPT = BENCH_DIR / "floor.py"
#: Issue 37's bound: the plugin's wall time over the limit's, median of the pairs.
TARGET = 1.15
_PLAIN_TEST = "def test_plain():\n    assert sum(range(4)) == 6\n"
_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class LimitCell:
    """One cell: how many items, how many in flight, and the plugin's flags."""

    n: int
    concurrency: int
    flags: tuple[str, ...]

    @property
    def label(self) -> str:
        """How the table names the cell."""
        if self.n == 1:
            return "1 item, default options"
        return f"N={self.n}, C={self.concurrency}, --stream=off"


CELLS = (LimitCell(1, 1, ()), LimitCell(400, 32, ("--concurrency=32", "--stream=off")))


@dataclass(frozen=True)
class PairFigures:
    """What one A B pair measured: A's and B's wall and CPU seconds."""

    a_wall: float
    a_cpu: float
    b_wall: float
    b_cpu: float


@dataclass(frozen=True)
class Suite:
    """An eval suite of one cell and the system prompt its cases send (the floor sends it too)."""

    cell: LimitCell
    root: Path
    system: str


@dataclass(frozen=True)
class CellResult:
    """A cell's measured pairs under one bytecode setting, and the load around them."""

    cell: LimitCell
    no_bytecode: bool
    figures: tuple[PairFigures, ...]
    load_before: str
    load_after: str


@dataclass(frozen=True)
class Projects:
    """The folders the commands run in."""

    workdir: Path
    plain: Path
    api_base: str


def _env(no_bytecode: bool) -> dict[str, str]:
    env = bench_env()
    if no_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _checked(run: ProcessRun, what: str) -> ProcessRun:
    if run.timed_out or run.returncode != 0:
        sys.exit(f"{what} failed (exit {run.returncode}):\n{run.tail()}")
    return run


def _pair(python: str, projects: Projects, suite: Suite, env: dict[str, str]) -> PairFigures:
    """One A run, then one B (pytest on the plain test, then the floor)."""
    out = projects.workdir / "out" / uuid.uuid4().hex[:8]
    cell = suite.cell
    a_argv = [python, "-m", "pytest", str(suite.root), "-q", "-p", "no:cacheprovider"]
    a_argv += [f"--models={MODEL_NAME}", f"--results-dir={out}", "-n", "0", *cell.flags]
    a = _checked(run_bounded(a_argv, suite.root, env, _TIMEOUT_S), "the plugin's run")
    plain = [python, "-m", "pytest", str(projects.plain), "-q", "-p", "no:cacheprovider"]
    plain += ["-p", "no:llmbench"]
    b1 = _checked(run_bounded(plain, projects.plain, env, _TIMEOUT_S), "pytest")
    floor = [python, str(FLOOR_SCRIPT), f"--api-base={projects.api_base}", f"--n={cell.n}"]
    floor += [f"--concurrency={cell.concurrency}", f"--system={suite.system}"]
    floor += [f"--out={out}-floor.jsonl"]
    b2 = _checked(run_bounded(floor, projects.workdir, env, _TIMEOUT_S), "the floor")
    return PairFigures(a.wall_s, a.cpu_s, b1.wall_s + b2.wall_s, b1.cpu_s + b2.cpu_s)


def _projects(workdir: Path, api_base: str) -> tuple[Projects, list[Suite]]:
    """The plain project and one eval suite per cell (a unique system prompt each)."""
    plain = workdir / "plain"
    plain.mkdir(parents=True, exist_ok=True)
    (plain / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (plain / "test_plain.py").write_text(_PLAIN_TEST, encoding="utf-8")
    write_profile(plain, "http://127.0.0.1:9/v1")
    suites = []
    for cell in CELLS:
        salt, root = uuid.uuid4().hex, workdir / f"suite-{cell.n}"
        write_suite(root, cell.n, api_base, salt, prompt=capital_prompt, system=DEFAULT_SYSTEM)
        suites.append(Suite(cell, root, suite_system(DEFAULT_SYSTEM, salt)))
    return Projects(workdir, plain, api_base), suites


def _forget_rewritten(python: str) -> None:
    """Delete pytest's cached rewritten modules of the measured venv: an image built with
    ``PYTHONDONTWRITEBYTECODE=1`` never has them, and a stale one would hide a rewrite."""
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    for pyc in Path(purelib.stdout.strip()).rglob("*-pytest-*.pyc"):
        pyc.unlink(missing_ok=True)


def measure_cell(
    python: str, projects: Projects, suite: Suite, no_bytecode: bool, pairs: int
) -> CellResult:
    """``pairs`` measured A B pairs after one unmeasured one."""
    env = _env(no_bytecode)
    if no_bytecode:
        _forget_rewritten(python)
    load_before = load_average()
    _pair(python, projects, suite, env)
    figures = [_pair(python, projects, suite, env) for _ in range(pairs)]
    return CellResult(suite.cell, no_bytecode, tuple(figures), load_before, load_average())


def _spread(values: list[float], digits: int = 2) -> str:
    med = statistics.median(values)
    return f"{med:.{digits}f} [{min(values):.{digits}f}, {max(values):.{digits}f}]"


def result_row(result: CellResult) -> str:
    """One Markdown row: medians of A and B, and the pair-by-pair ratios with their spread."""
    f = result.figures
    wall = [p.a_wall / p.b_wall for p in f]
    cpu = [p.a_cpu / p.b_cpu for p in f]
    cells = (
        result.cell.label,
        "PYTHONDONTWRITEBYTECODE=1" if result.no_bytecode else "written (default)",
        str(len(f)),
        _spread([p.a_wall for p in f]),
        _spread([p.b_wall for p in f]),
        _spread(wall),
        _spread(cpu),
        "met" if statistics.median(wall) <= TARGET else "NOT met",
        f"{result.load_before} / {result.load_after}",
    )
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| cell | bytecode | pairs | A wall s | B wall s (pytest + floor) | wall A / B | CPU A / B "
    f"| wall A / B <= {TARGET} | load average before / after |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def intro(args: argparse.Namespace, argv: list[str]) -> str:
    """When, with which command and on which revision, and how to read the table."""
    command = shlex.join(["benchmarks/startup_limit.py", *argv])
    return (
        f"Measured {now_iso()} with `{command}`, plugin revision {args.revision} (a wheel in "
        f"its own venv), {args.pairs} pairs per cell after one unmeasured pair. A is the "
        "plugin's run, B pytest's own start-up on one plain test plus the raw floor making the "
        f"same calls; the target is A / B <= {TARGET} in wall time. Each figure is the median "
        "over the pairs, [min, max] its spread; the ratios are taken pair by pair.\n"
    )


def main(argv: list[str] | None = None) -> int:
    """Measure every cell under both bytecode settings and print (or write) the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--python", default=sys.executable, help="The measured interpreter")
    parser.add_argument("--pairs", type=int, default=6, help="Measured pairs per cell")
    parser.add_argument("--out", type=Path, help="Write the Markdown table here")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/llmbench-startup-limit"))
    parser.add_argument("--revision", default=None, help="The revision the wheel was built from")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    args.revision = args.revision or git_revision()
    rows = []
    with FakeServer(ServerOptions(), args.workdir / "server") as server:
        projects, suites = _projects(args.workdir, server.api_base)
        for no_bytecode in (False, True):
            for suite in suites:
                rows.append(
                    result_row(measure_cell(args.python, projects, suite, no_bytecode, args.pairs))
                )
                print(rows[-1], file=sys.stderr, flush=True)
    text = intro(args, argv) + "\n" + HEADER + "\n" + "\n".join(rows) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
