"""``llmbench cache stats | list | prune | clear``: the response cache seen and trimmed by hand.

Each subcommand opens the run's SQLite file (``--cache-dir``, default the folder the plugin
uses) through :class:`~pytest_llmbench.engine.cache.ResponseCache`, so it shares a run's WAL
mode and busy timeout: a prune or a clear while a run writes waits its turn and deletes only
what it names, in one short transaction. A folder without a cache is said so, and left as it
was (no file is made).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..config import DEFAULT_CACHE_DIR, OPTIONS, format_age, parse_age
from ..engine import CacheError, EntryInfo, ResponseCache, cache_path
from ..spec import UsageFailure

#: ``stats`` columns: entries younger than each bound (seconds), then ``older``.
AGE_BUCKETS: tuple[tuple[str, float], ...] = (("<1d", 86400), ("1-7d", 7 * 86400),
                                              ("7-30d", 30 * 86400))  # fmt: skip
#: How many hex digits of a key ``list`` shows.
KEY_PREFIX = 12


def add_cache_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``llmbench cache`` and its four subcommands on ``commands``."""
    cache = commands.add_parser("cache", help="See, prune or clear the response cache")
    actions = cache.add_subparsers(title="actions", required=True, metavar="ACTION")
    stats = actions.add_parser("stats", help="Entries and sizes per model and age")
    listing = actions.add_parser("list", help="Each entry: key prefix, model, age, size")
    prune = actions.add_parser("prune", help="Delete entries older than an age")
    prune.add_argument("--older-than", required=True, type=_age, metavar="AGE",
                       help="Delete entries written longer ago than AGE (90s, 30m, 12h, 14d)")  # fmt: skip
    clear = actions.add_parser("clear", help="Delete every entry (of one model with --model)")
    for action, command in ((stats, _stats), (listing, _list), (prune, _prune), (clear, _clear)):
        action.add_argument(OPTIONS["cache_dir"].flag, type=Path, default=Path(DEFAULT_CACHE_DIR),
                            metavar="DIR", help="Folder of the response cache "
                            f"(default {DEFAULT_CACHE_DIR}, as pytest's --cache-dir)")  # fmt: skip
        if action is not stats:
            action.add_argument("--model", metavar="ID",
                                help="Only the entries of this model id (as list shows it)")  # fmt: skip
        action.set_defaults(command=_opened(command))


def _age(text: str) -> float:
    try:
        return parse_age(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _opened(command: Callable[[ResponseCache, argparse.Namespace], str]) -> Any:
    """``command`` run on the cache of ``--cache-dir``: its text printed, exit 0; a folder
    without a cache says so; a file that is no cache is a usage error (exit 2)."""

    def run(args: argparse.Namespace) -> int:
        path = cache_path(args.cache_dir)
        if not path.is_file():
            print(f"llmbench: no response cache at {path}")
            return 0
        cache = ResponseCache(path)
        try:
            print(command(cache, args))
        except CacheError as exc:
            raise UsageFailure(str(exc)) from None
        finally:
            cache.close()
        return 0

    return run


def _list(cache: ResponseCache, args: argparse.Namespace) -> str:
    entries = cache.entries(args.model)
    now = time.time()
    rows = [
        (entry.key[:KEY_PREFIX], entry.model or "?", _age_of(entry, now), _size(entry.size))
        for entry in entries
    ]
    return _table(("key", "model", "age", "size"), rows, left=2) + f"\n{_count(len(entries))}"


def _stats(cache: ResponseCache, args: argparse.Namespace) -> str:
    entries = cache.entries()
    now = time.time()
    by_model: dict[str, list[EntryInfo]] = {}
    for entry in entries:
        by_model.setdefault(entry.model or "?", []).append(entry)
    head = ("model", "entries", "size", *(name for name, _ in AGE_BUCKETS), "older")
    rows = [_stats_row(model, group, now) for model, group in sorted(by_model.items())]
    if len(by_model) != 1:
        rows.append(_stats_row("all", entries, now))
    return f"{cache.path}: {_count(len(entries))}\n" + _table(head, rows)


def _stats_row(model: str, entries: Sequence[EntryInfo], now: float) -> tuple[str, ...]:
    buckets = Counter(_bucket(entry, now) for entry in entries)
    counts = [str(buckets[name]) for name, _ in AGE_BUCKETS] + [str(buckets["older"])]
    return (model, str(len(entries)), _size(sum(entry.size for entry in entries)), *counts)


def _bucket(entry: EntryInfo, now: float) -> str:
    """The ``stats`` column of ``entry``'s age (one without a write time counts as older)."""
    if entry.created_at is not None:
        for name, bound in AGE_BUCKETS:
            if now - entry.created_at < bound:
                return name
    return "older"


def _prune(cache: ResponseCache, args: argparse.Namespace) -> str:
    gone = cache.prune(args.older_than, args.model)
    scope = "" if args.model is None else f" of {args.model}"
    kept = len(cache)
    age = format_age(args.older_than)
    return f"llmbench: pruned {_count(gone)}{scope} older than {age} from {cache.path}; {kept} left"


def _clear(cache: ResponseCache, args: argparse.Namespace) -> str:
    gone = cache.clear(args.model)
    scope = "" if args.model is None else f" of {args.model}"
    return f"llmbench: cleared {_count(gone)}{scope} from {cache.path}; {len(cache)} left"


def _age_of(entry: EntryInfo, now: float) -> str:
    return "?" if entry.created_at is None else format_age(now - entry.created_at)


def _count(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


def _size(size: int) -> str:
    """Bytes for people: 512 B, 3.4 KB, 12.0 MB."""
    for unit, scale in (("MB", 1e6), ("KB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    """Columns padded to their widest cell: the first ``left`` to the left, the rest (numbers)
    to the right."""
    widths = [max(len(row[i]) for row in (head, *rows)) for i in range(len(head))]
    lines = []
    for row in (head, *rows):
        cells = [
            cell.ljust(width) if i < left else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)
