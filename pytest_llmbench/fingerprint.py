"""Fingerprints: what decides a case's outcome, and which sources a run read.

- :func:`case_hash`: a short digest of everything that decides one case's outcome (the rendered
  messages, a conversation's turns, the expected answer, the assertions with their weights and
  thresholds, the case's model parameters, tools and solver or agent settings), and of nothing
  else (not its id, tags, description or line, not the model under test, not the run's
  options). Records carry it as
  ``case_hash``; the baseline pairs only cases whose hashes match (:mod:`.results.baseline`).
- :func:`file_hash` and :func:`source_info`: the run.json ``source``: the git commit and dirty
  flag of the rootdir, and the sha256 of every eval file and dataset file the run read.
- :class:`CollectedSources`: the files the collected eval items came from, gathered where they
  are collected (each xdist worker hands its list to the controller in ``workeroutput``).

A shared module: it imports no stage, so the spec stage (whose loader gives each case a
:class:`CaseHasher`; the case digests itself once, when its first record asks), the results stage
and the ``llmbench`` command all use it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from .yamlguard import json_text

#: Hex characters of a case hash: 64 bits, plenty to tell the versions of one case apart.
CASE_HASH_CHARS = 16
#: The fields of a resolved case (``spec.schema.EvalCase``) that decide its outcome. Left out on
#: purpose: ``id``, ``tags``, ``line`` (naming and selection), ``prompt_variant`` (part of the
#: model label; its text is in ``messages``), ``template``/``template_vars`` (rendered into
#: ``messages``), ``expected_output_tokens`` (only the cost estimate reads it).
CASE_FIELDS: tuple[str, ...] = (
    "messages",
    "expected",
    "assertions",
    "threshold",
    "model_params",
    "files",
    "vars",
    "task",
    "judge_metrics",
    "include_dirs",
    "images",
    "choices",
    "answer_index",
    "choice_labels",
    "loglikelihood",
)
#: Seconds a ``git`` command may take before the run says "no git information".
GIT_TIMEOUT_S = 10.0
#: The ``workeroutput`` key under which an xdist worker hands its collected files over.
WORKER_OUTPUT_KEY = "llmbench_sources"

_CHUNK = 1 << 20


def case_hash(case: Any, settings: Mapping[str, Any], base: Path) -> str:
    """The ``case_hash`` of a resolved case (an ``EvalCase``): :data:`CASE_HASH_CHARS` hex
    characters of the sha256 of the canonical JSON (sorted keys, the same text in every process:
    no ``hash()``) of its :data:`CASE_FIELDS` and the eval file's ``settings`` that
    change an answer (solver, agent tools and limits). The files it names (images,
    ``include_dirs``) are taken relative to ``base``, the eval file's folder, so that a
    checkout elsewhere hashes alike."""
    return CaseHasher(settings, base)(case)


class CaseHasher:
    """:func:`case_hash` for the cases of one eval file: the file's ``settings`` converted once,
    and the assertions converted without the deep copies of :func:`dataclasses.asdict` (the
    same digests; collecting 10,000 cases spent 0.45 s in those copies)."""

    def __init__(self, settings: Mapping[str, Any], base: Path) -> None:
        self._settings = {key: _fields(value) for key, value in settings.items()}
        self._base = base

    def __call__(self, case: Any) -> str:
        base = self._base
        payload = {name: getattr(case, name) for name in CASE_FIELDS}
        payload["assertions"] = [_plain(item) for item in case.assertions]
        if case.loglikelihood is not None:
            payload["loglikelihood"] = _plain(case.loglikelihood)
        payload["include_dirs"] = [_relative_name(str(path), base) for path in case.include_dirs]
        payload["images"] = [_relative_name(ref, base) for ref in case.images]
        payload["settings"] = self._settings
        turns = getattr(case, "turns", ())
        if turns:  # only when given: the hashes of cases without turns stay what they were
            payload["turns"] = [_plain(turn) for turn in turns]
        user = getattr(case, "simulated_user", None)
        if user is not None:  # as turns: only when given
            payload["simulated_user"] = _plain(user)
        context = getattr(case, "context", None)
        if context is not None:  # as turns: only when given (its text may not be in a prompt)
            payload["context"] = list(context)
        try:
            text = json_text(payload, canonical=True)
        except TypeError:  # keys of mixed types (``{1: a, b: c}`` in vars): their written order
            text = repr(payload)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:CASE_HASH_CHARS]


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """``value`` with every dataclass inside it a dict of its fields, as
    :func:`dataclasses.asdict` gives it, without copying the rest (only read, then digested)."""
    if type(value) in _SCALARS:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {name: _plain(getattr(value, name)) for name in _field_names(type(value))}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return value


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(field.name for field in dataclasses.fields(cls))


def _fields(value: Any) -> Any:
    """A dataclass value (``AgentSpec``) as a dict; any other value as it is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def _relative_name(ref: str, base: Path) -> str:
    """A resolved path as it reads from ``base``; a URL as it is."""
    return os.path.relpath(ref, base) if os.path.isabs(ref) else ref


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


#: The plugin that gathers the collected files, on every process.
SOURCES_KEY = pytest.StashKey["CollectedSources"]()


class CollectedSources:
    """The eval files and dataset files of the collected eval items, on every process.

    A worker hands its list to the controller in ``workeroutput``; the controller (or the sole
    process without xdist) keeps the union, for run.json's ``source`` (:meth:`source`).
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.paths: set[Path] = set()
        config.stash[SOURCES_KEY] = self

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The files of this process's eval items (none unless an eval file was collected)."""
        if "pytest_llmbench.item" not in sys.modules:
            return
        for item in session.items:
            plan = getattr(item, "plan", None)
            case = getattr(plan, "case", None)
            if case is not None:
                self.paths.add(plan.path)  # type: ignore[union-attr]
                self.paths.update(case.sources)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """A worker hands its files to the controller."""
        output = getattr(session.config, "workeroutput", None)
        if output is not None:
            output[WORKER_OUTPUT_KEY] = sorted(str(path) for path in self.paths)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """The controller keeps the files each worker collected."""
        found = getattr(node, "workeroutput", None) or {}
        self.paths.update(Path(path) for path in found.get(WORKER_OUTPUT_KEY, ()))

    def source(self) -> dict[str, Any]:
        """run.json's ``source`` for this run (see :func:`source_info`)."""
        return source_info(self.config.rootpath, self.paths)


def run_source(config: pytest.Config) -> dict[str, Any]:
    """run.json's ``source`` of the run ``config`` drives: the collected files, when the
    plugin gathered them, and the rootdir's git state."""
    sources = config.stash.get(SOURCES_KEY, None)
    if sources is None:
        return source_info(config.rootpath, ())
    return sources.source()


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
