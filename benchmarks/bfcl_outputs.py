"""Model outputs to judge, made from BFCL rows: each row's ground truth and perturbations of it.

Standard library only, deterministic (each output's random choices are seeded by its row id and
kind), shared by ``bfcl_crosscheck.py`` (which has both checkers judge them) and the suite's
test of the committed reference file.

A row is BFCL's: ``function`` (definitions in BFCL's type words) and ``ground_truth`` (the
possible answer: ``[{name: {argument: [allowed values]}}]``, ``""`` meaning "may be left out").
An output is the calls a model made, ``[{"name": ..., "arguments": "<JSON text>"}]``, as a
function-calling reply carries them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from typing import Any

OPTIONAL = ""
Call = dict[str, Any]  # {"name": str, "args": dict} while being made; arguments as JSON at the end


def ground_truth_calls(row: dict[str, Any]) -> list[Call]:
    """The answer's calls with each argument's first allowed value (left out when that is
    ``""``), objects and lists of objects made the same way, key by key."""
    types = _types(row)
    calls = []
    for call in row["ground_truth"]:
        [(name, allowed)] = call.items()
        args = {}
        for arg, listed in allowed.items():
            if listed and listed[0] != OPTIONAL:
                args[arg] = concrete(listed[0], types.get(name, {}).get(arg))
        calls.append({"name": name, "args": args})
    return calls


def concrete(value: Any, schema: dict[str, Any] | None, pick: int = 0) -> Any:
    """One allowed value made a value a model sends: an object of allowed-value lists (a BFCL
    ``dict`` argument) takes each key's allowed value at ``pick``, a list of them each one's."""
    kind = (schema or {}).get("type")
    if kind == "dict" and isinstance(value, dict):
        return _concrete_object(value, pick)
    items = (schema or {}).get("items") or {}
    if kind in ("array", "tuple") and items.get("type") == "dict" and isinstance(value, list):
        return [_concrete_object(item, pick) if isinstance(item, dict) else item for item in value]
    return value


def _concrete_object(allowed: dict[str, Any], pick: int) -> dict[str, Any]:
    made = {}
    for key, listed in allowed.items():
        listed = listed if isinstance(listed, list) else [listed]
        values = [v for v in listed if v != OPTIONAL]
        if not values or (pick == 0 and listed[0] == OPTIONAL):
            continue
        made[key] = values[min(pick, len(values) - 1)] if pick else listed[0]
    return made


def _types(row: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each function's argument schemas by name (BFCL's type words)."""
    return {fn["name"]: fn.get("parameters", {}).get("properties", {}) for fn in row["function"]}


def _allowed(row: dict[str, Any], index: int) -> dict[str, list[Any]]:
    [(_, allowed)] = row["ground_truth"][index].items()
    return dict(allowed)


# --- perturbations ---------------------------------------------------------------------------
# Each takes the row, the ground-truth calls (a fresh copy) and a seeded Random; it returns the
# perturbed calls, or None where it does not apply to the row.

Perturbation = Callable[[dict[str, Any], list[Call], random.Random], "list[Call] | None"]


def _pick_arg(
    calls: list[Call], rng: random.Random, keep: Callable[[str, Any], bool] = lambda a, v: True
) -> tuple[Call, str] | None:
    choices = [(c, a) for c in calls for a, v in c["args"].items() if keep(a, v)]
    return rng.choice(choices) if choices else None


def _change_one(
    calls: list[Call],
    rng: random.Random,
    change: Callable[[Any, random.Random], Any],
    keep: Callable[[str, Any], bool] = lambda a, v: True,
) -> list[Call] | None:
    """One argument (of those ``keep`` takes) given ``change(value, rng)``; None for none."""
    picked = _pick_arg(calls, rng, keep)
    if picked is None:
        return None
    call, arg = picked
    call["args"][arg] = change(call["args"][arg], rng)
    return calls


def _typed(row: dict[str, Any], words: tuple[str, ...]) -> Callable[[Call, str], bool]:
    types = _types(row)

    def check(call: Call, arg: str) -> bool:
        return types.get(call["name"], {}).get(arg, {}).get("type") in words

    return check


def _pick_typed(
    row: dict[str, Any], calls: list[Call], rng: random.Random, words: tuple[str, ...]
) -> tuple[Call, str] | None:
    typed = _typed(row, words)
    choices = [(c, a) for c in calls for a in c["args"] if typed(c, a)]
    return rng.choice(choices) if choices else None


def other_allowed(row: dict[str, Any], calls: list[Call], rng: random.Random) -> list[Call] | None:
    """Every argument takes its last allowed value that is not ``""`` (objects: each key's)."""
    types = _types(row)
    changed = False
    for index, call in enumerate(calls):
        for arg, listed in _allowed(row, index).items():
            values = [v for v in listed if v != OPTIONAL]
            if len(values) > 1:
                call["args"][arg] = concrete(values[-1], types[call["name"]].get(arg), pick=9)
                changed = True
    return calls if changed else None


def optional_sent(row: dict[str, Any], calls: list[Call], rng: random.Random) -> list[Call] | None:
    """Arguments that may be left out and were, sent with an allowed value."""
    types = _types(row)
    changed = False
    for index, call in enumerate(calls):
        for arg, listed in _allowed(row, index).items():
            values = [v for v in listed if v != OPTIONAL]
            if arg not in call["args"] and values:
                call["args"][arg] = concrete(values[0], types[call["name"]].get(arg))
                changed = True
    return calls if changed else None


def wrong_value(row: dict[str, Any], calls: list[Call], rng: random.Random) -> list[Call] | None:
    """One argument's value changed to one no answer allows, of the same type."""
    return _change_one(calls, rng, lambda value, rng: _changed(value))


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1000
    if isinstance(value, float):
        return value + 0.5
    if isinstance(value, str):
        return value + " zzz"
    if isinstance(value, list):
        return [*value, value[0] if value else "zzz"]
    if isinstance(value, dict) and value:
        key = sorted(value)[0]
        return {**value, key: _changed(value[key])}
    return "zzz"


def missing_arg(row: dict[str, Any], calls: list[Call], rng: random.Random) -> list[Call] | None:
    """One argument left out."""
    picked = _pick_arg(calls, rng)
    if picked is None:
        return None
    call, arg = picked
    del call["args"][arg]
    return calls


def extra_arg(row: dict[str, Any], calls: list[Call], rng: random.Random) -> list[Call] | None:
    """An argument no schema declares added to one call."""
    rng.choice(calls)["args"]["verbose"] = True
    return calls


def declared_extra(row: dict[str, Any], calls: list[Call], rng: random.Random) -> list[Call] | None:
    """An argument the schema declares but the answer does not name, added to one call."""
    types = _types(row)
    choices = [
        (call, arg)
        for index, call in enumerate(calls)
        for arg in types.get(call["name"], {})
        if arg not in _allowed(row, index)
    ]
    if not choices:
        return None
    call, arg = rng.choice(choices)
    call["args"][arg] = _sample(types[call["name"]][arg].get("type"))
    return calls


def _sample(word: str | None) -> Any:
    return {"integer": 1, "float": 1.5, "boolean": True, "array": [], "tuple": [], "dict": {}}.get(
        word or "", "x"
    )


def wrong_function(row: dict[str, Any], calls: list[Call], rng: random.Random) -> list[Call] | None:
    """One call names another function: another the row declares, or an undeclared one."""
    call = rng.choice(calls)
    others = [fn["name"] for fn in row["function"] if fn["name"] != call["name"]]
    call["name"] = rng.choice(others) if others else call["name"] + "_v2"
    return calls


def int_as_float(row: dict[str, Any], calls: list[Call], rng: random.Random) -> list[Call] | None:
    """An integer argument sent as a float (``5`` as ``5.0``)."""
    return _change_one(calls, rng, lambda value, rng: float(value), lambda a, v: type(v) is int)


def float_as_int(row: dict[str, Any], calls: list[Call], rng: random.Random) -> list[Call] | None:
    """A float argument sent as an integer (``2.0`` as ``2``, ``2.5`` as ``2``)."""
    return _change_one(calls, rng, lambda value, rng: int(value), lambda a, v: type(v) is float)


def number_as_string(
    row: dict[str, Any], calls: list[Call], rng: random.Random
) -> list[Call] | None:
    """A number sent as text (``5`` as ``"5"``)."""
    return _change_one(
        calls, rng, lambda value, rng: str(value), lambda a, v: type(v) in (int, float)
    )


def bool_as_int(row: dict[str, Any], calls: list[Call], rng: random.Random) -> list[Call] | None:
    """A boolean sent as ``0``/``1``."""
    return _change_one(calls, rng, lambda value, rng: int(value), lambda a, v: type(v) is bool)


def empty_string(row: dict[str, Any], calls: list[Call], rng: random.Random) -> list[Call] | None:
    """``""`` sent for an argument whose allowed values hold ``""`` (it may be left out), or
    else for any argument."""
    loose = [
        (call, arg)
        for index, call in enumerate(calls)
        for arg, listed in _allowed(row, index).items()
        if OPTIONAL in listed
    ]
    if loose:
        call, arg = rng.choice(loose)
    else:
        picked = _pick_arg(calls, rng)
        if picked is None:
            return None
        call, arg = picked
    call["args"][arg] = ""
    return calls


def null_value(row: dict[str, Any], calls: list[Call], rng: random.Random) -> list[Call] | None:
    """``null`` sent for one argument."""
    return _change_one(calls, rng, lambda value, rng: None)


def string_variant(row: dict[str, Any], calls: list[Call], rng: random.Random) -> list[Call] | None:
    """A string argument in upper case with its spaces made ``-`` and a trailing ``.``: the same
    after BFCL's normalisation, different as written."""
    return _change_one(
        calls,
        rng,
        lambda value, rng: value.upper().replace(" ", "-") + ".",
        lambda a, v: isinstance(v, str) and v.strip() != "",
    )


def string_typo(row: dict[str, Any], calls: list[Call], rng: random.Random) -> list[Call] | None:
    """A string argument with one letter dropped: different after normalisation too."""
    picked = _pick_arg(calls, rng, lambda a, v: isinstance(v, str) and len(v.strip()) > 1)
    if picked is None:
        return None
    call, arg = picked
    text = call["args"][arg]
    at = rng.randrange(len(text))
    call["args"][arg] = text[:at] + text[at + 1 :] if text[at].isalnum() else text + "q"
    return calls


def list_reversed(row: dict[str, Any], calls: list[Call], rng: random.Random) -> list[Call] | None:
    """A list argument of two or more different items, reversed."""
    return _change_one(
        calls,
        rng,
        lambda value, rng: list(reversed(value)),
        lambda a, v: isinstance(v, list) and len(set(map(str, v))) > 1,
    )


def list_items_as_strings(
    row: dict[str, Any], calls: list[Call], rng: random.Random
) -> list[Call] | None:
    """A list of numbers sent as a list of texts (an array's items' type)."""
    picked = _pick_arg(
        calls, rng, lambda a, v: isinstance(v, list) and any(type(i) in (int, float) for i in v)
    )
    if picked is None:
        return None
    call, arg = picked
    call["args"][arg] = [str(item) for item in call["args"][arg]]
    return calls


def object_key_dropped(
    row: dict[str, Any], calls: list[Call], rng: random.Random
) -> list[Call] | None:
    """An object argument with one key left out."""
    picked = _pick_arg(calls, rng, lambda a, v: isinstance(v, dict) and bool(v))
    if picked is None:
        return None
    call, arg = picked
    value = dict(call["args"][arg])
    del value[rng.choice(sorted(value))]
    call["args"][arg] = value
    return calls


def object_key_added(
    row: dict[str, Any], calls: list[Call], rng: random.Random
) -> list[Call] | None:
    """An object argument with an unexpected key."""
    return _change_one(
        calls, rng, lambda value, rng: {**value, "zzz_extra": "x"}, lambda a, v: isinstance(v, dict)
    )


def object_as_lists(
    row: dict[str, Any], calls: list[Call], rng: random.Random
) -> list[Call] | None:
    """An object argument sent with the answer's allowed-value lists as its values (what a
    comparison of whole objects would take for the answer)."""
    typed = _typed(row, ("dict",))
    for index, call in enumerate(calls):
        for arg, listed in _allowed(row, index).items():
            entries = [v for v in listed if isinstance(v, dict)]
            if typed(call, arg) and entries:
                call["args"][arg] = entries[0]
                return calls
    return None


def reordered(row: dict[str, Any], calls: list[Call], rng: random.Random) -> list[Call] | None:
    """The calls in reverse order and each call's arguments in reverse order."""
    for call in calls:
        call["args"] = dict(reversed(list(call["args"].items())))
    return list(reversed(calls))


def call_left_out(row: dict[str, Any], calls: list[Call], rng: random.Random) -> list[Call] | None:
    """One call left out (with a single call: no call at all)."""
    del calls[rng.randrange(len(calls))]
    return calls


def call_repeated(row: dict[str, Any], calls: list[Call], rng: random.Random) -> list[Call] | None:
    """One call made twice."""
    call = rng.choice(calls)
    calls.append({"name": call["name"], "args": dict(call["args"])})
    return calls


def swapped_values(row: dict[str, Any], calls: list[Call], rng: random.Random) -> list[Call] | None:
    """Two calls of the same function with one argument's values swapped between them (each
    call still of allowed shape, paired the other way round)."""
    by_name: dict[str, list[Call]] = {}
    for call in calls:
        by_name.setdefault(call["name"], []).append(call)
    pairs = [
        (a, b, arg)
        for group in by_name.values()
        for i, a in enumerate(group)
        for b in group[i + 1 :]
        for arg in a["args"]
        if arg in b["args"] and a["args"][arg] != b["args"][arg]
    ]
    if not pairs:
        return None
    a, b, arg = rng.choice(pairs)
    a["args"][arg], b["args"][arg] = b["args"][arg], a["args"][arg]
    return calls


#: Every perturbation by kind, in table order (``ground_truth`` first, not a perturbation).
PERTURBATIONS: dict[str, Perturbation] = {
    "other_allowed": other_allowed,
    "optional_sent": optional_sent,
    "wrong_value": wrong_value,
    "missing_arg": missing_arg,
    "extra_arg": extra_arg,
    "declared_extra": declared_extra,
    "wrong_function": wrong_function,
    "int_as_float": int_as_float,
    "float_as_int": float_as_int,
    "number_as_string": number_as_string,
    "bool_as_int": bool_as_int,
    "empty_string": empty_string,
    "null_value": null_value,
    "string_variant": string_variant,
    "string_typo": string_typo,
    "list_reversed": list_reversed,
    "list_items_as_strings": list_items_as_strings,
    "object_key_dropped": object_key_dropped,
    "object_key_added": object_key_added,
    "object_as_lists": object_as_lists,
    "reordered": reordered,
    "call_left_out": call_left_out,
    "call_repeated": call_repeated,
    "swapped_values": swapped_values,
}
KINDS = ("ground_truth", *PERTURBATIONS)


def outputs(row: dict[str, Any]) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """The row's ground truth and each perturbation that applies: (kind, calls as sent)."""
    yield "ground_truth", _as_sent(ground_truth_calls(row))
    for kind, perturb in PERTURBATIONS.items():
        made = perturb(row, ground_truth_calls(row), random.Random(f"{row['id']}:{kind}"))
        if made is not None:
            yield kind, _as_sent(made)


def _as_sent(calls: list[Call]) -> list[dict[str, str]]:
    return [{"name": c["name"], "arguments": json.dumps(c["args"])} for c in calls]
