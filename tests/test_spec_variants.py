"""The experiment matrix end to end: prompt variants, temperature variations, latency-only runs,
multiple choice, solvers, images and optimized prompts, on the fake provider."""

from __future__ import annotations

import base64
import csv
import warnings
from pathlib import Path

import pytest
from conftest import Bench, Rule

from pytest_llmbench.spec.load import load_spec
from pytest_llmbench.spec.resolved import EvalCase
from pytest_llmbench.spec.variants import PromptVariantWarning, Variant, temperature_variations

PROMPTS = """\
prompts:
  - name: terse
    prompt: "Capital of {{country}}? One word."
  - name: polite
    prompt: "Please tell me the capital city of {{country}}."
    system: You are a geography teacher.
  - file://prompts/formal.txt
cases:
  - id: france
    vars: {country: France}
    expected: Paris
    assert: [icontains]
  - id: japan
    vars: {country: Japan}
    expected: Tokyo
    assert: [icontains]
"""


def collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::" in line and not line.startswith(" ")]


def _prompt_project(bench: Bench) -> None:
    (bench.pytester.path / "prompts").mkdir()
    (bench.pytester.path / "prompts" / "formal.txt").write_text(
        "State the capital of {{country}}, formally."
    )
    bench.eval_file("capitals", PROMPTS)


# --- variants as values -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "count", "expected"),
    [
        (0.4, 2, [0.2, 0.4, 0.6]),
        (0.4, 0, [0.4]),
        (0.4, 1, [0.2, 0.4]),
        (0.4, 4, [0.0, 0.2, 0.4, 0.6, 0.8]),
        (1.6, 2, [0.8, 1.6, 2.0]),  # clipped at 2
        (0.0, 2, [0.0, 0.25, 0.5]),
        (None, 2, [0.5, 1.0, 1.5]),  # nothing configured: the providers' default 1.0
    ],
)
def test_temperature_variations_step_by_half_the_base(
    base: float | None, count: int, expected: list[float]
) -> None:
    assert temperature_variations(base, count) == pytest.approx(expected)


def test_a_negative_temperature_has_no_variations() -> None:
    with pytest.raises(ValueError, match="temperature must be a number >= 0"):
        temperature_variations(-0.1, 2)


def test_variant_labels_and_id_parts() -> None:
    assert Variant().label("fake") == "fake"
    assert Variant().id_parts() == []
    both = Variant("terse", 0.2, optimized=True)
    assert both.label("fake") == "fake:terse_optimized@t0.2"
    assert both.id_parts() == ["terse_optimized", "t0.2"]
    assert Variant(optimized=True).label("fake") == "fake_optimized"
    assert Variant(optimized=True).id_parts() == ["optimized"]


# --- prompt variants ----------------------------------------------------------------------------


def test_each_case_runs_under_each_prompt_variant(bench: Bench) -> None:
    _prompt_project(bench)
    result = bench.run("--models=fake", "--collect-only", "-q")
    assert collected(result) == [
        f"capitals.eval.yaml::{case}[fake-{variant}-r0]"
        for variant in ("terse", "polite", "formal")
        for case in ("france", "japan")
    ]


def test_prompt_variants_render_send_and_land_in_the_records(bench: Bench) -> None:
    _prompt_project(bench)
    bench.server.add_rule(Rule(match="formal", reply="Paris, Tokyo"))
    bench.server.add_rule(Rule(reply="I do not know"))
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=2, failed=4)
    sent = {r.body["messages"][-1]["content"] for r in bench.server.chat_requests()}
    assert "Please tell me the capital city of Japan." in sent
    assert "State the capital of France, formally." in sent
    systems = [
        r.body["messages"][0]["content"]
        for r in bench.server.chat_requests()
        if r.body["messages"][0]["role"] == "system"
    ]
    assert systems == ["You are a geography teacher."] * 2
    records = bench.records()
    by_label = {(r["model"], r["case_id"]): r for r in records}
    assert set(by_label) == {
        (f"fake:{v}", c) for v in ("terse", "polite", "formal") for c in ("france", "japan")
    }
    formal = by_label[("fake:formal", "france")]
    assert formal["profile"] == "fake"
    assert formal["prompt_variant"] == "formal"
    assert formal["outcome"] == "passed"
    assert formal["prompt"] == "State the capital of France, formally."
    # The leaderboard ranks (model, prompt) pairs: the formal prompt is first.
    board = bench.out("leaderboard.csv").read_text().splitlines()
    assert board[1].split(",")[1] == "fake:formal"


def test_k_selects_a_prompt_variant(bench: Bench) -> None:
    _prompt_project(bench)
    bench.server.add_rule(Rule(reply="Paris Tokyo"))
    result = bench.run("--models=fake", "-k", "polite")
    result.assert_outcomes(passed=2)
    assert {r["prompt_variant"] for r in bench.records()} == {"polite"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "prompt: hi {{x}}\nprompts: [a]\ncases: [{vars: {x: 1}}]\n",
            "capitals.eval.yaml:1: give either `prompt` or `prompts`, not both",
        ),
        (
            "prompts: ['a {{x}}', {name: p1, prompt: 'b'}]\ncases: [{vars: {x: 1}}]\n",
            "capitals.eval.yaml:1: prompts[[]1]: duplicate variant name 'p1'*",
        ),
        (
            "prompts:\n  - file://missing.txt\ncases: [{vars: {x: 1}}]\n",
            "capitals.eval.yaml:2: prompts[[]0]: cannot read prompt file 'missing.txt'*",
        ),
        (
            "prompts:\n  - {name: a}\ncases: [{vars: {x: 1}}]\n",
            "capitals.eval.yaml:2: prompts[[]0]: give either `prompt` or `file`",
        ),
        (
            "prompts: ['a {{x}}']\ncases:\n  - id: one\n    prompt: own\n",
            "capitals.eval.yaml:4: case 'one': the file's `prompts:` give the prompt; give the "
            "case `vars:` instead",
        ),
        (
            "prompts: ['a {{y}}']\ncases:\n  - id: one\n    vars: {x: 1}\n",
            "capitals.eval.yaml:4: case 'one': unknown template variable 'y' (known: x)",
        ),
    ],
)
def test_bad_prompt_variants_are_collection_errors_with_lines(
    bench: Bench, text: str, message: str
) -> None:
    bench.eval_file("capitals", text)
    result = bench.run("--models=fake", "--collect-only")
    result.stdout.fnmatch_lines([message])
    assert "Traceback" not in result.stdout.str()


# --- temperature variations -----------------------------------------------------------------


def test_temperature_variations_send_each_temperature_and_group_by_it(bench: Bench) -> None:
    bench.eval_file(
        "capitals",
        "model_params: {temperature: 0.4}\n"
        "cases:\n  - {id: france, prompt: Capital of France?, expected: Paris, assert: [contains]}\n",
    )
    bench.server.add_rule(Rule(reply="Paris"))
    result = bench.run("--models=fake,fake2", "--temperature-variations=2", "-v")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*france?fake-t0.2-r0?*PASSED*"])
    sent = sorted((r.body["model"], r.body["temperature"]) for r in bench.server.chat_requests())
    assert sent == sorted(
        (model, t) for model in ("fake-model", "fake-model-2") for t in (0.2, 0.4, 0.6)
    )
    records = bench.records()
    assert {r["model"] for r in records} == {
        f"{m}@t{t}" for m in ("fake", "fake2") for t in ("0.2", "0.4", "0.6")
    }
    assert {r["temperature"] for r in records} == {0.2, 0.4, 0.6}
    by_temperature = bench.out("by_temperature.csv").read_text()
    assert by_temperature.count("\n") == 4  # header + 3 temperatures


def test_one_model_with_temperature_variations_writes_by_temperature(bench: Bench) -> None:
    bench.eval_file(
        "t",
        "cases:\n  - {id: france, prompt: Capital of France?, expected: Paris, assert: [contains]}\n",
    )
    bench.server.add_rule(Rule(reply="Paris"))
    result = bench.run("--models=fake", "--temperature-variations=2")
    result.assert_outcomes(passed=3)
    rows = bench.out("by_temperature.csv").read_text().splitlines()
    # The fake profile sets temperature 0: its variations are 0, 0.25 and 0.5.
    assert sorted(row.split(",")[1] for row in rows[1:]) == ["0", "0.25", "0.5"]


def test_a_profile_temperature_is_the_base_of_its_variations(bench: Bench) -> None:
    # The `fake` profile sets temperature 0: it grows upwards in steps of 0.25.
    bench.eval_file("one", "cases: [{id: a, prompt: hi}]\n")
    result = bench.run("--models=fake", "--temperature-variations=2", "--collect-only", "-q")
    assert collected(result) == [f"one.eval.yaml::a[fake-t{t}-r0]" for t in ("0", "0.25", "0.5")]


# --- latency-only -------------------------------------------------------------------------------


def test_latency_only_measures_without_scoring_or_judging(bench: Bench) -> None:
    bench.eval_file(
        "capitals",
        """\
cases:
  - id: france
    prompt: What is the capital of France?
    expected: Paris
    assert:
      - contains
      - {type: llm-rubric, value: names Paris, judges: [fake2]}
""",
    )
    bench.server.add_rule(Rule(reply="Lyon"))  # would fail the assertion
    result = bench.run("--models=fake", "--latency-only")
    result.assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["eval_type"] == "latency"
    assert record["score"] is None
    assert record["assertions"] == [] and record["judges"] == []
    assert record["streamed"] is True and record["ttft_s"] is not None
    assert record["latency_s"] > 0 and record["output_tokens"] > 0
    assert len(bench.server.chat_requests()) == 1  # no judge call


# --- multiple choice ------------------------------------------------------------------------


MC_ROWS = [
    {"id": "q1", "question": "Which is a fruit?", "a": "Carrot", "b": "Apple", "label": "1"},
    {"id": "q2", "question": "Which is blue?", "a": "Sky", "b": "Grass", "label": "0"},
]


def test_multiple_choice_inline_cases_score_the_named_option(bench: Bench) -> None:
    bench.eval_file(
        "mc",
        """\
cases:
  - id: fruit
    prompt: Which is a fruit?
    choices: [Carrot, Apple, Stone]
    answer: B
  - id: sky
    prompt: Which is blue?
    choices: [Sky, Grass]
    answer: 0
""",
    )
    bench.server.add_rule(Rule(match="fruit", reply="The answer is B"))
    bench.server.add_rule(Rule(reply="B. Grass"))
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=1, failed=1)
    asked = [r.body["messages"][-1]["content"] for r in bench.server.chat_requests()]
    (sent,) = [text for text in asked if "fruit" in text]  # the two calls overlap: any order
    assert "A. Carrot" in sent and "B. Apple" in sent and "C. Stone" in sent
    records = {r["case_id"]: r for r in bench.records()}
    assert records["fruit"]["choice"] == {"chosen": "B", "answer": "B", "correct": True}
    assert records["sky"]["choice"] == {"chosen": "B", "answer": "A", "correct": False}
    assert records["fruit"]["expected"] == "Apple"
    assert [a["type"] for a in records["fruit"]["assertions"]] == ["choice"]


def test_multiple_choice_rows_from_a_csv_dataset(bench: Bench) -> None:
    path = bench.pytester.path / "piqa.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(MC_ROWS[0]))
        writer.writeheader()
        writer.writerows(MC_ROWS)
    bench.eval_file(
        "piqa",
        "dataset: {path: piqa.csv, prompt: question, choices: [a, b], answer: label}\n",
    )
    bench.server.add_rule(Rule(reply="A"))
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=1, failed=1)  # q2 (answer 0 = A) passes
    assert {r["case_id"]: r["passed"] for r in bench.records()} == {"q1": False, "q2": True}


def test_a_bad_multiple_choice_answer_is_a_collection_error(bench: Bench) -> None:
    bench.eval_file("mc", "cases:\n  - id: x\n    prompt: p\n    choices: [a, b]\n    answer: E\n")
    result = bench.run("--models=fake", "--collect-only")
    result.stdout.fnmatch_lines(["mc.eval.yaml:5: case 'x': answer: *"])


# --- solvers --------------------------------------------------------------------------------


SOLVER = """\
async def vote(case, client):
    answers = []
    for _ in range(3):
        reply = await client.acomplete(case.prompt + " Answer in one word.")
        answers.append(reply.text.strip())
    return max(set(answers), key=answers.count)


def upper(case, client):
    return client.complete(case.prompt).text.upper()
"""


def test_a_solver_answers_with_several_calls_and_sums_their_usage(bench: Bench) -> None:
    bench.pytester.makepyfile(strategies=SOLVER)
    bench.eval_file(
        "solved",
        "solver: strategies:vote\n"
        "cases:\n  - {id: france, prompt: Capital of France?, expected: Paris, assert: [equals]}\n",
    )
    bench.server.add_rule(Rule(reply="Paris", times=2))
    bench.server.add_rule(Rule(reply="Lyon"))
    result = bench.run("--models=fake", "--cache=use")
    result.assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["solver"] == "strategies:vote"
    assert record["response"] == "Paris"
    assert len(bench.server.chat_requests()) == 3
    one = bench.server.chat_requests()[0]
    assert one.body["messages"][-1]["content"] == "Capital of France? Answer in one word."
    assert record["input_tokens"] > 0 and record["cost_usd"] > 0
    # Each of the solver's calls has its own cache entry: a re-run replays all three answers.
    bench.server.reset()
    result = bench.run("--models=fake", "--cache=replay")
    result.assert_outcomes(passed=1)
    assert bench.server.chat_requests() == []


def test_a_solvers_own_verdict_decides_the_item(bench: Bench) -> None:
    bench.pytester.makepyfile(
        near="""
def solve(case, client):
    reply = client.complete(case.prompt)
    return reply.text.strip() == case.vars["want"]
"""
    )
    bench.eval_file(
        "near",
        "solver: near:solve\ncases:\n"
        "  - {id: right, prompt: Capital of France?, vars: {want: Paris}}\n"
        "  - {id: wrong, prompt: Capital of Spain?, vars: {want: Madrid}}\n",
    )
    bench.server.add_rule(Rule(reply="Paris"))
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=1, failed=1)
    records = {record["case_id"]: record for record in bench.records()}
    assert records["right"]["score"] == 1.0 and records["wrong"]["score"] == 0.0
    assert records["wrong"]["response"] == "Paris"  # the answer it got, recorded
    (verdict,) = records["wrong"]["assertions"]
    assert (verdict["type"], verdict["passed"]) == ("solver", False)
    assert "judged its answer wrong" in verdict["reason"]


def test_a_sync_solver_and_a_failing_one(bench: Bench) -> None:
    bench.pytester.makepyfile(strategies=SOLVER + "\n\ndef broken(case, client):\n    1 / 0\n")
    bench.eval_file("up", "solver: strategies:upper\ncases: [{id: a, prompt: hi, expected: OK}]\n")
    bench.eval_file("zz", "solver: strategies:broken\ncases: [{id: b, prompt: hi}]\n")
    bench.server.add_rule(Rule(reply="ok"))
    result = bench.run("--models=fake", "-rA")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*solver strategies:broken: ZeroDivisionError: division by zero*"])
    records = {r["case_id"]: r for r in bench.records()}
    assert records["a"]["response"] == "OK"
    assert records["b"]["error_kind"] == "solver"


# --- images ---------------------------------------------------------------------------------

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def test_images_are_sent_as_content_parts_and_refused_by_a_text_only_model(
    bench: Bench,
) -> None:
    (bench.pytester.path / "dot.png").write_bytes(PNG)
    profiles = bench.pytester.path / "profiles" / "fake.yaml"
    profiles.write_text(profiles.read_text().replace("  fake2:\n", "  fake2:\n    vision: false\n"))
    bench.eval_file(
        "seeing",
        "cases:\n  - {id: dot, prompt: What is this?, images: [dot.png], expected: a dot}\n",
    )
    bench.server.add_rule(Rule(reply="a dot"))
    result = bench.run("--models=fake,fake2", "-rA")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*fake2*does not accept images*"])
    (request,) = bench.server.chat_requests()
    content = request.body["messages"][-1]["content"]
    assert content[0] == {"type": "text", "text": "What is this?"}
    assert content[1]["type"] == "image_url"
    assert content[1]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(
        PNG
    ).decode("ascii")
    records = {r["model"]: r for r in bench.records()}
    assert records["fake"]["images"] and str(Path("dot.png")) in records["fake"]["images"][0]
    assert records["fake2"]["error_kind"] == "unsupported"


def test_a_missing_image_is_a_collection_error(bench: Bench) -> None:
    bench.eval_file("seeing", "cases:\n  - id: dot\n    prompt: p\n    images: [nope.png]\n")
    result = bench.run("--models=fake", "--collect-only")
    result.stdout.fnmatch_lines(["seeing.eval.yaml:4: case 'dot': images[[]0]: *"])


# --- prompt optimization --------------------------------------------------------------------


def test_optimize_both_runs_original_and_rewritten_prompts_side_by_side(bench: Bench) -> None:
    bench.eval_file(
        "capitals",
        """\
prompt: "capital {{country}}"
cases:
  - {id: france, vars: {country: France}, expected: Paris, assert: [icontains]}
  - {id: japan, vars: {country: Japan}, expected: Tokyo, assert: [icontains]}
""",
    )
    rewrite = '{"system": null, "prompt": "What is the capital city of {{country}}? One word."}'
    bench.server.add_rule(Rule(model="fake-model-2", reply=rewrite))
    bench.server.add_rule(Rule(match="capital city of France", reply="Paris"))
    bench.server.add_rule(Rule(match="capital city of Japan", reply="Tokyo"))
    bench.server.add_rule(Rule(reply="?"))
    result = bench.run(
        "--models=fake", "--optimize-prompts=both", "--optimizer=fake2", "--repeat=2", "-v"
    )
    result.assert_outcomes(passed=4, failed=4)
    result.stdout.fnmatch_lines(["*france?fake-optimized-r1?*PASSED*"])
    # One rewrite for the template and model, however many items use it.
    rewrites = [r for r in bench.server.chat_requests() if r.body["model"] == "fake-model-2"]
    assert len(rewrites) == 1
    records = bench.records()
    optimized = [r for r in records if r["optimized"]]
    assert {r["model"] for r in optimized} == {"fake_optimized"}
    assert all(r["passed"] for r in optimized)
    assert {r["optimization"]["status"] for r in optimized} == {"rewritten"}
    assert optimized[0]["prompt"].startswith("What is the capital city of")
    assert {r["model"] for r in records if not r["optimized"]} == {"fake"}
    (log_line,) = bench.out("prompt_optimizations.jsonl").read_text().splitlines()
    assert '"status": "rewritten"' in log_line and "{{country}}" in log_line
    result.stdout.fnmatch_lines(
        ["llmbench: items with an optimized prompt: 4 rewritten; rewrites in *"]
    )


def test_a_failed_rewrite_falls_back_to_the_original_prompt(bench: Bench) -> None:
    bench.eval_file(
        "capitals",
        'prompt: "capital {{country}}"\n'
        "cases: [{id: france, vars: {country: France}, expected: Paris, assert: [icontains]}]\n",
    )
    # The rewrite drops the placeholder: it is refused and the original prompt is sent.
    bench.server.add_rule(Rule(model="fake-model-2", reply='{"system": null, "prompt": "hi"}'))
    bench.server.add_rule(Rule(match="capital France", reply="Paris"))
    result = bench.run("--models=fake", "--optimize-prompts=only", "--optimizer=fake2")
    result.assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["optimized"] and record["optimization"]["status"] == "failed"
    assert "country" in record["optimization"]["reason"]
    assert record["prompt"] == "capital France"


def test_a_solver_that_cannot_be_imported_is_a_collection_error(bench: Bench) -> None:
    bench.eval_file("solved", "solver: nowhere:solve\ncases: [{id: a, prompt: hi}]\n")
    result = bench.run("--models=fake", "--collect-only")
    result.stdout.fnmatch_lines(["solved.eval.yaml:1: solver: nowhere:solve: cannot load: *"])
    assert "Traceback" not in result.stdout.str()


# --- xdist ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_matrix_gives_the_same_records_with_two_workers(bench: Bench) -> None:
    """Prompt variants x temperatures x original/optimized prompts: -n 2 (real pytest-xdist)
    gives the records -n 0 gives, and the optimizer is asked once per prompt and model."""
    import json

    _prompt_project(bench)
    rewrite = '{"system": null, "prompt": "Capital city of {{country}}, one word, please."}'
    bench.server.add_rule(Rule(model="fake-model-2", reply=rewrite))
    bench.server.add_rule(Rule(match="France", reply="Paris"))
    bench.server.add_rule(Rule(reply="Tokyo"))
    common = (
        "--models=fake",
        "--temperature-variations=2",
        "--optimize-prompts=both",
        "--optimizer=fake2",
        "--stream=off",
    )
    serial = bench.run("-n", "0", "--results-dir=serial", *common)
    serial.assert_outcomes(passed=36)  # 2 cases x 3 prompts x 3 temperatures x 2
    optimizer_calls = sum(r.body["model"] == "fake-model-2" for r in bench.server.chat_requests())
    assert optimizer_calls == 3  # one rewrite per prompt variant (and model)
    bench.server.reset()
    bench.server.add_rule(Rule(model="fake-model-2", reply=rewrite))
    bench.server.add_rule(Rule(match="France", reply="Paris"))
    bench.server.add_rule(Rule(reply="Tokyo"))
    parallel = bench.run_subprocess("-n", "2", "--results-dir=parallel", *common)
    parallel.assert_outcomes(passed=36)
    optimizer_calls = sum(r.body["model"] == "fake-model-2" for r in bench.server.chat_requests())
    assert optimizer_calls == 3  # shared by the two workers

    def comparable(folder: str) -> list[dict[str, object]]:
        path = bench.pytester.path / folder / "results.jsonl"
        records = [json.loads(line) for line in path.read_text().splitlines() if line]
        volatile = ("ttft_s", "latency_s", "tokens_per_s", "started_at", "worker")
        return sorted(
            ({k: v for k, v in r.items() if k not in volatile} for r in records),
            key=lambda r: str(r["nodeid"]),
        )

    assert comparable("parallel") == comparable("serial")
    labels = {r["model"] for r in comparable("serial")}
    assert "fake:terse_optimized@t0" in labels and "fake:formal@t0.5" in labels
    for name in ("leaderboard.csv", "by_temperature.csv", "by_prompt_variant.csv"):
        serial_rows = (bench.pytester.path / "serial" / name).read_text().splitlines()
        parallel_rows = (bench.pytester.path / "parallel" / name).read_text().splitlines()
        assert len(serial_rows) == len(parallel_rows) > 2, name


@pytest.mark.slow
def test_more_sync_solver_items_than_executor_threads_do_not_hang(bench: Bench) -> None:
    """Sync solvers block a thread while they wait for their calls; litellm starts calls on the
    loop's default executor (cpu_count + 4 threads), so they must not run there."""
    import os

    count = (os.cpu_count() or 1) + 8
    bench.pytester.makepyfile(strategies=SOLVER)
    cases = "".join(f"  - {{id: c{i}, prompt: q{i}, expected: OK}}\n" for i in range(count))
    bench.eval_file("up", "solver: strategies:upper\ncases:\n" + cases)
    bench.server.add_rule(Rule(reply="ok", delay_s=0.2))
    result = bench.pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--results-dir=out", "--models=fake", "--concurrency=64",
        timeout=120,  # a hang fails the test instead of the suite
    )  # fmt: skip
    result.assert_outcomes(passed=count)


# --- review fixes -----------------------------------------------------------------------------


def test_choices_placed_by_the_template_are_lettered_even_over_a_choices_column(
    bench: Bench,
) -> None:
    (bench.pytester.path / "q.jsonl").write_text(
        '{"id": "cap", "question": "Capital of France?", "choices": ["Lyon", "Paris"], '
        '"answer": 1}\n'
    )
    bench.eval_file(
        "mc",
        "dataset: {path: q.jsonl}\n"
        'prompt: "Question: {{question}}\\n{{choices}}\\nAnswer with the letter."\n',
    )
    bench.server.add_rule(Rule(reply="B"))
    bench.run("--models=fake").assert_outcomes(passed=1)
    sent = bench.server.chat_requests()[0].body["messages"][-1]["content"]
    assert sent == "Question: Capital of France?\nA. Lyon\nB. Paris\nAnswer with the letter."


def test_a_case_system_cannot_silently_replace_a_variant_system(bench: Bench) -> None:
    bench.eval_file(
        "v",
        "prompts:\n  - {name: teacher, prompt: 'hi {{x}}', system: You teach.}\n"
        "cases:\n  - id: one\n    vars: {x: 1}\n    system: Case system.\n",
    )
    result = bench.run("--models=fake", "--collect-only")
    result.stdout.fnmatch_lines(
        ["v.eval.yaml:6: case 'one': its `system` would replace the `system` of prompt "
         "variant 'teacher'; give it in one place"]
    )  # fmt: skip


TWO_PROMPTS = """\
prompts:
  - {name: terse, prompt: "Q: {{q}}"}
  - {name: warm, prompt: "Dear bot, {{q}}"}
cases:
  - id: chat
    vars: {q: why?}
"""
PLAIN_CASE = "  - {id: plain, vars: {q: how?}}\n"


def _load_variants(tmp_path: Path, text: str) -> list[EvalCase]:
    path = tmp_path / "talk.eval.yaml"
    path.write_text(text, encoding="utf-8")
    return list(load_spec(path).cases)


@pytest.mark.parametrize(
    "talk",
    [
        "    turns: [{user: Hello}, {user: And then?}]\n",
        "    simulated_user: {instructions: Ask why., first_message: Hello}\n",
        "    simulated_user: {instructions: Ask why.}\n",
    ],
    ids=["turns", "first_message", "simulated_opening"],
)
def test_a_conversation_the_prompt_variants_cannot_change_is_warned_about_at_its_line(
    tmp_path: Path, talk: str
) -> None:
    with pytest.warns(PromptVariantWarning) as caught:
        cases = _load_variants(tmp_path, TWO_PROMPTS + talk + PLAIN_CASE)
    (warning,) = caught  # not the plain case: it sends each variant's template
    assert (warning.filename, warning.lineno) == (str(tmp_path / "talk.eval.yaml"), 5)
    assert str(warning.message).startswith(
        "llmbench: case 'chat' is the same conversation under every prompt variant "
        "(terse, warm): its turns or simulated user never use {{prompt}}"
    )
    # A warning, not an error: every case still runs under every variant.
    assert [(c.id, c.prompt_variant) for c in cases] == [
        ("chat", "terse"),
        ("plain", "terse"),
        ("chat", "warm"),
        ("plain", "warm"),
    ]


@pytest.mark.parametrize(
    "talk",
    [
        "    turns: [{user: '{{prompt}}'}, {user: And then?}]\n",
        "    simulated_user: {instructions: Ask why., first_message: '{{prompt}}'}\n",
        "    simulated_user: {instructions: 'Ask {{prompt}}'}\n",
    ],
    ids=["turns", "first_message", "instructions"],
)
def test_a_conversation_that_uses_the_variants_prompt_is_not_warned_about(
    tmp_path: Path, talk: str
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", PromptVariantWarning)
        cases = _load_variants(tmp_path, TWO_PROMPTS + talk)
    assert len({c.case_hash for c in cases}) == 2


def test_prompt_variants_with_their_own_system_are_not_warned_about(tmp_path: Path) -> None:
    text = TWO_PROMPTS.replace('"Q: {{q}}"}', '"Q: {{q}}", system: Be terse.}')
    with warnings.catch_warnings():
        warnings.simplefilter("error", PromptVariantWarning)
        _load_variants(tmp_path, text + "    turns: [{user: Hello}]\n")


def test_a_simulated_users_first_message_may_be_the_variants_prompt(tmp_path: Path) -> None:
    talk = "    simulated_user: {instructions: Ask why., first_message: '{{prompt}}'}\n"
    cases = _load_variants(tmp_path, TWO_PROMPTS + talk)
    assert [c.simulated_user.first_message for c in cases if c.simulated_user] == [
        "Q: why?",
        "Dear bot, why?",
    ]


def test_the_unvaried_conversation_warning_is_a_pytest_warning(bench: Bench) -> None:
    bench.eval_file("talk", TWO_PROMPTS + "    turns: [{user: Hello}]\n")
    result = bench.run("--models=fake", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        ["*talk.eval.yaml:5: PromptVariantWarning: llmbench: case 'chat' is the same "
         "conversation under every prompt variant (terse, warm)*"]
    )  # fmt: skip


@pytest.mark.slow
def test_the_unvaried_conversation_warning_shows_once_under_xdist(bench: Bench) -> None:
    bench.eval_file("talk", TWO_PROMPTS + "    turns: [{user: Hello}]\n")
    result = bench.run("--models=fake", "-n", "2")
    assert result.stdout.str().count("PromptVariantWarning: llmbench: case 'chat'") == 1
    result.stdout.fnmatch_lines(["*1 warning*"])


def test_cases_varying_around_different_temperatures_are_warned_about(bench: Bench) -> None:
    bench.eval_file(
        "t",
        "model_params: {temperature: 0.4}\ncases:\n  - {id: a, prompt: hi}\n"
        "  - {id: b, prompt: hi, model_params: {temperature: 1.0}}\n",
    )
    result = bench.run("--models=fake2", "--temperature-variations=2", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        ["*TemperatureVariationWarning: llmbench: --temperature-variations: cases of fake2 vary "
         "around different temperatures (0.4 and 1 here)*"]
    )  # fmt: skip


def test_latency_only_refuses_cached_answers(bench: Bench) -> None:
    bench.eval_file("one", "cases: [{id: a, prompt: hi}]\n")
    for flags in (("--cache=use",), ("--cache=replay",), ("--rescore",)):
        result = bench.run("--models=fake", "--latency-only", *flags)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(["*--latency-only measures calls*"])


def test_latency_only_turns_plain_test_records_into_measurements(bench: Bench) -> None:
    bench.pytester.makepyfile(
        test_plain="def test_one(llm, record_score):\n"
        "    assert llm.complete('hi').text\n    record_score(1.0)\n"
    )
    bench.server.add_rule(Rule(reply="hello"))
    bench.run("--models=fake", "--latency-only").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["eval_type"] == "latency" and record["score"] is None
    assert record["latency_s"] > 0
