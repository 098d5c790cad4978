"""Where a run came from: run.json's ``source``, the git commit and dirty flag of the rootdir
and the sha256 of every eval file and dataset file the run read; how two runs' sources differ
and one source for runs merged into one (shards).

A shared module: the results stage writes and compares it; the files a run read are gathered by
the shell's plugin (:class:`~pytest_llmbench.plugin.CollectedSources`) into the stash under
:data:`SOURCES_KEY`, which :func:`run_source` reads.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

#: Seconds a ``git`` command may take before the run says "no git information".
GIT_TIMEOUT_S = 10.0

_CHUNK = 1 << 20


def file_hash(path: Path) -> str | None:
    """The sha256 hex digest of the file at ``path``; None when it cannot be read (gone)."""
    sha = hashlib.sha256()
    try:
        with path.open("rb") as stream:
            while chunk := stream.read(_CHUNK):
                sha.update(chunk)
    except OSError:
        return None
    return sha.hexdigest()


def source_info(rootdir: Path, paths: Iterable[Path]) -> dict[str, Any]:
    """run.json's ``source``: ``{"git": {"commit", "dirty"} | None, "files": {path: sha256}}``,
    each path relative to ``rootdir`` (absolute outside it), in sorted order."""
    files = {_relative(Path(path), rootdir): Path(path) for path in paths}
    return {
        "git": git_info(rootdir),
        "files": {name: file_hash(files[name]) for name in sorted(files)},
    }


def _relative(path: Path, rootdir: Path) -> str:
    return path.relative_to(rootdir).as_posix() if path.is_relative_to(rootdir) else str(path)


def git_info(folder: Path) -> dict[str, Any] | None:
    """The commit checked out at ``folder`` and whether tracked files differ from it
    (``dirty``; untracked files do not count: the results folder is one); None when git is
    missing, ``folder`` is in no repository or one without a commit, or git takes too long.
    ``dirty`` is None when git could tell the commit but not the status."""
    commit = _git(folder, "rev-parse", "--verify", "--quiet", "HEAD")
    if not commit:
        return None
    status = _git(folder, "status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def _git(folder: Path, *args: str) -> str | None:
    """``git -C folder args``'s output, or None when it fails, is missing or times out."""
    # No optional locks: a status run beside the user's own git commands must not block them.
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            env=env,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


#: The files the collected eval items came from, on every process (the plugin gathers them).
SOURCES_KEY = pytest.StashKey[set[Path]]()


def run_source(config: pytest.Config) -> dict[str, Any]:
    """run.json's ``source`` of the run ``config`` drives: the collected files, when the
    plugin gathered them, and the rootdir's git state."""
    paths: set[Path] = config.stash.get(SOURCES_KEY, set())
    return source_info(config.rootpath, paths)


def source_differences(
    first: Mapping[str, Any] | None, second: Mapping[str, Any] | None
) -> list[tuple[str, Any, Any]]:
    """Where two runs' ``source`` disagree: ``(what, first's, second's)`` for the git commit and
    for each file both read with other contents (a file only one read is no disagreement: a
    shard reads its own part). Nothing when either has no ``source`` (an older run)."""
    if not first or not second:
        return []
    found: list[tuple[str, Any, Any]] = []
    commits = (_commit(first), _commit(second))
    if None not in commits and commits[0] != commits[1]:
        found.append(("git commit", *commits))
    files, others = first.get("files") or {}, second.get("files") or {}
    for name in sorted(files.keys() & others.keys()):
        if files[name] != others[name]:
            found.append((f"file {name}", files[name], others[name]))
    return found


def merged_source(sources: Iterable[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """One ``source`` for runs merged into one (shards): every file any of them read (the first
    one's hash where they disagree, which :func:`source_differences` reports), the first git
    commit, dirty when any was; None when none has a ``source``."""
    known = [source for source in sources if source]
    if not known:
        return None
    files: dict[str, Any] = {}
    for source in known:
        for name, value in (source.get("files") or {}).items():
            files.setdefault(name, value)
    gits = [source["git"] for source in known if isinstance(source.get("git"), dict)]
    git = None
    if gits:
        dirty = [item.get("dirty") for item in gits]
        flag = True if True in dirty else None if None in dirty else False
        git = {"commit": gits[0].get("commit"), "dirty": flag}
    return {"git": git, "files": dict(sorted(files.items()))}


def _commit(source: Mapping[str, Any]) -> str | None:
    git = source.get("git")
    return str(git["commit"]) if isinstance(git, dict) and git.get("commit") else None
