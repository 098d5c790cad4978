"""A plain pytest test on the model under test, next to the eval files.

The `llm` fixture is a client for the current model: the test runs once per model of
`--models` (and per `--repeat`), and its calls land in the results like an eval item's.
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_llmbench.fixtures import LLMClient


def test_capital_of_italy(
    llm: LLMClient, brief_system_prompt: str, record_score: Callable[..., None]
) -> None:
    answer = llm.complete(
        "What is the capital of Italy?", system=brief_system_prompt, max_tokens=32
    )
    found = "rome" in answer.text.lower()
    record_score(1.0 if found else 0.0)  # the score shown in the leaderboard (0..1)
    assert found, answer.text
