"""``-n auto`` on an eval run: how many xdist workers are worth starting.

Model calls are I/O-bound and run concurrently inside one process (``--concurrency`` in flight,
paced and rate-limited), so a worker adds its start-up (a second interpreter, pytest, the
plugin) and a share of the controller's relaying, and speeds nothing up: on the peer benchmark
(400 items, 0.25 s a call, 32 in flight, 2 cores) ``-n 0`` takes 4.3 s, ``-n 2`` 4.8 s. For a
run of eval files only, ``-n auto`` therefore starts none and the session header says so;
``-n N`` still starts N, and a run that also collects Python tests keeps xdist's own count.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .results_folder import DEFAULT_ROOT

#: The ``-n auto`` decision, for the session header.
AUTO_KEY = pytest.StashKey[str]()
#: Folders a search for eval files never enters.
_SKIPPED = frozenset({"node_modules", "__pycache__", "site-packages", DEFAULT_ROOT})
#: How many folder entries a search reads at most before it gives up (and keeps xdist's count).
_MAX_ENTRIES = 5000


def auto_workers(config: pytest.Config, pattern: str) -> int | None:
    """0 when the run's paths hold eval files and no Python tests; None: xdist decides."""
    found = _kinds(_paths(config), pattern)
    if found != {"eval"}:
        return None
    config.stash[AUTO_KEY] = (
        "llmbench: -n auto starts no worker: model calls run concurrently in one process "
        "(--concurrency); -n N starts N"
    )
    return 0


def _paths(config: pytest.Config) -> list[Path]:
    root = config.invocation_params.dir
    given = [arg.split("::", 1)[0] for arg in config.args if not arg.startswith("-")]
    return [root / arg for arg in given or ["."]]


def _kinds(paths: list[Path], pattern: str) -> set[str]:
    """``eval`` and/or ``python`` for what ``paths`` hold (``unknown`` when too many to read)."""
    kinds: set[str] = set()
    for path in _files(paths):
        if path is None:
            return {"unknown"}
        if path.match(pattern):
            kinds.add("eval")
        elif path.suffix == ".py" and (
            path.name.startswith("test_") or path.stem.endswith("_test")
        ):
            kinds.add("python")
    return kinds


def _files(paths: list[Path]) -> Iterator[Path | None]:
    """The files under ``paths`` (None once :data:`_MAX_ENTRIES` are read)."""
    read = 0
    for path in paths:
        if path.is_file():
            yield path
            continue
        for folder, folders, files in os.walk(path):
            folders[:] = [f for f in folders if not f.startswith(".") and f not in _SKIPPED]
            read += len(files) + len(folders)
            if read > _MAX_ENTRIES:
                yield None
                return
            yield from (Path(folder) / name for name in files)
