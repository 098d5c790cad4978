"""Equality of JSON values, the one comparator of arguments and expected values.

Numbers compare by value (``1 == 1.0``, since JSON has one number type), but a boolean is never
a number (``true != 1``); strings exactly; lists element by element in order; objects key by
key, recursively. Nothing is compared as a substring.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def json_equal(left: Any, right: Any) -> bool:
    """Equality of two JSON values: numbers by value, booleans apart, containers recursively."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if is_number(left) or is_number(right):
        return is_number(left) and is_number(right) and left == right
    if isinstance(left, Mapping) or isinstance(right, Mapping):
        if not (isinstance(left, Mapping) and isinstance(right, Mapping)):
            return False
        if set(left) != set(right):
            return False
        return all(json_equal(left[key], right[key]) for key in left)
    if is_list(left) or is_list(right):
        if not (is_list(left) and is_list(right)) or len(left) != len(right):
            return False
        return all(json_equal(a, b) for a, b in zip(left, right, strict=True))
    return type(left) is type(right) and bool(left == right)


def is_number(value: Any) -> bool:
    """An int or float that is not a boolean."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_list(value: Any) -> bool:
    """A list or tuple (a JSON array)."""
    return isinstance(value, list | tuple)
