"""The judge kinds table, in process: every judged kind graded through the engine's
:func:`~pytest_llmbench.engine.grading.grade` against a scripted pacer (no server, no pytest
session), and a toy kind registered in the table alone, graded the same way."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from pytest_llmbench.engine.grading import HelperCalls, grade
from pytest_llmbench.engine.pacing import CallPacer
from pytest_llmbench.engine.plan import CallPlan, GradedSpec
from pytest_llmbench.engine.request import Request
from pytest_llmbench.judging.judge_kinds import JUDGE_KINDS, JudgeKind, judge_kind
from pytest_llmbench.judging.panel import GradedAssertion, JudgeCall, PanelForm
from pytest_llmbench.judging.panel_kinds import grade_by_panel
from pytest_llmbench.judging.prompts import JURY_DIMENSIONS, JudgeRequest, retry_messages
from pytest_llmbench.judging.verdicts import ParsedVerdict, VerdictError
from pytest_llmbench.models.profiles import ModelProfile
from pytest_llmbench.models.providers.completion import CallTarget, Completion
from pytest_llmbench.scoring.assertions import Assertion, Verdict, parse_assertion
from pytest_llmbench.scoring.judged import JudgeSpec
from pytest_llmbench.scoring.pairwise import BaselineAnswer
from pytest_llmbench.spec import EvalCase

MODEL = ModelProfile(name="m", model="openai/m")
JUDGE = ModelProfile(name="j", model="openai/judge")
EMBEDDER = ModelProfile(name="e", model="openai/embed")
QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France."
#: A judge's reply to each request, from the request.
Script = Callable[[Request], str]


def completion(text: str) -> Completion:
    return Completion(text, "id", 10, 5, False, None, 0.1, None, 0, False, "stop")


class ScriptedPacer:
    """A pacer whose every call is answered by ``script``; it keeps the requests it got."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[Request] = []

    def lane(self, model: ModelProfile, file_parallel_safe: bool) -> None:
        return None

    async def paced(self, request: Request) -> Completion:
        self.requests.append(request)
        if request.embed:  # every text the same vector: each cosine is 1
            return completion(json.dumps([[1.0, 0.0]] * len(request.messages)))
        return completion(self.script(request))


class Baseline(HelperCalls):
    """Helpers whose ``--baseline`` run answered every case with ``text``."""

    def baseline_answer(self, plan: CallPlan) -> BaselineAnswer | str:
        return BaselineAnswer("Lyon.", "old", 0)


def case(**changes: Any) -> EvalCase:
    fields: dict[str, Any] = {
        "id": "capital",
        "messages": ({"role": "user", "content": QUESTION},),
        "expected": "Paris",
        "assertions": (),
        "threshold": 1.0,
        "model_params": {},
        "tags": (),
        "files": {},
        "vars": {},
        "task": None,
        "expected_output_tokens": None,
        "line": 1,
    }
    return EvalCase(**{**fields, **changes})


def graded(raw: Mapping[str, Any], judges: tuple[ModelProfile, ...] = (JUDGE,)) -> GradedSpec:
    assertion = parse_assertion(dict(raw))
    assert assertion.graded is not None
    return GradedSpec(0, assertion, assertion.graded, judges)


def run_grade(
    entry: GradedSpec,
    script: Script,
    helpers_class: type[HelperCalls] = HelperCalls,
    **case_changes: Any,
) -> tuple[GradedAssertion, ScriptedPacer]:
    pacer = ScriptedPacer(script)
    helpers = helpers_class(cast(CallPacer, pacer), n_workers=1)
    plan = CallPlan(
        "t.eval.yaml::capital[m]", "t", Path("t.eval.yaml"), case(**case_changes), MODEL, 0
    )
    plan = CallPlan(**{**plan.__dict__, "graded": (entry,)})
    targets = {p.name: CallTarget(p.name, p.model) for p in (JUDGE, EMBEDDER)}
    result = asyncio.run(grade(helpers, plan, completion(ANSWER), dict(targets), ()))
    (one,) = result
    return one, pacer


def verdict(graded: GradedAssertion) -> Verdict:
    assert graded.verdict is not None, graded.failure
    return graded.verdict


def replying(reply: Any) -> Script:
    text = reply if isinstance(reply, str) else json.dumps(reply)
    return lambda request: text


CLAIMS = {"claims": [{"claim": "Paris is the capital.", "supported": True, "reason": "said"}]}
CHUNKS = {"chunks": [{"chunk": 1, "relevant": True, "reason": "it says so"}]}
CONTEXT = ("Paris is the capital of France.",)


@pytest.mark.parametrize(
    ("raw", "reply", "passed", "score", "case_changes"),
    [
        (
            {"type": "llm-rubric", "value": "names Paris"},
            {"score": 0.8, "reason": "ok"},
            True,
            0.8,
            {},
        ),
        (
            {"type": "jury"},
            {key: {"score": 4, "reason": "good"} for key in JURY_DIMENSIONS},
            True,
            0.75,
            {},
        ),
        ({"type": "factuality"}, {"choice": "D", "reason": "disagrees"}, False, 0.0, {}),
        (
            {"type": "closed-qa", "value": "is polite"},
            {"verdict": "Y", "reason": "yes"},
            True,
            1.0,
            {},
        ),
        ({"type": "faithfulness"}, CLAIMS, True, 1.0, {"context": CONTEXT}),
        ({"type": "context-recall"}, CLAIMS, True, 1.0, {"context": CONTEXT}),
        ({"type": "context-precision"}, CHUNKS, True, 1.0, {"context": CONTEXT}),
        ({"type": "answer-relevance"}, {"score": 0.9, "reason": "on topic"}, True, 0.9, {}),
        (
            {"type": "model-graded", "prompt": "Is {{output}} right?", "choices": {"A": 1, "B": 0}},
            {"choice": "B"},
            False,
            0.0,
            {},
        ),
    ],
    ids=lambda value: value["type"] if isinstance(value, dict) and "type" in value else None,
)
def test_each_panel_kind_is_graded_in_process(
    raw: dict[str, Any], reply: Any, passed: bool, score: float, case_changes: dict[str, Any]
) -> None:
    result, pacer = run_grade(graded(raw), replying(reply), **case_changes)
    assert (verdict(result).passed, verdict(result).score) == (passed, pytest.approx(score))
    assert [call.judge for call in result.calls] == ["j"]
    assert len(pacer.requests) == 1


def test_a_grader_is_shown_its_prompt_rendered_for_the_answer() -> None:
    raw = {"type": "model-graded", "prompt": "Is {{output}} right?", "choices": {"A": 1, "B": 0}}
    _, pacer = run_grade(graded(raw), replying({"choice": "A"}))
    assert pacer.requests[0].messages[0]["content"].startswith(f"Is {ANSWER} right?")


def test_a_context_metric_without_context_is_unchecked_and_asks_no_judge() -> None:
    result, pacer = run_grade(graded({"type": "faithfulness"}), replying(CLAIMS), context=())
    assert verdict(result).unchecked
    assert verdict(result).reason == "unchecked: the context is empty: nothing to judge against"
    assert pacer.requests == []


def test_answer_relevance_with_an_embedding_model_embeds_each_judges_questions() -> None:
    entry = graded(
        {"type": "answer-relevance", "embedding_model": "e", "questions": 2}, (JUDGE, EMBEDDER)
    )
    reply = {"questions": ["Which city?", "Capital?"], "noncommittal": False, "reason": "ok"}
    result, pacer = run_grade(entry, replying(reply))
    assert verdict(result).score == pytest.approx(1.0)
    assert [request.model_name for request in pacer.requests] == ["j", "e"]
    assert pacer.requests[1].embed


def test_similarity_by_embedding_compares_the_reply_with_the_expected_answer() -> None:
    entry = graded(
        {"type": "similarity", "method": "embedding", "embedding_model": "e"}, (EMBEDDER,)
    )
    result, pacer = run_grade(entry, replying("unused"))
    assert verdict(result).passed
    assert [m["content"] for m in pacer.requests[0].messages] == [ANSWER, "Paris"]
    assert result.dimensions == {"cosine": pytest.approx(1.0)}


def test_pairwise_without_a_baseline_is_unchecked_saying_why() -> None:
    result, pacer = run_grade(graded({"type": "pairwise"}), replying({"choice": "A"}))
    assert verdict(result).reason == (
        "unchecked: no --baseline run to compare with: nothing to judge against"
    )
    assert pacer.requests == []


def test_pairwise_judges_both_orders_against_the_baseline() -> None:
    # A judge that always picks A prefers whichever answer is shown first: a tie.
    result, pacer = run_grade(graded({"type": "pairwise"}), replying({"choice": "A"}), Baseline)
    assert verdict(result).reason.startswith("pairwise tie against the baseline's old")
    assert verdict(result).score == 0.5
    assert len(pacer.requests) == 2


def test_select_best_without_other_contestants_is_unchecked() -> None:
    result, pacer = run_grade(graded({"type": "select-best"}), replying({"choice": "A"}))
    assert "no other contestant of this case runs in this session" in verdict(result).reason
    assert pacer.requests == []


#: The least an assertion of each judged type needs besides its type.
MINIMAL: dict[str, dict[str, Any]] = {
    "llm-rubric": {"value": "names Paris"},
    "closed-qa": {"value": "is polite"},
    "model-graded": {"prompt": "{{output}}?", "choices": {"A": 1, "B": 0}},
    "similarity": {"method": "embedding", "embedding_model": "e"},
}


def test_every_judged_assertion_type_has_a_kind_and_no_other_does() -> None:
    from pytest_llmbench.scoring.judged import JUDGE_TYPES

    assert set(JUDGE_KINDS) == {*JUDGE_TYPES, "similarity"}
    assert all(name == kind.name for name, kind in JUDGE_KINDS.items())
    for name, kind in JUDGE_KINDS.items():
        assertion = parse_assertion({"type": name, **MINIMAL.get(name, {})})
        assert isinstance(assertion.graded, kind.spec), name
    with pytest.raises(KeyError, match="'g-eval' is not a judge kind"):
        judge_kind("g-eval")


# -- a toy judge kind: its spec, prompt, parser and aggregation, registered in the table alone --


@dataclass(frozen=True)
class ToySpec(JudgeSpec):
    """A toy judged assertion: the judges say whether the answer names ``word``."""

    word: str = "Paris"


def toy_prompt(request: JudgeRequest) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Yes or no: does this name the city? {request.answer}"}]


def toy_schema(request: JudgeRequest) -> dict[str, Any]:
    return {"type": "string", "enum": ["yes", "no"]}


def toy_parse(request: JudgeRequest, reply: str) -> ParsedVerdict:
    said = reply.strip().lower()
    if said not in ("yes", "no"):
        raise VerdictError(f"say yes or no, not {reply!r}")
    return ParsedVerdict({"toy": float(said == "yes")}, {"toy": said})


def toy_aggregate(
    index: int,
    assertion: Assertion,
    spec: JudgeSpec,
    keys: Any,
    calls: tuple[JudgeCall, ...],
) -> GradedAssertion:
    yes = [call for call in calls if call.scores.get("toy") == 1.0]
    passed = len(yes) == len(calls)
    reason = f"{len(yes)} of {len(calls)} said yes"
    return GradedAssertion(index, Verdict("toy", passed, float(passed), 1.0, reason), calls)


TOY = JudgeKind(
    "toy",
    ToySpec,
    grade_by_panel,
    PanelForm(toy_prompt, toy_schema, toy_parse, retry_messages, toy_aggregate),
)


def test_a_toy_judge_kind_registered_in_the_table_is_graded_by_grade(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(JUDGE_KINDS, "toy", TOY)
    spec = ToySpec(kind="toy")
    entry = GradedSpec(0, Assertion("toy", "toy", graded=spec), spec, (JUDGE,))
    replies = iter(["maybe", "Yes"])  # a malformed reply is asked again, as for every kind
    result, pacer = run_grade(entry, lambda request: next(replies))
    assert verdict(result) == Verdict("toy", True, 1.0, 1.0, "1 of 1 said yes")
    first, again = (request.messages for request in pacer.requests)
    assert first[0]["content"] == f"Yes or no: does this name the city? {ANSWER}"
    assert again[-1]["content"].startswith("That reply was not valid: say yes or no")
    assert pacer.requests[0].params["response_format"]["json_schema"]["schema"] == toy_schema(
        cast(JudgeRequest, None)
    )
