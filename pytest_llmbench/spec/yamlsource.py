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

from ..yamlguard import YamlLimitError, check_yaml_limits

_MERGE_TAG = "tag:yaml.org,2002:merge"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"

Loc = tuple[Any, ...]


#: libyaml's parser when PyYAML was built with it (3x faster on large files), same marks.
_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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
    lines: dict[Loc, int] = field(default_factory=dict)
    #: The source text of every scalar that did not load as a string (``yes``, ``3.10``, ``007``).
    texts: dict[Loc, str] = field(default_factory=dict)

    def line_of(self, loc: Loc) -> int | None:
        """The line of the deepest known prefix of ``loc``."""
        for end in range(len(loc), -1, -1):
            line = self.lines.get(tuple(loc[:end]))
            if line is not None:
                return line
        return None

    def text_of(self, loc: Loc) -> str | None:
        """The source text of the non-string scalar at ``loc``, or None."""
        return self.texts.get(tuple(loc))


def load_located(text: str) -> LocatedDocument:
    """Parse one YAML document; raise :class:`SourceError` on syntax errors, duplicate keys,
    characters YAML does not allow, and texts past :mod:`pytest_llmbench.yamlguard`'s limits."""
    try:
        check_yaml_limits(text, _LOADER)
    except YamlLimitError as exc:
        raise SourceError(f"invalid YAML: {exc.message}", exc.line) from None
    try:
        node = yaml.compose(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        detail = ", ".join(part for part in (exc.context, exc.problem) if part) or str(exc)
        raise SourceError(f"invalid YAML: {detail}", line) from None
    if node is None:
        return LocatedDocument(None, {(): 1})
    builder = _Builder()
    data = builder.build(node, ())
    return LocatedDocument(data, builder.lines, builder.texts)


def load_located_file(path: Path) -> LocatedDocument:
    """Read and parse ``path`` (UTF-8, BOM tolerated)."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # exc.object is what was decoded: after a BOM it no longer starts at byte 0.
        line = exc.object[: exc.start].count(b"\n") + 1
        raise SourceError(f"not UTF-8 text: {exc.reason}", line) from None
    return load_located(text)


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


class _Builder:
    """Turns a node graph into plain values, recording lines and scalar source texts."""

    def __init__(self) -> None:
        self.lines: dict[Loc, int] = {}
        self.texts: dict[Loc, str] = {}
        self._constructor = yaml.constructor.SafeConstructor()

    def build(self, node: yaml.Node, path: Loc) -> Any:
        self.lines[path] = _line(node)
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, path)
        # No node holds itself here: yamlguard refused aliases inside their own anchor.
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]

    def _mapping(self, node: yaml.MappingNode, path: Loc) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        merged: dict[Any, tuple[Any, _Builder]] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                self._merge(value_node, path, merged)
                continue
            key = self._key(key_node)
            if key in result:
                raise SourceError(f"duplicate key {key!r}", _line(key_node))
            result[key] = self.build(value_node, (*path, key))
            # Errors about a key's value (unknown key, wrong type) read best at the key's line.
            self.lines[(*path, key)] = _line(key_node)
        for key, (value, source) in merged.items():
            if key not in result:  # keys written out beside `<<` win over merged ones
                result[key] = value
                self._adopt(source, (*path, key))
        return result

    def _merge(self, node: yaml.Node, path: Loc, merged: dict[Any, tuple[Any, _Builder]]) -> None:
        """``<<: *anchor`` or ``<<: [*a, *b]`` (earlier sources win), as YAML 1.1 merge keys."""
        sources = node.value if isinstance(node, yaml.SequenceNode) else [node]
        for source in sources:
            if not isinstance(source, yaml.MappingNode):
                raise SourceError("`<<` merges a mapping or a list of mappings", _line(source))
            builder = _Builder()
            for key, value in builder.build(source, path).items():
                merged.setdefault(key, (value, builder))

    def _adopt(self, other: _Builder, prefix: Loc) -> None:
        """Take the lines and texts ``other`` recorded at or below ``prefix``."""

        def below(loc: Loc) -> bool:
            return loc[: len(prefix)] == prefix

        self.lines.update({loc: line for loc, line in other.lines.items() if below(loc)})
        self.texts.update({loc: text for loc, text in other.texts.items() if below(loc)})

    def _key(self, node: yaml.Node) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            raise SourceError("mapping keys must be plain values", _line(node))
        return self._construct(node)

    def _scalar(self, node: yaml.ScalarNode, path: Loc) -> Any:
        if node.tag == _TIMESTAMP_TAG:
            return node.value  # eval files have no use for dates: keep what was written
        value = self._construct(node)
        if not isinstance(value, str):
            self.texts[path] = node.value
        return value

    def _construct(self, node: yaml.ScalarNode) -> Any:
        try:
            return self._constructor.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or str(exc)
            raise SourceError(f"invalid YAML value: {problem}", _line(node)) from None
        except ValueError as exc:  # an integer of more digits than Python converts, say
            raise SourceError(f"invalid YAML value: {exc}", _line(node)) from None
