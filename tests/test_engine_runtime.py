"""The per-process runtime (pytest_llmbench/engine/runtime.py), without a pytest session of its own."""

from __future__ import annotations

import pytest

from pytest_llmbench.engine.runtime import Runtime


def test_what_an_item_said_is_asked_without_making_the_scheduler(
    pytestconfig: pytest.Config,
) -> None:
    """pytest-timeout's handler asks what a cut-short item said on the main thread, which may be
    in the middle of making the scheduler: the question never makes one (a second, re-entrant
    making imported the engine's modules half-way through their first import)."""
    runtime = Runtime(pytestconfig)
    try:
        assert runtime.said_so_far("evals/x.eval.yaml::c[m-r0]") is None
        assert runtime._scheduler is None
    finally:
        runtime.close()
