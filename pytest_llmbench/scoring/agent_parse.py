"""Parsing the assertions on what an agent left behind: files, commands, its tool calls.

:func:`parse_agent_assertion` turns one agent ``assert:`` item into an :class:`AgentCheck` at
collection time, raising :class:`~pytest_llmbench.scoring.base.AssertionSpecError` (a ValueError
naming the offending key as ``.field``). Their evaluation is :mod:`.agent`'s.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

from .base import AssertionSpecError, is_number, valid_regex, weight_of
from .trajectory import ARGS_MATCH_MODES, SEQUENCE_MODES, ExpectedStep

#: The agent assertion types; each may also be written with a ``not-`` prefix.
AGENT_TYPES: frozenset[str] = frozenset(
    {
        "file-exists",
        "file-contains",
        "file-matches",
        "command",
        "tool-called",
        "tool-sequence",
        "tool-args",
        "max-turns",
        "tool-count",
    }
)
#: The keys an agent assertion may have besides ``type``, ``value`` and ``weight``.
AGENT_KEYS: frozenset[str] = frozenset(
    {"path", "exit_code", "output_contains", "args", "timeout", "mode", "min", "max"}
)

#: Which of :data:`AGENT_KEYS` each type takes.
_TYPE_KEYS: dict[str, frozenset[str]] = {
    "file-exists": frozenset({"path"}),
    "file-contains": frozenset({"path"}),
    "file-matches": frozenset({"path"}),
    "command": frozenset({"exit_code", "output_contains", "timeout"}),
    "tool-called": frozenset(),
    "tool-sequence": frozenset({"mode"}),
    "tool-args": frozenset({"args"}),
    "max-turns": frozenset(),
    "tool-count": frozenset({"min", "max"}),
}


@dataclasses.dataclass(frozen=True)
class AgentCheck:
    """One parsed agent ``assert:`` item."""

    type: str  #: as written, e.g. ``not-file-exists``
    base_type: str  #: without the ``not-`` prefix
    negate: bool  #: whether the ``not-`` prefix was given
    #: the value, normalised: a tool-name list becomes a tuple, max-turns an int; for
    #: file-exists without ``path`` the path; None when only ``path`` was given
    value: Any
    weight: float = 1.0  #: weight in the case score, >= 0
    path: str | None = None  #: the file the file-* types inspect, relative to the workdir
    exit_code: int = 0  #: the exit code a ``command`` must end with
    output_contains: str | None = None  #: text a ``command``'s stdout or stderr must contain
    #: the arguments (key -> value) a ``tool-args`` call must include; strings match as substrings
    args: Mapping[str, Any] | None = None
    timeout: float | None = None  #: seconds a ``command`` may run; None: the sandbox's limit
    #: a ``tool-sequence``'s steps (names, or names with ``args`` and ``args_match``)
    steps: tuple[ExpectedStep, ...] | None = None
    mode: str = SEQUENCE_MODES[0]  #: how a ``tool-sequence``'s steps pair with the calls
    min: int | None = None  #: the fewest calls a ``tool-count`` allows; None: no lower bound
    max: int | None = None  #: the most calls a ``tool-count`` allows; None: no upper bound


def parse_agent_assertion(raw: Mapping[str, Any]) -> AgentCheck:
    """Parse one agent ``assert:`` item (a mapping with ``type`` and its keys).

    Raises :class:`~pytest_llmbench.scoring.assertions.AssertionSpecError` naming the offending key.
    """
    type_name, base = _split_type(raw.get("type"))
    allowed = {"type", "value", "weight", *_TYPE_KEYS[base]}
    unknown = sorted(str(key) for key in raw if key not in allowed)
    if unknown:
        names = ", ".join(repr(key) for key in unknown)
        message = f"unknown key {names} for {base}; allowed keys: {', '.join(sorted(allowed))}"
        raise AssertionSpecError(message, unknown[0])
    return AgentCheck(
        type=type_name,
        base_type=base,
        negate=type_name != base,
        value=_PARSE_VALUE[base](base, raw),
        weight=weight_of(raw),
        path=_path_key(base, raw),
        exit_code=_exit_code(raw),
        output_contains=_optional_text(raw, "output_contains"),
        args=_args(raw) if base == "tool-args" else None,
        timeout=_timeout(raw),
        steps=_steps(raw["value"]) if base == "tool-sequence" else None,
        mode=_sequence_mode(raw),
        min=_count_bound(raw, "min"),
        max=_count_bound(raw, "max"),
    )


def _split_type(type_name: Any) -> tuple[str, str]:
    if isinstance(type_name, str) and type_name.removeprefix("not-") in AGENT_TYPES:
        return type_name, type_name.removeprefix("not-")
    known = ", ".join(sorted(AGENT_TYPES))
    raise AssertionSpecError(f"{type_name!r} is not an agent check ({known})", "type")


def _text(base: str, key: str, value: Any) -> str:
    if isinstance(value, str) and value:
        return value
    if is_number(value):  # YAML reads `value: 42` as an int
        return str(value)
    raise AssertionSpecError(f"{base} needs a non-empty string {key}, got {value!r}", key)


def _optional_text(raw: Mapping[str, Any], key: str) -> str | None:
    return None if raw.get(key) is None else _text("command", key, raw[key])


def _path_key(base: str, raw: Mapping[str, Any]) -> str | None:
    if "path" in raw:
        return _text(base, "path", raw["path"])
    if base in ("file-contains", "file-matches"):
        raise AssertionSpecError(f"{base} needs a 'path' (the file to inspect)", "path")
    return None


def _file_exists_value(base: str, raw: Mapping[str, Any]) -> str | None:
    if "path" in raw and "value" in raw:
        raise AssertionSpecError(f"{base} takes a 'path' or a 'value', not both", "value")
    if "path" in raw:
        return None
    if raw.get("value") is None:
        raise AssertionSpecError(f"{base} needs a 'path' (or the path as its 'value')", "path")
    return _text(base, "value", raw["value"])  # the path written as the value


def _text_value(base: str, raw: Mapping[str, Any]) -> str:
    return _text(base, "value", raw.get("value"))


def _regex_value(base: str, raw: Mapping[str, Any]) -> str:
    return valid_regex(_text_value(base, raw))


def _names(base: str, value: Any, *, single: bool) -> str | tuple[str, ...]:
    """One tool name (when ``single`` allows it) or a non-empty list of them."""
    if single and isinstance(value, str) and value:
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    what = "a tool name or a non-empty list of them" if single else "a non-empty list of names"
    raise AssertionSpecError(f"{base} needs {what}, got {value!r}", "value")


def _tool_called_value(base: str, raw: Mapping[str, Any]) -> str | tuple[str, ...]:
    return _names(base, raw.get("value"), single=True)


def _tool_sequence_value(base: str, raw: Mapping[str, Any]) -> tuple[str, ...]:
    """The steps' names; each step is a name or a ``{name, args, args_match}`` mapping."""
    value = raw.get("value")
    if isinstance(value, list) and value:
        return tuple(_step(base, item).name for item in value)
    raise AssertionSpecError(
        f"{base} needs a non-empty list of names or steps, got {value!r}", "value"
    )


def _steps(value: list[Any]) -> tuple[ExpectedStep, ...]:
    return tuple(_step("tool-sequence", item) for item in value)


def _step(base: str, item: Any) -> ExpectedStep:
    """One step: ``name`` or ``{name, args, args_match}`` (``args_match`` default ``exact``)."""
    if isinstance(item, str) and item:
        return ExpectedStep(item)
    if not isinstance(item, Mapping):
        raise AssertionSpecError(f"{base} steps are tool names or mappings, got {item!r}", "value")
    unknown = sorted(str(key) for key in item if key not in ("name", "args", "args_match"))
    if unknown:
        raise AssertionSpecError(
            f"unknown step key {unknown[0]!r} (name, args, args_match)", "value"
        )
    name, args, mode = item.get("name"), item.get("args"), item.get("args_match", "exact")
    if not (isinstance(name, str) and name):
        raise AssertionSpecError(f"a {base} step needs a tool 'name', got {item!r}", "value")
    if args is not None and not (
        isinstance(args, Mapping) and all(isinstance(k, str) for k in args)
    ):
        raise AssertionSpecError(f"a step's args must be a mapping, got {args!r}", "value")
    if mode not in ARGS_MATCH_MODES:
        known = ", ".join(ARGS_MATCH_MODES)
        raise AssertionSpecError(f"unknown args_match {mode!r} ({known})", "value")
    return ExpectedStep(name, dict(args) if args is not None else None, mode)


def _sequence_mode(raw: Mapping[str, Any]) -> str:
    mode = raw.get("mode", SEQUENCE_MODES[0])
    if mode in SEQUENCE_MODES:
        return str(mode)
    raise AssertionSpecError(f"unknown mode {mode!r} ({', '.join(SEQUENCE_MODES)})", "mode")


def _tool_count_value(base: str, raw: Mapping[str, Any]) -> str | None:
    """The tool whose calls are counted; None counts every call."""
    if "min" not in raw and "max" not in raw:
        raise AssertionSpecError(f"{base} needs 'min', 'max' or both", "min")
    low, high = _count_bound(raw, "min"), _count_bound(raw, "max")
    if low is not None and high is not None and low > high:
        raise AssertionSpecError(f"{base}: min {low} is above max {high}", "min")
    return None if raw.get("value") is None else _text(base, "value", raw["value"])


def _count_bound(raw: Mapping[str, Any], key: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise AssertionSpecError(f"{key} must be a whole number >= 0, got {value!r}", key)


def _max_turns_value(base: str, raw: Mapping[str, Any]) -> int:
    value = raw.get("value")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise AssertionSpecError(f"{base} needs a whole number >= 1, got {value!r}", "value")


def _exit_code(raw: Mapping[str, Any]) -> int:
    value = raw.get("exit_code", 0)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 255:
        return value
    raise AssertionSpecError(f"exit_code must be a whole number 0..255, got {value!r}", "exit_code")


def _args(raw: Mapping[str, Any]) -> dict[str, Any]:
    value = raw.get("args")
    if isinstance(value, Mapping) and value and all(isinstance(key, str) for key in value):
        return dict(value)
    message = f"tool-args needs 'args': a mapping of argument names to values, got {value!r}"
    raise AssertionSpecError(message, "args")


def _timeout(raw: Mapping[str, Any]) -> float | None:
    value = raw.get("timeout")
    if value is None:
        return None
    if is_number(value) and math.isfinite(value) and value > 0:
        return float(value)
    raise AssertionSpecError(f"timeout must be a number of seconds > 0, got {value!r}", "timeout")


_PARSE_VALUE: dict[str, Callable[[str, Mapping[str, Any]], Any]] = {
    "file-exists": _file_exists_value,
    "file-contains": _text_value,
    "file-matches": _regex_value,
    "command": _text_value,
    "tool-called": _tool_called_value,
    "tool-sequence": _tool_sequence_value,
    "tool-args": _text_value,
    "max-turns": _max_turns_value,
    "tool-count": _tool_count_value,
}
