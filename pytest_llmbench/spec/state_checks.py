"""The state assertions of a file's cases, checked at collection: ``state-equals`` and
``state-subset`` need an environment (a ``kind: agent`` file's ``environment:``), a
``state-equals`` without a value needs the case's ``expected_actions`` (the state they leave
is its expected one) and an environment module to replay them through (a server has none),
and a ``file://`` value is read once here, so that an item compares with a JSON value and its
case hash digests the file's content, not its name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .expand_environment import read_state_value
from .expand_place import written_assertions
from .file_kinds import kinds_allowing
from .resolved import EvalFileError

if TYPE_CHECKING:
    from ..scoring import Assertion
    from .resolved import Environment, EvalCase
    from .schema import EvalSpec
    from .yamlsource import LocatedDocument


def checked_state_assertions(
    spec: EvalSpec,
    cases: Sequence[EvalCase],
    environment: Environment | None,
    path: Path,
    document: LocatedDocument,
    roots: Sequence[Path] = (),
) -> list[EvalCase]:
    """``cases`` with their state assertions' ``file://`` values read; an error at the first
    state assertion a file without an environment writes, or at a case that cannot be checked."""
    from ..scoring import STATE_TYPES

    lines = _written_lines(spec, document)
    if environment is None:
        if lines:
            type_name, line = lines[0]
            raise EvalFileError(path, line, f"`{type_name}` checks an agent environment's "
                                f"final state: it needs {_needs()}")  # fmt: skip
        for case in cases:  # a dataset row's own assertions
            found = next((a for a in case.assertions if a.base_type in STATE_TYPES), None)
            if found is not None:
                raise EvalFileError(path, case.line, f"case {case.id!r}: `{found.type}` needs "
                                    f"{_needs()}")  # fmt: skip
        return list(cases)
    _refuse_turn_state(spec, document, path)
    if environment.module is None:
        _refuse_replays(spec, cases, environment, path, document)
    read: dict[str, Any] = {}
    result = []
    where = _Where(path, document, roots, _value_lines(spec, document))
    for case in cases:
        if any(a.base_type in STATE_TYPES for a in case.assertions):
            case = _checked_case(case, read, where)
        result.append(case)
    return result


def _refuse_replays(
    spec: EvalSpec,
    cases: Sequence[EvalCase],
    environment: Environment,
    path: Path,
    document: LocatedDocument,
) -> None:
    """An error at the first ``state-equals`` without a value with a server environment: the
    expected state comes from replaying the case's actions through the module's tools, and a
    server has no module (its tools are known only when it runs)."""
    message = (f"without a value, with the MCP server environment {environment.server!r}: "
               "give a value: expected actions are replayed through a module")  # fmt: skip
    written = []
    for loc, raw in written_assertions(spec):
        type_name = raw if isinstance(raw, str) else raw.get("type")
        bare = isinstance(raw, str) or raw.get("value") is None
        if bare and str(type_name).removeprefix("not-") == "state-equals":
            written.append((document.line_of(loc) or 0, str(type_name)))
    if written:
        line, type_name = min(written)  # the first in the file
        raise EvalFileError(path, line or None, f"`{type_name}` {message}")
    for case in cases:  # a dataset row's own assertions
        found = next((a for a in case.assertions if _replayed(a)), None)
        if found is not None:
            raise EvalFileError(path, case.line, f"case {case.id!r}: `{found.type}` {message}")


def _replayed(assertion: Assertion) -> bool:
    """Whether ``assertion`` compares with the state the case's expected actions leave."""
    return assertion.base_type == "state-equals" and assertion.value is None


def _needs() -> str:
    return f"{kinds_allowing(lambda kind: kind.agent)} with an `environment:`"


def _written_lines(spec: EvalSpec, document: LocatedDocument) -> list[tuple[str, int | None]]:
    """Each state assertion written in the file: its type and line, in file order."""
    from ..scoring import STATE_TYPES

    found = []
    for loc, raw in written_assertions(spec):
        type_name = raw if isinstance(raw, str) else raw.get("type")
        if str(type_name).removeprefix("not-") in STATE_TYPES:
            found.append((str(type_name), document.line_of(loc)))
    return sorted(found, key=lambda entry: entry[1] or 0)


def _refuse_turn_state(spec: EvalSpec, document: LocatedDocument, path: Path) -> None:
    """An error at the first state assertion a turn or a simulated user checks: the state is
    read once, after the conversation, so a check on a reply would read the final state."""
    from ..scoring import STATE_TYPES

    for loc, raw in written_assertions(spec):
        type_name = str(raw if isinstance(raw, str) else raw.get("type"))
        if "turns" in loc or "simulated_user" in loc:
            if type_name.removeprefix("not-") in STATE_TYPES:
                raise EvalFileError(path, document.line_of(loc), f"`{type_name}` is checked on "
                                    "the final state: put it in the case's assert:")  # fmt: skip


@dataclass(frozen=True)
class _Where:
    """Where the file is, and the line of each ``file://`` value its state assertions give."""

    path: Path
    document: LocatedDocument
    roots: Sequence[Path]
    value_lines: dict[str, int | None]


def _value_lines(spec: EvalSpec, document: LocatedDocument) -> dict[str, int | None]:
    """The line of each string ``value:`` the file's assertions give (the first, if repeated)."""
    lines: dict[str, int | None] = {}
    for loc, raw in written_assertions(spec):
        value = raw.get("value") if isinstance(raw, dict) else None
        if isinstance(value, str):
            lines.setdefault(value, document.line_of((*loc, "value")))
    return lines


def _checked_case(case: EvalCase, read: dict[str, Any], where: _Where) -> EvalCase:
    from ..scoring import STATE_TYPES

    assertions: list[Assertion] = []
    for assertion in case.assertions:
        if assertion.base_type in STATE_TYPES and isinstance(assertion.value, str):
            value = _file_value(assertion, read, where)
            assertion = replace(assertion, value=value)
        if _replayed(assertion):
            if case.expected_actions is None:
                raise EvalFileError(where.path, case.line, f"case {case.id!r}: `{assertion.type}` "
                                    "without a value compares the final state with the one "
                                    "the case's `expected_actions` leave: give the case "
                                    "expected_actions, or the assertion a value")  # fmt: skip
        assertions.append(assertion)
    return replace(case, assertions=tuple(assertions))


def _file_value(assertion: Assertion, read: dict[str, Any], where: _Where) -> Any:
    """A ``file://`` value as JSON (read once per file, whichever cases share it)."""
    name = str(assertion.value)
    if name not in read:
        try:
            # a state assertion compares JSON values, a SQLite state's too ({table: [rows]})
            read[name] = read_state_value(name, False, where.path.parent, where.roots)
        except ValueError as exc:
            line = where.value_lines.get(name)
            raise EvalFileError(where.path, line, f"{assertion.type}: {exc}") from None
    return read[name]
