"""The on-disk response cache: one SQLite file shared by every process of a run.

A key covers everything that determines an answer, the repeat index included, so the repeats of
a case stay independent samples and a second run of the same evals makes no call at all. Only
successes are stored: an error is retried on the next run, never replayed.

xdist workers write the same file at once. WAL lets readers run beside the one writer, the busy
timeout makes writers queue instead of failing, and autocommit keeps each ``put`` to one short
transaction, so the write lock is never held across a model call.

Each entry keeps when it was written (``created_at``, seconds since the epoch), the model id
it answers for (``model``) and the run that wrote it (``run``), so a run can treat entries past
``--cache-ttl`` as stale and ``llmbench cache`` can list, prune and clear them. Files written
before the ``model`` or ``run`` column existed gain it on first open (``model`` filled from each
stored answer's ``model_id``).

Two processes (or two items of one) may miss the same key at once and both call the model; the
answers may differ. ``put`` with ``keep`` settles it in one transaction: the first answer
stored for the run stays, and the later caller continues from it, so every item of a run
continues from the one answer the file holds and a replay of the run finds every history.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import format_age as format_age  # re-exported: pacing, tests
from ..config import parse_age as parse_age  # re-exported: tests
from ..models import Completion
from ..yamlguard import json_text
from .shared_sqlite import SharedSqlite, execute_when_unlocked

#: Bumped when the key's layout changes, so old entries stop matching instead of lying.
_KEY_VERSION = 1
#: Call parameters that change how an answer is fetched, not what it is.
_IGNORED_PARAMS = frozenset({"timeout", "max_retries", "stream", "stream_options", "api_key"})

#: The cache's file name inside its folder (``--cache-dir``).
CACHE_FILE = "responses.sqlite"

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS responses "
    "(key TEXT PRIMARY KEY, value TEXT NOT NULL, created_at REAL, model TEXT, run TEXT)"
)


def cache_path(folder: Path) -> Path:
    """The cache file in ``folder`` (the run's ``--cache-dir``)."""
    return Path(folder) / CACHE_FILE


@dataclass(frozen=True)
class CacheEntry:
    """One stored answer and when it was written."""

    completion: Completion
    created_at: float | None  #: seconds since the epoch; None in rows that never had it
    run: str | None = None  #: the run that wrote it; None in rows written before runs were kept


@dataclass(frozen=True)
class EntryInfo:
    """What ``llmbench cache list`` shows of an entry, without its answer."""

    key: str
    model: str | None  #: the model id the answer is for
    created_at: float | None  #: seconds since the epoch
    size: int  #: bytes of the stored answer


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


class ResponseCache(SharedSqlite):
    """Completions by ``cache_key``, in one SQLite file that many processes may share.

    Nothing touches the disk until the first ``get``, ``put`` or ``len``. Each thread gets its
    own connection; ``close`` closes them all and a later use opens new ones.
    """

    def get(self, key: str) -> Completion | None:
        """The stored completion for ``key``, or None when there is none."""
        entry = self.entry(key)
        return None if entry is None else entry.completion

    def entry(self, key: str) -> CacheEntry | None:
        """The stored completion for ``key`` and when it was written, or None."""
        try:
            return _read_entry(self._connection(), key)
        except sqlite3.Error as exc:
            raise self._error(exc) from exc

    def put(
        self,
        key: str,
        completion: Completion,
        *,
        model: str | None = None,
        run: str | None = None,
        keep: Callable[[CacheEntry], bool] | None = None,
    ) -> Completion:
        """Store ``completion`` under ``key`` for ``model`` (default: the completion's
        ``model_id``), written now by ``run``, replacing any earlier answer, unless ``keep``
        says to keep the entry found there; return the answer the entry holds then.

        The look and the write are one transaction, so of processes storing the same key at
        once, each sees the entry the others wrote before it.
        """
        if completion.text is None:
            raise ValueError("refusing to cache a completion without text: errors are not cached")
        value = json.dumps(dataclasses.asdict(completion), ensure_ascii=False)
        row = (key, value, time.time(), model or completion.model_id, run)
        try:
            return _put_unless_kept(self._connection(), row, completion, keep)
        except sqlite3.Error as exc:
            raise self._error(exc) from exc

    def entries(self, model: str | None = None) -> list[EntryInfo]:
        """Every entry (of ``model`` only, when given), newest first, without its answer."""
        sql = "SELECT key, model, created_at, length(CAST(value AS BLOB)) FROM responses"
        rows = self._execute(*_where_model(sql, model, "ORDER BY created_at DESC, key"))
        return [EntryInfo(*row) for row in rows.fetchall()]

    def prune(self, older_than_s: float, model: str | None = None) -> int:
        """Delete the entries written more than ``older_than_s`` seconds ago (and those that
        never recorded when); return how many went."""
        cutoff = time.time() - older_than_s
        sql, parameters = _where_model("DELETE FROM responses", model)
        aged = " AND " if parameters else " WHERE "
        aged += "(created_at IS NULL OR created_at < ?)"
        return int(self._execute(sql + aged, (*parameters, cutoff)).rowcount)

    def clear(self, model: str | None = None) -> int:
        """Delete every entry (of ``model`` only, when given); return how many went."""
        return int(self._execute(*_where_model("DELETE FROM responses", model)).rowcount)

    def __len__(self) -> int:
        return int(self._execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def _prepare(self, connection: sqlite3.Connection) -> None:
        execute_when_unlocked(connection, _SCHEMA)
        _add_model_column(connection)
        _add_column(connection, "run")

    def _error(self, exc: Exception) -> CacheError:
        return CacheError(
            f"{self.path}: cannot use this file as the llmbench response cache ({exc}); "
            "delete it or choose another cache path"
        )


def _read_entry(connection: sqlite3.Connection, key: str) -> CacheEntry | None:
    """The entry stored under ``key``, or None when there is none or it no longer decodes."""
    sql = "SELECT value, created_at, run FROM responses WHERE key = ?"
    row = connection.execute(sql, (key,)).fetchone()
    completion = None if row is None else _decode(row[0])
    return None if completion is None else CacheEntry(completion, row[1], row[2])


def _put_unless_kept(
    connection: sqlite3.Connection,
    row: tuple[str, str, float, str | None, str | None],
    completion: Completion,
    keep: Callable[[CacheEntry], bool] | None,
) -> Completion:
    """Write ``row`` (key, value, created_at, model, run) unless ``keep`` keeps the entry
    already there; the answer the entry holds after. BEGIN IMMEDIATE takes the write lock
    before the look, so no other process writes the key between the two."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        found = None if keep is None else _read_entry(connection, row[0])
        if found is not None and keep is not None and keep(found):
            connection.execute("COMMIT")
            return found.completion
        connection.execute(
            "INSERT OR REPLACE INTO responses (key, value, created_at, model, run) "
            "VALUES (?, ?, ?, ?, ?)",
            row,
        )
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    return completion


def _add_column(connection: sqlite3.Connection, name: str) -> bool:
    """Add the TEXT column ``name`` to a file written before it existed; whether this call
    added it. Processes opening the file at once race harmlessly: one adds the column, the
    others find it added."""
    columns = {row[1] for row in connection.execute("PRAGMA table_info(responses)")}
    if name in columns:
        return False
    try:
        execute_when_unlocked(connection, f"ALTER TABLE responses ADD COLUMN {name} TEXT")
    except sqlite3.OperationalError as exc:
        if "duplicate column" in str(exc):
            return False
        raise
    return True


def _add_model_column(connection: sqlite3.Connection) -> None:
    """Give a file written before entries named their model a ``model`` column, filled from
    each answer's ``model_id``."""
    if not _add_column(connection, "model"):
        return
    connection.execute("BEGIN IMMEDIATE")  # one transaction, not one per row
    try:
        rows = connection.execute("SELECT key, value FROM responses WHERE model IS NULL")
        named = [(_model_of(value), key) for key, value in rows.fetchall()]
        connection.executemany("UPDATE responses SET model = ? WHERE key = ?", named)
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def _model_of(value: str) -> str | None:
    """The ``model_id`` of a stored answer, or None when it holds none."""
    try:
        model = json.loads(value).get("model_id")
    except (ValueError, AttributeError):
        return None
    return model if isinstance(model, str) else None


def _where_model(sql: str, model: str | None, tail: str = "") -> tuple[str, tuple[str, ...]]:
    """``sql`` limited to ``model``'s entries when one is given, then ``tail``."""
    if model is None:
        return f"{sql} {tail}".strip(), ()
    return f"{sql} WHERE model = ? {tail}".strip(), (model,)


def _decode(value: str) -> Completion | None:
    """A stored completion, or None when it no longer matches ``Completion`` (then a miss)."""
    try:
        return Completion(**json.loads(value))
    except (TypeError, ValueError):
        return None
