"""Checks on an environment's final state: ``state-equals`` and ``state-subset``, and the diff
the record and the viewer show.

Pure functions on JSON values (a SQLite state is read as ``{table: [rows]}`` first):
``state-equals`` holds when the final state equals the expected one (the assertion's ``value``,
else the state the case's ``expected_actions`` leave the seed in, tau-bench's rule), the paths
its ``ignore:`` globs match aside; ``state-subset`` when every key and value the assertion gives
is in the final state. Values compare as JSON (:func:`.values.json_equal`: ``1 == 1.0``,
``true != 1``). Both may be negated with ``not-``; a check that cannot be made (no expected
state) fails negated or not.

Paths name a place in a state: mapping keys and list positions (``#0``, from 0) joined by
``/`` (``orders/W1001/status``, ``users/#2/name``); a key holding ``/`` or ``~`` is written
with JSON Pointer's escapes (``~1``, ``~0``). An ``ignore:`` glob matches one part per part
(``orders/*/updated_at``), and a path under a match is ignored too.

Subset rule: a mapping in the value needs each of its keys in the state, each value a subset
of the state's, recursively; a list needs a list of the same length, element by element; any
other value must equal the state's.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from .base import (
    Assertion,
    AssertionSpecError,
    CheckFailed,
    Outcome,
    Verdict,
    clip,
    weight_of,
)
from .values import is_list, json_equal

#: The assertion types on an environment's final state.
STATE_TYPES: frozenset[str] = frozenset({"state-equals", "state-subset"})
#: The most changes a diff keeps (the record's ``state.diff``); the rest are counted.
MAX_DIFF_CHANGES = 200
#: The JSON characters of the final state the record keeps (larger: ``final`` is None).
MAX_FINAL_CHARS = 100_000
#: The JSON characters of one side of a change the record keeps (larger: clipped text).
MAX_CHANGE_CHARS = 2_000
#: The differing paths a verdict's reason names.
REASON_PATHS = 3
#: The keys of a state assertion besides ``type``.
_KEYS = {"state-equals": ("value", "weight", "ignore"), "state-subset": ("value", "weight")}


# --- parsing ---------------------------------------------------------------------------------


def parse_state_assertion(raw: Mapping[str, Any]) -> Assertion:
    """A ``state-equals`` or ``state-subset`` item: ``value`` (a mapping, or ``file://NAME``
    that collection reads), ``weight``, and for ``state-equals`` ``ignore`` (path globs)."""
    type_name = str(raw.get("type"))
    base = type_name.removeprefix("not-")
    allowed = ("type", *_KEYS[base])
    unknown = sorted(str(key) for key in raw if key not in allowed)
    if unknown:
        names = ", ".join(repr(key) for key in unknown)
        raise AssertionSpecError(f"unknown key {names} for {base}; allowed keys: "
                                 f"{', '.join(allowed)}", unknown[0])  # fmt: skip
    value = raw.get("value")
    if value is None and base == "state-subset":
        raise AssertionSpecError(f"{base} needs a value: the keys and values the final state "
                                 "must hold (a mapping, or file://NAME)", "value")  # fmt: skip
    if value is not None and not _state_value(value):
        raise AssertionSpecError(f"{base}'s value is a mapping (a JSON object) or file://NAME, "
                                 f"not {clip(repr(value))}", "value")  # fmt: skip
    options = {"ignore": _ignore(raw["ignore"])} if "ignore" in raw else {}
    return Assertion(type_name, base, type_name != base, value, weight_of(raw), options)


def _state_value(value: Any) -> bool:
    return isinstance(value, Mapping) or (isinstance(value, str) and value.startswith("file://"))


def _ignore(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    raise AssertionSpecError(f"ignore is a list of state paths (orders/*/updated_at), not "
                             f"{clip(repr(value))}", "ignore")  # fmt: skip


def check_state_elsewhere(value: Any, output: str, assertion: Assertion, _: Any) -> Outcome:
    """The answer checks' entry for a state type: a state is checked by :func:`evaluate_state`
    on the item's environment, so reaching here means no state was read."""
    raise CheckFailed(f"{assertion.type} checks an environment's final state, and this item "
                      "has none")  # fmt: skip


# --- diffs -----------------------------------------------------------------------------------


def state_diff(before: Any, after: Any) -> list[dict[str, Any]]:
    """What changed from ``before`` to ``after``: one ``{"path", "op", "before", "after"}`` per
    changed leaf (``op``: ``added``, ``removed``, ``changed``), paths as ``orders/#W1/status``,
    in path order, at most :data:`MAX_DIFF_CHANGES`."""
    return _kept(_changes(before, after, ()))[0]


def _kept(changes: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The first :data:`MAX_DIFF_CHANGES` of ``changes`` as shown, and how many more there
    were (one walk)."""
    kept: list[dict[str, Any]] = []
    more = 0
    for change in changes:
        if len(kept) < MAX_DIFF_CHANGES:
            kept.append(_shown(change))
        else:
            more += 1
    return kept, more


def _changes(before: Any, after: Any, path: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    """The changes, depth first, keys sorted; a walk by generators, each level one frame (a
    state nested deeper than Python's recursion is refused where it is read)."""
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        for key in sorted({*before, *after}, key=str):
            part = _escaped(str(key))
            if key not in after:
                yield _change((*path, part), "removed", before[key], None)
            elif key not in before:
                yield _change((*path, part), "added", None, after[key])
            else:
                yield from _changes(before[key], after[key], (*path, part))
    elif is_list(before) and is_list(after):
        for index in range(max(len(before), len(after))):
            part = f"#{index}"
            if index >= len(after):
                yield _change((*path, part), "removed", before[index], None)
            elif index >= len(before):
                yield _change((*path, part), "added", None, after[index])
            else:
                yield from _changes(before[index], after[index], (*path, part))
    elif not json_equal(before, after):
        yield _change(path, "changed", before, after)


def _change(path: tuple[str, ...], op: str, before: Any, after: Any) -> dict[str, Any]:
    return {"path": "/".join(path), "op": op, "before": before, "after": after}


def _escaped(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _shown(change: dict[str, Any]) -> dict[str, Any]:
    """A change with each side small enough for the record: a large one as its JSON text,
    clipped, and named in ``clipped`` (so that a reader tells it from a string value)."""
    shown = {**change}
    clipped = []
    for side in ("before", "after"):
        small = _small(change[side])
        if small is not change[side]:
            shown[side] = small
            clipped.append(side)
    if clipped:
        shown["clipped"] = clipped
    return shown


def _small(value: Any) -> Any:
    """``value``, or its JSON text clipped when that passes :data:`MAX_CHANGE_CHARS`."""
    from ..yamlguard import json_text

    if value is None or isinstance(value, bool | int | float):
        return value
    text = json_text(value)
    return value if len(text) <= MAX_CHANGE_CHARS else clip(text, MAX_CHANGE_CHARS)


def ignored(path: str, globs: Sequence[str]) -> bool:
    """Whether ``path`` is, or lies under, a path that one of ``globs`` matches part by part."""
    parts = path.split("/")
    for glob in globs:
        pattern = glob.strip("/").split("/")
        if len(parts) >= len(pattern) and all(
            fnmatch.fnmatchcase(part, want) for part, want in zip(parts, pattern, strict=False)
        ):
            return True
    return False


# --- subsets ---------------------------------------------------------------------------------


def subset_problems(expected: Any, actual: Any) -> list[str]:
    """Where ``actual`` lacks what ``expected`` gives (empty: ``expected`` is a subset)."""
    return list(_subset(expected, actual, ()))


def _subset(expected: Any, actual: Any, path: tuple[str, ...]) -> Iterator[str]:
    where = "/".join(path) or "the state"
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            yield f"{where}: {_json(actual)}, expected an object"
            return
        for key in sorted(expected, key=str):
            place = (*path, _escaped(str(key)))
            if key not in actual:
                yield f"{'/'.join(place)}: missing, expected {_json(expected[key])}"
            else:
                yield from _subset(expected[key], actual[key], place)
    elif is_list(expected):
        if not is_list(actual) or len(actual) != len(expected):
            size = f"{len(actual)} items" if is_list(actual) else _json(actual)
            yield f"{where}: {size}, expected a list of {len(expected)}"
            return
        for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
            yield from _subset(want, got, (*path, f"#{index}"))
    elif not json_equal(expected, actual):
        yield f"{where}: {_json(actual)}, expected {_json(expected)}"


def _json(value: Any) -> str:
    from ..yamlguard import json_text

    try:
        return clip(json_text(value), 60)
    except (TypeError, ValueError):
        return clip(repr(value), 60)


# --- verdicts and the record -----------------------------------------------------------------


def evaluate_state(assertion: Any, snapshot: Any) -> Any:
    """The verdict (a :class:`~.base.Verdict`) of a ``state-equals`` or ``state-subset``
    ``assertion`` on ``snapshot`` (an :class:`~pytest_llmbench.agent.environment.StateSnapshot`:
    its ``final`` state, against the assertion's ``value`` or the snapshot's ``expected``)."""
    if assertion.base_type == "state-subset":
        problems = subset_problems(assertion.value, snapshot.final)
        outcome = _outcome(problems, "the final state holds the given keys and values")
    else:
        expected = expected_state(assertion, snapshot)
        if expected is None:
            reason = f"{assertion.type}: no expected state (no value, no expected_actions)"
            return Verdict(assertion.type, False, 0.0, assertion.weight, reason)
        found = _expected_changes(assertion, snapshot.final, expected)
        differing = [_difference(change) for change in found]
        outcome = _outcome(differing, "the final state equals the expected state")
    if assertion.negate:
        outcome = Outcome(not outcome.passed, f"negated: {outcome.reason}", 1.0 - outcome.score)
    return Verdict(assertion.type, outcome.passed, outcome.score, assertion.weight, outcome.reason)


def expected_state(assertion: Assertion, snapshot: Any) -> Any:
    """The state a ``state-equals`` ``assertion`` expects: its ``value``, else the snapshot's
    ``expected`` (the case's ``expected_actions`` replayed); None when there is none. The
    verdict and the record's ``expected_diff`` both ask here."""
    return assertion.value if assertion.value is not None else snapshot.expected


def _expected_changes(assertion: Assertion, final: Any, expected: Any) -> Iterator[dict[str, Any]]:
    """The changes from ``final`` to ``expected`` that ``assertion`` counts: those on paths
    its ``ignore:`` globs do not match."""
    globs = tuple(assertion.options.get("ignore", ()))
    return (c for c in _changes(final, expected, ()) if not ignored(c["path"], globs))


def _difference(change: dict[str, Any]) -> str:
    """One difference of final from expected, as a reason names it."""
    path = change["path"] or "the state"
    if change["op"] == "added":
        return f"{path}: missing, expected {_json(change['after'])}"
    if change["op"] == "removed":
        return f"{path}: {_json(change['before'])}, not expected"
    return f"{path}: {_json(change['before'])}, expected {_json(change['after'])}"


def _outcome(problems: Sequence[str], if_passed: str) -> Outcome:
    if not problems:
        return Outcome(True, if_passed, 1.0)
    shown = "; ".join(problems[:REASON_PATHS])
    more = f" (and {len(problems) - REASON_PATHS} more)" if len(problems) > REASON_PATHS else ""
    count = f"{len(problems)} difference" + ("s" if len(problems) > 1 else "")
    return Outcome(False, f"{count}: {shown}{more}", 0.0)


def state_record(snapshot: Any, file: str, assertions: Sequence[Assertion] = ()) -> dict[str, Any]:
    """The record's ``state``: ``{"file", "diff" (seed -> final, :func:`state_diff`),
    "diff_more" (changes cut), "expected_diff" (final -> expected, None without one),
    "expected_diff_more", "final" (None when its JSON passes 100 kB)}``. The expected state
    and the paths left out are those of the first ``state-equals`` of ``assertions`` that has
    an expected state (:func:`expected_state`, its ``ignore:`` globs): the differences shown
    are the ones its verdict counted."""
    from ..yamlguard import json_text

    diff, diff_more = _kept(_changes(snapshot.initial, snapshot.final, ()))
    record: dict[str, Any] = {
        "file": file,
        "diff": diff,
        "diff_more": diff_more,
        "expected_diff": None,
        "expected_diff_more": 0,
        "final": snapshot.final if len(json_text(snapshot.final)) <= MAX_FINAL_CHARS else None,
    }
    equals = (a for a in assertions if a.base_type == "state-equals")
    for assertion in equals:
        expected = expected_state(assertion, snapshot)
        if expected is None:
            continue
        found = _expected_changes(assertion, snapshot.final, expected)
        record["expected_diff"], record["expected_diff_more"] = _kept(found)
        break
    return record
