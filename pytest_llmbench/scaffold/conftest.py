"""Fixtures and hooks shared by this project's tests and eval files.

pytest-llmbench adds the fixtures `llm` (a client for the model under test), `record_score`,
`workdir` and `eval_case`; add your own here, as in any pytest project.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def brief_system_prompt() -> str:
    """The system prompt of the plain tests in evals/test_example.py."""
    return "You are a helpful assistant. Answer in one short sentence."
