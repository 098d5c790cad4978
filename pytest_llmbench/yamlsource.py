"""A YAML loader that remembers where every value came from.

Schema errors must name ``path:line``; PyYAML's plain loaders forget positions. We compose the
node graph ourselves, build plain Python values, and keep a map from each value's path (a tuple
of mapping keys and list indices, as pydantic reports error locations) to its 1-based line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class SourceError(Exception):
    """A problem in a YAML source file, located by line (1-based, or None when unknown)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


@dataclass(frozen=True)
class LocatedDocument:
    """Plain data loaded from YAML plus the line of every nested value."""

    data: Any
    lines: dict[tuple[Any, ...], int] = field(default_factory=dict)

    def line_of(self, loc: tuple[Any, ...]) -> int | None:
        """The line of the deepest known prefix of ``loc``."""
        for end in range(len(loc), -1, -1):
            line = self.lines.get(tuple(loc[:end]))
            if line is not None:
                return line
        return None


def load_located(text: str) -> LocatedDocument:
    """Parse one YAML document; raise :class:`SourceError` on syntax errors or duplicate keys."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise SourceError(f"invalid YAML: {exc.problem or exc}", line) from None
    if node is None:
        return LocatedDocument(None, {(): 1})
    lines: dict[tuple[Any, ...], int] = {}
    return LocatedDocument(_build(node, (), lines), lines)


def load_located_file(path: Path) -> LocatedDocument:
    """Read and parse ``path`` (UTF-8, BOM tolerated)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceError(f"not UTF-8 text: {exc.reason}", None) from None
    return load_located(text)


def _build(node: yaml.Node, path: tuple[Any, ...], lines: dict[tuple[Any, ...], int]) -> Any:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        return _build_mapping(node, path, lines)
    if isinstance(node, yaml.SequenceNode):
        return [_build(item, (*path, i), lines) for i, item in enumerate(node.value)]
    return _scalar(node)


def _build_mapping(
    node: yaml.MappingNode, path: tuple[Any, ...], lines: dict[tuple[Any, ...], int]
) -> dict[Any, Any]:
    result: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            raise SourceError("mapping keys must be plain values", key_node.start_mark.line + 1)
        key = _scalar(key_node)
        if key in result:
            raise SourceError(f"duplicate key {key!r}", key_node.start_mark.line + 1)
        result[key] = _build(value_node, (*path, key), lines)
        # Errors about a key's value (unknown key, wrong type) read best at the key's line.
        lines[(*path, key)] = key_node.start_mark.line + 1
    return result


_CONSTRUCTOR = yaml.constructor.SafeConstructor()


def _scalar(node: yaml.Node) -> Any:
    return _CONSTRUCTOR.construct_object(node, deep=True)
