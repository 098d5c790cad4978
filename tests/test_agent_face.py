"""Tests for the agent stage's face (pytest_llmbench/agent/__init__.py)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import pytest_llmbench.agent as agent


@pytest.mark.parametrize("name", agent.__all__)
def test_each_name_of_the_face_is_its_module_s_own(name: str) -> None:
    module = importlib.import_module(f"pytest_llmbench.agent.{agent._FACE[name]}")
    assert getattr(agent, name) is getattr(module, name)


def test_the_face_lists_each_name_once() -> None:
    assert sorted(agent.__all__) == sorted(agent._FACE)
    assert len(set(agent.__all__)) == len(agent.__all__)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Sandboxes'"):
        agent.Sandboxes  # noqa: B018 - the lookup is what is tested


def test_the_face_and_the_shim_import_no_sandbox() -> None:
    # the engine imports agent.shim for function-calling items: that must not load the sandbox
    code = (
        "import sys, pytest_llmbench.agent, pytest_llmbench.agent.shim; "
        "print(sorted(m for m in sys.modules if m.startswith('pytest_llmbench.agent.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['pytest_llmbench.agent.shim']"
