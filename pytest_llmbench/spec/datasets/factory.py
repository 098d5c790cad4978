"""Rows made by a Python factory: a ``module:function`` that returns or yields mappings.

The factory is imported relative to the eval file's folder; anything its code raises becomes a
one-line :class:`DatasetError` naming it.
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
        function = load_callable(ref, base_dir)
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
    except Exception as exc:
        raise DatasetError(f"factory {ref} raised {type(exc).__name__}: {exc}", None) from None
