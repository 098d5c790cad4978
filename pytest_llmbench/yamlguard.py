"""Limits that user-given data must keep: YAML texts before they are composed, and the values
read from them (or from JSON files and dataset factories) before anything walks them.

PyYAML composes and builds recursively, so a file nested 100,000 levels deep crashes the
process (the C composer overflows the stack) and one 1,000 deep raises RecursionError; a
520-byte "billion laughs" file of nested aliases expands to millions of values; an alias inside
the collection its anchor names (``params: &p {self: *p}``) builds a value that holds itself.
:func:`check_yaml_limits` runs on the parser's events, which libyaml produces without recursion,
before anything is built. Eval files, datasets, profile files and schema files are read
through it.

A value that holds itself, or nests thousands of levels deep, breaks every recursive walker
after the loader (``json.dumps`` for cache keys, digests and templates, pydantic, the record's
encoding, xdist's transport). :func:`check_value` refuses both without recursing; the readers
of data that is not YAML (JSON lines, a factory's rows) call it, and :func:`json_text`, the
encoder of user values, names the place when a value still breaks it. This module is the one
place that knows these limits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

#: Collections may nest this deep; eval files, profiles and dataset rows need a handful.
MAX_DEPTH = 64
#: Values that aliases may add beyond the ones written out (``*anchor`` repeats its subtree).
MAX_ALIAS_VALUES = 100_000


class YamlLimitError(Exception):
    """A YAML text beyond :data:`MAX_DEPTH` or :data:`MAX_ALIAS_VALUES`, with a recursive
    alias, or not readable."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def check_yaml_limits(text: str, loader: type = yaml.SafeLoader) -> None:
    """Raise :class:`YamlLimitError` when ``text`` nests too deep (in what it writes out, or
    through aliases of deep anchors), its aliases expand too far, or an alias refers to a
    collection it is inside of (a value that would contain itself).

    Syntax errors are left to the loader that composes the text (they carry better context),
    except characters YAML does not allow (NUL, control characters), which are reported here
    with their line.
    """
    shape = _Shape()
    try:
        for event in yaml.parse(text, Loader=loader):
            shape.add(event)
    except yaml.reader.ReaderError as exc:
        raise YamlLimitError(_reader_message(exc), text[: exc.position].count("\n") + 1) from None
    except yaml.MarkedYAMLError:
        return  # the loader reports it, with its context


class _Shape:
    """The shape of the document so far, from the parser's events: the open collections (their
    anchor, values and levels so far) and the values and levels under every anchor."""

    def __init__(self) -> None:
        self.open: list[list[Any]] = []  # [anchor, values, levels] of each open collection
        #: (values, levels) under each anchor; None while its collection is open
        self.anchors: dict[str, tuple[int, int] | None] = {}
        self.expanded = 0  # values that aliases repeat

    def add(self, event: yaml.Event) -> None:
        anchor = getattr(event, "anchor", None)
        if isinstance(event, yaml.CollectionStartEvent):
            if len(self.open) >= MAX_DEPTH:
                raise YamlLimitError(f"nested more than {MAX_DEPTH} levels deep", _line(event))
            self.open.append([anchor, 1, 1])
            if anchor:
                self.anchors[anchor] = None  # an alias refers to the latest anchor of its name
            return
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, size, levels = self.open.pop()
        elif isinstance(event, yaml.ScalarEvent):
            size, levels = 1, 0
        elif isinstance(event, yaml.AliasEvent):
            anchor, (size, levels) = None, self._alias(event)
        else:
            return
        if anchor:
            self.anchors[anchor] = (size, levels)
        if self.open:
            parent = self.open[-1]
            parent[1] += size
            parent[2] = max(parent[2], levels + 1)

    def _alias(self, event: yaml.AliasEvent) -> tuple[int, int]:
        """The values and levels ``*anchor`` repeats, checked against the limits."""
        name = event.anchor or ""
        found = self.anchors.get(name, (1, 0))
        if found is None:
            message = (
                f"recursive alias: *{name} is inside the value &{name} names "
                "(a value cannot contain itself)"
            )
            raise YamlLimitError(message, _line(event))
        size, levels = found
        self.expanded += size
        if self.expanded > MAX_ALIAS_VALUES:
            message = f"aliases expand to more than {MAX_ALIAS_VALUES:,} values"
            raise YamlLimitError(message, _line(event))
        if len(self.open) + levels > MAX_DEPTH:
            message = f"nested more than {MAX_DEPTH} levels deep through *{name}"
            raise YamlLimitError(message, _line(event))
        return size, levels


def _line(event: yaml.Event) -> int | None:
    mark = event.start_mark
    return None if mark is None else mark.line + 1


def _reader_message(exc: yaml.reader.ReaderError) -> str:
    character = exc.character
    code = ord(character) if isinstance(character, str) else character
    return f"character #x{code:04x} is not allowed in YAML (control characters and NUL are not)"


# -- values ---------------------------------------------------------------------------------


class ValueLimitError(ValueError):
    """A value that contains itself or nests deeper than allowed; ``loc`` is where inside it
    (mapping keys and list indices from the top), ``message`` says what, naming that place."""

    def __init__(self, problem: str, loc: tuple[Any, ...]) -> None:
        self.loc = loc
        self.message = f"{_dotted(loc)}: {problem}" if loc else problem
        super().__init__(self.message)


def check_value(value: Any, max_depth: int = MAX_DEPTH, within: tuple[Any, ...] = ()) -> None:
    """Raise :class:`ValueLimitError` when ``value`` (mappings, lists and tuples within
    mappings, lists and tuples) contains itself or nests more than ``max_depth`` levels;
    ``within``: where ``value`` is, the start of the place an error names.

    A container met twice without being inside itself (a YAML alias used twice) is fine. The
    walk uses no recursion and looks into each container once, so it costs one pass.
    """
    if not isinstance(value, (Mapping, list, tuple)):
        return
    heights: dict[int, int] = {}  # levels at and below each container looked into
    path: list[_Frame] = [_Frame(value)]
    inside = {id(value)}
    while path:
        frame = path[-1]
        child = frame.next_container()
        if child is None:
            path.pop()
            inside.discard(id(frame.node))
            heights[id(frame.node)] = frame.height
            if path:
                path[-1].height = max(path[-1].height, frame.height + 1)
            continue
        if id(child) in inside:
            raise ValueLimitError("the value contains itself", within + _loc(path))
        below = heights.get(id(child))
        if len(path) + (below or 1) > max_depth:
            message = f"nested more than {max_depth} levels deep"
            raise ValueLimitError(message, within + _loc(path))
        if below is not None:
            frame.height = max(frame.height, below + 1)
            continue
        path.append(_Frame(child))
        inside.add(id(child))


class _Frame:
    """A container being looked into: its children still to look at, and its height so far."""

    __slots__ = ("height", "items", "key", "node")

    def __init__(self, node: Any) -> None:
        self.node = node
        self.items: Iterator[tuple[Any, Any]] = iter(
            node.items() if isinstance(node, Mapping) else enumerate(node)
        )
        self.key: Any = None  # the key (or index) of the child looked at now
        self.height = 1

    def next_container(self) -> Any:
        for key, child in self.items:
            if isinstance(child, (Mapping, list, tuple)):
                self.key = key
                return child
        return None


def _loc(path: list[_Frame]) -> tuple[Any, ...]:
    return tuple(frame.key for frame in path)


#: A place deeper than this many keys is shown by its first ones (a 10,000-deep value's is long).
_SHOWN_PARTS = 8


def _dotted(loc: tuple[Any, ...]) -> str:
    shown = ".".join(str(part) for part in loc[:_SHOWN_PARTS])
    return shown + ("..." if len(loc) > _SHOWN_PARTS else "")


def json_text(value: Any, *, canonical: bool = False) -> str:
    """``value`` as JSON text (non-ASCII kept); ``canonical``: sorted keys and no whitespace,
    the same text in every process whatever the dict order (cache keys, digests).

    Raises :class:`ValueLimitError` naming the place when ``value`` contains itself or nests
    past what the encoder's recursion allows; TypeError for what JSON cannot hold.
    """
    try:
        if canonical:
            return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return json.dumps(value, ensure_ascii=False)
    except (ValueError, RecursionError):
        check_value(value)  # names the place of a value that holds itself or nests too deep
        raise


def json_value(text: str) -> Any:
    """The value of the JSON ``text``, refused when it nests more than :data:`MAX_DEPTH` levels
    (:class:`ValueLimitError`); ``json.JSONDecodeError`` for text that is no JSON."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueLimitError(f"nested more than {MAX_DEPTH} levels deep", ()) from None
    check_value(value)
    return value
