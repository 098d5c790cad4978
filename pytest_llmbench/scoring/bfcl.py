"""One call's arguments judged as BFCL's AST checker judges them (``args_match: allowed``).

The Berkeley Function Calling Leaderboard writes an expected call as each argument's **allowed
values** (``{"unit": ["c", "celsius", ""]}``, ``""`` meaning "may be left out") and judges a call
against them and the function's schema (``bfcl_eval.eval_checker.ast_eval.ast_checker``'s
``simple_function_checker``). :func:`allowed_mismatch` follows its rules, in its order, so the
first problem found is the one BFCL reports, under BFCL's own error type:

1. every argument the schema requires is there (``missing_required``), even when the allowed
   values would let it be left out;
2. every argument sent is declared by the schema and named by the answer (``unexpected_param``);
3. its type is the schema's (``type_error:simple``; an integer is taken for a ``number``, as
   Python turns ``int`` into ``float``; a value of the allowed values' own type is taken as
   BFCL takes a "variable"; an array's items one level deep, ``type_error:nested``);
4. its value is allowed: strings after BFCL's normalisation (spaces and ``,./-_*^`` dropped,
   case ignored, ``'`` read as ``"``) unless ``normalize_strings`` is off; lists element by
   element (strings normalised); an object key by key, each key's own allowed values
   (``value_error:dict_*``); a list of objects object by object; any other value by Python's
   ``==`` among the allowed values (``value_error:others``);
5. every argument named by the answer without ``""`` among its values is sent
   (``missing_optional``).

Without a schema (an expected call of a tool whose parameters are not known, as an agent's
``tool-sequence`` may be) rules 1 and 3 are skipped; an argument without a type (no schema, or
a property with no single ``type``) compares a string as rule 4 does and any other value as a
JSON value (``1 == 1.0``, but ``true != 1``, where BFCL's Python ``==`` would take it). Values are the JSON the model sent, parsed (``1`` an int, ``1.0`` a float), as BFCL's
function-calling handlers parse them.

:func:`allowed_value_problem` checks the shape of an answer's allowed values against the schema
(a list per argument; per object-typed argument each entry an object of allowed-value lists,
or a string: ``""`` or the name of a variable).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .values import json_equal

#: JSON Schema types as the Python types BFCL's checker compares with ``type(value)``.
_PYTHON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}
_STRING_NOISE = re.compile(r"[ ,./\-_*^]")
OPTIONAL = ""  #: among an argument's allowed values: the argument may be left out


@dataclass(frozen=True)
class ArgumentMismatch:
    """Why a call's arguments are not among the allowed ones: BFCL's error type and a message
    naming the argument and the rule."""

    error_type: str  #: BFCL's ``error_type``, e.g. ``type_error:simple``
    message: str  #: what is wrong, naming the argument

    def __str__(self) -> str:
        return f"{self.message} [{self.error_type}]"


@dataclass(frozen=True)
class _Expected:
    """An argument's expected type from its schema (None: unknown, no type rule)."""

    python: type | None
    nested: type | None  #: an array's items' type, checked one level deep
    word: str  #: the schema's type word, for messages


def normalize_string(text: str) -> str:
    """BFCL's ``standardize_string``: spaces and ``,./-_*^`` dropped, lower case, ``'`` -> ``"``."""
    return _STRING_NOISE.sub("", text).lower().replace("'", '"')


def allowed_mismatch(
    allowed: Mapping[str, Any],
    arguments: Mapping[str, Any],
    schema: Mapping[str, Any] | None,
    *,
    normalize_strings: bool = True,
) -> ArgumentMismatch | None:
    """The first reason the call's ``arguments`` are not among the ``allowed`` values under
    the function's ``schema`` (its ``parameters``), in BFCL's order, or None when they are."""
    norm = normalize_string if normalize_strings else _same
    properties = _properties(schema)
    for name in _required(schema):
        if name not in arguments:
            return ArgumentMismatch("simple_function_checker:missing_required",
                                    f"missing required argument {name!r}")  # fmt: skip
    for name, value in arguments.items():
        if (properties is not None and name not in properties) or name not in allowed:
            return ArgumentMismatch("simple_function_checker:unexpected_param",
                                    f"unexpected argument {name!r}")  # fmt: skip
        values = _as_list(allowed[name])
        expected = _expected(properties.get(name) if properties is not None else None)
        problem = _argument_mismatch(name, value, values, expected, norm)
        if problem is not None:
            return problem
    for name, listed in allowed.items():
        if name not in arguments and OPTIONAL not in _as_list(listed):
            return ArgumentMismatch("simple_function_checker:missing_optional",
                                    f"argument {name!r} left out, but its allowed values "
                                    f"lack \"\" (may be left out)")  # fmt: skip
    return None


def _same(text: str) -> str:
    return text


def _as_list(listed: Any) -> list[Any]:
    return list(listed) if isinstance(listed, (list, tuple)) else [listed]


def _properties(schema: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if schema is None:
        return None
    properties = schema.get("properties")
    # no properties (``{type: object}``): the arguments are not declared, not forbidden
    return properties if isinstance(properties, Mapping) else None


def _required(schema: Mapping[str, Any] | None) -> Sequence[str]:
    required = schema.get("required") if schema is not None else None
    return (
        [name for name in required if isinstance(name, str)] if isinstance(required, list) else []
    )


def _expected(prop: Any) -> _Expected:
    word = prop.get("type") if isinstance(prop, Mapping) else None
    if not isinstance(word, str) or word not in _PYTHON_TYPES:
        return _Expected(None, None, str(word))
    items = prop.get("items") if word == "array" else None
    item_word = items.get("type") if isinstance(items, Mapping) else None
    nested = _PYTHON_TYPES.get(item_word) if isinstance(item_word, str) else None
    return _Expected(_PYTHON_TYPES[word], nested, word)


def _argument_mismatch(
    name: str, value: Any, values: list[Any], expected: _Expected, norm: Any
) -> ArgumentMismatch | None:
    if expected.python is float and type(value) is int:
        try:
            value = float(value)  # BFCL lets an integer stand for a float, as Python does
        except OverflowError:
            return ArgumentMismatch("type_error:simple", f"{name}: {value} is too large for "
                                    "a number")  # fmt: skip
    if expected.python is None:
        return _untyped_mismatch(name, value, values, norm)
    is_variable = _type_mismatch(name, value, values, expected)
    if isinstance(is_variable, ArgumentMismatch):
        return is_variable
    if not is_variable:
        if expected.python is dict:
            return _dict_mismatch(name, value, values, norm)
        if expected.python is list and expected.nested is dict:
            return _list_of_dicts_mismatch(name, value, values, norm)
        if expected.python is str:
            return _string_mismatch(name, value, values, norm)
        if expected.python is list:
            return _list_mismatch(name, value, values, norm)
    if value not in values:
        return ArgumentMismatch("value_error:others", f"{name}: {value!r} is not among the "
                                f"allowed values {values!r}")  # fmt: skip
    return None


def _untyped_mismatch(
    name: str, value: Any, values: list[Any], norm: Any
) -> ArgumentMismatch | None:
    """An argument whose schema gives no type (or no schema is known): a string as BFCL
    compares strings, anything else as a JSON value (``1 == 1.0``, ``true != 1``)."""
    if isinstance(value, str):
        return _string_mismatch(name, value, values, norm)
    if any(json_equal(value, candidate) for candidate in values):
        return None
    return ArgumentMismatch("value_error:others", f"{name}: {value!r} is not among the "
                            f"allowed values {values!r}")  # fmt: skip


def _answer_type(values: Sequence[Any]) -> type | None:
    """The type of the first allowed value that is not ``""`` (BFCL's possible answer type)."""
    return next((type(value) for value in values if value != OPTIONAL), None)


def _type_mismatch(
    name: str, value: Any, values: list[Any], expected: _Expected
) -> ArgumentMismatch | bool:
    """BFCL's ``type_checker``: a mismatch, or whether the value stands as a "variable" (of the
    allowed values' type where that differs from the schema's)."""
    answer_type = _answer_type(values)
    is_variable = answer_type is not None and answer_type is not expected.python
    if type(value) is expected.python:
        if expected.nested is None or _nested_ok(value, values, expected.nested):
            return is_variable
        return ArgumentMismatch("type_error:nested", f"{name}: expected {expected.word} of "
                                f"{expected.nested.__name__}, got {value!r}")  # fmt: skip
    if answer_type is not None and type(value) is answer_type:
        return True
    return ArgumentMismatch("type_error:simple", f"{name}: expected type {expected.word}, got "
                            f"{type(value).__name__} ({value!r})")  # fmt: skip


def _nested_ok(value: Any, values: list[Any], nested: type) -> bool:
    """An array's items have the items' type (or the allowed items' type), against some allowed
    value; an allowed value that is not a list (``""``) lets any items pass, as in BFCL."""
    for candidate in values:
        if not isinstance(candidate, list):
            return True
        answer_type = _answer_type(candidate)
        if all(type(item) is nested or type(item) is answer_type for item in value):
            return True
    return False


def _string_mismatch(
    name: str, value: str, values: list[Any], norm: Any
) -> ArgumentMismatch | None:
    if norm(value) in [norm(candidate) for candidate in values if isinstance(candidate, str)]:
        return None
    return ArgumentMismatch("value_error:string", f"{name}: {value!r} is not among the allowed "
                            f"values {values!r}{_strings_note(norm)}")  # fmt: skip


def _strings_note(norm: Any) -> str:
    return " (compared ignoring case, spaces and ,./-_*^)" if norm is normalize_string else ""


def _normalized_list(items: Any, norm: Any) -> list[Any] | None:
    """A list (or, as BFCL iterates it, a string's characters) with its strings normalised;
    None for a value that is neither, which no list equals."""
    if not isinstance(items, (list, tuple, str)):
        return None
    return [norm(item) if isinstance(item, str) else item for item in items]


def _list_mismatch(
    name: str, value: list[Any], values: list[Any], norm: Any
) -> ArgumentMismatch | None:
    candidates = [_normalized_list(candidate, norm) for candidate in values]
    if _normalized_list(value, norm) in candidates:
        return None
    return ArgumentMismatch("value_error:list/tuple", f"{name}: {value!r} is not among the "
                            f"allowed lists {values!r}{_strings_note(norm)}")  # fmt: skip


def _dict_mismatch(
    name: str, value: dict[str, Any], values: list[Any], norm: Any
) -> ArgumentMismatch | None:
    """BFCL's ``dict_checker``: the object matches some allowed object key by key, each key's
    value among that key's allowed values, and keys without ``""`` present."""
    problem: ArgumentMismatch | None
    problem = ArgumentMismatch("dict_checker:unclear", f"{name}: no allowed object to compare with")
    for candidate in values:
        if not isinstance(candidate, Mapping):
            continue  # "" (may be left out), or a variable's name: no object to compare with
        problem = _one_dict_mismatch(name, value, candidate, norm)
        if problem is None:
            return None
    return problem


def _one_dict_mismatch(
    name: str, value: Any, candidate: Mapping[str, Any], norm: Any
) -> ArgumentMismatch | None:
    if not isinstance(value, Mapping):
        return ArgumentMismatch("value_error:dict_value", f"{name}: {value!r} is not an object")
    problem = _dict_items_mismatch(name, value, candidate, norm)
    # BFCL looks for missing keys after a wrong value too, and reports the missing key then
    for key, allowed in candidate.items():
        if key not in value and OPTIONAL not in _as_list(allowed):
            return ArgumentMismatch("value_error:dict_key", f"{name}: missing key {key!r}")
    return problem


def _dict_items_mismatch(
    name: str, value: Mapping[str, Any], candidate: Mapping[str, Any], norm: Any
) -> ArgumentMismatch | None:
    for key, item in value.items():
        if key not in candidate:
            return ArgumentMismatch("value_error:dict_key", f"{name}: unexpected key {key!r}")
        allowed = _normalized_list(_as_list(candidate[key]), norm) or []
        if (norm(item) if isinstance(item, str) else item) not in allowed:
            return ArgumentMismatch("value_error:dict_value", f"{name}.{key}: {item!r} is not "
                                    f"among the allowed values {candidate[key]!r}")  # fmt: skip
    return None


def _list_of_dicts_mismatch(
    name: str, value: list[Any], values: list[Any], norm: Any
) -> ArgumentMismatch | None:
    """BFCL's ``list_dict_checker``: the list matches some allowed list object by object."""
    problem: ArgumentMismatch | None
    problem = ArgumentMismatch("list_dict_checker:unclear", f"{name}: no allowed list to compare")
    for candidate in values:
        if isinstance(candidate, str) and candidate != OPTIONAL:
            continue  # a variable's name: no list to compare with
        if not isinstance(candidate, (list, str)) or len(value) != len(candidate):
            problem = ArgumentMismatch("value_error:list_dict_count", f"{name}: {len(value)} "
                                       f"objects, the allowed list {_short(candidate)} has "
                                       f"another number")  # fmt: skip
            continue
        for item, allowed in zip(value, candidate, strict=True):
            problem = _dict_mismatch(name, item, [allowed], norm)
            if problem is not None:
                break
        else:
            return None
    return problem


# --- the shape of an answer's allowed values -------------------------------------------------


def allowed_value_problem(
    allowed: Mapping[str, Any], schema: Mapping[str, Any] | None
) -> str | None:
    """What is wrong with the shape of an expected call's allowed values (a list per argument;
    for an object-typed argument, objects of allowed-value lists; for an array of objects, lists
    of them), or None."""
    properties = _properties(schema) or {}
    for argument, listed in allowed.items():
        if not isinstance(listed, list):
            return f"{argument}: the allowed values must be a list, got {_short(listed)}"
        expected = _expected(properties.get(argument))
        for entry in listed:
            problem = _entry_problem(entry, expected)
            if problem is not None:
                return f"{argument}: {problem}"
    return None


def _entry_problem(entry: Any, expected: _Expected) -> str | None:
    if isinstance(entry, str):
        return None  # "" (may be left out), or the name of a variable, as BFCL reads it
    if expected.python is dict:
        return _object_problem(entry)
    if expected.python is list and expected.nested is dict:
        if not isinstance(entry, list):
            return (f"an allowed value of an array of objects must be a list of objects, got "
                    f"{_short(entry)}")  # fmt: skip
        return next(filter(None, (_object_problem(item) for item in entry)), None)
    return None


def _object_problem(entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return f"an allowed value of an object must be an object (or a string), got {_short(entry)}"
    for key, listed in entry.items():
        if not isinstance(listed, list):
            return (f"an allowed object's key {key!r} must map to a list of allowed values, "
                    f"got {_short(listed)}")  # fmt: skip
    return None


def _short(value: Any) -> str:
    return json.dumps(value)[:60]
