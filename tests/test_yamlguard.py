"""Tests for pytest_llmbench.yamlguard: YAML that would crash, hang or exhaust memory is refused
with a line, in eval files (spec.load), profile files (models.profile_files) and `llmbench
validate`, before PyYAML composes it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_llmbench.models.profile_files import load_profiles
from pytest_llmbench.models.profiles import ProfileError
from pytest_llmbench.spec.load import load_spec
from pytest_llmbench.spec.schema import EvalFileError
from pytest_llmbench.yamlguard import MAX_ALIAS_VALUES, MAX_DEPTH, YamlLimitError, check_yaml_limits

#: "Billion laughs": 9 levels of 9 aliases each, 520 bytes, 9**9 values once expanded.
BOMB = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
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
