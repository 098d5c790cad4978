"""People's labels and the judge gate combined with the other features a run has: repeats,
early stopping, xdist, cache replay and rescoring, conversations, prompt variants, RAG metrics,
agents, shards and merge, batches. Each test runs a suite against the fake server, labels the
records of that run with ``append_review`` (the answer digest real), and runs again: the label
must decide exactly the item (or assertion) it names, and nothing else."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest
from conftest import Bench, Rule

from pytest_llmbench.results.reviews import (
    Review,
    answer_digest,
    append_review,
    machine_verdict,
    review_key,
)
from pytest_llmbench.results_folder import REVIEWS_FILE


def _label(folder: Path, record: dict[str, Any], label: str, assertion: int | None = None) -> None:
    """Append a person's ``label`` on ``record`` (or its ``assertion``) to folder's labels file."""
    machine = machine_verdict(record, assertion) if assertion is not None else None
    review = Review(
        key=review_key(record, assertion),
        answer=answer_digest(record),
        label=label,
        comment="checked by hand",
        reviewer="ana",
        at="2026-11-29T10:00:00+00:00",
        machine=machine,
    )
    append_review(folder / REVIEWS_FILE, review)


def _rows(bench: Bench, name: str) -> list[dict[str, str]]:
    with bench.out(name).open(newline="", encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


def _run_json(bench: Bench) -> dict[str, Any]:
    info: dict[str, Any] = json.loads(bench.out("run.json").read_text(encoding="utf-8"))
    return info


def _by(records: list[dict[str, Any]], *fields: str) -> dict[Any, dict[str, Any]]:
    return {tuple(r[f] for f in fields) if len(fields) > 1 else r[fields[0]]: r for r in records}


# -- repeats, replay from the cache, early stopping -----------------------------------------------
FLAKY = """
model_params: {temperature: 0}
cases:
  - id: flaky
    prompt: Is it flaky?
    expected: "yes"
    assert: [contains]
  - id: wrong
    prompt: What is the capital of Japan?
    expected: Tokyo
    assert: [contains]
"""


def _flaky_answers(bench: Bench) -> None:
    """'flaky' answers yes, no, yes; Japan always Kyoto."""
    for rule in (
        Rule(match="flaky", reply="yes", times=1),
        Rule(match="flaky", reply="no", times=1),
        Rule(match="flaky", reply="yes"),
        Rule(match="Japan", reply="Kyoto."),
    ):
        bench.server.add_rule(rule)


def test_a_label_on_one_repeat_decides_that_repeat_and_replays_with_no_request(
    bench: Bench,
) -> None:
    """--repeat 3: the flaky case's failing repeat labelled pass is that repeat's verdict only;
    case_verdicts.csv's verdict turns flaky -> passed and pass^k 1.0. The second run replays
    every answer from the cache (no request to the server) and the label still applies."""
    bench.eval_file("flaky", FLAKY)
    _flaky_answers(bench)
    args = ("--models=fake", "--repeat=3", "--cache-dir=c")
    bench.run(*args, "--cache=use").assert_outcomes(passed=2, failed=4)
    verdicts = _by(_rows(bench, "case_verdicts.csv"), "case_id")
    assert verdicts["flaky"]["verdict"] == "flaky"
    first = _by(bench.records(), "case_id", "repeat")
    failing = [r for (case, _), r in first.items() if case == "flaky" and r["outcome"] == "failed"]
    (no,) = failing
    _label(bench.out(""), no, "pass")
    bench.server.reset()
    result = bench.run(*args, "--cache=replay")
    assert bench.server.requests == []
    result.assert_outcomes(passed=3, failed=3)
    again = _by(bench.records(), "case_id", "repeat")
    for key, record in again.items():
        assert answer_digest(record) == answer_digest(first[key])
        labelled = key == ("flaky", no["repeat"])
        assert record["verdict_source"] == ("human" if labelled else "machine"), key
        assert record["outcome"] == ("passed" if labelled else first[key]["outcome"]), key
    verdicts = _by(_rows(bench, "case_verdicts.csv"), "case_id")
    flaky = verdicts["flaky"]
    assert (flaky["verdict"], flaky["passed"], flaky["human_verdicts"]) == ("passed", "3", "1")
    assert float(flaky["pass_hat_k"]) == 1.0 and flaky["verdict_source"] == "mixed"
    assert verdicts["wrong"]["verdict"] == "failed"
    assert _run_json(bench)["reviews"]["overrides"] == {"to_pass": 1, "to_fail": 0}


def test_stop_early_decides_on_the_labelled_verdicts(bench: Bench) -> None:
    """--stop-early with --repeat 3 (majority): the rule observed is that early stopping counts
    the effective (labelled) verdicts. Japan's two failing repeats settle the case and repeat 2
    is not run; with a person's pass on repeat 0 the case is 1-1, no longer settled, so repeat 2
    is run (one request: the others come from the cache) and decides it: failed, 1/3 passed."""
    bench.eval_file("flaky", FLAKY)
    _flaky_answers(bench)
    args = ("--models=fake", "--repeat=3", "--repeat-policy=majority", "--stop-early",
            "--cache-dir=c", "--cache=use", "-k", "wrong")  # fmt: skip
    bench.run(*args).assert_outcomes(failed=2, skipped=1)
    first = _by(bench.records(), "repeat")
    assert first[2]["stopped_early"] and _run_json(bench)["stop_early"]["repeats_not_run"] == 1
    _label(bench.out(""), first[0], "pass")
    bench.server.reset()
    bench.server.add_rule(Rule(match="Japan", reply="Kyoto."))
    result = bench.run(*args)
    result.assert_outcomes(passed=1, failed=2)
    assert len(bench.server.chat_requests()) == 1  # repeat 2, no longer stopped
    again = _by(bench.records(), "repeat")
    assert [(again[n]["outcome"], again[n]["verdict_source"]) for n in range(3)] == [
        ("passed", "human"),
        ("failed", "machine"),
        ("failed", "machine"),
    ]
    assert not any(r["stopped_early"] for r in again.values())
    assert _run_json(bench)["stop_early"]["repeats_not_run"] == 0
    (row,) = _rows(bench, "case_verdicts.csv")
    assert (row["verdict"], row["passed"], row["verdict_source"]) == ("flaky", "1", "mixed")
    assert result.ret == 1  # 1 of 3 fails the majority policy


# -- conversations, variants, RAG, agents, the gate, rescoring and xdist in one suite -------------
TALK = """
cases:
{cases}
"""
TALK_CASE = """  - id: {id}
    turns:
      - user: Hello {word}-ONE
        assert: [{{type: contains, value: ok}}]
      - user: Bye {word}-TWO
        assert:
          - {{type: llm-rubric, value: TURN-RUBRIC says goodbye, judges: [fake2]}}
"""
VARIANTS = """
prompts:
  - {name: terse, prompt: "Capital of {{country}}? One word."}
  - {name: polite, prompt: "Please tell me the capital city of {{country}}."}
cases:
  - {id: fr, vars: {country: France}, expected: Paris, assert: [contains]}
"""
RAG = """
prompt: "Answer from these documents:\\n{{context}}\\nQ: {{q}}"
cases:
  - id: paris
    vars: {q: What is the capital of France?}
    context: ["Paris is the capital of France.", "The Eiffel Tower stands in Paris."]
    assert:
      - {type: faithfulness, judges: [fake2]}
"""
AGENT = """
kind: agent
tools: [write_file]
max_steps: 3
cases:
  - {id: chore, prompt: Say AGENT-DONE., expected: done, assert: [icontains]}
"""
CLAIMS = json.dumps(
    {"claims": [{"claim": "Paris is the capital of France.", "supported": True, "reason": "x"}]}
)


def _mixed_suite(bench: Bench) -> None:
    talks = TALK_CASE.format(id="talk1", word="TURN") + TALK_CASE.format(id="talk2", word="AGAIN")
    bench.eval_file("talk", TALK.format(cases=talks))
    bench.eval_file("variants", VARIANTS)
    bench.eval_file("rag", RAG)
    bench.eval_file("agent", AGENT)
    for rule in (
        Rule(model="fake-model-2", match_any="TURN-RUBRIC", reply='{"score": 0.1, "reason": "no"}'),
        Rule(model="fake-model-2", reply=CLAIMS),
        Rule(model="fake-model", match_any="documents", reply="Paris is the capital of France."),
        Rule(model="fake-model", match_any="France", reply="Paris."),
        Rule(model="fake-model", match_any="AGENT-DONE", reply="All done."),
        Rule(model="fake-model", reply="ok"),
    ):
        bench.server.add_rule(rule)


def _comparable(records: list[dict[str, Any]]) -> list[Any]:
    keep = ("nodeid", "model", "outcome", "passed", "verdict_source", "machine_outcome", "review",
            "assertions", "response", "score")  # fmt: skip
    return sorted(([r.get(k) for k in keep] for r in records), key=lambda r: r[0])


def test_labels_and_a_demoting_gate_across_kinds_rescored_and_under_xdist(bench: Bench) -> None:
    """One suite of a scripted conversation judged per turn (twice), two prompt variants, a RAG
    faithfulness judge and an agent. Labels: turn 2 of talk1 passed by a person (its judge said
    fail), the terse variant failed, the RAG item and the agent item failed. With a gate of
    min_labels=1 the rubric's judge is demoted (1 label against it): talk1's turn 2 keeps the
    person's verdict (verdict_source human), talk2's is demoted (unchecked, turn 1 passes it).
    The polite variant (model fake:polite) is untouched. --rescore (judges asked again, answers
    from the cache) keeps every label; -n 2 writes the records -n 0 does."""
    _mixed_suite(bench)
    bench.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(passed=4, failed=2)
    first = _by(bench.records(), "case_id", "model")
    labels = bench.pytester.path / "labels"
    _label(labels, first[("talk1", "fake")], "pass", assertion=1)
    _label(labels, first[("fr", "fake:terse")], "fail")
    _label(labels, first[("paris", "fake")], "fail")
    _label(labels, first[("chore", "fake")], "fail")
    args = ("--models=fake", "--reviews-dir=labels", "--judge-gate=min_labels=1",
            "--rescore", "--cache-dir=c")  # fmt: skip
    bench.server.reset()  # a call now would be answered "ok": a malformed verdict
    result = bench.run(*args)
    result.assert_outcomes(passed=3, failed=3)
    assert bench.server.requests == []  # rescored from the cache: judges' calls cached too
    again = _by(bench.records(), "case_id", "model")
    for key, record in again.items():
        assert answer_digest(record) == answer_digest(first[key]), key
    talk1, talk2 = again[("talk1", "fake")], again[("talk2", "fake")]
    assert (talk1["outcome"], talk1["verdict_source"], talk1["machine_outcome"]) == (
        "passed",
        "human",
        "passed",  # the gated machine's outcome: turn 2 demoted, turn 1 passes it
    )
    turn2 = talk1["assertions"][1]
    assert (turn2["passed"], turn2["verdict_source"], turn2["machine_passed"]) == (
        True,
        "human",
        False,
    )
    assert turn2["judge_gate"] == "demoted" and "unchecked" not in turn2
    assert (talk2["outcome"], talk2["verdict_source"]) == ("passed", "machine")
    assert talk2["assertions"][1]["unchecked"] is True  # demoted: turn 1 decides
    assert talk2["assertions"][1]["passed"] is False  # as the judge said
    assert {
        (k[1], r["outcome"], r["verdict_source"]) for k, r in again.items() if k[0] == "fr"
    } == {
        ("fake:terse", "failed", "human"),
        ("fake:polite", "passed", "machine"),
    }
    # The RAG item's label keeps no machine verdict, so it is paired with its record: its
    # faithfulness judge is calibrated on that one label (kappa 0) and demoted by the gate; the
    # machine's outcome was then skipped (nothing else checked), the person's failed.
    for case, machine in (("paris", "skipped"), ("chore", "passed")):
        record = again[(case, "fake")]
        assert (record["outcome"], record["machine_outcome"]) == ("failed", machine), case
        assert record["review"]["label"] == "fail"
    assert again[("paris", "fake")]["assertions"][0]["type"] == "faithfulness"
    assert again[("chore", "fake")]["workdir"]  # an agent ran in a work folder
    groups = {g["type"]: g for g in _run_json(bench)["judge_gate"]["groups"]}
    assert (groups["llm-rubric"]["decision"], groups["llm-rubric"]["verdicts_demoted"]) == (
        "demoted",
        2,
    )
    faithful = groups["faithfulness"]
    assert (faithful["decision"], faithful["n"], faithful["kappa"]) == ("demoted", 1, 0.0)
    # talk1's label agrees with the gated machine's outcome: no override counted for it; the
    # terse variant, the RAG item (skipped by the machine) and the agent are overridden to fail
    assert _run_json(bench)["reviews"]["overrides"] == {"to_pass": 0, "to_fail": 3}
    alone = _comparable(bench.records())
    parallel = bench.run_subprocess(*args, "-n", "2")
    parallel.assert_outcomes(passed=3, failed=3)
    assert {r["worker"] for r in bench.records()} == {"gw0", "gw1"}
    assert _comparable(bench.records()) == alone
    assert _run_json(bench)["judge_gate"]["groups"] == list(groups.values())


SIMULATED = """
cases:
  - id: curious
    simulated_user:
      model: fake2
      instructions: Ask questions.
      max_turns: 3
      assert: [{type: icontains, value: answer}]
    assert: [{type: llm-rubric, value: SIM-RUBRIC is helpful, judges: [fake2]}]
"""


def _simulated(bench: Bench) -> dict[str, Any]:
    """A simulated user's conversation of 3 replies checked each turn, its whole judged by a
    rubric the judge fails: the item fails on the rubric (the last assertion)."""
    for rule in (
        Rule(model="fake-model", reply="Here is your answer."),
        Rule(model="fake-model-2", match_any="SIM-RUBRIC", reply='{"score": 0.1, "reason": "no"}'),
        Rule(model="fake-model-2", reply="One more question."),
    ):
        bench.server.add_rule(rule)
    bench.eval_file("sim", SIMULATED)
    bench.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(failed=1)
    (record,) = bench.records()
    assert [a["type"] for a in record["assertions"]] == ["icontains"] * 3 + ["llm-rubric"]
    return record


def test_a_label_on_a_simulated_conversations_rubric_re_decides_it(bench: Bench) -> None:
    """The rubric's verdict (position 3 of record["assertions"]) labelled pass: every check now
    passes, so the replayed conversation passes, decided by a person."""
    record = _simulated(bench)
    _label(bench.out(""), record, "pass", assertion=3)
    bench.server.reset()
    bench.run("--models=fake", "--cache=replay", "--cache-dir=c").assert_outcomes(passed=1)
    assert bench.server.requests == []
    (again,) = bench.records()
    assert (again["outcome"], again["verdict_source"]) == ("passed", "human")
    rubric = again["assertions"][3]
    assert (rubric["passed"], rubric["verdict_source"], rubric["machine_passed"]) == (
        True,
        "human",
        False,
    )
    assert all("verdict_source" not in a for a in again["assertions"][:3])


def test_a_label_on_a_simulated_conversations_rubric_names_its_judge(bench: Bench) -> None:
    # The case-level rubric comes after the turns' checks in record["assertions"]: its judge is
    # named at its position (3), not at the case's assertion index (1, an icontains).
    record = _simulated(bench)
    assert machine_verdict(record, 3).judges == ("fake2",)
    assert machine_verdict(record, 1).judges == ()


# -- shards and merge ----------------------------------------------------------------------------
CAPITALS = """
cases:
  - {id: france, prompt: "Capital of France?", expected: Paris, assert: [contains]}
  - {id: japan, prompt: "Capital of Japan?", expected: Tokyo, assert: [contains]}
  - {id: italy, prompt: "Capital of Italy?", expected: Rome, assert: [contains]}
  - {id: spain, prompt: "Capital of Spain?", expected: Madrid, assert: [contains]}
"""
#: Fields that measure a run, not its results.
TIMINGS = {"latency_s", "ttft_s", "tokens_per_s", "started_at", "worker", "rate_limit_wait_s",
           "streamed", "workdir", "cached"}  # fmt: skip


def _capitals(bench: Bench) -> None:
    bench.eval_file("capitals", CAPITALS)
    for word, reply in (("France", "Paris"), ("Japan", "Kyoto"), ("Italy", "Milan"),
                        ("Spain", "Madrid")):  # fmt: skip
        bench.server.add_rule(Rule(match=word, reply=reply))


def _folder_records(folder: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    return {row["nodeid"]: {k: v for k, v in row.items() if k not in TIMINGS} for row in rows}


def test_merged_shards_with_labels_equal_the_unsharded_run(
    bench: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    """Japan and Italy fail; a person passes Japan and fails Spain (labels in --reviews-dir).
    Run whole and as shards 1/2 and 2/2 with the labels, then merged with them: the merged
    records (verdicts by people included) and exit status are the unsharded run's."""
    from pytest_llmbench.cli import main

    _capitals(bench)
    bench.run("--models=fake").assert_outcomes(passed=2, failed=2)
    first = _by(bench.records(), "case_id")
    labels = bench.pytester.path / "labels"
    _label(labels, first["japan"], "pass")
    _label(labels, first["spain"], "fail")
    root = bench.pytester.path

    def run(folder: str, *args: str) -> pytest.RunResult:
        return bench.pytester.runpytest("-p", "no:cacheprovider", f"--results-dir={folder}",
                                        "--models=fake", "--reviews-dir=labels", *args)  # fmt: skip

    assert run("full").ret == 1  # Italy (machine) and Spain (person) fail
    run("s1", "--shard", "1/2")
    run("s2", "--shard", "2/2")
    full = _folder_records(root / "full")
    assert {r["case_id"]: (r["outcome"], r["verdict_source"]) for r in full.values()} == {
        "france": ("passed", "machine"),
        "japan": ("passed", "human"),
        "italy": ("failed", "machine"),
        "spain": ("failed", "human"),
    }
    shards = [_folder_records(root / s) for s in ("s1", "s2")]
    assert all(shards) and set(shards[0]).isdisjoint(shards[1])
    code = main(["merge", str(root / "s1"), str(root / "s2"), "-o", str(root / "merged"),
                 "--reviews-dir", str(labels)])  # fmt: skip
    assert code == json.loads((root / "full" / "run.json").read_text())["exitstatus"] == 1
    assert _folder_records(root / "merged") == full
    merged_info = json.loads((root / "merged" / "run.json").read_text())
    assert merged_info["reviews"]["overrides"] == {"to_pass": 1, "to_fail": 1}
    capsys.readouterr()


# -- batches -------------------------------------------------------------------------------------
BATCHED_PROFILE = """
models:
  batched:
    model: openai/fake-model
    api_base: {base}
    api_key_env: {env}
    batch: true
    params: {{temperature: 0}}
"""
BATCHED_SUITE = """
cases:
  - id: italy
    prompt: What is the capital of Italy?
    expected: Rome
    assert:
      - contains
      - {type: llm-rubric, value: BATCH-RUBRIC names the capital, judges: [batched]}
  - {id: japan, prompt: What is the capital of Japan?, expected: Tokyo, assert: [contains]}
"""


@pytest.fixture
def fresh_backends() -> Iterator[None]:
    """The batch backends made for an earlier test's server are not reused."""
    from pytest_llmbench.models.providers.batch_routes import forget_backends

    forget_backends()
    yield
    forget_backends()


@pytest.mark.usefixtures("fresh_backends")
def test_batched_judge_verdicts_are_labelled_as_live_ones(bench: Bench) -> None:
    """--batch: the answers and the judge's verdict go through the fake server's Batch API.
    A person passes the judge's failed verdict on Italy (an assertion label) and Japan's wrong
    answer (an item label): a second batched run (no cache: every line sent again) passes both,
    by people, with each line sent once."""
    from conftest import FAKE_KEY_ENV

    text = BATCHED_PROFILE.format(base=bench.server.base_url, env=FAKE_KEY_ENV)
    bench.pytester.makefile(".yaml", **{"profiles/batched": text})
    bench.eval_file("batched", BATCHED_SUITE)

    def script() -> None:
        for rule in (
            Rule(match_any="BATCH-RUBRIC", reply='{"score": 0.2, "reason": "vague"}'),
            Rule(match="Italy", reply="Rome."),
            Rule(match="Japan", reply="Kyoto."),
        ):
            bench.server.add_rule(rule)

    script()
    args = ("--models=batched", "--batch", "--batch-poll=0.05", "--cache=off")
    bench.run(*args).assert_outcomes(failed=2)
    first = _by(bench.records(), "case_id")
    assert all(r["batched"] for r in first.values())
    assert first["italy"]["assertions"][1]["passed"] is False
    _label(bench.out(""), first["italy"], "pass", assertion=1)
    _label(bench.out(""), first["japan"], "pass")
    bench.server.reset()
    script()
    result = bench.run(*args)
    result.assert_outcomes(passed=2)
    assert bench.server.chat_requests() == []  # nothing live: answers and verdict batched
    assert sorted(bench.server.lines_received.values()) == [1, 1, 1]
    again = _by(bench.records(), "case_id")
    italy, japan = again["italy"], again["japan"]
    assert italy["batched"] and japan["batched"]
    assert (italy["outcome"], italy["verdict_source"], italy["machine_outcome"]) == (
        "passed",
        "human",
        "failed",
    )
    rubric = italy["assertions"][1]
    assert (rubric["passed"], rubric["machine_passed"], rubric["verdict_source"]) == (
        True,
        False,
        "human",
    )
    assert (japan["outcome"], japan["review"]["label"]) == ("passed", "pass")
    assert _run_json(bench)["reviews"]["overrides"] == {"to_pass": 2, "to_fail": 0}
