"""The on-disk response cache: one SQLite file shared by every process of a run.

A key covers everything that determines an answer, the repeat index included, so the repeats of
a case stay independent samples and a second run of the same evals makes no call at all. Only
successes are stored: an error is retried on the next run, never replayed.

xdist workers write the same file at once. WAL lets readers run beside the one writer, the busy
timeout makes writers queue instead of failing, and autocommit keeps each ``put`` to one short
transaction, so the write lock is never held across a model call.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..models.providers.completion import Completion
from ..yamlguard import json_text

#: Bumped when the key's layout changes, so old entries stop matching instead of lying.
_KEY_VERSION = 1
#: Call parameters that change how an answer is fetched, not what it is.
_IGNORED_PARAMS = frozenset({"timeout", "max_retries", "stream", "stream_options", "api_key"})
BUSY_TIMEOUT_MS = 30_000

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS responses "
    "(key TEXT PRIMARY KEY, value TEXT NOT NULL, created_at REAL)"
)


def cache_key(
    model_id: str,
    messages: Sequence[Mapping[str, Any]],
    params: Mapping[str, Any],
    repeat: int,
    *,
    api_base: str | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> str:
    """The sha256 hex digest of one call's canonical JSON (:func:`digest`).

    Values must be JSON-serialisable; one that holds itself or nests too deep (parameters a
    plain test passes) is a ValueError naming its place (:mod:`pytest_llmbench.yamlguard`).
    """
    payload = {
        "v": _KEY_VERSION,
        "model": model_id,
        "api_base": api_base,
        "messages": messages,
        "params": {name: value for name, value in params.items() if name not in _IGNORED_PARAMS},
        "tools": tools,
        "repeat": repeat,
    }
    return digest(payload)


def digest(value: Any) -> str:
    """The sha256 hex digest of ``value``'s canonical JSON: sorted keys and no whitespace, so
    it is the same in every process and Python run whatever the dict order."""
    canonical = json_text(value, canonical=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class CacheError(Exception):
    """The cache file cannot be used (not a SQLite database, unreadable, locked too long)."""


class ResponseCache:
    """Completions by ``cache_key``, in one SQLite file that many processes may share.

    Nothing touches the disk until the first ``get``, ``put`` or ``len``. Each thread gets its
    own connection; ``close`` closes them all and a later use opens new ones.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()

    def get(self, key: str) -> Completion | None:
        """The stored completion for ``key``, or None when there is none."""
        row = self._execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else _decode(row[0])

    def put(self, key: str, completion: Completion) -> None:
        """Store ``completion`` under ``key``, replacing any earlier answer."""
        if completion.text is None:
            raise ValueError("refusing to cache a completion without text: errors are not cached")
        value = json.dumps(dataclasses.asdict(completion), ensure_ascii=False)
        self._execute(
            "INSERT OR REPLACE INTO responses (key, value, created_at) VALUES (?, ?, ?)",
            (key, value, time.time()),
        )

    def __len__(self) -> int:
        return int(self._execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        """Close every thread's connection."""
        with self._lock:
            connections, self._connections = self._connections, []
            self._local = threading.local()
        for connection in connections:
            connection.close()

    def _execute(self, sql: str, parameters: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self._connection().execute(sql, parameters)
        except sqlite3.Error as exc:
            raise self._error(exc) from exc

    def _connection(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._open()
            self._local.connection = connection
        return connection

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # check_same_thread=False only so close() may close other threads' connections;
            # each connection is used by the thread that opened it alone.
            connection = sqlite3.connect(
                self.path,
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
        except (OSError, sqlite3.Error) as exc:
            raise self._error(exc) from exc
        try:
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            execute_when_unlocked(connection, "PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = NORMAL")
            execute_when_unlocked(connection, _SCHEMA)
        except sqlite3.Error as exc:
            connection.close()
            raise self._error(exc) from exc
        with self._lock:
            self._connections.append(connection)
        return connection

    def _error(self, exc: Exception) -> CacheError:
        return CacheError(
            f"{self.path}: cannot use this file as the llmbench response cache ({exc}); "
            "delete it or choose another cache path"
        )


def execute_when_unlocked(connection: sqlite3.Connection, sql: str) -> None:
    """Run a setup statement, retrying while other processes hold the lock it needs.

    Several processes opening a new file at once all switch it to WAL; SQLite answers "database
    is locked" to all but one at once, without waiting on the busy timeout, to avoid a deadlock.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            connection.execute(sql)
            return
        except sqlite3.OperationalError as exc:
            locked = "locked" in str(exc) or "busy" in str(exc)
            if not locked or time.monotonic() > deadline:
                raise
            time.sleep(random.uniform(0.005, 0.05))  # jittered, so the waiters do not collide


def _decode(value: str) -> Completion | None:
    """A stored completion, or None when it no longer matches ``Completion`` (then a miss)."""
    try:
        return Completion(**json.loads(value))
    except (TypeError, ValueError):
        return None
