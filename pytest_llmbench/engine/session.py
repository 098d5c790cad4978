"""The run's session directory: shared by the controller and its xdist workers.

It holds the embedded server's state, the serial-call locks and the optimizer's store; the
process that owns the run removes it at the end. Its name, unique to the run, also names the
run in the response cache entries it writes (:func:`run_id`).
"""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path

import pytest

STATE_DIR_KEY = pytest.StashKey[tuple[str, int]]()
RESULTS_DIR_KEY = pytest.StashKey[Path]()


def session_state(config: pytest.Config) -> tuple[Path, int]:
    """The shared session directory and the pid of the process that owns the run."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "llmbench_state_dir" in workerinput:
        return Path(workerinput["llmbench_state_dir"]), int(workerinput["llmbench_owner_pid"])
    state = config.stash.get(STATE_DIR_KEY, None)
    if state is None:
        name = f"pytest-llmbench-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        state = (str(Path(tempfile.gettempdir()) / name), os.getpid())
        config.stash[STATE_DIR_KEY] = state
    return Path(state[0]), state[1]


def run_id(config: pytest.Config) -> str:
    """A name unique to this run and the same in the controller and every xdist worker: the
    session directory's (the owner's pid and a random part)."""
    return session_state(config)[0].name


def results_dir(config: pytest.Config) -> Path:
    """The run's results folder, chosen once by the controller (``--results-dir``, else a new
    timestamped folder under ``llmbench-results/``; ``--retry-errors DIR``: DIR) and handed to
    the xdist workers: the batch journal of every process goes there. Choosing it makes no
    folder."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "llmbench_results_dir" in workerinput:
        return Path(workerinput["llmbench_results_dir"])
    chosen = config.stash.get(RESULTS_DIR_KEY, None)
    if chosen is None:
        chosen = config.stash[RESULTS_DIR_KEY] = _new_results_dir(config)
    return chosen


def _new_results_dir(config: pytest.Config) -> Path:
    import datetime as dt

    from ..config import get_run_config
    from ..results_folder import DEFAULT_ROOT

    retried = config.getoption("llmbench_retry_errors", None)
    if retried:  # --retry-errors DIR completes DIR: its batches are journaled there
        return config.invocation_params.dir / str(retried)
    explicit = get_run_config(config).results_dir
    if explicit is not None:
        return explicit
    base = config.invocation_params.dir / DEFAULT_ROOT
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    candidate, counter = base / stamp, 2
    while candidate.exists():
        candidate, counter = base / f"{stamp}-{counter}", counter + 1
    return candidate


def batch_asked(config: pytest.Config) -> bool:
    """Whether ``--batch`` or ``--resume-batch`` (or their ini keys) was given, read from the
    options without building the run's config (the xdist controller, which collects no eval
    file, asks too)."""
    given = config.getoption("llmbench_batch", None) or config.getoption(
        "llmbench_resume_batch", None
    )
    if given is None:
        given = config.getini("llmbench_batch") or config.getini("llmbench_resume_batch")
    return bool(given)
