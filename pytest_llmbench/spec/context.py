"""Retrieved context: the documents a RAG case answers from.

A case (``context:``) or a dataset row (a ``context`` column, or one mapped with
``columns: {context: <column>}``) gives its context as one string or a list of strings (its
*chunks*, in retrieval order); a CSV cell may hold a JSON list. :func:`context_chunks` reads
any of these into a tuple of chunks; :func:`context_text` joins them for ``{{context}}`` in
templates (chunks separated by a blank line). A solver may hand back the context it retrieved
(:mod:`pytest_llmbench.engine.solver`); :func:`context_record` is the record's ``context``
field either way.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

#: The template variable (and case key, and dataset column) that holds the context.
CONTEXT_VAR = "context"
#: What separates two chunks in ``{{context}}``.
CHUNK_SEPARATOR = "\n\n"
#: Where the context a judge used came from.
ContextSource = Literal["case", "solver"]


class ContextError(ValueError):
    """A context value that is not a string or a list of strings."""


def context_chunks(value: Any) -> tuple[str, ...] | None:
    """The chunks of a written context: a string is one chunk (or, when it is a JSON list of
    strings, that list's chunks), a list of strings its chunks; None and ``""`` mean no context.

    Raises :class:`ContextError` for anything else (a number, a list holding a non-string).
    """
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return _json_list(value) or (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return tuple(value)
    shown = type(value).__name__
    raise ContextError(f"context must be a string or a list of strings, got {shown}")


def _json_list(text: str) -> tuple[str, ...] | None:
    """The chunks of a cell holding a JSON list of strings (``["a", "b"]``), else None."""
    stripped = text.strip()
    if not stripped.startswith("["):
        return None
    try:
        value = json.loads(stripped)
    except ValueError:
        return None
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    return None


def context_text(chunks: Sequence[str]) -> str:
    """The context as ``{{context}}`` renders it: the chunks joined by a blank line."""
    return CHUNK_SEPARATOR.join(chunks)


def context_record(chunks: Sequence[str] | None, source: ContextSource) -> dict[str, Any] | None:
    """The record's ``context`` field: ``{"source": "case" | "solver", "chunks": [...]}``, or
    None when the item had no context."""
    if chunks is None:
        return None
    return {"source": source, "chunks": list(chunks)}
