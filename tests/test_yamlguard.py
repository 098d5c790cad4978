"""Tests for pytest_llmbench.yamlguard: YAML that would crash, hang, exhaust memory or build a
value that holds itself is refused with a line, in eval files (spec.load), profile files
(models.profile_files) and `llmbench validate`, before PyYAML composes it; values that hold
themselves or nest too deep are refused by the one walk that every reader of other data uses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_llmbench.models.profile_files import load_profiles
from pytest_llmbench.models.profiles import ProfileError
from pytest_llmbench.spec.load import load_spec
from pytest_llmbench.spec.resolved import EvalFileError
from pytest_llmbench.yamlguard import (
    MAX_ALIAS_VALUES,
    MAX_DEPTH,
    ValueLimitError,
    YamlLimitError,
    check_value,
    check_yaml_limits,
    json_text,
    json_value,
)

#: "Billion laughs": 9 levels of 9 aliases each, 520 bytes, 9**9 values once expanded.
BOMB = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)

#: An anchor 60 levels deep: an alias to it inside 5 more levels makes a value 66 deep.
DEEP_ANCHOR = "a: &a " + "[" * 60 + "x" + "]" * 60 + "\n"
#: Anchors each 40 deep around an alias of the one before: the second is 82 levels deep; the
#: 60 of them made a value 2,400 deep (a RecursionError when built) within the alias limits.
ALIAS_CHAIN = (
    "a0: &a0 "
    + "[" * 40
    + "x"
    + "]" * 40
    + "\n"
    + "".join(f"a{i}: &a{i} " + "[" * 40 + f"*a{i - 1}" + "]" * 40 + "\n" for i in range(1, 60))
)

BAD_TEXTS = [
    # (text, line, message)
    pytest.param(BOMB, 6, "aliases expand to more than 100,000 values", id="alias-bomb"),
    pytest.param("a: " + "[" * 1000 + "]" * 1000 + "\n", 1, "nested more than 64", id="flow-1000"),
    pytest.param(
        "".join(" " * i + "k:\n" for i in range(80)) + " " * 80 + "v\n",
        65,
        "nested more than 64 levels deep",
        id="block-80",
    ),
    pytest.param(
        "models:\n  m:\n    model: m\n    params: &p {max_tokens: 5, self: *p}\n",
        4,
        "recursive alias: *p is inside the value &p names",
        id="recursive-alias-flow",
    ),
    pytest.param(
        "a: &loop\n  - x\n  - b:\n      c: *loop\n",
        4,
        "recursive alias: *loop",
        id="recursive-block",
    ),
    pytest.param("a: &m\n  k: 1\n  <<: *m\n", 3, "recursive alias: *m", id="recursive-merge"),
    pytest.param(
        DEEP_ANCHOR + "b: " + "[" * 5 + "*a" + "]" * 5 + "\n",
        2,
        "nested more than 64 levels deep through *a",
        id="deep-through-an-alias",
    ),
    pytest.param(ALIAS_CHAIN, 2, "nested more than 64 levels deep through *a0", id="alias-chain"),
    pytest.param("a: 1\nb: x\x00y\n", 2, "character #x0000 is not allowed", id="nul"),
    pytest.param("a: 1\n\nb: \x07\n", 3, "character #x0007 is not allowed", id="control"),
]


@pytest.mark.parametrize(("text", "line", "message"), BAD_TEXTS)
def test_limits_name_the_line(text: str, line: int, message: str) -> None:
    with pytest.raises(YamlLimitError) as info:
        check_yaml_limits(text)
    assert (info.value.line, message in info.value.message) == (line, True), info.value.message


def test_aliases_and_nesting_within_the_limits_are_fine() -> None:
    nested = "a: " + "[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1) + "\n"
    check_yaml_limits(nested)
    # Reuse is what anchors are for: 100 aliases of a 900-value list stay under the limit.
    items = ", ".join(["x"] * 899)
    check_yaml_limits(f"a: &a [{items}]\nb: [{', '.join(['*a'] * 100)}]\n")
    assert 100 * 900 < MAX_ALIAS_VALUES


def test_an_alias_after_its_anchor_closed_is_no_recursion() -> None:
    # A sibling, an alias used twice, and an anchor of the same name redefined inside: the
    # alias names the latest anchor, which is closed.
    check_yaml_limits("a: &p {x: 1}\nb: {self: *p, again: *p}\n")
    check_yaml_limits("a: &p [&p [1], *p]\n")
    check_yaml_limits("a: &s text\nb: [*s, *s]\n")
    check_yaml_limits(DEEP_ANCHOR + "b: [*a]\n")  # 62 levels


@pytest.mark.parametrize(("text", "line", "message"), BAD_TEXTS)
def test_an_eval_file_past_the_limits_is_a_located_error(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = tmp_path / "bad.eval.yaml"
    path.write_bytes(text.encode("utf-8"))
    with pytest.raises(EvalFileError) as info:
        load_spec(path)
    assert str(info.value).startswith(f"{path}:{line}: invalid YAML: ")
    assert message in info.value.message


def test_an_integer_past_pythons_digit_limit_is_a_located_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.eval.yaml"
    path.write_text("cases:\n  - id: a\n    prompt: hi\n    threshold: " + "9" * 5000 + "\n")
    with pytest.raises(EvalFileError) as info:
        load_spec(path)
    assert info.value.line == 4 and "invalid YAML value: Exceeds the limit" in info.value.message


@pytest.mark.parametrize(("text", "line", "message"), BAD_TEXTS)
def test_a_profile_file_past_the_limits_is_a_located_error(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_bytes(text.encode("utf-8"))
    with pytest.raises(ProfileError) as info:
        load_profiles([path])
    assert info.value.line == line and message in str(info.value)


def test_a_profile_integer_past_the_digit_limit_is_a_profile_error(tmp_path: Path) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text("models:\n  a:\n    model: m\n    rpm: " + "9" * 5000 + "\n")
    with pytest.raises(ProfileError, match="invalid YAML: Exceeds the limit"):
        load_profiles([path])


@pytest.mark.slow
def test_nesting_100000_deep_neither_crashes_collection_nor_validate(tmp_path: Path) -> None:
    """It took the whole process down with SIGSEGV (the C composer's stack)."""
    deep = "cases:\n  - id: a\n    prompt: " + "[" * 100_000 + "]" * 100_000 + "\n"
    (tmp_path / "deep.eval.yaml").write_text(deep)
    (tmp_path / "bomb.eval.yaml").write_text(BOMB)
    run = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q"]
    collect = subprocess.run([*run, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert collect.returncode == pytest.ExitCode.INTERRUPTED, collect.stdout + collect.stderr
    assert "deep.eval.yaml:3: invalid YAML: nested more than 64 levels deep" in collect.stdout
    assert "bomb.eval.yaml:6: invalid YAML: aliases expand to more than" in collect.stdout
    assert "Traceback" not in collect.stdout + collect.stderr
    validate = [sys.executable, "-m", "pytest_llmbench.cli", "validate", str(tmp_path)]
    checked = subprocess.run(validate, capture_output=True, text=True, timeout=120)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "deep.eval.yaml:3: invalid YAML: nested more than 64 levels deep" in checked.stdout
    assert "Traceback" not in checked.stdout + checked.stderr


# -- values -------------------------------------------------------------------------------------


def nested(levels: int, inner: object = None) -> list[object]:
    """A list nested ``levels`` deep (the innermost holding ``inner``, if given), built without
    recursion."""
    value: list[object] = [] if inner is None else [inner]
    for _ in range(levels - 1):
        value = [value]
    return value


def holding_itself() -> dict[str, object]:
    params: dict[str, object] = {"max_tokens": 5}
    params["self"] = params
    return {"params": params}


def test_a_value_that_holds_itself_is_refused_naming_the_place() -> None:
    with pytest.raises(ValueLimitError) as info:
        check_value(holding_itself())
    assert info.value.message == "params.self: the value contains itself"
    cyclic: list[object] = [1, (2, [])]
    cyclic[1][1].append(cyclic)  # type: ignore[index]
    with pytest.raises(ValueLimitError, match=r"^1\.1\.0: the value contains itself$"):
        check_value(cyclic)


def test_a_value_nested_past_the_limit_is_refused_without_recursion() -> None:
    check_value(nested(MAX_DEPTH))
    with pytest.raises(ValueLimitError, match=f"nested more than {MAX_DEPTH} levels deep"):
        check_value(nested(MAX_DEPTH + 1))
    with pytest.raises(ValueLimitError) as info:
        check_value({"a": nested(10_000)})
    assert info.value.message.startswith("a.0.0.0.0.0.0.0...: nested more than 64 levels")


def test_a_shared_value_is_no_cycle_and_is_looked_into_once() -> None:
    # 30 levels of two references to the level below: 2**30 paths, one walk of 30 containers.
    value: list[object] = ["leaf"]
    for _ in range(30):
        value = [value, value]
    check_value(value)
    # Depth counts through a shared container met again from a deeper place.
    shared = nested(40)
    with pytest.raises(ValueLimitError, match="nested more than 64"):
        check_value([shared, nested(30, shared)])
    check_value([shared, nested(20, shared)])


def test_json_text_is_canonical_and_names_what_breaks_the_encoder() -> None:
    assert json_text({"b": 1, "a": ["é"]}, canonical=True) == '{"a":["é"],"b":1}'
    assert json_text({"b": 1}) == '{"b": 1}'
    with pytest.raises(ValueLimitError, match=r"^params\.self: the value contains itself$"):
        json_text(holding_itself(), canonical=True)
    with pytest.raises(
        ValueLimitError, match=r"^0\.0\.0\.0\.0\.0\.0\.0\.\.\.: nested more than 64"
    ):
        json_text(nested(100_000))
    with pytest.raises(TypeError):
        json_text({"a": object()})


def test_json_value_refuses_deep_documents() -> None:
    assert json_value('{"a": [1]}') == {"a": [1]}
    with pytest.raises(ValueLimitError, match="nested more than 64"):
        json_value("[" * 100 + "]" * 100)
    with pytest.raises(ValueLimitError, match="nested more than 64"):
        json_value("[" * 100_000 + "]" * 100_000)
