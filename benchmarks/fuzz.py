"""The long fuzzer: malformed eval files, profile files, .env files, option values, JSONL
datasets, dataset factories, workdir file names and results folders (tests/fuzzing.py), each
given to pytest in its own process with a time limit: collected, or run from the response cache
(no call is made) for the kinds whose trouble comes after collection. The corpus of earlier
findings (``fuzzing.CORPUS``) runs first, then ``--count`` seeded inputs.

    .venv/bin/python benchmarks/fuzz.py --seed 1 --count 700 --jobs 2 --write benchmarks/FUZZ.md

Each input ends as one of:
- ``clean``: a located collection error or a usage error (exit 2 or 4, or 0/5 with a collection
  error line), no traceback;
- ``accepted``: collected without error (exit 0), or run with every item ending as a record
  (exit 0 or 1: an item error is a clean outcome of a run from an empty cache);
- ``traceback``: a Python traceback frame in the output (an internal error shown to the user);
- ``internalerror``: pytest's INTERNALERROR;
- ``hang``: still running after ``--timeout`` seconds;
- ``crash``: killed by a signal (SIGSEGV, say).
The run exits 1 when any input is a traceback, an internal error, a hang or a crash.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fuzzing import CORPUS, KEY_ENV, FuzzInput, inputs, pytest_args  # noqa: E402

FRAME = re.compile(r"\.py:\d+: in |Traceback \(most recent call last\)")
BAD = ("traceback", "internalerror", "hang", "crash")


def classify(item: FuzzInput, folder: Path, timeout: float) -> tuple[str, str]:
    """Run one input; return its class and the last lines of output."""
    args = pytest_args(item, folder)
    if any("\x00" in arg for arg in args):
        return "clean", "a NUL cannot be passed in argv (the shell refuses it)"
    command = [sys.executable, "-m", "pytest", *args]
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONFAULTHANDLER": "",
        KEY_ENV: "sk-fuzz-0000000000",
    }
    try:
        done = subprocess.run(command, cwd=folder, capture_output=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return "hang", f"still running after {timeout:g} s"
    text = (done.stdout + done.stderr).decode("utf-8", "replace")
    tail = "\n".join(text.strip().splitlines()[-4:])
    if done.returncode < 0:
        return "crash", f"signal {-done.returncode}"
    if "INTERNALERROR" in text:
        return "internalerror", tail
    if FRAME.search(text):
        return "traceback", tail
    return ("accepted" if _accepted(item, done.returncode, text) else "clean"), tail


def _accepted(item: FuzzInput, returncode: int, text: str) -> bool:
    """Collected (and run, for a run) without a collection or usage error."""
    if item.runs:
        refused = "ERROR collecting" in text or "ERROR: " in text
        return returncode in (0, 1) and not refused
    return returncode == 0 and "ERROR" not in text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=700)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--write", type=Path, help="Write the figures as Markdown here")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="llmbench-fuzz-") as tmp:
        items = [item for item, *_ in CORPUS] + list(inputs(args.seed, args.count))
        with ThreadPoolExecutor(args.jobs) as pool:
            results = list(
                pool.map(lambda i: classify(i, Path(tmp) / f"i{i.index}", args.timeout), items)
            )
    wall = time.monotonic() - started
    counts = Counter(kind for kind, _ in results)
    by_kind = Counter((item.kind, result) for item, (result, _) in zip(items, results, strict=True))
    findings = [
        f"- {item.label()} -> {result}: {tail[-300:]!r}"
        for item, (result, tail) in zip(items, results, strict=True)
        if result in BAD
    ]
    report = _report(args, counts, by_kind, findings, wall)
    print(report)
    if args.write:
        args.write.write_text(report, encoding="utf-8")
    return 1 if findings else 0


def _report(
    args: argparse.Namespace,
    counts: Counter[str],
    by_kind: Counter[tuple[str, str]],
    findings: list[str],
    wall: float,
) -> str:
    classes = ("clean", "accepted", *BAD)
    kinds = sorted({kind for kind, _ in by_kind})
    rows = [
        f"| {kind} | " + " | ".join(str(by_kind[(kind, name)]) for name in classes) + " |"
        for kind in kinds
    ]
    total = "| **all** | " + " | ".join(str(counts[name]) for name in classes) + " |"
    command = (
        f"`.venv/bin/python benchmarks/fuzz.py --seed {args.seed} --count {args.count} "
        f"--jobs {args.jobs} --timeout {args.timeout:g}`"
    )
    lines = [
        "# Fuzz results",
        "",
        f"{len(CORPUS)} inputs of the corpus of earlier findings and {args.count} seeded "
        "malformed inputs, each given to pytest in its own process (collected, or run from the "
        f"response cache), with {command} ({wall:.0f} s on {os.cpu_count()} cores).",
        "",
        "| input | " + " | ".join(classes) + " |",
        "|---|" + "---:|" * len(classes),
        *rows,
        total,
        "",
        "Findings:" if findings else "Findings: none.",
        *findings,
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
