"""Tests for the spec stage's face (pytest_llmbench/spec/__init__.py)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import pytest_llmbench.spec as spec


@pytest.mark.parametrize("name", spec.__all__)
def test_each_name_of_the_face_is_its_module_s_own(name: str) -> None:
    module = importlib.import_module(f"pytest_llmbench.spec.{spec._FACE[name]}")
    assert getattr(spec, name) is getattr(module, name)


def test_the_face_lists_each_name_once() -> None:
    assert sorted(spec.__all__) == sorted(spec._FACE) and len(set(spec.__all__)) == len(
        spec.__all__
    )


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'EvalSpecs'"):
        spec.EvalSpecs  # noqa: B018 - the lookup is what is tested


def test_the_face_and_the_validate_command_import_no_pydantic() -> None:
    # `llmbench` imports spec.validate at start: the face must not drag the schema in.
    code = (
        "import sys, pytest_llmbench.spec, pytest_llmbench.spec.validate; "
        "print(sorted(m for m in sys.modules if m.startswith(('pydantic', 'pytest_llmbench.spec.'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['pytest_llmbench.spec.validate']"
