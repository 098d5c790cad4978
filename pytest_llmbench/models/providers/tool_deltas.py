"""A streamed reply's tool calls, put back together from their ``delta.tool_calls`` fragments.

OpenAI streams a tool call in pieces: the first fragment of each call carries its ``index`` in
the reply's list, its ``id`` and ``function.name``; later fragments of the same ``index`` carry
more of ``function.arguments`` (a JSON text cut anywhere). Both clients feed the fragments they
read (plain dicts from the lean client, litellm's objects of the same shape) to one
:class:`StreamedToolCalls`, which gives the calls as a whole answer's are recorded:
``{"id", "name", "arguments"}``, the arguments as the JSON text the model sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Parts:
    """One call while it streams: its id, name and the pieces of its arguments."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class StreamedToolCalls:
    """The tool calls of one streamed reply, by their index in the reply's list."""

    _calls: dict[int, _Parts] = field(default_factory=dict)

    def add(self, fragments: Iterable[Any]) -> bool:
        """Add one chunk's ``delta.tool_calls``; whether it carried any fragment."""
        seen = False
        for fragment in fragments or ():
            seen = True
            index = _field(fragment, "index")
            parts = self._calls.setdefault(
                index if isinstance(index, int) else len(self._calls), _Parts()
            )
            parts.id = parts.id or str(_field(fragment, "id") or "")
            function = _field(fragment, "function")
            if function is None:
                continue
            parts.name = parts.name or str(_field(function, "name") or "")
            piece = _field(function, "arguments")
            if isinstance(piece, str):
                parts.arguments.append(piece)
        return seen

    @property
    def received(self) -> int:
        """Characters of names and arguments received so far (what a cut stream had sent)."""
        return sum(
            len(parts.name) + sum(map(len, parts.arguments)) for parts in self._calls.values()
        )

    def calls(self) -> tuple[dict[str, Any], ...]:
        """The calls in the reply's order, as a whole answer's are recorded."""
        return tuple(
            {"id": parts.id, "name": parts.name, "arguments": "".join(parts.arguments)}
            for _, parts in sorted(self._calls.items())
        )


def _field(value: Any, name: str) -> Any:
    """``value[name]`` of a dict, or the attribute of litellm's object of that shape."""
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)
