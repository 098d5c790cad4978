"""Retrieved context: the documents a RAG case answers from.

A case (``context:``) or a dataset row (a ``context`` column, or one mapped with
``columns: {context: <column>}``) gives its context as one string or a list (its *chunks*, in
retrieval order); a CSV cell may hold a JSON list. A list's items are strings, or documents as
RAG logs write them: a mapping whose text is in ``page_content`` (LangChain's ``Document``),
``text`` (LlamaIndex's nodes) or ``content`` (Haystack's ``Document``); their other fields
(metadata, ids, scores) are left out. :func:`context_chunks` reads any of these into a tuple of
chunks; :func:`context_text` joins them for ``{{context}}`` in templates (chunks separated by
a blank line). A solver may hand back the context it retrieved
(:mod:`pytest_llmbench.engine.solver`); :func:`context_record` is the record's ``context``
field either way.

Two absences are kept apart, however the context arrives: *no context given* (no key,
``null``, an empty string: a CSV cell cannot say more) is None, and a metric that needs one is
a collection error (or, from a solver, an error of the item); an *empty retrieval* (``[]``,
``"[]"`` in a cell) is ``()``, and the metrics that read it are unchecked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

#: The template variable (and case key, and dataset column) that holds the context.
CONTEXT_VAR = "context"
#: What separates two chunks in ``{{context}}``.
CHUNK_SEPARATOR = "\n\n"
#: Where the context a judge used came from.
ContextSource = Literal["case", "solver"]
#: The fields a retrieved document's text is read from, as LangChain, LlamaIndex and Haystack
#: write it. A document has exactly one of them: with two, which is the chunk is a guess.
DOCUMENT_TEXT_KEYS = ("page_content", "text", "content")
#: The shapes a context may take, as every error about one names them.
ACCEPTED_SHAPES = (
    "a string, or a list (the chunks in retrieval order; [] for a retrieval that found "
    "nothing) of strings or of documents with one text field: 'page_content' (LangChain), "
    "'text' (LlamaIndex) or 'content' (Haystack)"
)


class ContextError(ValueError):
    """A context value that is none of :data:`ACCEPTED_SHAPES`."""


def context_chunks(value: Any) -> tuple[str, ...] | None:
    """The chunks of a written context: a string is one chunk (or, when it is a JSON list of
    strings or documents, that list's chunks), a list its chunks, each a string or a
    document's text; ``[]`` is an empty retrieval, ``()``; None and a blank string mean no
    context.

    Raises :class:`ContextError` for anything else, naming the accepted shapes.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        listed = _json_list(value)
        return (value,) if listed is None else chunks_of(listed)
    if isinstance(value, (list, tuple)):
        return chunks_of(value)
    raise ContextError(f"context must be {ACCEPTED_SHAPES}; got {_kind(value)}")


def chunks_of(items: Sequence[Any]) -> tuple[str, ...]:
    """The chunks of a context's list: each item a string or a document's text."""
    return tuple(_chunk(item, index) for index, item in enumerate(items))


def _chunk(item: Any, index: int) -> str:
    if isinstance(item, str):
        return item
    fields = _text_fields(item)
    if fields is None:
        raise ContextError(f"context[{index}] is {_kind(item)}; context must be {ACCEPTED_SHAPES}")
    if len(fields) != 1:
        found = "several text fields" if fields else "no text field"
        raise ContextError(
            f"context[{index}] is a document with {found} ({_names(item)}); a document needs "
            "exactly one of 'page_content', 'text' or 'content'"
        )
    ((name, text),) = fields.items()
    if not isinstance(text, str):
        raise ContextError(f"context[{index}].{name} must be a string, got {_kind(text)}")
    return text


def _text_fields(item: Any) -> dict[str, Any] | None:
    """The text fields a document has: a mapping's keys, or (a solver's LangChain ``Document``
    or LlamaIndex node) an object's attributes; None for a value that is no document."""
    if isinstance(item, Mapping):
        return {key: item[key] for key in DOCUMENT_TEXT_KEYS if key in item}
    if item is None or isinstance(item, (int, float, bool, bytes, list, tuple)):
        return None
    found = {}
    for name in DOCUMENT_TEXT_KEYS:
        try:  # a property may raise (LlamaIndex's .text on a node that holds no text)
            found[name] = getattr(item, name)
        except Exception:
            continue
    return found


def _names(item: Any) -> str:
    """What a document holds, as an error shows it: a mapping's first fields, or its type."""
    if not isinstance(item, Mapping):
        return f"a {type(item).__name__} object"
    names = ", ".join(repr(str(name)) for name in list(item)[:6])
    return f"fields: {names}" if names else "no field"


def _kind(value: Any) -> str:
    """What a value is, as an error names it: a list of objects reads 'a list', not 'a str'."""
    if value is None:
        return "null"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"{type(value).__name__} {repr(value)[:40]}"


def _json_list(text: str) -> list[Any] | None:
    """The items of a cell holding a JSON list of strings or documents (``["a", "b"]``,
    ``[]``), else None: the cell is then plain text (``[1, 2]`` included)."""
    stripped = text.strip()
    if not stripped.startswith("["):
        return None
    try:
        value = json.loads(stripped)
    except ValueError:
        return None
    if isinstance(value, list) and all(isinstance(item, (str, dict)) for item in value):
        return value
    return None


def context_text(chunks: Sequence[str]) -> str:
    """The context as ``{{context}}`` renders it: the chunks joined by a blank line (an empty
    retrieval renders as an empty string)."""
    return CHUNK_SEPARATOR.join(chunks)


def context_record(chunks: Sequence[str] | None, source: ContextSource) -> dict[str, Any] | None:
    """The record's ``context`` field: ``{"source": "case" | "solver", "chunks": [...]}``
    (``"chunks": []`` for an empty retrieval), or None when the item had no context."""
    if chunks is None:
        return None
    return {"source": source, "chunks": list(chunks)}
