"""Building blocks of the benchmark: the fake server process, suites, bounded pytest runs, RSS.

Every process started here runs in its own session (process group) and is ended by that group's
id on timeout, on Ctrl-C and at the end, so nothing outlives the benchmark.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
FAKESERVER = BENCH_DIR / "fakeserver.py"
MODEL_NAME = "bench"
KEY_ENV = "BENCH_KEY"
#: Seconds between RSS samples of the pytest process tree.
RSS_INTERVAL_S = 0.05
_UNRECOGNIZED = re.compile(r"error: unrecognized arguments: (.+)")
_AMBIGUOUS = re.compile(r"error: ambiguous option: (--[\w-]+)")
_COLLECTED = re.compile(r"(\d+) tests? collected in ([\d.]+)s")


@dataclass(frozen=True)
class ServerOptions:
    """Command-line settings of ``fakeserver.py``."""

    ttft_s: float = 0.25
    token_delay_s: float = 0.0
    tokens: int = 20
    fault_rate: float = 0.0
    faults: str = "429,500,timeout,drop,malformed"
    seed: int = 1
    rpm_limit: int = 0

    @property
    def latency_s(self) -> float:
        """Seconds one successful call takes at the server."""
        return self.ttft_s + self.token_delay_s * max(0, self.tokens - 1)

    def argv(self) -> list[str]:
        """The server's command-line flags."""
        return [
            f"--ttft={self.ttft_s}",
            f"--token-delay={self.token_delay_s}",
            f"--tokens={self.tokens}",
            f"--fault-rate={self.fault_rate}",
            f"--faults={self.faults}",
            f"--seed={self.seed}",
            f"--rpm-limit={self.rpm_limit}",
        ]


def stop_group(proc: subprocess.Popen[Any], grace_s: float = 5.0) -> None:
    """End ``proc`` and its process group (started with ``start_new_session``): TERM, then KILL."""
    if proc.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue


class FakeServer:
    """``fakeserver.py`` as a subprocess on 127.0.0.1, for a ``with`` block."""

    def __init__(self, options: ServerOptions, workdir: Path) -> None:
        self.options = options
        self.workdir = workdir
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> FakeServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        port_file = self.workdir / "server.port"
        port_file.unlink(missing_ok=True)
        log = (self.workdir / "server.log").open("wb")
        argv = [sys.executable, str(FAKESERVER), "--port=0", f"--port-file={port_file}"]
        self._proc = subprocess.Popen(
            argv + self.options.argv(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.port = self._wait_for_port(port_file, timeout_s=30.0)
        return self

    def _wait_for_port(self, port_file: Path, timeout_s: float) -> int:
        assert self._proc is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if port_file.is_file():
                return int(port_file.read_text().strip())
            if self._proc.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        log = (self.workdir / "server.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"fake server did not start within {timeout_s:.0f} s:\n{log}")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        if self._proc is not None:
            stop_group(self._proc)
            self._proc = None

    @property
    def api_base(self) -> str:
        """The OpenAI-compatible base URL."""
        return f"http://127.0.0.1:{self.port}/v1"

    def _request(self, method: str, path: str) -> dict[str, Any]:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method)
        with urllib.request.urlopen(req, timeout=5) as resp:
            data: dict[str, Any] = json.loads(resp.read())
        return data

    def stats(self) -> dict[str, Any]:
        """The server's counters (``GET /stats``)."""
        return self._request("GET", "/stats")

    def reset_stats(self) -> None:
        """Zero the server's counters before a run."""
        self._request("POST", "/stats/reset")


def numbered_prompt(i: int) -> str:
    """The default user prompt of case ``i``."""
    return f"q{i}"


def write_suite(
    root: Path,
    n_cases: int,
    api_base: str,
    salt: str,
    prompt: Callable[[int], str] = numbered_prompt,
    system: str = "Benchmark run.",
) -> Path:
    """Write an eval suite of ``n_cases`` cases and the ``bench`` profile under ``root``.

    Case ``i`` asks ``prompt(i)``. ``salt`` goes after the ``system`` prompt: suites with
    different salts never share cache entries.
    """
    root.mkdir(parents=True, exist_ok=True)
    # An ini file pins the rootdir (and so the profiles/ folder) to this suite.
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    lines = [
        f"description: Benchmark suite of {n_cases} cases",
        f"system: {json.dumps(suite_system(system, salt))}",
        "assert:",
        "  - {type: contains, value: w0}",
        "cases:",
    ]
    for i in range(n_cases):
        lines += [f"  - id: c{i}", f"    prompt: {json.dumps(prompt(i))}"]
    (root / "bench.eval.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_profile(root, api_base)
    return root


def suite_system(system: str, salt: str) -> str:
    """The system prompt of a suite written with ``salt`` (a raw client sends the same)."""
    return f"{system.rstrip('.')} {salt}."


def write_profile(root: Path, api_base: str) -> None:
    """The ``bench`` profile pointing at ``api_base``, with zero prices."""
    profiles = root / "profiles"
    profiles.mkdir(exist_ok=True)
    text = (
        "models:\n"
        f"  {MODEL_NAME}:\n"
        f"    model: openai/{MODEL_NAME}\n"
        f"    api_base: {api_base}\n"
        f"    api_key_env: {KEY_ENV}\n"
        "    cost_per_1k: {input: 0, output: 0}\n"
    )
    (profiles / "bench.yaml").write_text(text, encoding="utf-8")


def pytest_argv(root: Path, out_dir: Path, workers: int | str, extra: list[str]) -> list[str]:
    """The benchmarked pytest command line (``workers``: ``-n``'s value, a number or "auto")."""
    return [
        sys.executable,
        "-m",
        "pytest",
        str(root),
        "-q",
        "-p",
        "no:cacheprovider",
        f"--models={MODEL_NAME}",
        f"--results-dir={out_dir}",
        "-n",
        str(workers),
        *extra,
    ]


def bench_env() -> dict[str, str]:
    """The environment of the pytest runs: the key, the local price map, no user addopts."""
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_PLUGINS", None)
    # As a user's machine runs it: compiled modules (and pytest's rewritten ones) cached in
    # __pycache__. A sandbox that sets this recompiles every module on every run.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env[KEY_ENV] = "sk-bench"
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return env


# -- peak RSS of a process tree ---------------------------------------------------------------


def _parent_pids() -> dict[int, int]:
    """pid -> parent pid of every process in /proc."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: fields follow the last ')'.
        fields = stat[stat.rfind(b")") + 2 :].split()
        parents[int(entry.name)] = int(fields[1])
    return parents


def tree_pids(root: int) -> list[int]:
    """``root`` and all its descendants."""
    children: dict[int, list[int]] = {}
    for pid, parent in _parent_pids().items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def rss_kib(pid: int) -> int:
    """Resident set size of ``pid`` in KiB (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


@dataclass(frozen=True)
class PeakRss:
    """What the RSS sampler saw of a process tree."""

    sum_mib: float
    """The highest sum of VmRSS over the tree's processes at one sample."""
    process_mib: float
    """The highest VmRSS of any single process of the tree."""
    processes: int
    """The most processes the tree had at one sample."""


class PeakRssSampler(threading.Thread):
    """Samples the VmRSS of each process of a tree every 50 ms: the highest sum, the highest
    single process and the most processes at once."""

    def __init__(self, root_pid: int) -> None:
        super().__init__(name="rss-sampler", daemon=True)
        self.root_pid = root_pid
        self.peak_kib = 0
        self.peak_process_kib = 0
        self.processes = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            sizes = [rss_kib(pid) for pid in tree_pids(self.root_pid)]
            alive = [size for size in sizes if size]
            self.peak_kib = max(self.peak_kib, sum(alive))
            self.peak_process_kib = max(self.peak_process_kib, *alive, 0)
            self.processes = max(self.processes, len(alive))
            self._stop_event.wait(RSS_INTERVAL_S)

    def stop(self) -> PeakRss:
        """Stop sampling; the peaks."""
        self._stop_event.set()
        self.join(timeout=5)
        return PeakRss(self.peak_kib / 1024, self.peak_process_kib / 1024, self.processes)


# -- one bounded run ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessRun:
    """What one subprocess run gave."""

    returncode: int | None
    wall_s: float
    peak_rss_mib: float
    output: str
    timed_out: bool
    cpu_s: float
    """User + system CPU seconds of the process and the descendants it waited for."""
    peak_process_rss_mib: float = 0.0
    """The highest RSS of any single process of the tree (``peak_rss_mib`` is the sum)."""
    processes: int = 0
    """The most processes the tree had at once (pytest and its xdist workers)."""

    def unavailable_flags(self) -> list[str]:
        """Flags pytest rejected as unrecognized (or ambiguous), e.g. ``['--concurrency']``."""
        flags: list[str] = []
        for match in _UNRECOGNIZED.finditer(self.output):
            flags += [arg.split("=", 1)[0] for arg in match.group(1).split() if arg.startswith("-")]
        flags += _AMBIGUOUS.findall(self.output)
        return sorted(set(flags))

    def collected(self) -> tuple[int, float] | None:
        """``(items, seconds)`` from pytest's "N tests collected in S s" line."""
        match = _COLLECTED.search(self.output)
        return (int(match.group(1)), float(match.group(2))) if match else None

    def tail(self, lines: int = 15) -> str:
        """The last lines of the output, for diagnosis."""
        return "\n".join(self.output.rstrip().splitlines()[-lines:])


def run_bounded(argv: list[str], cwd: Path, env: dict[str, str], timeout_s: float) -> ProcessRun:
    """Run ``argv`` to its end or ``timeout_s``, timing it and sampling its tree's peak RSS.

    Runs are sequential, so the change in this process's ``RUSAGE_CHILDREN`` is the CPU time of
    the run's tree (the fake server, still running, is not counted until it is reaped).
    """
    cpu_before = _children_cpu_s()
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    sampler = PeakRssSampler(proc.pid)
    sampler.start()
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        stop_group(proc)
        out, _ = proc.communicate()
    except BaseException:  # Ctrl-C included: leave nothing running
        stop_group(proc)
        sampler.stop()
        raise
    wall = time.perf_counter() - started
    peak = sampler.stop()
    text = out.decode(errors="replace")
    cpu = _children_cpu_s() - cpu_before
    return ProcessRun(
        proc.returncode, wall, peak.sum_mib, text, timed_out, cpu, peak.process_mib, peak.processes
    )


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def count_records(out_dir: Path) -> tuple[int, dict[str, int]]:
    """Records in ``out_dir/results.jsonl`` and their outcome counts."""
    path = out_dir / "results.jsonl"
    if not path.is_file():
        return 0, {}
    outcomes: dict[str, int] = {}
    total = 0
    with path.open(encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            total += 1
            outcome = str(json.loads(line).get("outcome"))
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return total, outcomes
