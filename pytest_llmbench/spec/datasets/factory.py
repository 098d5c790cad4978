"""Rows made by a Python factory: a ``module:function`` that returns or yields mappings.

The factory is imported relative to the eval file's folder; anything its code raises becomes a
one-line :class:`DatasetError` naming it: ``SystemExit`` (``sys.exit()``) and other
``BaseException`` subclasses too, which would otherwise end pytest as an internal error. Only
Ctrl-C (``KeyboardInterrupt``) and pytest's own outcomes (``pytest.skip``, ``pytest.exit``) go
through as they are. ``os._exit()`` ends the process before anything can see it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from ...userimport import UserImportError, load_callable
from .rows import Record, object_record
from .source import DatasetError

_T = TypeVar("_T")


def factory_records(ref: str, args: dict[str, Any], base_dir: Path) -> Iterator[Record]:
    """The mappings the factory returns or yields, as records; its errors become ours."""
    try:
        function = _guarded(ref, lambda: load_callable(ref, base_dir))  # its import runs code
    except UserImportError as exc:
        raise DatasetError(f"factory {exc}", None) from None
    result = _guarded(ref, lambda: function(**args))
    if isinstance(result, (str, bytes, Mapping)) or not isinstance(result, Iterable):
        kind = type(result).__name__
        raise DatasetError(f"factory {ref} returned {kind}, not an iterable of mappings", None)
    items = _guarded(ref, lambda: iter(result))
    for number in itertools.count(1):
        item = _guarded(ref, lambda: next(items, _END))
        if item is _END:
            return
        if not isinstance(item, Mapping):
            kind = type(item).__name__
            raise DatasetError(f"factory row {number}: expected a mapping, got {kind}", None)
        yield object_record(number, None, item)


_END = object()


def _guarded(ref: str, step: Callable[[], _T]) -> _T:
    """``step()``, any exception of the user's code becoming a one-line DatasetError."""
    try:
        return step()
    except UserImportError:
        raise
    except BaseException as exc:  # SystemExit and the like: the user's code, not pytest's end
        if isinstance(exc, KeyboardInterrupt) or _pytest_outcome(exc):
            raise
        what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise DatasetError(f"factory {ref} raised {what}", None) from None


def _pytest_outcome(exc: BaseException) -> bool:
    """``pytest.skip()`` or ``pytest.exit()``: the factory asks pytest itself to act."""
    import pytest  # loaded already under pytest; spec/ does not import it otherwise

    return isinstance(exc, (pytest.skip.Exception, pytest.exit.Exception))
