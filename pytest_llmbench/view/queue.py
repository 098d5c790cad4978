"""Runs launched from `llmbench view`: queued, run one after another as real ``pytest``
processes, cancellable, and kept in ``queue.json`` so that they survive a restart of the viewer.

A launch is a list of arguments built from validated form fields, run without a shell
(``subprocess.Popen([python, "-m", "pytest", ...])``): nothing a user types reaches one. A job
that was running when the viewer stopped is marked ``interrupted`` when it starts again; queued
jobs go on.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..results_folder import DEFAULT_ROOT

#: A model, profile or ``@set`` name as --models takes them (comma-separated).
_MODEL = re.compile(r"@?[A-Za-z0-9][\w./:@+-]*")
_STATES = ("queued", "running", "finished", "failed", "cancelled", "interrupted")


class LaunchError(ValueError):
    """A launch form that cannot become a run; the message says which field and why."""


@dataclass
class Launch:
    """What a user asked to run."""

    files: list[str]  #: eval files or folders, relative to the project
    models: list[str] = field(default_factory=list)
    repeat: int = 1
    workers: str = "0"  #: -n: 0, auto or a number
    keyword: str = ""  #: -k expression
    concurrency: int | None = None

    def argv(self, results_dir: Path) -> list[str]:
        """pytest's arguments: each value one argument, never parsed by a shell."""
        args = [*self.files, f"--results-dir={results_dir}", "-p", "no:cacheprovider"]
        if self.models:
            args.append("--models=" + ",".join(self.models))
        if self.repeat != 1:
            args.append(f"--repeat={self.repeat}")
        if self.workers != "0":
            args += ["-n", self.workers]
        if self.keyword:
            args += ["-k", self.keyword]
        if self.concurrency is not None:
            args.append(f"--concurrency={self.concurrency}")
        return args


def parse_launch(form: dict[str, Any], project: Path) -> Launch:
    """A :class:`Launch` from the form's fields; :class:`LaunchError` for a bad one."""
    files = [str(name) for name in form.get("files", []) if str(name).strip()]
    if not files:
        raise LaunchError("files: choose at least one eval file")
    root = project.resolve()
    for name in files:
        path = (root / name).resolve()
        if (path != root and root not in path.parents) or not path.exists():
            raise LaunchError(f"files: {name!r} is not in the project")
    models = [part.strip() for part in str(form.get("models") or "").split(",") if part.strip()]
    for name in models:
        if not _MODEL.fullmatch(name):
            raise LaunchError(f"models: {name!r} is not a model, profile or @set name")
    workers = str(form.get("workers") or "0").strip()
    if workers != "auto" and not (workers.isdigit() and int(workers) <= 64):
        raise LaunchError("workers: 0, auto or a number up to 64")
    keyword = str(form.get("keyword") or "").strip()
    if len(keyword) > 200 or any(ord(c) < 32 for c in keyword):
        raise LaunchError("keyword: one line of at most 200 characters")
    return Launch(
        files=files,
        models=models,
        repeat=_number(form.get("repeat"), "repeat", 1, 100) or 1,
        workers=workers,
        keyword=keyword,
        concurrency=_number(form.get("concurrency"), "concurrency", 1, 1024),
    )


def _number(raw: Any, name: str, low: int, high: int) -> int | None:
    text = str(raw or "").strip()
    if not text:
        return None
    if not text.isdigit() or not low <= int(text) <= high:
        raise LaunchError(f"{name}: a whole number from {low} to {high}")
    return int(text)


@dataclass
class Job:
    """A launch in the queue and what became of it."""

    id: int
    launch: Launch
    results_dir: str
    state: str = "queued"
    created_at: str = ""
    pid: int | None = None
    exit_code: int | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Job:
        return cls(**{**data, "launch": Launch(**data["launch"])})


class JobQueue:
    """The queue of launched runs, persisted in ``state_file``, run by one thread."""

    def __init__(self, state_file: Path, project: Path, results_root: Path) -> None:
        self.state_file = state_file
        self.project = project
        self.results_root = results_root
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._process: subprocess.Popen[bytes] | None = None
        self.jobs: list[Job] = self._load()
        self._thread = threading.Thread(target=self._run, name="llmbench-queue", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()

    # -- what the pages do -----------------------------------------------------------------------
    def submit(self, launch: Launch) -> Job:
        with self._lock:
            number = max((job.id for job in self.jobs), default=0) + 1
            stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
            folder = self.results_root / f"view-{stamp}-job{number}"
            created = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
            job = Job(number, launch, str(folder), created_at=created)
            self.jobs.append(job)
            self._save()
        self._wake.set()
        return job

    def cancel(self, job_id: int) -> bool:
        with self._lock:
            job = next((job for job in self.jobs if job.id == job_id), None)
            if job is None or job.state not in ("queued", "running"):
                return False
            running = job.state == "running"
            job.state = "cancelled"  # first: the runner thread leaves it so
            self._save()
            process = self._process if running else None
        if process is not None:
            _stop_group(process)
        return True

    def snapshot(self) -> list[Job]:
        with self._lock:
            return [Job.from_dict(asdict(job)) for job in self.jobs]

    # -- the runner thread -----------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            job = self._next()
            if job is None:
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            self._execute(job)

    def _next(self) -> Job | None:
        with self._lock:
            job = next((job for job in self.jobs if job.state == "queued"), None)
            if job is not None:
                job.state = "running"
                self._save()
            return job

    def _execute(self, job: Job) -> None:
        command = [sys.executable, "-m", "pytest", *job.launch.argv(Path(job.results_dir))]
        log = Path(job.results_dir).with_suffix(".log")
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as output:
            process = subprocess.Popen(
                command, cwd=self.project, stdout=output, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        with self._lock:
            self._process, job.pid = process, process.pid
            self._save()
        code = process.wait()
        with self._lock:
            self._process = None
            job.exit_code = code
            if job.state == "running":
                job.state = "finished" if code in (0, 1) else "failed"
            self._save()

    # -- the file --------------------------------------------------------------------------------
    def _load(self) -> list[Job]:
        try:
            data = json.loads(self.state_file.read_text(encoding="utf-8"))
            jobs = [Job.from_dict(item) for item in data.get("jobs", [])]
        except (OSError, ValueError, TypeError, KeyError):
            return []
        for job in jobs:
            if job.state == "running":  # the viewer stopped while it ran
                job.state = "interrupted"
            if job.state not in _STATES:
                job.state = "failed"
        return jobs

    def _save(self) -> None:
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        partial = self.state_file.with_suffix(".tmp")
        partial.write_text(json.dumps({"jobs": [asdict(job) for job in self.jobs]}, indent=1))
        partial.replace(self.state_file)


def _stop_group(process: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """Ctrl-C to the run's process group (pytest writes what it has), then TERM, then KILL."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return
            time.sleep(0.1)


def eval_files(project: Path, pattern: str = "*.eval.yaml", limit: int = 500) -> list[str]:
    """The eval files under ``project`` (relative, sorted), for the launch form."""
    found: list[str] = []
    for path in sorted(project.rglob(pattern)):
        parts = path.relative_to(project).parts
        if any(part.startswith(".") or part in ("node_modules", DEFAULT_ROOT) for part in parts):
            continue
        found.append(path.relative_to(project).as_posix())
        if len(found) >= limit:
            break
    return found


def states() -> Sequence[str]:
    return _STATES
