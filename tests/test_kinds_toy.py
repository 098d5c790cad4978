"""A new kind is its own module plus one line in each table: a toy file kind and case kind,
registered in ``spec.file_kinds.FILE_KINDS`` and ``engine.kinds.CASE_KINDS`` and nowhere else, run
through a whole pytest session (collection, answer, verdicts, record, terminal) like any kind."""

from __future__ import annotations

import pytest
from conftest import Bench

from pytest_llmbench.engine.kinds import CASE_KINDS, CaseKind, Engine, KindCall, KindResult
from pytest_llmbench.engine.request import Answer
from pytest_llmbench.models.providers.completion import Completion
from pytest_llmbench.spec.file_kinds import FILE_KINDS, FileKind


class ShoutKind(CaseKind):
    """The toy kind: its items answer with the prompt in capitals, without any model call."""

    name = "shout"

    async def answer(self, engine: Engine, call: KindCall) -> Answer:
        text = (call.plan.case.prompt or "").upper()
        completion = Completion(text, "shout", 0, 0, False, None, 0.0, 0.0, 0, False, "stop")
        return Answer(completion, await engine.grade(call.plan, completion, call.targets))

    def metrics(self, result: KindResult) -> dict[str, float]:
        return {"shouted": 1.0}


SHOUT_FILE = """
kind: shout
cases:
  - id: quiet
    prompt: hello there
    expected: HELLO THERE
  - id: wrong
    prompt: goodbye
    assert:
      - {type: equals, value: goodbye}
"""


def test_a_toy_kind_runs_end_to_end_from_its_table_lines_alone(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(FILE_KINDS, "shout", FileKind("shout", "the prompt shouted back"))
    monkeypatch.setitem(CASE_KINDS, "shout", ShoutKind())
    bench.eval_file("toy", SHOUT_FILE)
    bench.run("--models=fake").assert_outcomes(passed=1, failed=1)
    records = {record["case_id"]: record for record in bench.records()}
    assert records["quiet"]["response"] == "HELLO THERE"
    assert records["quiet"]["metrics"] == {"shouted": 1.0}
    assert records["wrong"]["assertions"][0]["passed"] is False
    assert bench.server.requests == []  # the kind answered: no model was called


def test_an_unregistered_kind_is_a_collection_error_at_its_line(bench: Bench) -> None:
    bench.eval_file("toy", SHOUT_FILE)
    result = bench.run("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*toy.eval.yaml:1: kind: unknown kind 'shout'*completion, agent*"])
