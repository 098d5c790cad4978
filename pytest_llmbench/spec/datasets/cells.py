"""The structured cells of a row: multiple-choice options, their answer, and images.

A choices cell is a list, an ARC-style ``{text, label}`` struct, or several columns; an image cell
is a path (relative to the dataset's folder), a URL, image bytes, a Hugging Face image struct
``{bytes, path}`` or a list of them. A CSV cell may hold either as a JSON list.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

from .source import RowError

_URL = re.compile(r"^(?:https?|data):", re.IGNORECASE)


def choices(
    columns: str | tuple[str, ...] | None, fields: dict[str, Any]
) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """The row's choices and their labels, from a list or {text, label} column or columns."""
    if columns is None:
        return None, None
    if isinstance(columns, tuple):
        return tuple(_choice_text(fields[column], column) for column in columns), None
    value = _json_list(fields[columns])
    if value is None or value == "":
        return None, None
    labels = None
    if isinstance(value, dict) and "text" in value:  # ARC: {"text": [...], "label": [...]}
        value, labels = value["text"], _choice_list(value.get("label"), columns, "labels")
    texts = _choice_list(value, columns, "choices")
    if labels is not None and len(labels) != len(texts or ()):
        raise RowError(f"{columns!r} has {len(labels)} labels for {len(texts or ())} choices")
    return texts, labels


def _choice_list(value: Any, column: str, what: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise RowError(f"{what} in {column!r} must be a non-empty list, got {value!r:.60}")
    return tuple(_choice_text(item, column) for item in value)


def _choice_text(value: Any, column: str) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise RowError(f"a choice in {column!r} must be a non-empty string, got {value!r:.60}")
    return value


def answer(value: Any) -> Any:
    return None if value is None or value == "" else value


def images(value: Any, folder: Path) -> tuple[str, ...]:
    """Image refs from a path, URL, image struct ``{bytes, path}`` or a list of them."""
    value = _json_list(value)
    items = value if isinstance(value, list) else [value]
    return tuple(ref for item in items if (ref := _image_ref(item, folder)) is not None)


def _image_ref(item: Any, folder: Path) -> str | None:
    if isinstance(item, dict) and {"bytes", "path"} >= item.keys():  # a Hugging Face Image
        item = item.get("bytes") or item.get("path")
    if item is None or item == "":
        return None
    if isinstance(item, (bytes, bytearray)):
        return _data_url(bytes(item))
    if not isinstance(item, str):
        raise RowError(f"an image must be a path, a URL or image bytes, got {item!r:.60}")
    return item if _URL.match(item) else str((folder / item).resolve())


def _data_url(data: bytes) -> str:
    from ..images import sniff_image_type

    mime = sniff_image_type(data[:16])
    if mime is None:
        raise RowError("image bytes are not a png, jpeg, gif or webp image")
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _json_list(value: Any) -> Any:
    """A CSV cell holding a JSON list, parsed; any other value as it is."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):  # not JSON, an int past 4,300 digits, too deep
            raise RowError(f"cell {value!r:.60} starts with '[' but is not a JSON list") from None
    return value
