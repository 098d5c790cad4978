"""``answer-relevance`` with ``embedding_model``: Ragas' answer relevancy.

The fake server scripts each judge's questions (``fake-model-2``, or ``judge-1..2``) and
embeds every text as its 26 letter counts (``fakeserver.letter_vector``), so the similarities
below are computed by hand from letters: ``ab`` and ``ba`` point the same way (cosine 1),
``a`` is at 45 degrees from ``ab`` (cosine 1/sqrt(2)), ``cd`` shares no letter (cosine 0).
"""

from __future__ import annotations

import csv
import json
import math
from typing import Any

import pytest
from conftest import FAKE_KEY_ENV, Bench, Rule
from judged_runs import same_under_xdist

EMB = """
models:
  emb:
    model: openai/embed-1
    api_base: "{base}"
    api_key_env: {env}
    cost_per_1k: {{input: 1.0, output: 0}}
  down:
    model: openai/embed-1
    api_base: "http://127.0.0.1:{closed}/v1"
    api_key_env: {env}
  j1: {{model: openai/judge-1, api_base: "{base}", api_key_env: {env}}}
  j2: {{model: openai/judge-2, api_base: "{base}", api_key_env: {env}}}
"""
ANSWER = "The answer."


def relevance_file(options: str = "", prompt: str = "ab") -> str:
    assertion = f"{{type: answer-relevance, judges: [fake2], embedding_model: emb{options}}}"
    return f"cases:\n  - id: q\n    prompt: {prompt}\n    assert:\n      - {assertion}\n"


def questions(*texts: str, noncommittal: bool = False, reason: str = "plain") -> str:
    return json.dumps({"questions": list(texts), "noncommittal": noncommittal, "reason": reason})


def closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def rel(bench: Bench) -> Bench:
    """``bench`` with an embedding profile ``emb``, one on a closed port, and judges j1, j2."""
    text = EMB.format(base=bench.server.base_url, env=FAKE_KEY_ENV, closed=closed_port())
    bench.pytester.makefile(".yaml", **{"profiles/emb": text})
    bench.server.add_rule(Rule(model="fake-model", reply=ANSWER))
    return bench


def embeddings(bench: Bench) -> list[list[str]]:
    return [r.body["input"] for r in bench.server.requests if r.path.endswith("/embeddings")]


def judge_bodies(bench: Bench, model: str = "fake-model-2") -> list[dict[str, Any]]:
    return [r.body for r in bench.server.chat_requests() if r.body["model"] == model]


def test_the_score_is_the_mean_cosine_of_the_judges_questions_to_the_question(
    rel: Bench,
) -> None:
    # cos(ba, ab) = 1, cos(a, ab) = 1/sqrt(2), cos(cd, ab) = 0: mean (1 + 0.7071) / 3 = 0.569
    rel.server.add_rule(Rule(model="fake-model-2", reply=questions("ba", "a", "cd")))
    rel.eval_file("rel", relevance_file())
    rel.run("--models=fake").assert_outcomes(passed=1)
    (record,) = rel.records()
    want = (1 + 1 / math.sqrt(2)) / 3
    assert record["dimensions"] == {"answer_relevance": pytest.approx(want)}
    (verdict,) = record["assertions"]
    assert verdict["score"] == pytest.approx(want) and verdict["passed"] is True
    assert "mean cosine 0.569 of 3 generated question(s)" in verdict["reason"]
    assert "least similar: 'cd' (0.000)" in verdict["reason"]
    (judge,) = record["judges"]
    assert [(d["question"], round(d["similarity"], 4)) for d in judge["details"]] == [
        ("ba", 1.0),
        ("a", round(1 / math.sqrt(2), 4)),
        ("cd", 0.0),
    ]
    # One embedding call per judge: the question first, then its questions.
    assert embeddings(rel) == [["ab", "ba", "a", "cd"]]
    # The judge wrote its questions from the answer alone, 3 of them (Ragas' strictness).
    (body,) = judge_bodies(rel)
    text = body["messages"][-1]["content"]
    assert f"<answer>\n{ANSWER}\n</answer>" in text and "<question>" not in text
    assert "Write 3 different questions" in body["messages"][0]["content"]
    schema = body["response_format"]["json_schema"]["schema"]["properties"]["questions"]
    assert schema["minItems"] == 3 == schema["maxItems"]
    # The embedding call's tokens (4 words at 1 USD per 1k) are counted with the judge's.
    assert record["judge_cost_usd"] >= 4 / 1000


def test_a_noncommittal_answer_scores_zero_with_the_reason(rel: Bench) -> None:
    reply = questions("ab", "ba", noncommittal=True, reason="it says it does not know")
    rel.server.add_rule(Rule(model="fake-model-2", reply=reply))
    rel.eval_file("rel", relevance_file(", questions: 2"))
    rel.run("--models=fake").assert_outcomes(failed=1)
    (record,) = rel.records()
    assert record["dimensions"] == {"answer_relevance": 0.0}
    (verdict,) = record["assertions"]
    assert verdict["score"] == 0.0 and not verdict.get("unchecked")
    assert "noncommittal answer, score 0 (mean similarity 1.000)" in verdict["reason"]
    assert "it says it does not know" in verdict["reason"]


@pytest.mark.parametrize(
    ("reply", "prompt", "why"),
    [
        (questions(" ", "", ""), "ab", "no question generated from the answer"),
        (questions("ab", "ab", "ab"), "'{{blank}}'", "the case has no question to compare"),
    ],
)
def test_no_question_to_compare_is_unchecked_never_a_score(
    rel: Bench, reply: str, prompt: str, why: str
) -> None:
    rel.server.add_rule(Rule(model="fake-model-2", reply=reply))
    text = relevance_file(prompt=prompt).replace(
        "    prompt:", "    vars: {blank: ' '}\n    prompt:"
    )
    rel.eval_file("rel", text)
    rel.run("--models=fake").assert_outcomes(skipped=1)
    (record,) = rel.records()
    assert (record["outcome"], record["error_kind"], record["score"]) == (
        "skipped",
        "unchecked",
        None,
    )
    (verdict,) = record["assertions"]
    assert verdict["unchecked"] is True and why in verdict["reason"]
    assert embeddings(rel) == []


def test_a_failing_embedding_call_is_the_judges_error_naming_its_cause(rel: Bench) -> None:
    rel.server.add_rule(Rule(model="fake-model-2", reply=questions("ab", "ab", "ab")))
    rel.eval_file("rel", relevance_file().replace("embedding_model: emb", "embedding_model: down"))
    result = rel.run("--models=fake", "--max-retries=0")
    result.assert_outcomes(errors=1)
    (record,) = rel.records()
    assert record["error_kind"] == "judge" and record["score"] is None
    assert "embedding model down (connection)" in record["error"]
    (judge,) = record["judges"]
    assert judge["error"].startswith("embedding model down (connection)")


# --- a jury, the cache, xdist ----------------------------------------------------------------

CHECK = "{type: answer-relevance, judges: [j1, j2], embedding_model: emb, questions: 2}"
JURY = f"""
cases:
  - id: a
    prompt: ab
    assert: [{CHECK}]
  - id: b
    prompt: cd
    assert: [{CHECK}]
"""


def _jury(bench: Bench) -> None:
    """Each judge's questions by case (the judges see the answer, not the question):
    a -> j1 a, a: 1/sqrt(2); j2 cd, dc: 0.0. b -> j1 cd, dc: 1.0; j2 c, c: 1/sqrt(2)."""
    bench.server.reset()  # the answers differ by case here
    for case, question in (("a", "ab"), ("b", "cd")):
        bench.server.add_rule(Rule(model="fake-model", match=question, reply=f"Answer {case}."))
    scripted = {(1, "a"): ("a", "a"), (2, "a"): ("cd", "dc")}
    scripted |= {(1, "b"): ("cd", "dc"), (2, "b"): ("c", "c")}
    for (judge, case), texts in scripted.items():
        rule = Rule(model=f"judge-{judge}", match_any=f"Answer {case}.", reply=questions(*texts))
        bench.server.add_rule(rule)
    bench.eval_file("rel", JURY)


def judged_fields(bench: Bench) -> dict[str, Any]:
    keep = ("outcome", "score", "assertions", "dimensions")
    return {
        r["case_id"]: (
            {key: r[key] for key in keep},
            sorted((j["judge"], j["scores"], json.dumps(j["details"])) for j in r["judges"]),
        )
        for r in bench.records()
    }


def test_a_jury_averages_each_judges_own_score_and_reports_agreement(rel: Bench) -> None:
    _jury(rel)
    rel.run("--models=fake").assert_outcomes(passed=1, failed=1)  # a: 0.354 fails; b: 0.854
    root = 1 / math.sqrt(2)
    scores = {r["case_id"]: r["dimensions"]["answer_relevance"] for r in rel.records()}
    assert scores == {"a": pytest.approx(root / 2), "b": pytest.approx((1 + root) / 2)}
    per_judge = {
        (r["case_id"], j["judge"]): j["scores"]["answer_relevance"]
        for r in rel.records()
        for j in r["judges"]
    }
    assert per_judge == {
        ("a", "j1"): pytest.approx(root),
        ("a", "j2"): pytest.approx(0.0),
        ("b", "j1"): pytest.approx(1.0),
        ("b", "j2"): pytest.approx(root),
    }
    # Krippendorff's alpha (interval) over the judges' scores, n = 4 values in 2 units:
    # D_o = (1/4) * (2 * root**2 + 2 * (1 - root)**2); D_e = 2 * (4 * 2 - (2 + root*2)**2) / 12
    # (sum of values 1 + 2*root, of squares 2).
    observed = (2 * root**2 + 2 * (1 - root) ** 2) / 4
    expected = 2 * (4 * 2 - (1 + 2 * root) ** 2) / 12
    rows = {r["dimension"]: r for r in csv.DictReader(rel.out("judge_agreement.csv").open())}
    row = rows["answer_relevance"]
    assert (row["units"], row["judges"]) == ("2", "2")
    assert float(row["alpha"]) == pytest.approx(1 - observed / expected, abs=1e-6)


@pytest.mark.parametrize("again", ["--cache=replay", "--rescore"])
def test_verdicts_replay_from_the_cache_with_no_judge_nor_embedding_request(
    rel: Bench, again: str
) -> None:
    _jury(rel)
    rel.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(passed=1, failed=1)
    first = judged_fields(rel)
    assert len(embeddings(rel)) == 4  # one per judge and case
    rel.server.reset()  # a call now would be answered "ok", and embeddings counted
    rel.run("--models=fake", again, "--cache-dir=c").assert_outcomes(passed=1, failed=1)
    assert rel.server.requests == []
    assert judged_fields(rel) == first
    assert all(j["cached"] for r in rel.records() for j in r["judges"])


def test_rescore_applies_a_changed_threshold_without_calls(rel: Bench) -> None:
    _jury(rel)
    rel.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(passed=1, failed=1)
    rel.server.reset()
    rel.eval_file("rel", JURY.replace("questions: 2}", "questions: 2, threshold: 0.9}"))
    rel.run("--models=fake", "--rescore", "--cache-dir=c").assert_outcomes(failed=2)
    assert rel.server.requests == []


@pytest.mark.slow
def test_records_are_the_same_under_xdist(rel: Bench) -> None:
    _jury(rel)
    same_under_xdist(rel, judged_fields)


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("", "*rel.eval.yaml:2: case 'q': answer-relevance embedding_model: *@nowhere*"),
        (", questions: 0", "*rel.eval.yaml:5:*questions must be an integer from 1 to 10, got 0*"),
        (", questions: three", "*rel.eval.yaml:5:*questions must be an integer*got 'three'*"),
        (", questions: true", "*rel.eval.yaml:5:*questions must be an integer*got True*"),
    ],
)
def test_bad_relevance_settings_are_collection_errors_at_their_line(
    rel: Bench, options: str, message: str
) -> None:
    model = "'@nowhere'" if not options else "emb"
    text = relevance_file(options).replace("embedding_model: emb", f"embedding_model: {model}")
    rel.eval_file("rel", text)
    result = rel.run("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([message])
    assert "Traceback" not in result.stdout.str()
    assert rel.server.requests == []


@pytest.mark.parametrize(
    ("check", "message"),
    [
        (
            "{type: faithfulness, judges: [fake2], embedding_model: emb}",
            "*'embedding_model' applies to answer-relevance only*",
        ),
        (
            "{type: answer-relevance, judges: [fake2], questions: 2}",
            "*questions needs embedding_model*",
        ),
        (
            "{type: answer-relevance, judges: [fake2], embedding_model: ''}",
            "*embedding_model must name an embedding model*",
        ),
    ],
)
def test_relevance_keys_out_of_place_are_collection_errors(
    rel: Bench, check: str, message: str
) -> None:
    text = f"cases:\n  - id: q\n    prompt: ab\n    context: c\n    assert:\n      - {check}\n"
    rel.eval_file("rel", text)
    result = rel.run("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*rel.eval.yaml:6:{message}"])


def test_validate_names_a_bad_embedding_model_as_collection_does(
    rel: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_llmbench.cli import main

    text = relevance_file().replace("embedding_model: emb", "embedding_model: '@nowhere'")
    rel.eval_file("rel", text)
    code = main(["validate", "rel.eval.yaml"])
    out = capsys.readouterr().out
    assert code == 1
    assert "rel.eval.yaml:2: case 'q': answer-relevance embedding_model: " in out
    assert "@nowhere" in out and "Traceback" not in out


def test_a_turns_relevance_compares_that_turns_user_message(rel: Bench) -> None:
    rel.server.reset()
    rel.server.add_rule(Rule(model="fake-model", match="ab", reply="First reply."))
    rel.server.add_rule(Rule(model="fake-model", match="cd", reply="Second reply."))
    rel.server.add_rule(Rule(model="fake-model-2", reply=questions("cd", "c", "ab")))
    check = "{type: answer-relevance, judges: [fake2], embedding_model: emb}"
    turns = f"      - user: ab\n      - user: cd\n        assert: [{check}]\n"
    rel.eval_file("rel", f"cases:\n  - id: talk\n    turns:\n{turns}")
    rel.run("--models=fake").assert_outcomes(passed=1)
    (record,) = rel.records()
    (verdict,) = record["assertions"]
    # cos(cd, cd) = 1, cos(c, cd) = 1/sqrt(2), cos(ab, cd) = 0
    assert verdict["turn"] == 2
    assert verdict["score"] == pytest.approx((1 + 1 / math.sqrt(2)) / 3)
    assert embeddings(rel) == [["cd", "cd", "c", "ab"]]
    (body,) = judge_bodies(rel)
    assert "<answer>\nSecond reply.\n</answer>" in body["messages"][-1]["content"]
