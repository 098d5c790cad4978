"""The tour of the example evals: ``pytest evals/ -m tour`` (what ``make eval`` runs).

One or two cases of each feature, picked here by file and case id and marked ``tour``, so that a
first run on the embedded model takes under three minutes instead of the whole folder's eight
(``make eval-all``). The eval files stay as they are: a dataset's rows cannot carry a tag without
changing the data, and a tag would change the cases' records. With ``--models``, each tour case
runs on each model, as any selection does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent

#: The tour, by feature: an eval file (relative to this folder) and the ids of its toured cases.
TOUR: dict[str, tuple[str, ...]] = {
    # assertions: equals, contains with weights, a JSON schema; templates, datasets
    "formatting.eval.yaml": ("copy-sentence", "json-person"),
    "geography.eval.yaml": ("capital-france",),
    "arithmetic.eval.yaml": ("add-small",),
    # a python check on a JSONL dataset
    "support-tickets.eval.yaml": ("double-charge",),
    # messages and scripted and simulated conversations
    "chat.eval.yaml": ("few-shot-spanish",),
    "conversation.eval.yaml": ("remember-name", "simulated-traveller"),
    # prompt variants, multiple choice, log-likelihood
    "prompt-variants.eval.yaml": ("france",),
    "multiple-choice.eval.yaml": ("water-boils",),
    "loglikelihood/arc_easy.eval.yaml": ("arc-01",),
    # judges: a grader of your own, select-best's contest, RAG metrics (summaries-judged.eval.yaml's
    # jury of seven dimensions is left out: about 2 minutes for one item)
    "graders/fact.eval.yaml": ("capital-of-france",),
    "graders/select-best.eval.yaml": ("spider-legs",),
    "rag.eval.yaml": ("lighthouse-height",),
    # a reasoning model's thinking kept apart from its answer
    "reasoning.eval.yaml": ("think-then-answer",),
    # function calling; an agent in the sandbox with MCP tools (agents/files.eval.yaml is left
    # out: its first item spends its whole 120 s limit while the server starts and the look-ahead
    # calls of later items hold it)
    "function-calling-bfcl.eval.yaml": ("simple_python_0",),
    "agents/mcp-time.eval.yaml": ("utc-now",),
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "tour: the curated first run of the example evals")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _case_id(item) in TOUR.get(_eval_file(item), ()):
            item.add_marker("tour")


def _eval_file(item: pytest.Item) -> str:
    path = item.path
    return path.relative_to(HERE).as_posix() if path.is_relative_to(HERE) else ""


def _case_id(item: pytest.Item) -> str:
    """The case's id: the item's name before its parameters (model, prompt, repeat)."""
    return item.name.partition("[")[0]
