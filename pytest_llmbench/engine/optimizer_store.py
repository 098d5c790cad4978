"""The store behind prompt optimization: one SQLite file of rewrites shared by every process.

:class:`RewriteStore` keeps one row per (optimizer model, target model, template) key: claimed
by the task or xdist worker that makes the optimizer call, refreshed while the call is in
flight, and finished with the :class:`Outcome`. Each method is one short transaction. At session
end :func:`write_log` turns the store into ``prompt_optimizations.jsonl`` in the results folder.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..results_folder import OPTIMIZATIONS_FILE
from .shared_sqlite import BUSY_TIMEOUT_MS, execute_when_unlocked

if TYPE_CHECKING:
    import pytest

#: The store's file name in the session directory.
STORE_FILE = "prompt_optimizations.sqlite"
#: The log's file name in the results folder.
LOG_FILE = OPTIMIZATIONS_FILE


@dataclass(frozen=True)
class Outcome:
    """One finished optimizer call (or a skip without a call), as stored."""

    status: str
    messages: tuple[dict[str, str], ...]
    reason: str
    reply: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)


# -- the shared store -------------------------------------------------------------------------

_COLUMNS = (
    "key TEXT PRIMARY KEY, state TEXT NOT NULL, owner TEXT, claimed_at REAL, "
    "optimizer TEXT, optimizer_model TEXT, target TEXT, target_model TEXT, template_hash TEXT, "
    "original TEXT, messages TEXT, status TEXT, reason TEXT, reply TEXT, input_tokens INTEGER, "
    "output_tokens INTEGER, cost_usd REAL, latency_s REAL, response_cached INTEGER, "
    "started_at REAL, finished_at REAL"
)
_SCHEMA = f"CREATE TABLE IF NOT EXISTS rewrites ({_COLUMNS})"
_USAGE = ("input_tokens", "output_tokens", "cost_usd", "latency_s", "response_cached")


class RewriteStore:
    """The run's rewrites in one SQLite file shared by every process (WAL, busy timeout).

    One connection per instance, used by one thread at a time; every method is one short
    transaction, so the write lock is never held across a model call.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None

    def claim(
        self, key: str, token: str, meta: dict[str, Any], stale_s: float
    ) -> tuple[bool, Outcome | None]:
        """(claimed, the stored outcome if done): claim ``key`` when it is free or stale."""
        now = time.time()
        with self._transaction() as db:
            row = db.execute("SELECT * FROM rewrites WHERE key = ?", (key,)).fetchone()
            if row is not None and row["state"] == "done":
                return False, _outcome(row)
            if row is None:
                names = ["key", "state", "owner", "claimed_at", "started_at", *meta]
                values = [key, "pending", token, now, now, *meta.values()]
                marks = ", ".join("?" * len(names))
                db.execute(f"INSERT INTO rewrites ({', '.join(names)}) VALUES ({marks})", values)
                return True, None
            if row["claimed_at"] < now - stale_s:
                db.execute(
                    "UPDATE rewrites SET owner = ?, claimed_at = ? WHERE key = ?", (token, now, key)
                )
                return True, None
            return False, None

    def finish(self, key: str, token: str, outcome: Outcome) -> tuple[Outcome, bool]:
        """Store ``outcome`` unless another owner finished first; (the stored one, ours?)."""
        with self._transaction() as db:
            row = db.execute("SELECT * FROM rewrites WHERE key = ?", (key,)).fetchone()
            if row is not None and row["state"] == "done":
                return _outcome(row), False
            values = {
                "state": "done",
                "owner": token,
                "messages": json.dumps(list(outcome.messages), ensure_ascii=False),
                "status": outcome.status,
                "reason": outcome.reason,
                "reply": outcome.reply,
                **{name: outcome.usage.get(name) for name in _USAGE},
                "finished_at": time.time(),
            }
            assignments = ", ".join(f"{name} = ?" for name in values)
            db.execute(f"UPDATE rewrites SET {assignments} WHERE key = ?", (*values.values(), key))
            return outcome, True

    def refresh(self, key: str, token: str) -> None:
        """Keep this owner's claim fresh while its call is in flight."""
        with self._transaction() as db:
            db.execute(
                "UPDATE rewrites SET claimed_at = ? WHERE key = ? AND owner = ? "
                "AND state = 'pending'",
                (time.time(), key, token),
            )

    def release(self, key: str, token: str) -> None:
        """Give up this owner's claim, so that a waiter claims it at once."""
        with self._transaction() as db:
            db.execute(
                "DELETE FROM rewrites WHERE key = ? AND owner = ? AND state = 'pending'",
                (key, token),
            )

    def rows(self) -> list[dict[str, Any]]:
        """Every entry, pending ones included."""
        with self._transaction() as db:
            return [dict(row) for row in db.execute("SELECT * FROM rewrites")]

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        # IMMEDIATE takes the write lock up front: a read-then-write cannot race another process.
        with self._lock:
            db = self._connection or self._open()
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(
            self.path,
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,
            check_same_thread=False,  # used from asyncio.to_thread's threads, one at a time
        )
        db.row_factory = sqlite3.Row
        try:
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            execute_when_unlocked(db, "PRAGMA journal_mode = WAL")
            execute_when_unlocked(db, _SCHEMA)
        except sqlite3.Error:
            db.close()
            raise
        self._connection = db
        return db


def _outcome(row: sqlite3.Row) -> Outcome:
    messages = tuple(json.loads(row["messages"]))
    usage = {name: row[name] for name in _USAGE}
    return Outcome(row["status"], messages, row["reason"], row["reply"], usage)


# -- session end ------------------------------------------------------------------------------


def store_path(config: pytest.Config) -> Path:
    """The run's store: :data:`STORE_FILE` in the session directory every worker shares."""
    from .session import session_state

    return session_state(config)[0] / STORE_FILE


def write_log(
    store: Path, out_dir: Path, *, redact: Callable[[Any], Any] | None = None
) -> Path | None:
    """Write ``prompt_optimizations.jsonl`` in ``out_dir``: one line per stored entry, sorted
    by target, template and optimizer, written atomically; ``redact`` is applied to each line.
    None (and no file) when the store is missing or empty."""
    if not store.exists():
        return None
    reader = RewriteStore(store)
    try:
        rows = reader.rows()
    finally:
        reader.close()
    if not rows:
        return None
    rows.sort(key=lambda row: (row["target"], row["template_hash"], row["optimizer"], row["key"]))
    lines = [json.dumps(_log_entry(row, redact), ensure_ascii=False) for row in rows]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / LOG_FILE
    partial = path.with_name(f".{LOG_FILE}.{os.getpid()}.tmp")
    partial.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.replace(partial, path)
    return path


def _log_entry(row: dict[str, Any], redact: Callable[[Any], Any] | None) -> dict[str, Any]:
    done = row["state"] == "done"
    original = json.loads(row["original"]) if row["original"] else None
    entry = {
        "target": row["target"],
        "target_model": row["target_model"],
        "optimizer": row["optimizer"],
        "optimizer_model": row["optimizer_model"],
        "template_hash": row["template_hash"],
        "status": row["status"] if done else "pending",
        "reason": row["reason"] if done else "the optimizer call never finished",
        "original": original,
        "rewritten": json.loads(row["messages"]) if row["status"] == "rewritten" else None,
        "reply": row["reply"],
        **{name: row[name] for name in _USAGE},
        "started_at": _iso(row["started_at"]),
        "finished_at": _iso(row["finished_at"]),
    }
    entry["response_cached"] = bool(entry["response_cached"])
    return redact(entry) if redact is not None else entry


def _iso(stamp: float | None) -> str | None:
    if stamp is None:
        return None
    moment = dt.datetime.fromtimestamp(stamp, dt.timezone.utc)
    return moment.isoformat(timespec="seconds")
