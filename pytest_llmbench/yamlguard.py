"""Limits a YAML text must keep before it is composed: nesting depth and alias expansion.

PyYAML composes and builds recursively, so a file nested 100,000 levels deep crashes the
process (the C composer overflows the stack) and one 1,000 deep raises RecursionError; a
520-byte "billion laughs" file of nested aliases expands to millions of values. The check runs
on the parser's events, which libyaml produces without recursion, before anything is built.
Eval files, datasets and profile files are read through it.
"""

from __future__ import annotations

from typing import Any

import yaml

#: Collections may nest this deep; eval files and profiles need a handful of levels.
MAX_DEPTH = 64
#: Values that aliases may add beyond the ones written out (``*anchor`` repeats its subtree).
MAX_ALIAS_VALUES = 100_000


class YamlLimitError(Exception):
    """A YAML text beyond :data:`MAX_DEPTH` or :data:`MAX_ALIAS_VALUES`, or not readable."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def check_yaml_limits(text: str, loader: type = yaml.SafeLoader) -> None:
    """Raise :class:`YamlLimitError` when ``text`` nests too deep or its aliases expand too far.

    Syntax errors are left to the loader that composes the text (they carry better context),
    except characters YAML does not allow (NUL, control characters), which are reported here
    with their line.
    """
    open_sizes: list[list[Any]] = []  # [anchor, values so far] of each open collection
    sizes: dict[str, int] = {}  # values under each anchor
    expanded = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            size = _closed_size(event, open_sizes, sizes)
            if isinstance(event, yaml.AliasEvent):
                size = sizes.get(event.anchor or "", 1)
                expanded += size
                if expanded > MAX_ALIAS_VALUES:
                    message = f"aliases expand to more than {MAX_ALIAS_VALUES:,} values"
                    raise YamlLimitError(message, _line(event))
            if size and open_sizes:
                open_sizes[-1][1] += size
    except yaml.reader.ReaderError as exc:
        raise YamlLimitError(_reader_message(exc), text[: exc.position].count("\n") + 1) from None
    except yaml.MarkedYAMLError:
        return  # the loader reports it, with its context


def _closed_size(event: yaml.Event, open_sizes: list[list[Any]], sizes: dict[str, int]) -> int:
    """Track collections; return the values ``event`` completes (0 while a collection is open)."""
    anchor = getattr(event, "anchor", None)
    if isinstance(event, yaml.CollectionStartEvent):
        if len(open_sizes) >= MAX_DEPTH:
            raise YamlLimitError(f"nested more than {MAX_DEPTH} levels deep", _line(event))
        open_sizes.append([anchor, 1])
        return 0
    if isinstance(event, yaml.CollectionEndEvent):
        anchor, size = open_sizes.pop()
    elif isinstance(event, yaml.ScalarEvent):
        size = 1
    else:
        return 0
    if anchor:
        sizes[anchor] = size
    return int(size)


def _line(event: yaml.Event) -> int | None:
    mark = event.start_mark
    return None if mark is None else mark.line + 1


def _reader_message(exc: yaml.reader.ReaderError) -> str:
    character = exc.character
    code = ord(character) if isinstance(character, str) else character
    return f"character #x{code:04x} is not allowed in YAML (control characters and NUL are not)"
