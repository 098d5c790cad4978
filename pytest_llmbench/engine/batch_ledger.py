"""Which calls were sent in which provider batch: a SQLite ledger beside the response cache,
and the run's human-readable journal of the same (``batches.jsonl`` in its results folder).

The ledger (``<cache_dir>/batches.sqlite``) is shared by the xdist workers of a run and kept
across runs, so a call is paid for once: before a process sends a call in a batch it claims
the call's custom_id (its response-cache key) in one ``BEGIN IMMEDIATE`` transaction
(:meth:`BatchLedger.claim`). A key nobody holds becomes this process's, in a pending batch; a
key a batch already holds (sent, running or finished, by this run, another worker or an earlier
run that was killed) is answered with that batch's id, and the caller waits on that batch
instead of sending the call again.

A pending batch is a claim whose create call has not returned yet (its id is ``pending-...``).
When the run that made it is gone (killed between sending and writing the id down), the next
run adopts it (:meth:`BatchLedger.adopt`): it asks the provider for a batch holding its input
(``find(input_sha256)``) and either records the id found or releases the keys to be sent anew.

The journal (:class:`BatchJournal`) is append-only JSON lines, each written and flushed at
once: ``creating`` (before the create call), ``created`` (its id), ``ended`` (its final
state), ``recovered``/``resent`` (a pending batch after a kill). ``--resume-batch DIR`` reads
it back into the ledger (:func:`load_journal`), so a run can resume from its results folder
even where the cache folder is gone.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .shared_sqlite import SharedSqlite, execute_when_unlocked

#: The ledger's file name inside the response cache's folder.
LEDGER_FILE = "batches.sqlite"
#: Ids of batches whose create call has not returned yet start with this.
PENDING = "pending-"

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS batches (batch_id TEXT PRIMARY KEY, backend TEXT NOT NULL, "
    "endpoint TEXT NOT NULL, kind TEXT NOT NULL, input_sha256 TEXT NOT NULL, "
    "created_at REAL NOT NULL, status TEXT NOT NULL, run_id TEXT, lines INTEGER NOT NULL, "
    "done INTEGER NOT NULL DEFAULT 0, ended_at REAL)",
    "CREATE TABLE IF NOT EXISTS lines (custom_id TEXT PRIMARY KEY, batch_id TEXT NOT NULL, "
    "state TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS lines_by_batch ON lines (batch_id)",
)

#: A line's states: sent in its batch, answered (written to the response cache), or ended
#: without an answer (the batch failed, expired, was cancelled, or its line was bad).
SENT, DONE, ERROR = "sent", "done", "error"


def ledger_path(cache_dir: Path) -> Path:
    """The ledger in the response cache's folder."""
    return Path(cache_dir) / LEDGER_FILE


def input_sha256(custom_ids: Sequence[str], attempt: str) -> str:
    """A batch's input hash: the sha256 of the attempt's id (its pending id) and its
    custom_ids in the order sent, one a line.

    A custom_id is the call's response-cache key, a digest of everything the call sends, so
    this names the batch's input as well as a hash of the uploaded file would, whichever
    backend writes the file. The attempt makes it this attempt's alone: the same calls sent
    again (an earlier batch of them failed or expired) are another batch, which a look-up by
    hash (after a create whose answer was lost) must not take for this one.
    """
    return hashlib.sha256("\n".join([attempt, *custom_ids]).encode("ascii")).hexdigest()


@dataclass(frozen=True)
class BatchRow:
    """A batch as the ledger knows it."""

    batch_id: str
    backend: str
    endpoint: str
    kind: str
    input_sha256: str
    created_at: float
    status: str  #: ``pending``, or the last polled status (in_progress, completed...)
    run_id: str | None  #: the run that sent it (or adopted it)
    lines: int
    done: int = 0
    ended_at: float | None = None

    @property
    def pending(self) -> bool:
        """Its create call has not returned (or its run died before it did)."""
        return self.batch_id.startswith(PENDING)


@dataclass(frozen=True)
class Claim:
    """What :meth:`BatchLedger.claim` gave: the keys now this process's to send, in a
    pending batch, and the others, each with the batch that holds it."""

    pending_id: str | None  #: the pending batch of the claimed keys (None: none claimed)
    claimed: tuple[str, ...]
    held: Mapping[str, str]  #: key -> the batch id (or pending id) that holds it


class BatchLedger(SharedSqlite):
    """The ledger file, opened on first use; one connection per thread."""

    # -- claims ----------------------------------------------------------------------------
    def claim(
        self,
        keys: Sequence[str],
        *,
        backend: str,
        endpoint: str,
        kind: str,
        run_id: str | None,
    ) -> Claim:
        """Claim ``keys`` at once: the free ones go to a new pending batch of this process,
        the others are answered with the batch that holds them (never sent again).

        A key another run's batch already answered is claimed anew (sampled again), not
        collected from that batch: a call reaches the ledger only when the response cache gave
        no answer it may use (``--cache=off``, ``refresh``, an entry past ``--cache-ttl``, or
        another cache folder), and an earlier run's answer is then not this run's. A key
        still waiting in a batch (this run's, another worker's, a killed run's) is that
        batch's."""
        unique = list(dict.fromkeys(keys))
        with self._transaction() as connection:
            held = dict(self._holders(connection, unique))
            for key in self._answered_by_others(connection, list(held), run_id):
                connection.execute("DELETE FROM lines WHERE custom_id = ?", (key,))
                del held[key]
            free = [key for key in unique if key not in held]
            if not free:
                return Claim(None, (), held)
            pending = f"{PENDING}{uuid.uuid4().hex}"
            connection.execute(
                "INSERT INTO batches (batch_id, backend, endpoint, kind, input_sha256, "
                "created_at, status, run_id, lines) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
                (pending, backend, endpoint, kind, input_sha256(free, pending), time.time(), run_id,
                 len(free)),
            )  # fmt: skip
            connection.executemany(
                "INSERT INTO lines (custom_id, batch_id, state) VALUES (?, ?, ?)",
                [(key, pending, SENT) for key in free],
            )
        return Claim(pending, tuple(free), held)

    def created(self, pending_id: str, batch_id: str) -> None:
        """The pending batch was created: it and its lines go by the provider's id now."""
        with self._transaction() as connection:
            self._rename(connection, pending_id, batch_id)

    def release(self, pending_id: str) -> list[str]:
        """Forget a pending batch that was never created (its create call failed, or a killed
        run's that the provider does not know): its keys are free to be sent again."""
        with self._transaction() as connection:
            keys = self._keys(connection, pending_id)
            connection.execute("DELETE FROM lines WHERE batch_id = ?", (pending_id,))
            connection.execute("DELETE FROM batches WHERE batch_id = ?", (pending_id,))
        return keys

    def adopt(self, pending_id: str, run_id: str | None) -> BatchRow | None:
        """Take over a pending batch of another run (one that died before its create call
        returned): it is this run's from now on. None when another process adopted it first or
        it is no longer pending."""
        with self._transaction() as connection:
            row = self._row(connection, pending_id)
            if row is None or row.run_id == run_id:
                return None
            connection.execute(
                "UPDATE batches SET run_id = ? WHERE batch_id = ?", (run_id, pending_id)
            )
        return row

    def disown(self, pending_id: str, run_id: str | None) -> None:
        """Give back a pending batch ``run_id`` adopted and could not recover (the provider
        did not answer): the next follower adopts it and asks again."""
        with self._transaction() as connection:
            connection.execute(
                "UPDATE batches SET run_id = NULL WHERE batch_id = ? AND run_id IS ?",
                (pending_id, run_id),
            )

    # -- states ------------------------------------------------------------------------------
    def polled(self, batch_id: str, status: str, done: int) -> None:
        """Note the batch's state as last polled."""
        self._execute(
            "UPDATE batches SET status = ?, done = ? WHERE batch_id = ?", (status, done, batch_id)
        )

    def ended(self, batch_id: str, status: str, done: int) -> None:
        """The batch reached a terminal state (its results were read)."""
        self._execute(
            "UPDATE batches SET status = ?, done = ?, ended_at = ? WHERE batch_id = ?",
            (status, done, time.time(), batch_id),
        )

    def mark(self, keys: Iterable[str], state: str) -> None:
        """Set the state of the lines ``keys`` (:data:`DONE` or :data:`ERROR`)."""
        with self._transaction() as connection:
            connection.executemany(
                "UPDATE lines SET state = ? WHERE custom_id = ?", [(state, k) for k in keys]
            )

    def forget_lines(self, batch_id: str, keys: Iterable[str]) -> None:
        """Free ``keys`` that ``batch_id`` ended without answering: a later run sends them anew
        (that batch, failed, expired or cancelled, will never answer them)."""
        with self._transaction() as connection:
            connection.executemany(
                "DELETE FROM lines WHERE custom_id = ? AND batch_id = ?",
                [(key, batch_id) for key in keys],
            )

    def touch(self, batch_id: str, run_id: str | None) -> None:
        """The run ``run_id`` waits on ``batch_id`` (an earlier run's): its progress counts
        it."""
        self._execute("UPDATE batches SET run_id = ? WHERE batch_id = ?", (run_id, batch_id))

    # -- reading -----------------------------------------------------------------------------
    def batch(self, batch_id: str) -> BatchRow | None:
        """The batch ``batch_id`` (or pending id), or None."""
        return self._row(self._connection(), batch_id)

    def batches(self, run_id: str | None = None) -> list[BatchRow]:
        """Every batch (of ``run_id`` only, when given), oldest first."""
        sql = f"SELECT {_COLUMNS} FROM batches"
        rows = (
            self._execute(sql + " WHERE run_id = ? ORDER BY created_at", (run_id,))
            if run_id is not None
            else self._execute(sql + " ORDER BY created_at")
        )
        return [BatchRow(*row) for row in rows.fetchall()]

    def keys(self, batch_id: str) -> list[str]:
        """The custom_ids sent in ``batch_id``."""
        return self._keys(self._connection(), batch_id)

    def lines_done(self, batch_ids: Sequence[str]) -> int:
        """How many lines of ``batch_ids`` were answered (written to the response cache)."""
        total = 0
        for start in range(0, len(batch_ids), 500):
            chunk = list(batch_ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT COUNT(*) FROM lines WHERE state = ? AND batch_id IN ({marks})"
            total += int(self._execute(sql, (DONE, *chunk)).fetchone()[0])
        return total

    def holder(self, key: str) -> str | None:
        """The batch (or pending) id that holds ``key``, or None."""
        found = dict(self._holders(self._connection(), [key]))
        return found.get(key)

    def record(self, batch: BatchRow, keys: Sequence[str]) -> None:
        """Write a batch read from a journal (``--resume-batch``): its row unless the ledger
        has it, and each of its keys that no batch holds."""
        with self._transaction() as connection:
            connection.execute(
                "INSERT OR IGNORE INTO batches (batch_id, backend, endpoint, kind, input_sha256, "
                "created_at, status, run_id, lines, done) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (batch.batch_id, batch.backend, batch.endpoint, batch.kind, batch.input_sha256,
                 batch.created_at, batch.status, batch.run_id, batch.lines, batch.done),
            )  # fmt: skip
            connection.executemany(
                "INSERT OR IGNORE INTO lines (custom_id, batch_id, state) VALUES (?, ?, ?)",
                [(key, batch.batch_id, SENT) for key in keys],
            )

    # -- internals ---------------------------------------------------------------------------
    def _holders(self, connection: sqlite3.Connection, keys: Sequence[str]) -> Iterator[Any]:
        for start in range(0, len(keys), 500):  # SQLite's bound on variables
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT custom_id, batch_id FROM lines WHERE custom_id IN ({marks})"
            yield from connection.execute(sql, chunk).fetchall()

    def _answered_by_others(
        self, connection: sqlite3.Connection, keys: Sequence[str], run_id: str | None
    ) -> list[str]:
        """Of ``keys``, those answered by a batch of another run than ``run_id``."""
        found = []
        for key in keys:
            row = connection.execute(
                "SELECT lines.state, batches.run_id FROM lines JOIN batches "
                "ON lines.batch_id = batches.batch_id WHERE lines.custom_id = ?",
                (key,),
            ).fetchone()
            if row is not None and row[0] == DONE and row[1] != run_id:
                found.append(key)
        return found

    def _keys(self, connection: sqlite3.Connection, batch_id: str) -> list[str]:
        rows = connection.execute(
            "SELECT custom_id FROM lines WHERE batch_id = ? ORDER BY rowid", (batch_id,)
        )
        return [row[0] for row in rows.fetchall()]

    def _row(self, connection: sqlite3.Connection, batch_id: str) -> BatchRow | None:
        sql = f"SELECT {_COLUMNS} FROM batches WHERE batch_id = ?"
        row = connection.execute(sql, (batch_id,)).fetchone()
        return None if row is None else BatchRow(*row)

    def _rename(self, connection: sqlite3.Connection, old: str, new: str) -> None:
        connection.execute(
            "UPDATE batches SET batch_id = ?, status = 'in_progress', created_at = ? "
            "WHERE batch_id = ?",
            (new, time.time(), old),
        )
        connection.execute("UPDATE lines SET batch_id = ? WHERE batch_id = ?", (new, old))

    def _transaction(self) -> _Transaction:
        return _Transaction(self)

    def _prepare(self, connection: sqlite3.Connection) -> None:
        for statement in _SCHEMA:
            execute_when_unlocked(connection, statement)

    def _error(self, exc: Exception) -> LedgerError:
        return LedgerError(
            f"{self.path}: cannot use this file as the llmbench batch ledger ({exc}); "
            "delete it (the batches it lists are then sent again) or choose another --cache-dir"
        )


_COLUMNS = (
    "batch_id, backend, endpoint, kind, input_sha256, created_at, status, run_id, lines, done, "
    "ended_at"
)


class LedgerError(Exception):
    """The ledger file cannot be used."""


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on an error) on this thread's
    connection: the write lock is taken before the first read, so no other process changes a
    key between the look and the write."""

    def __init__(self, ledger: BatchLedger) -> None:
        self._ledger = ledger
        self._connection: sqlite3.Connection | None = None

    def __enter__(self) -> sqlite3.Connection:
        connection = self._ledger._connection()
        try:
            connection.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._ledger._error(exc) from exc
        self._connection = connection
        return connection

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        assert self._connection is not None
        if kind is None:
            self._connection.execute("COMMIT")
        else:
            self._connection.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise self._ledger._error(exc) from exc


# -- the journal ---------------------------------------------------------------------------


class BatchJournal:
    """``batches.jsonl`` in the run's results folder: one JSON object a line, appended,
    flushed and synced at once (a run killed after a line was written keeps it)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def write(self, event: str, **fields: Any) -> None:
        """Append the event ``event`` with ``fields`` and the time."""
        line = json.dumps({"event": event, "at": time.time(), **fields}, ensure_ascii=False)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as stream:
                stream.write(line + "\n")
                stream.flush()
                os.fsync(stream.fileno())


def read_journal(path: Path) -> list[dict[str, Any]]:
    """The events of a journal, in order; a line that is not a JSON object (the last one, cut
    by a kill) is skipped."""
    events = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("event"), str):
            events.append(event)
    return events


def load_journal(path: Path, ledger: BatchLedger) -> int:
    """Write the batches of the journal at ``path`` into ``ledger`` (those it does not know
    yet); how many batches the journal names.

    A batch the journal saw created goes in by its id; one it saw only ``creating`` (the run
    was killed before the id came back) goes in as a pending batch of no run, which the run
    adopts: the provider is asked for it by its input hash, else its calls are sent anew. A
    call in several batches is the newest one's.
    """
    creating: dict[str, dict[str, Any]] = {}
    created: dict[str, str] = {}
    ended: dict[str, str] = {}
    for event in read_journal(path):
        pending = event.get("pending_id")
        if event["event"] == "creating" and isinstance(pending, str):
            creating[pending] = event
        elif event["event"] in ("created", "recovered") and isinstance(pending, str):
            created[pending] = str(event["batch_id"])
        elif event["event"] == "resent" and isinstance(pending, str):
            creating.pop(pending, None)
        elif event["event"] == "ended":
            ended[str(event["batch_id"])] = str(event.get("status"))
    # Newest first: a call sent again (its earlier batch ended without its answer, then a
    # retry sent it) is the newer batch's, never collected from the older one and sent anew.
    for pending, event in reversed(creating.items()):
        batch_id = created.get(pending, pending)
        row = BatchRow(
            batch_id=batch_id,
            backend=str(event.get("backend")),
            endpoint=str(event.get("endpoint")),
            kind=str(event.get("kind", "chat")),
            input_sha256=str(event.get("input_sha256")),
            created_at=float(event.get("at", time.time())),
            status=ended.get(batch_id, "pending" if batch_id == pending else "in_progress"),
            run_id=None,
            lines=len(event.get("custom_ids") or ()),
        )
        ledger.record(row, [str(key) for key in event.get("custom_ids") or ()])
    return len(creating)
