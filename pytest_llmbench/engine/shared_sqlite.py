"""One SQLite file that many processes share (the xdist workers, runs one after another): the
response cache and the batch ledger are each one.

:class:`SharedSqlite` opens the file on first use, one connection per thread, in WAL mode with
a busy timeout, and makes its tables (:meth:`SharedSqlite._prepare`); ``close`` closes every
thread's connection and a later use opens new ones. An unusable file is the owner's own error
(:meth:`SharedSqlite._error`), naming the file and what to do.
"""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: How long a process waits for another's write lock before the file counts as unusable.
BUSY_TIMEOUT_MS = 30_000


class SharedSqlite:
    """A SQLite file many processes share, opened on first use; one connection per thread."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close every thread's connection."""
        with self._lock:
            connections, self._connections = self._connections, []
            self._local = threading.local()
        for connection in connections:
            connection.close()

    def _prepare(self, connection: sqlite3.Connection) -> None:
        """Make (or bring up to date) the file's tables."""
        raise NotImplementedError

    def _error(self, exc: Exception) -> Exception:
        """The error that says the file cannot be used, and why."""
        raise NotImplementedError

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
            self._prepare(connection)
        except sqlite3.Error as exc:
            connection.close()
            raise self._error(exc) from exc
        with self._lock:
            self._connections.append(connection)
        return connection


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
