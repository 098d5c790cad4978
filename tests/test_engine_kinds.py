"""Case kinds as one protocol (engine/kinds): which kind a plan is, the table, and a toy kind
added by registering it alone (no other change), answered, scored and recorded in-process."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from engine_support import answer_of, answerer, loaded, plan_of
from fakeserver import FakeLLMServer, Rule

from pytest_llmbench.engine.kinds import (
    CASE_KINDS,
    CaseKind,
    Checking,
    Engine,
    KindCall,
    KindResult,
)
from pytest_llmbench.engine.plan import plan_kind
from pytest_llmbench.engine.request import Answer
from pytest_llmbench.models.providers.completion import Completion
from pytest_llmbench.results.item_record import eval_record
from pytest_llmbench.results.state import EvalResult
from pytest_llmbench.scoring.assertions import AssertionContext, score_verdicts

KINDS = {
    "plain": "cases:\n  - {id: a, prompt: Hi, expected: x}\n",
    "turns": "cases:\n  - {id: a, turns: [{user: Hi}], expected: x}\n",
    "simulated_user": (
        "cases:\n  - id: a\n    simulated_user: {model: fake2, instructions: Ask.}\n"
        "    expected: x\n"
    ),
    "agent": "kind: agent\ntools: [read_file]\ncases:\n  - {id: a, prompt: Hi, expected: x}\n",
    "agent_conversation": (
        "kind: agent\ntools: [read_file]\ncases:\n  - {id: a, turns: [{user: Hi}], expected: x}\n"
    ),
    "solver": "solver: m:f\ncases:\n  - {id: a, prompt: Hi, expected: x}\n",
    "loglikelihood": (
        "loglikelihood: true\ncases:\n  - {id: a, prompt: Hi, choices: [x, y], answer: A}\n"
    ),
}


@pytest.mark.parametrize("name", list(KINDS))
def test_the_plan_says_its_kind_from_its_file_and_case(tmp_path: Path, name: str) -> None:
    (tmp_path / "m.py").write_text("def f(case, client):\n    return 'x'\n")  # the solver
    plan = plan_of(loaded(tmp_path, KINDS[name]))
    assert plan.kind == name
    assert dataclasses.replace(plan, repeat=1).kind == name  # a copy keeps it


def test_every_kind_a_plan_can_be_is_in_the_table() -> None:
    assert set(CASE_KINDS) == set(KINDS)
    assert all(CASE_KINDS[name].name == name for name in CASE_KINDS)


def test_a_file_kind_of_another_name_is_the_plans_kind(tmp_path: Path) -> None:
    plan = plan_of(loaded(tmp_path, KINDS["turns"]), kind="echo")
    assert plan.kind == "echo"
    assert plan_kind("completion", plan) == "turns"  # the file's own kinds read the fields
    assert plan_kind("agent", plan) == "turns"


class EchoKind(CaseKind):
    """A toy kind: answers with the prompt, calls no model; one metric of its own."""

    name = "echo"

    async def answer(self, engine: Engine, call: KindCall) -> Answer:
        text = call.plan.case.prompt or ""
        completion = Completion(text, "echo", 0, 0, False, None, 0.0, 0.0, 0, False, "stop")
        return Answer(completion, await engine.grade(call.plan, completion, call.targets))

    def metrics(self, result: KindResult) -> dict[str, float]:
        return {"echoed": 1.0}


ECHO = """
cases:
  - id: hello
    prompt: Hello there
    expected: hello
"""


def test_a_toy_kind_is_one_class_and_one_table_line(
    tmp_path: Path, fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(CASE_KINDS, "echo", EchoKind())
    plan = plan_of(loaded(tmp_path, ECHO), kind="echo")
    answer = answer_of(answerer(tmp_path, fake_llm.base_url), plan)
    assert answer.completion.text == "Hello there"
    assert fake_llm.requests == []  # no model call
    result = EvalResult(plan, completion=answer.completion)
    verdicts = CASE_KINDS["echo"].verdicts(Checking(result, _context(plan.case.expected)))
    assert [(v.type, v.passed) for v in verdicts] == [("icontains", True)]
    record = eval_record(result, "passed", None, root=tmp_path, worker="master")
    assert (record["response"], record["metrics"]) == ("Hello there", {"echoed": 1.0})
    assert record["conversation"] is None and record["agent_steps"] is None


def _context(expected: Any) -> AssertionContext:
    return AssertionContext(expected=expected, prompt=None, vars={}, model="fake", case_id="x")


TWO_TURNS = """
cases:
  - id: talk
    turns:
      - user: Hello
        assert: [{type: icontains, value: hello}]
      - user: What is your name?
        assert: [{type: regex, value: Alice}]
"""


def test_a_conversation_is_checked_turn_by_turn_and_fails_at_its_turn(tmp_path: Path) -> None:
    with FakeLLMServer([Rule(match="Hello", reply="Hello!")], default_reply="Bob") as server:
        plan = plan_of(loaded(tmp_path, TWO_TURNS))
        answer = answer_of(answerer(tmp_path, server.base_url), plan)
    kind = CASE_KINDS[plan.kind]
    result = EvalResult(plan, completion=answer.completion, conversation=answer.conversation)
    result.verdicts = kind.verdicts(Checking(result, _context(None)))
    assert [(v.turn, v.passed) for v in result.verdicts] == [(1, True), (2, False)]
    result.score = score_verdicts(result.verdicts)
    failure = kind.failure(result, result.verdicts)
    assert failure is not None and failure.startswith("turn 2 of 2: regex")
    shown = kind.shown(result, 80)
    assert shown is not None and any("What is your name?" in line for line in shown)
