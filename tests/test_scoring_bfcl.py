"""BFCL's rules for one call (``scoring/bfcl.py``) and for a row's calls (``tool-calls`` with a
dataset's ``tool_calls: {dialect: bfcl}``), each class positive and negative, and our verdicts
against bfcl-eval's own on the committed reference file (``benchmarks/bfcl_crosscheck.py``)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_llmbench.scoring.base import Assertion, AssertionContext
from pytest_llmbench.scoring.bfcl import allowed_mismatch, allowed_value_problem, normalize_string
from pytest_llmbench.scoring.tool_calls import check_tool_calls
from pytest_llmbench.spec.functions import row_expected_calls, row_function_tools

REFERENCE = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "bfcl-reference.jsonl.gz"
#: The outputs where we differ from BFCL on purpose (benchmarks/bfcl-crosscheck.md): BFCL's
#: first-fit pairing of parallel calls fails them, our optimal pairing passes them.
FIRST_FIT = "parallel_function_checker_no_order:cannot_find_match"

# A function in BFCL's words, as the loader makes it a JSON schema (dict -> object, float ->
# number, tuple -> array).
DB = {
    "name": "db_fetch_records",
    "parameters": {
        "type": "dict",
        "properties": {
            "database_name": {"type": "string"},
            "conditions": {
                "type": "dict",
                "properties": {"department": {"type": "string"}, "school": {"type": "string"}},
            },
            "fetch_limit": {"type": "integer"},
            "ratio": {"type": "float"},
            "ids": {"type": "array", "items": {"type": "integer"}},
            "rows": {"type": "array", "items": {"type": "dict"}},
            "verbose": {"type": "boolean"},
        },
        "required": ["database_name", "conditions"],
    },
}
ANSWER = {
    "database_name": ["StudentDB"],
    "conditions": [{"department": ["Science"], "school": ["Bluebird High School", "Bluebird HS"]}],
    "fetch_limit": ["", 0],
    "ratio": [0.5, ""],
    "ids": [[1, 2], ""],
    "rows": [[{"k": ["a"]}, {"k": ["b", ""]}], ""],
    "verbose": [False, ""],
}
RIGHT = {
    "database_name": "StudentDB",
    "conditions": {"department": "Science", "school": "Bluebird HS"},
}


def schema() -> Mapping[str, Any]:
    return row_function_tools([DB], "bfcl").schemas()["db_fetch_records"]


def mismatch(arguments: Mapping[str, Any], **changes: Any) -> str | None:
    found = allowed_mismatch(ANSWER, {**arguments, **changes}, schema())
    return None if found is None else str(found)


def test_the_right_call_passes_with_an_object_argument() -> None:
    assert mismatch(RIGHT) is None
    assert mismatch(RIGHT, fetch_limit=0, ratio=0.5, verbose=False) is None


@pytest.mark.parametrize(
    ("conditions", "rule"),
    [
        ({"department": "Math", "school": "Bluebird HS"}, "conditions.department: 'Math'"),
        ({"department": "Science"}, "conditions: missing key 'school'"),
        ({"department": "Science", "school": "Bluebird HS", "x": 1}, "unexpected key 'x'"),
        (  # the allowed lists sent literally: what comparing whole objects would have passed
            {"department": ["Science"], "school": ["Bluebird High School", "Bluebird HS"]},
            "value_error:dict_value",
        ),
        ("Science", "conditions: expected type object, got str"),
    ],
)
def test_an_object_argument_is_judged_key_by_key(conditions: Any, rule: str) -> None:
    found = mismatch(RIGHT, conditions=conditions)
    assert found is not None and rule in found


def test_a_list_of_objects_is_judged_object_by_object() -> None:
    assert mismatch(RIGHT, rows=[{"k": "a"}, {"k": "b"}]) is None
    assert mismatch(RIGHT, rows=[{"k": "a"}, {}]) is None  # b's key may be left out
    # BFCL reports what the last allowed list found ("" here: the count)
    assert "list_dict_count" in str(mismatch(RIGHT, rows=[{"k": "a"}, {"k": "c"}]))
    strict = {**ANSWER, "rows": [[{"k": ["a"]}, {"k": ["b", ""]}]]}
    found = allowed_mismatch(strict, {**RIGHT, "rows": [{"k": "a"}, {"k": "c"}]}, schema())
    assert str(found).startswith("rows.k: 'c' is not among the allowed values ['b', '']")
    found = allowed_mismatch(strict, {**RIGHT, "rows": [{"k": "a"}]}, schema())
    assert "value_error:list_dict_count" in str(found)


@pytest.mark.parametrize(
    ("changes", "found"),
    [
        (
            {"fetch_limit": 0.0},
            "fetch_limit: expected type integer, got float (0.0) [type_error:simple]",
        ),
        ({"fetch_limit": False}, "fetch_limit: expected type integer, got bool"),
        ({"fetch_limit": "0"}, "fetch_limit: expected type integer, got str"),
        ({"ratio": "0.5"}, "ratio: expected type number, got str"),
        ({"verbose": 0}, "verbose: expected type boolean, got int"),
        ({"verbose": ""}, "verbose: expected type boolean, got str"),  # "" is no value
        ({"ids": [2, 1]}, "value_error:list/tuple"),
    ],
)
def test_types_follow_the_schema(changes: dict[str, Any], found: str) -> None:
    assert found in str(mismatch(RIGHT, **changes))


def test_an_arrays_items_are_typed_one_level_deep() -> None:
    strict = {**ANSWER, "ids": [[1, 2]]}
    found = allowed_mismatch(strict, {**RIGHT, "ids": ["1", "2"]}, schema())
    assert str(found) == "ids: expected array of int, got ['1', '2'] [type_error:nested]"
    assert allowed_mismatch(strict, {**RIGHT, "ids": [1, 2]}, schema()) is None
    # with "" among the allowed values BFCL skips the items' types and compares the lists
    assert "value_error:list/tuple" in str(mismatch(RIGHT, ids=["1", "2"]))


def test_an_integer_stands_for_a_float_and_a_variable_for_its_type() -> None:
    assert mismatch(RIGHT, ratio=0.5) is None
    int_answer = {**ANSWER, "ratio": [2.0]}
    assert allowed_mismatch(int_answer, {**RIGHT, "ratio": 2}, schema()) is None  # int for float
    # BFCL's "variable": an allowed value of another type than the schema's is a name to send
    named = {**ANSWER, "fetch_limit": ["limit_var"]}
    assert allowed_mismatch(named, {**RIGHT, "fetch_limit": "limit_var"}, schema()) is None
    assert allowed_mismatch(named, {**RIGHT, "fetch_limit": 3}, schema()) is not None


def test_an_empty_string_means_may_be_left_out() -> None:
    assert mismatch(RIGHT) is None  # fetch_limit, ratio, ... left out: "" is among their values
    assert "missing_optional" in str(
        allowed_mismatch({**ANSWER, "verbose": [False]}, RIGHT, schema())
    )
    # BFCL compares a string sent as "" with the allowed strings, "" among them: it passes
    loose = {**ANSWER, "database_name": ["StudentDB", ""]}
    assert allowed_mismatch(loose, {**RIGHT, "database_name": ""}, schema()) is None


def test_the_schema_decides_required_and_declared_arguments() -> None:
    # required by the schema, though the answer lets it be left out
    loose = {**ANSWER, "database_name": ["StudentDB", ""]}
    found = allowed_mismatch(loose, {"conditions": RIGHT["conditions"]}, schema())
    assert str(found) == (
        "missing required argument 'database_name' [simple_function_checker:missing_required]"
    )
    # allowed by the answer, but the function does not declare it
    extra = {**ANSWER, "color": ["red", ""]}
    found = allowed_mismatch(extra, {**RIGHT, "color": "red"}, schema())
    assert str(found) == "unexpected argument 'color' [simple_function_checker:unexpected_param]"
    assert allowed_mismatch(extra, RIGHT, schema()) is None  # left out: fine
    # declared, but the answer does not name it
    assert "unexpected_param" in str(allowed_mismatch(ANSWER, {**RIGHT, "x": 1}, schema()))


def test_strings_are_normalised_as_bfcl_does_unless_told_exact() -> None:
    assert normalize_string("Bluebird-High School.") == "bluebirdhighschool"
    assert normalize_string("it's") == 'it"s'
    assert mismatch(RIGHT, database_name="student_db.") is None
    assert "value_error:string" in str(mismatch(RIGHT, database_name="StudentD"))
    exact = allowed_mismatch(ANSWER, {**RIGHT, "database_name": "studentdb"}, schema(),
                             normalize_strings=False)  # fmt: skip
    assert exact is not None and "ignoring case" not in str(exact)
    assert allowed_mismatch(ANSWER, RIGHT, schema(), normalize_strings=False) is None


def test_without_a_schema_values_compare_as_json_and_strings_normalised() -> None:
    allowed = {"city": ["Paris"], "days": [3], "flag": [True, ""]}
    assert allowed_mismatch(allowed, {"city": "paris", "days": 3.0}, None) is None
    assert allowed_mismatch(allowed, {"city": "Paris", "days": 3, "flag": 1}, None) is not None
    assert allowed_mismatch(allowed, {"city": "Paris"}, None) is not None  # days is needed


@pytest.mark.parametrize(
    ("allowed", "problem"),
    [
        ({"conditions": [5]}, "conditions: an allowed value of an object must be an object"),
        ({"conditions": [{"department": "Science"}]}, "key 'department' must map to a list"),
        ({"rows": [{"k": ["a"]}]}, "an allowed value of an array of objects must be a list"),
        ({"rows": [[{"k": "a"}]]}, "rows: an allowed object's key 'k' must map to a list"),
        ({"database_name": "StudentDB"}, "database_name: the allowed values must be a list"),
    ],
)
def test_allowed_values_of_the_wrong_shape_are_named(allowed: dict[str, Any], problem: str) -> None:
    found = allowed_value_problem(allowed, schema())
    assert found is not None and problem in found
    assert allowed_value_problem(ANSWER, schema()) is None


# -- a row's calls: tool-calls -------------------------------------------------------------------


def judge(row: Mapping[str, Any], **options: str) -> Callable[[list[dict[str, Any]]], Any]:
    """``tool-calls`` on the row's expected calls, as a dataset row's item runs it: the row is
    read once, then each output judged."""
    tools = row_function_tools(row["function"], "bfcl")
    steps = row_expected_calls(row["ground_truth"], "bfcl", tools)
    assertion = Assertion("tool-calls", "tool-calls", options=options)

    def outcome(calls: list[dict[str, Any]]) -> Any:
        ctx = AssertionContext(tool_calls=tuple(calls), tool_schemas=tools.schemas())
        return check_tool_calls(steps, "", assertion, ctx)

    return outcome


def verdict(row: Mapping[str, Any], calls: list[dict[str, Any]], **options: str) -> Any:
    return judge(row, **options)(calls)


def test_parallel_calls_are_paired_optimally_where_bfcl_pairs_first_fit() -> None:
    play = {"name": "play", "parameters": {"type": "dict", "properties": {
        "artist": {"type": "string"}, "minutes": {"type": "integer"}}, "required": ["artist"]}}  # fmt: skip
    row = {"function": [play], "ground_truth": [
        {"play": {"artist": ["ABBA", "Queen"], "minutes": [5, ""]}},  # takes either call
        {"play": {"artist": ["ABBA"], "minutes": [5, ""]}},  # takes the ABBA call only
    ]}  # fmt: skip
    abba = {"name": "play", "arguments": json.dumps({"artist": "ABBA", "minutes": 5})}
    queen = {"name": "play", "arguments": json.dumps({"artist": "Queen"})}
    # BFCL's first fit gives ABBA to the first expected call, and the second finds no match
    assert verdict(row, [abba, queen]).passed is True
    assert verdict(row, [queen, queen]).passed is False


def test_a_failed_call_names_the_argument_and_the_rule() -> None:
    row = {"function": [DB], "ground_truth": [{"db_fetch_records": ANSWER}]}
    call = {"name": "db_fetch_records", "arguments": json.dumps({**RIGHT, "fetch_limit": 2.0})}
    outcome = verdict(row, [call])
    assert outcome.passed is False
    assert ("call 1 (db_fetch_records): fetch_limit: expected type integer, got float (2.0) "
            "[type_error:simple]") in outcome.reason  # fmt: skip
    garbage = verdict(row, [{"name": "db_fetch_records", "arguments": "{not json"}])
    assert garbage.passed is False and "not a JSON object" in garbage.reason


def test_strings_exact_on_the_assertion() -> None:
    row = {"function": [DB], "ground_truth": [{"db_fetch_records": ANSWER}]}
    call = {
        "name": "db_fetch_records",
        "arguments": json.dumps({**RIGHT, "database_name": "studentdb"}),
    }
    assert verdict(row, [call]).passed is True
    assert verdict(row, [call], strings="exact").passed is False


# -- beside bfcl-eval -----------------------------------------------------------------------------


def reference_rows() -> list[dict[str, Any]]:
    with gzip.open(REFERENCE, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def test_our_verdicts_equal_bfcls_on_the_reference_file() -> None:
    """Every output of every row of BFCL's four Python AST categories (benchmarks/
    bfcl_crosscheck.py wrote BFCL's verdicts): ours is the same, but where BFCL's first-fit
    pairing of parallel calls fails an output some pairing makes right."""
    rows = reference_rows()
    assert (
        len(rows) == 1000
        and sum(r["kind"] == "ground_truth" for x in rows for r in x["outputs"]) == 1000
    )
    different, first_fit = [], []
    for row in rows:
        outcome = judge(row)
        for output in row["outputs"]:
            ours = outcome(output["calls"]).passed
            if ours == output["valid"]:
                continue
            if ours and output["error_type"] == FIRST_FIT and "parallel" in row["category"]:
                first_fit.append(f"{row['id']}~{output['kind']}")
                continue
            different.append(f"{row['id']}~{output['kind']}: ours {ours}, BFCL {output['valid']}")
    assert different == []
    # benchmarks/bfcl-crosscheck.md explains it: an answer that allows either of two calls
    assert first_fit == ["parallel_178~reordered"]


# -- inputs BFCL's own checker crashes on: a clear verdict here --------------------------------


def test_a_variables_name_beside_an_object_is_no_object_to_compare_with() -> None:
    allowed = {**ANSWER, "conditions": [{"department": ["Science"]}, "conditions_var"]}
    found = allowed_mismatch(allowed, {**RIGHT, "conditions": {"department": "Art"}}, schema())
    assert "conditions.department: 'Art'" in str(found)
    # BFCL's variable: the first allowed value a string where the schema says object
    named = {**ANSWER, "conditions": ["conditions_var", {"department": ["Science"]}]}
    assert allowed_mismatch(named, {**RIGHT, "conditions": "conditions_var"}, schema()) is None
    rows = {**ANSWER, "rows": [[{"k": ["a"]}], "rows_var"]}
    assert "rows.k" in str(allowed_mismatch(rows, {**RIGHT, "rows": [{"k": "b"}]}, schema()))


def test_an_integer_too_large_for_a_number_is_a_type_mismatch() -> None:
    found = allowed_mismatch(ANSWER, {**RIGHT, "ratio": 10**400}, schema())
    assert found is not None and found.error_type == "type_error:simple"
    assert "too large for a number" in str(found)


def test_a_schema_without_properties_declares_nothing_and_forbids_nothing() -> None:
    assert allowed_mismatch({"q": ["foo"]}, {"q": "foo"}, {"type": "object"}) is None
    assert allowed_mismatch({"q": ["foo"]}, {"q": "bar"}, {"type": "object"}) is not None
    assert allowed_mismatch({"q": ["foo"]}, {"q": "foo", "z": 1}, {"type": "object"}) is not None


def test_a_lone_allowed_value_in_an_object_is_that_value_not_its_letters() -> None:
    # a shape the loader refuses, judged without crashing or reading "" inside "Paris"
    loose = {**ANSWER, "conditions": [{"department": "Science", "school": "Bluebird HS"}]}
    assert allowed_mismatch(loose, RIGHT, schema()) is None
    found = allowed_mismatch(loose, {**RIGHT, "conditions": {"department": "Science"}}, schema())
    assert "conditions: missing key 'school'" in str(found)
