"""Model-graded assertions end to end: a fake judge server returns chosen verdicts, malformed
JSON and errors; the records, outcomes, costs and aggregates must follow."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import FAKE_KEY_ENV, Bench, Rule

from pytest_llmbench.judging.prompts import JURY_DIMENSIONS

#: Judge profiles j1..j3 on the fake server, with their own prices.
JUDGE_PROFILES = """
models:
  j1:
    model: openai/judge-1
    api_base: {base}
    api_key_env: {env}
    cost_per_1k: {{input: 1.0, output: 2.0}}
  j2:
    model: openai/judge-2
    api_base: {base}
    api_key_env: {env}
    cost_per_1k: {{input: 1.0, output: 2.0}}
  j3:
    model: openai/judge-3
    api_base: {base}
    api_key_env: {env}
    cost_per_1k: {{input: 1.0, output: 2.0}}
sets:
  jury: [j1, j2, j3]
"""

ONE_JURY_CASE = """
cases:
  - id: summary
    prompt: Summarise the water cycle in one sentence.
    task: {task_type: summarization, task_criteria: one accurate sentence}
    assert:
      - type: jury
"""


@pytest.fixture
def judged(bench: Bench) -> Bench:
    """The bench project plus three judge profiles; the evaluated model answers plainly."""
    text = JUDGE_PROFILES.format(base=bench.server.base_url, env=FAKE_KEY_ENV)
    bench.pytester.makefile(".yaml", **{"profiles/judges": text})
    bench.server.add_rule(Rule(model="fake-model", reply="Water evaporates, condenses and falls."))
    return bench


def jury_reply(scores: dict[str, int], reason: str = "fine") -> str:
    return json.dumps({key: {"score": value, "reason": reason} for key, value in scores.items()})


def all_dims(score: int, **overrides: int) -> dict[str, int]:
    return {key: overrides.get(key, score) for key in JURY_DIMENSIONS}


def judge_rule(n: int, reply: str, times: int | None = None, status: int = 200) -> Rule:
    return Rule(model=f"judge-{n}", reply=reply, times=times, status=status)


def judge_requests(bench: Bench, n: int) -> list[Any]:
    return [r for r in bench.server.chat_requests() if r.body.get("model") == f"judge-{n}"]


# --- the jury method -------------------------------------------------------------------------


def test_jury_means_over_judges_and_records_every_judge(judged: Bench) -> None:
    judged.server.add_rule(judge_rule(1, jury_reply(all_dims(4))))
    judged.server.add_rule(judge_rule(2, jury_reply(all_dims(3, coherence=5))))
    judged.server.add_rule(judge_rule(3, jury_reply(all_dims(2, coherence=2))))
    judged.eval_file("summ", ONE_JURY_CASE)
    judged.run("--models=fake", "--judges=@jury").assert_outcomes(passed=1)
    (record,) = judged.records()
    assert record["dimensions"]["correctness"] == pytest.approx(3.0)
    assert record["dimensions"]["coherence"] == pytest.approx(11 / 3)
    assert list(record["dimensions"]) == list(JURY_DIMENSIONS)
    assert [entry["judge"] for entry in record["judges"]] == ["j1", "j2", "j3"]
    first = record["judges"][0]
    assert first["scores"] == {key: 4.0 for key in JURY_DIMENSIONS}
    assert first["reasons"]["format"] == "fine"
    assert first["error"] is None and first["call_attempts"] == 1 and first["type"] == "jury"
    (verdict,) = record["assertions"]
    # the score: the six dimensions' means mapped from 1..5 to 0..1, averaged
    assert verdict["passed"] is True
    assert verdict["score"] == pytest.approx((5 * (3 - 1) / 4 + (11 / 3 - 1) / 4) / 6)
    assert "mean over 3 judge(s)" in verdict["reason"]


def test_jury_fails_when_one_dimension_misses_the_threshold(judged: Bench) -> None:
    judged.server.add_rule(judge_rule(1, jury_reply(all_dims(4, relevance=2))))
    judged.server.add_rule(judge_rule(2, jury_reply(all_dims(4, relevance=3))))
    judged.eval_file("summ", ONE_JURY_CASE.replace("type: jury", "{type: jury, judges: [j1, j2]}"))
    result = judged.run("--models=fake")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*[[]FAIL[]] jury*below: relevance*"])
    (record,) = judged.records()
    assert record["dimensions"]["relevance"] == pytest.approx(2.5)
    expected = (5 * (4 - 1) / 4 + (2.5 - 1) / 4) / 6
    assert record["score"] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("aggregate", "threshold", "outcome", "relevance"),
    [
        ("mean", 3, "failed", 8 / 3),  # (1 + 2 + 5) / 3 < 3
        ("median", 3, "failed", 2.0),
        ("min", 1, "passed", 1.0),
        ("majority", 2, "passed", 8 / 3),  # two of three judges give >= 2
        ("majority", 3, "failed", 8 / 3),  # only one gives >= 3
    ],
)
def test_aggregations_and_thresholds(
    judged: Bench, aggregate: str, threshold: int, outcome: str, relevance: float
) -> None:
    for n, score in ((1, 1), (2, 2), (3, 5)):
        judged.server.add_rule(judge_rule(n, jury_reply(all_dims(5, relevance=score))))
    spec = f"{{type: jury, judges: '@jury', aggregate: {aggregate}, threshold: {threshold}}}"
    judged.eval_file("summ", ONE_JURY_CASE.replace("type: jury", spec))
    judged.run("--models=fake")
    (record,) = judged.records()
    assert record["outcome"] == outcome
    assert record["dimensions"]["relevance"] == pytest.approx(relevance)


# --- strict parsing, exclusion, errors -------------------------------------------------------


def test_malformed_verdict_is_asked_again_once_with_the_problem(judged: Bench) -> None:
    judged.server.add_rule(judge_rule(1, "I think it is good, 4/5.", times=1))
    judged.server.add_rule(judge_rule(1, jury_reply(all_dims(4))))
    judged.eval_file("summ", ONE_JURY_CASE.replace("type: jury", "{type: jury, judges: [j1]}"))
    judged.run("--models=fake").assert_outcomes(passed=1)
    (entry,) = judged.records()[0]["judges"]
    assert entry["call_attempts"] == 2 and entry["error"] is None
    first, second = judge_requests(judged, 1)
    assert second.body["messages"][: len(first.body["messages"])] == first.body["messages"]
    assert second.body["messages"][-2] == {
        "role": "assistant",
        "content": "I think it is good, 4/5.",
    }
    assert "JSON" in second.body["messages"][-1]["content"]


def test_a_judge_that_stays_malformed_is_excluded_and_never_counts_as_a_pass(
    judged: Bench,
) -> None:
    judged.server.add_rule(judge_rule(1, '{"correctness": 5}'))  # missing dimensions, twice
    judged.server.add_rule(judge_rule(2, jury_reply(all_dims(2))))
    judged.eval_file("summ", ONE_JURY_CASE.replace("type: jury", "{type: jury, judges: [j1, j2]}"))
    judged.run("--models=fake").assert_outcomes(failed=1)
    record = judged.records()[0]
    bad, good = record["judges"]
    assert bad["error"].startswith("malformed verdict:") and bad["scores"] == {}
    assert bad["call_attempts"] == 2
    assert good["error"] is None
    assert record["dimensions"]["correctness"] == 2.0  # j2 alone
    assert "excluded: j1: malformed verdict" in record["assertions"][0]["reason"]


def test_every_judge_failing_is_an_error_not_a_failure(judged: Bench) -> None:
    judged.server.add_rule(judge_rule(1, "not json"))
    judged.server.add_rule(judge_rule(2, "", status=500))
    judged.eval_file("summ", ONE_JURY_CASE.replace("type: jury", "{type: jury, judges: [j1, j2]}"))
    result = judged.run("--models=fake", "--max-retries=0")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*llmbench judge error: assertion 1: every judge failed*"])
    (record,) = judged.records()
    assert record["outcome"] == "error" and record["error_kind"] == "judge"
    assert record["score"] is None
    assert record["response"] == "Water evaporates, condenses and falls."
    assert [entry["error"] is not None for entry in record["judges"]] == [True, True]
    assert "HTTP 500" in record["judges"][1]["error"]


# --- costs, tokens, cache, parameters --------------------------------------------------------


def test_judge_tokens_and_cost_are_apart_from_the_models(judged: Bench) -> None:
    judged.server.add_rule(judge_rule(1, jury_reply(all_dims(4))))
    judged.eval_file("summ", ONE_JURY_CASE.replace("type: jury", "{type: jury, judges: [j1]}"))
    judged.run("--models=fake").assert_outcomes(passed=1)
    (record,) = judged.records()
    (entry,) = record["judges"]
    (request,) = judge_requests(judged, 1)
    assert entry["input_tokens"] > 0 and entry["output_tokens"] > 0
    assert record["judge_tokens"] == entry["input_tokens"] + entry["output_tokens"]
    price = (entry["input_tokens"] * 1.0 + entry["output_tokens"] * 2.0) / 1000
    assert record["judge_cost_usd"] == pytest.approx(price)
    model_price = (record["input_tokens"] * 0.001 + record["output_tokens"] * 0.002) / 1000
    assert record["cost_usd"] == pytest.approx(model_price)
    # temperature 0 and the verdict's JSON schema as structured output
    assert request.body["temperature"] == 0
    schema = request.body["response_format"]["json_schema"]["schema"]
    assert set(schema["required"]) == set(JURY_DIMENSIONS)


def test_judge_calls_are_cached_like_any_call(judged: Bench) -> None:
    judged.server.add_rule(judge_rule(1, jury_reply(all_dims(4))))
    judged.eval_file("summ", ONE_JURY_CASE.replace("type: jury", "{type: jury, judges: [j1]}"))
    cache = ("--models=fake", "--cache=use", "--cache-dir=c")
    judged.run(*cache).assert_outcomes(passed=1)
    judged.server.reset()
    judged.run(*cache, "--cache=replay").assert_outcomes(passed=1)
    assert judged.server.chat_requests() == []
    assert judged.records()[0]["judges"][0]["cached"] is True


def test_user_dimensions_from_the_command_line_and_the_assertion(judged: Bench) -> None:
    dims = all_dims(4) | {"brand_voice": 2, "empathy": 5, "brevity": 4}
    judged.server.add_rule(judge_rule(1, jury_reply(dims)))
    spec = "{type: jury, judges: [j1], dimensions: [Brevity]}"
    judged.eval_file("summ", ONE_JURY_CASE.replace("type: jury", spec))
    judged.run("--models=fake", "--judge-metrics=brand voice, Empathy")
    (record,) = judged.records()
    assert list(record["dimensions"])[6:] == ["brand_voice", "empathy", "brevity"]
    assert record["outcome"] == "failed"  # brand voice 2 < 3
    (request,) = judge_requests(judged, 1)
    assert "brand_voice" in request.body["messages"][0]["content"]


# --- the other kinds -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "reply", "outcome", "dimension", "value"),
    [
        ("{type: llm-rubric, value: mentions evaporation}", '{"score": 0.8, "reason": "ok"}',
         "passed", "rubric", 0.8),
        ("{type: llm-rubric, value: mentions evaporation, threshold: 0.9}",
         '{"score": 0.8, "reason": "ok"}', "failed", "rubric", 0.8),
        ("{type: factuality, value: Water evaporates and falls as rain.}",
         '{"choice": "B", "reason": "superset"}', "passed", "factuality", 1.0),
        ("{type: factuality, value: Water never evaporates.}",
         '{"choice": "D", "reason": "disagrees"}', "failed", "factuality", 0.0),
        ("{type: closed-qa, value: Is it one sentence?}", '{"verdict": "Y", "reason": "yes"}',
         "passed", "closed_qa", 1.0),
    ],
)  # fmt: skip
def test_rubric_factuality_and_closed_qa(
    judged: Bench, spec: str, reply: str, outcome: str, dimension: str, value: float
) -> None:
    judged.server.add_rule(judge_rule(1, reply))
    judged.eval_file("summ", ONE_JURY_CASE.replace("type: jury", spec))
    judged.run("--models=fake", "--judges=j1")
    (record,) = judged.records()
    assert record["outcome"] == outcome
    assert record["dimensions"] == {dimension: pytest.approx(value)}
    (request,) = judge_requests(judged, 1)
    if "value" in spec:
        written = spec.split("value: ")[1].split(",")[0].rstrip("}")
        assert written in request.body["messages"][-1]["content"]


def test_similarity_rouge_l_against_the_expected_answer(judged: Bench) -> None:
    judged.eval_file(
        "sim",
        """
cases:
  - id: close
    prompt: Describe the water cycle.
    expected: Water evaporates, condenses and then falls.
    assert: [{type: similarity, threshold: 0.7}]
  - id: far
    prompt: Describe the water cycle.
    expected: Clouds are made of ice crystals high up.
    assert: [similarity]
""",
    )
    judged.run("--models=fake").assert_outcomes(passed=1, failed=1)
    close, far = judged.records()
    assert close["assertions"][0]["reason"] == "ROUGE-L 0.909 >= 0.7"  # LCS 5 of 5 and 6 words
    assert far["score"] == 0.0
    assert judged.server.chat_requests()[0].body["model"] == "fake-model"
    assert len(judged.server.chat_requests()) == 2  # no judge call for similarity


# --- configuration errors and warnings -------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("{type: jury, judges: '@nobody'}", "*summ.eval.yaml:2: case 'summary': jury judges:*nobody*"),
        ("{type: jury, aggregate: mode}", "*summ.eval.yaml:6*aggregate must be one of*"),
        ("{type: jury, threshold: 7}", "*summ.eval.yaml:6*threshold must be between 1 and 5*"),
        ("{type: llm-rubric}", "*summ.eval.yaml:6*llm-rubric needs a value*"),
        ("{type: not-jury}", "*summ.eval.yaml:6*cannot be negated*"),
        ("{type: factuality, dimensions: [x]}", "*dimensions' applies to jury only*"),
        ("{type: jury, model: x}", "*unknown key 'model' in jury assertion*"),
    ],
)  # fmt: skip
def test_bad_judge_settings_are_collection_errors_with_file_and_line(
    judged: Bench, spec: str, message: str
) -> None:
    judged.eval_file("summ", ONE_JURY_CASE.replace("type: jury", spec))
    result = judged.run("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([message])
    assert "Traceback" not in result.stdout.str()


def test_unknown_judges_option_is_a_usage_error(judged: Bench) -> None:
    judged.eval_file("summ", ONE_JURY_CASE)
    result = judged.run("--models=fake", "--judges=@nobody")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*llmbench: --judges:*nobody*"])


def test_a_judge_that_is_also_the_evaluated_model_is_warned_about(judged: Bench) -> None:
    judged.server.add_rule(Rule(model="fake-model-2", reply=jury_reply(all_dims(4))))
    judged.eval_file("summ", ONE_JURY_CASE)
    result = judged.run("--models=fake2", "--judges=fake2", "-W", "default")
    result.stdout.fnmatch_lines(["*self-preference*fake2 judges its own answers*"])


def test_similarity_by_embedding_cosine_is_a_paced_cached_call(judged: Bench) -> None:
    from fakeserver import letter_vector

    from pytest_llmbench.scoring.similarity import cosine

    judged.pytester.makefile(
        ".yaml",
        **{
            "profiles/emb": f"""
models:
  emb:
    model: openai/embed-1
    api_base: {judged.server.base_url}
    api_key_env: {FAKE_KEY_ENV}
    cost_per_1k: {{input: 1.0, output: 0}}
"""
        },
    )
    spec = "{type: similarity, method: embedding, embedding_model: emb, threshold: 0.9}"
    judged.eval_file(
        "sim",
        f"""
cases:
  - id: near
    prompt: Describe the water cycle.
    expected: Water condenses, evaporates and falls.
    assert: [{spec}]
  - id: far
    prompt: Describe the water cycle.
    expected: zzz qqq
    assert: [{spec}]
""",
    )
    cache = ("--models=fake", "--cache=use", "--cache-dir=c")
    judged.run(*cache).assert_outcomes(passed=1, failed=1)
    near, far = judged.records()
    answer = "Water evaporates, condenses and falls."
    want = cosine(letter_vector(answer), letter_vector("Water condenses, evaporates and falls."))
    assert near["dimensions"] == {"cosine": pytest.approx(want)}
    (entry,) = near["judges"]
    assert (entry["judge"], entry["type"], entry["error"]) == ("emb", "similarity", None)
    assert entry["input_tokens"] == 10 and near["judge_cost_usd"] == pytest.approx(10 / 1000)
    assert far["dimensions"]["cosine"] < 0.9 and far["outcome"] == "failed"
    embeddings = [r for r in judged.server.requests if r.path.endswith("/embeddings")]
    inputs = sorted(tuple(r.body["input"]) for r in embeddings)
    assert inputs == [(answer, near["expected"]), (answer, "zzz qqq")]
    judged.server.reset()
    judged.run(*cache, "--cache=replay").assert_outcomes(passed=1, failed=1)
    assert judged.server.requests == []


TWO_QUESTIONS = """
cases:
  - id: a
    prompt: Question A about the water cycle.
    assert: [{type: jury, judges: '@jury'}]
  - id: b
    prompt: Question B about the water cycle.
    assert: [{type: jury, judges: '@jury'}]
"""


def _two_question_jury(bench: Bench) -> None:
    """Correctness by judge and case: a -> 5, 4, 4; b -> 2, 1, 2; every other dimension 3."""
    for n, (on_a, on_b) in enumerate(((5, 2), (4, 1), (4, 2)), start=1):
        for question, score in (("Question A", on_a), ("Question B", on_b)):
            reply = jury_reply(all_dims(3, correctness=score))
            bench.server.add_rule(Rule(model=f"judge-{n}", match=question, reply=reply))
    bench.eval_file("two", TWO_QUESTIONS)


def test_agreement_per_dimension_matches_the_hand_computed_alpha(judged: Bench) -> None:
    # Krippendorff's alpha, interval metric, correctness: n = 6 pairable values.
    # D_o = (1/6) * (4/2 + 4/2) = 2/3 (each unit's ordered squared differences sum to 4).
    # D_e = (2*6*66 - 2*18**2) / (6*5) = 144/30 = 4.8 (sum of values 18, of squares 66).
    # alpha = 1 - (2/3) / 4.8 = 0.861111...
    _two_question_jury(judged)
    result = judged.run("--models=fake")
    result.assert_outcomes(passed=1, failed=1)
    import csv

    rows = {r["dimension"]: r for r in csv.DictReader(judged.out("judge_agreement.csv").open())}
    assert float(rows["correctness"]["alpha"]) == pytest.approx(1 - (2 / 3) / 4.8)
    assert (rows["correctness"]["units"], rows["correctness"]["judges"]) == ("2", "3")
    assert rows["coherence"]["alpha"] == ""  # every judge said 3: no variation, no alpha
    result.stdout.fnmatch_lines(["*llmbench judges*", "correctness * 0.861 *2*"])
    run = json.loads(judged.out("run.json").read_text())
    agreement = {row["dimension"]: row for row in run["judge_agreement"]}
    assert agreement["correctness"]["alpha"] == pytest.approx(0.861111, abs=1e-6)
    board = next(csv.DictReader(judged.out("leaderboard.csv").open()))
    assert float(board["dim_correctness_mean"]) == pytest.approx((13 / 3 + 5 / 3) / 2)
    assert int(board["judge_errors"]) == 0
    assert int(board["judge_tokens_total"]) == sum(r["judge_tokens"] for r in judged.records())


@pytest.mark.slow
def test_judged_records_are_the_same_with_and_without_xdist(judged: Bench) -> None:
    _two_question_jury(judged)

    def judged_fields() -> dict[str, Any]:
        keys = ("outcome", "score", "dimensions", "judge_tokens", "judge_cost_usd")
        return {r["nodeid"]: tuple(json.dumps(r[k]) for k in keys) for r in judged.records()}

    judged.run_subprocess("-n", "2", "--models=fake").assert_outcomes(passed=1, failed=1)
    assert {r["worker"] for r in judged.records()} == {"gw0", "gw1"}
    with_xdist = judged_fields()
    judged.run("--models=fake").assert_outcomes(passed=1, failed=1)
    assert judged_fields() == with_xdist


def test_user_dimensions_per_file_and_per_case(judged: Bench) -> None:
    dims = all_dims(4) | {"tone": 4, "clarity": 2}
    judged.server.add_rule(judge_rule(1, jury_reply(dims)))
    judged.eval_file(
        "summ",
        """
judge_metrics: [Tone]
assert: [{type: jury, judges: [j1]}]
cases:
  - id: plain
    prompt: Summarise the water cycle.
  - id: clear
    prompt: Summarise the water cycle clearly.
    judge_metrics: [clarity]
""",
    )
    judged.run("--models=fake").assert_outcomes(passed=1, failed=1)
    plain, clear = judged.records()
    assert list(plain["dimensions"])[6:] == ["tone"]
    assert list(clear["dimensions"])[6:] == ["tone", "clarity"]
    assert clear["outcome"] == "failed"  # clarity 2 < 3


def test_a_bad_judge_metric_name_is_a_collection_error(judged: Bench) -> None:
    judged.eval_file(
        "summ", ONE_JURY_CASE.replace("    task:", "    judge_metrics: ['!!']\n    task:")
    )
    result = judged.run("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*summ.eval.yaml:4: judge_metrics:*"])


def test_budget_reached_before_the_judges_excludes_them_and_keeps_the_paid_answer(
    judged: Bench,
) -> None:
    judged.server.add_rule(judge_rule(1, jury_reply(all_dims(4))))
    judged.eval_file("summ", ONE_JURY_CASE.replace("type: jury", "{type: jury, judges: [j1]}"))
    # The evaluated answer costs more than the budget: no judge call may start after it.
    result = judged.run("--models=fake", "--max-cost=1e-9")
    result.assert_outcomes(errors=1)
    (record,) = judged.records()
    assert record["response"] and record["cost_usd"] > 0
    (entry,) = record["judges"]
    assert "--max-cost" in entry["error"] and entry["call_attempts"] == 1
    assert judge_requests(judged, 1) == []


def test_a_judge_without_its_key_is_excluded_not_the_item(
    judged: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    judged.server.add_rule(judge_rule(1, jury_reply(all_dims(4))))
    spec = "{type: jury, judges: [j1, openai/gpt-4o-mini]}"
    judged.eval_file("summ", ONE_JURY_CASE.replace("type: jury", spec))
    judged.run("--models=fake").assert_outcomes(passed=1)
    (record,) = judged.records()
    good, keyless = record["judges"]
    assert good["error"] is None
    assert "OPENAI_API_KEY" in keyless["error"] and keyless["call_attempts"] == 1
    assert "excluded: openai/gpt-4o-mini" in record["assertions"][0]["reason"]


def test_llm_rubric_is_graded_by_one_judge_the_first_of_the_panel(judged: Bench) -> None:
    judged.server.add_rule(judge_rule(1, '{"score": 1.0, "reason": "a"}'))
    judged.server.add_rule(judge_rule(2, '{"score": 0.2, "reason": "b"}'))
    spec = "{type: llm-rubric, value: mentions evaporation}"
    judged.eval_file("summ", ONE_JURY_CASE.replace("type: jury", spec))
    judged.run("--models=fake", "--judges=j1,j2").assert_outcomes(passed=1)
    (record,) = judged.records()
    assert [entry["judge"] for entry in record["judges"]] == ["j1"]
    assert judge_requests(judged, 2) == []


def test_two_assertions_on_one_dimension_are_averaged_in_the_record(judged: Bench) -> None:
    judged.server.add_rule(
        Rule(model="judge-1", match="first point", reply='{"score": 1.0, "reason": "a"}')
    )
    judged.server.add_rule(
        Rule(model="judge-1", match="second point", reply='{"score": 0.6, "reason": "b"}')
    )
    two = "{type: llm-rubric, value: first point}\n      - {type: llm-rubric, value: second point}"
    judged.eval_file("summ", ONE_JURY_CASE.replace("type: jury", two))
    judged.run("--models=fake", "--judges=j1").assert_outcomes(passed=1)
    (record,) = judged.records()
    assert record["dimensions"] == {"rubric": pytest.approx(0.8)}
    assert len(record["judges"]) == 2
