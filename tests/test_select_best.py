"""Select-best (``type: select-best``) end to end, against the fake judge server.

Three contestants answer each case: the profiles ``fake``, ``fake3`` and ``fake4`` (models
``fake-model``, ``fake-model-3`` and ``fake-model-4`` of the fake server), judged by ``fake2``.
The judge is scripted to pick the answer it likes by its text, whatever label it is shown
under, so the tests can check that the label it wrote back is mapped to the right contestant.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
import textwrap
from typing import Any

import pytest
from conftest import FAKE_KEY_ENV, Bench, Rule

ANSWERS = {
    "fake": "Paris.",
    "fake3": "The capital of France is Paris, on the Seine.",
    "fake4": "Lyon.",
}
BEST = ANSWERS["fake3"]
MODELS = "--models=fake,fake3,fake4"


def contest_file(extra: str = "", cases: str = "", judges: str = "fake2") -> str:
    head = textwrap.dedent(
        f"""\
        cases:
          - id: paris
            prompt: What is the capital of France?
            assert:
              - type: select-best
                value: the most informative answer
                judges: [{judges}]
        """
    )
    return head + "".join(f"        {line}\n" for line in extra.splitlines()) + cases


@pytest.fixture
def contest(bench: Bench) -> Bench:
    """The bench with the profiles fake3 and fake4 (contestants), fake5 and fake6 (more
    judges), and the contestants' answers scripted."""
    url = bench.server.base_url
    profiles = "".join(
        f"  {name}:\n    model: openai/fake-model-{n}\n    api_base: {url}\n"
        f"    api_key_env: {FAKE_KEY_ENV}\n    params: {{temperature: 0}}\n"
        for name, n in (("fake3", 3), ("fake4", 4), ("fake5", 5), ("fake6", 6))
    )
    bench.pytester.makefile(".yaml", **{"profiles/more": f"models:\n{profiles}"})
    script_answers(bench)
    return bench


def script_answers(bench: Bench, answers: dict[str, str] = ANSWERS) -> None:
    models = {"fake": "fake-model", "fake3": "fake-model-3", "fake4": "fake-model-4"}
    for name, text in answers.items():
        bench.server.add_rule(Rule(model=models[name], reply=text))


def judge_picks(bench: Bench, text: str, judge: str = "fake-model-2", **extra: Any) -> None:
    """The judge picks the answer ``text`` under whichever label it is shown."""
    for label in "ABCDEFGH":
        reply = json.dumps({"choice": label})
        rule = Rule(model=judge, match=f"[Answer {label}]\n{text}\n", reply=reply, **extra)
        bench.server.add_rule(rule)
        last = Rule(model=judge, match=f"[Answer {label}]\n{text}", reply=reply, **extra)
        bench.server.add_rule(last)  # the last answer shown has no blank line after it


def judge_requests(bench: Bench) -> list[dict[str, Any]]:
    return [r.body for r in bench.server.chat_requests() if r.body["model"] == "fake-model-2"]


def verdicts(bench: Bench) -> list[tuple[str, str, float | None, str]]:
    """(case, contestant, select-best score, reason) of every record, sorted."""
    found = []
    for record in bench.records():
        (verdict,) = [a for a in record["assertions"] if a["type"] == "select-best"] or [None]
        score = None if verdict is None else verdict["score"]
        reason = "" if verdict is None else verdict["reason"]
        found.append((record["case_id"], record["model"], score, reason))
    return sorted(found)


def test_the_judge_picks_one_answer_shown_in_a_seeded_order(contest: Bench) -> None:
    contest.eval_file("best", contest_file("seed: 7"))
    judge_picks(contest, BEST)
    result = contest.run(MODELS)
    result.assert_outcomes(passed=1, failed=2)
    shuffled = sorted(ANSWERS)
    random.Random(7).shuffle(shuffled)  # the order the judge must have been shown
    orders = [shuffled[start:] + shuffled[:start] for start in range(3)]  # and its rotations
    prompts = [request["messages"][-1]["content"] for request in judge_requests(contest)]
    assert len(prompts) == 3
    seen = []
    for prompt in prompts:
        positions = {prompt.index(ANSWERS[name]): name for name in ANSWERS}
        seen.append([positions[at] for at in sorted(positions)])
        assert "[Question]\nWhat is the capital of France?" in prompt
        assert "Pick the best answer (the most informative answer)" in prompt
    assert sorted(seen) == sorted(orders)
    records = {r["model"]: r for r in contest.records()}
    assert {m: r["outcome"] for m, r in records.items()} == {
        "fake": "failed",
        "fake3": "passed",
        "fake4": "failed",
    }
    shown = ", ".join(f"{'ABC'[i]}={name}" for i, name in enumerate(shuffled))
    winner = records["fake3"]["assertions"][0]
    assert winner["score"] == 1.0
    assert winner["reason"] == (
        f"select-best picked, of 3 answers (shown {shown}; seed 7); votes fake3 3 over 3 "
        "orders x 1 judge(s)"
    )
    loser = records["fake"]["assertions"][0]
    assert loser["score"] == 0.0 and loser["reason"].startswith("select-best not picked: fake3 was")
    # The judge's call is recorded once, on the first contestant, with the seed and the order.
    hosts = [r for r in records.values() if r["judges"]]
    assert [r["model"] for r in hosts] == ["fake"]
    calls = sorted(records["fake"]["judges"], key=lambda call: call["details"][0]["order"])
    assert [call["details"] for call in calls] == [
        [{"seed": 7, "order": start, "shown": order, "picked": "fake3"}]
        for start, order in enumerate(orders)
    ]
    assert [call["choice"] for call in calls] == ["ABC"[order.index("fake3")] for order in orders]
    assert records["fake3"]["judge_tokens"] == 0 and records["fake"]["judge_tokens"] > 0


def test_without_a_seed_the_order_is_derived_from_the_contest(contest: Bench) -> None:
    contest.eval_file("best", contest_file())
    judge_picks(contest, BEST)
    contest.run(MODELS).assert_outcomes(passed=1, failed=2)
    (call,) = [j for r in contest.records() for j in r["judges"] if j["details"][0]["order"] == 0]
    seed = call["details"][0]["seed"]
    # Derived from the contest (file, case, repeat), not from who contests.
    digest = hashlib.sha256(b"best.eval.yaml::paris::r0").digest()
    assert seed == int.from_bytes(digest[:4], "big")
    shuffled = sorted(ANSWERS)
    random.Random(seed).shuffle(shuffled)
    assert call["details"][0]["shown"] == shuffled
    first = verdicts(contest)
    contest.run(MODELS)  # the same contest shows the same order: the same seed
    assert verdicts(contest) == first
    contest.run("--models=fake4,fake3")
    assert {j["details"][0]["seed"] for r in contest.records() for j in r["judges"]} == {seed}


TWO_CASES = contest_file(
    cases=(
        "  - id: rome\n"
        "    prompt: What is the capital of Italy?\n"
        "    assert:\n"
        "      - type: select-best\n"
        "        judges: [fake2]\n"
    )
)


def test_identical_under_two_xdist_workers(contest: Bench) -> None:
    contest.eval_file("best", TWO_CASES)
    judge_picks(contest, BEST)
    contest.run(MODELS, "--repeat=2").assert_outcomes(passed=4, failed=8)
    serial = verdicts(contest)
    assert [(case, model) for case, model, score, _ in serial if score == 1.0] == [
        ("paris", "fake3"),
        ("paris", "fake3"),
        ("rome", "fake3"),
        ("rome", "fake3"),
    ]
    result = contest.run_subprocess("-n", "2", MODELS, "--repeat=2")
    result.assert_outcomes(passed=4, failed=8)
    assert verdicts(contest) == serial
    records = contest.records()
    assert {r["worker"] for r in records} == {"gw0", "gw1"}
    for case in ("paris", "rome"):  # a case's contestants answered in one process
        assert len({r["worker"] for r in records if r["case_id"] == case}) == 1
    assert len(judge_requests(contest)) == 2 * 4 * 3  # per run, contest and order


def test_a_scheduler_that_splits_cases_leaves_the_verdict_unchecked(contest: Bench) -> None:
    contest.eval_file("best", contest_file())
    judge_picks(contest, BEST)
    result = contest.run_subprocess("-n", "2", "--dist=worksteal", MODELS)
    result.assert_outcomes(skipped=3)
    for _, _, score, reason in verdicts(contest):
        assert score == 0.0
        assert reason.startswith("unchecked: select-best compares a case's contestants in one")
        assert "--dist worksteal" in reason
    assert judge_requests(contest) == []


@pytest.mark.parametrize("again", ["--cache=replay", "--rescore"])
def test_replayed_from_the_cache_with_no_request(contest: Bench, again: str) -> None:
    contest.eval_file("best", TWO_CASES)
    judge_picks(contest, BEST)
    contest.run(MODELS, "--cache=use", "--cache-dir=c").assert_outcomes(passed=2, failed=4)
    first = verdicts(contest)
    contest.server.reset()  # nothing scripted: any call would be answered "ok", a bad verdict
    contest.run(MODELS, again, "--cache-dir=c").assert_outcomes(passed=2, failed=4)
    assert contest.server.chat_requests() == []
    assert verdicts(contest) == first


def test_a_jury_picks_by_plurality_and_reports_agreement(contest: Bench) -> None:
    contest.eval_file("best", contest_file(judges="fake2, fake5, fake6"))
    judge_picks(contest, BEST)
    judge_picks(contest, BEST, judge="fake-model-5")
    judge_picks(contest, ANSWERS["fake4"], judge="fake-model-6")
    contest.run(MODELS).assert_outcomes(passed=1, failed=2)
    (winner,) = [r for r in contest.records() if r["model"] == "fake3"]
    assert winner["assertions"][0]["score"] == 1.0
    assert winner["assertions"][0]["reason"].endswith(
        "; votes fake3 6, fake4 3 over 3 orders x 3 judge(s)"
    )
    summary = json.loads(contest.out("run.json").read_text())
    text = json.dumps(summary)
    assert "select_best" in text  # the dimension judges agreed (or not) on


def test_a_split_jury_decides_nothing(contest: Bench) -> None:
    contest.eval_file("best", contest_file(judges="fake2, fake5"))
    judge_picks(contest, BEST)
    judge_picks(contest, ANSWERS["fake"], judge="fake-model-5")
    contest.run(MODELS).assert_outcomes(skipped=3)
    for _, _, _, reason in verdicts(contest):
        assert reason.startswith("unchecked: select-best decided nothing: votes ")


def test_a_contestant_that_errors_leaves_the_contest(contest: Bench) -> None:
    contest.server.reset()
    script_answers(contest, {"fake3": ANSWERS["fake3"], "fake4": ANSWERS["fake4"]})
    contest.server.add_rule(Rule(model="fake-model", status=500, error_message="down"))
    contest.eval_file("best", contest_file())
    judge_picks(contest, BEST)
    contest.run(MODELS, "--max-retries=0").assert_outcomes(passed=1, failed=1, errors=1)
    requests = judge_requests(contest)
    assert len(requests) == 2  # two answers: two orders
    assert all(ANSWERS["fake"] not in r["messages"][-1]["content"] for r in requests)
    found = {model: (score, reason) for _, model, score, reason in verdicts(contest)}
    assert found["fake3"][0] == 1.0 and "of 2 answers" in found["fake3"][1]


def test_one_answer_left_is_unchecked(contest: Bench) -> None:
    contest.server.reset()
    script_answers(contest, {"fake3": ANSWERS["fake3"]})
    contest.server.add_rule(Rule(model="fake-model", status=500, error_message="down"))
    contest.server.add_rule(Rule(model="fake-model-4", status=500, error_message="down"))
    contest.eval_file("best", contest_file())
    contest.run(MODELS, "--max-retries=0").assert_outcomes(skipped=1, errors=2)
    (record,) = [r for r in contest.records() if r["model"] == "fake3"]
    (verdict,) = record["assertions"]
    assert verdict["unchecked"] and "only one contestant answered" in verdict["reason"]
    assert judge_requests(contest) == []


def test_one_contestant_selected_is_unchecked(contest: Bench) -> None:
    contest.eval_file("best", contest_file())
    contest.run(MODELS, "-k", "fake3").assert_outcomes(skipped=1)
    (record,) = contest.records()
    (verdict,) = record["assertions"]
    assert verdict["unchecked"]
    assert (
        "its contest is incomplete: paris[fake-r0], paris[fake4-r0] not selected"
        in (verdict["reason"])
    )


def test_a_reply_outside_the_labels_is_a_judge_error(contest: Bench) -> None:
    contest.eval_file("best", contest_file())
    contest.server.add_rule(Rule(model="fake-model-2", reply=json.dumps({"choice": "Z"})))
    contest.run(MODELS).assert_outcomes(errors=3)
    (host,) = [r for r in contest.records() if r["judge_tokens"]]  # the calls counted once
    assert host["model"] == "fake"
    assert [j["error"] for j in host["judges"]] == 3 * [
        "malformed verdict: the choice must be one of A, B, C, got 'Z'"
    ]
    others = [r for r in contest.records() if r["nodeid"] != host["nodeid"]]
    assert all(r["judges"] == [] for r in others)  # the judge's error is counted once
    assert len(others) == 2
    assert all(r["outcome"] == "error" for r in contest.records())
    assert len(judge_requests(contest)) == 3 * 2  # each order asked again once, then an error


def test_prompt_variants_are_contestants(contest: Bench) -> None:
    contest.eval_file(
        "best",
        textwrap.dedent(
            """\
            prompts:
              - {name: terse, prompt: "Tersely: {{q}}"}
              - {name: full, prompt: "Fully: {{q}}"}
            cases:
              - id: paris
                vars: {q: What is the capital of France?}
                assert:
                  - type: select-best
                    judges: [fake2]
            """
        ),
    )
    contest.server.reset()
    contest.server.add_rule(Rule(model="fake-model", match="Tersely", reply="Paris."))
    contest.server.add_rule(Rule(model="fake-model", match="Fully", reply=BEST))
    judge_picks(contest, BEST)
    contest.run("--models=fake").assert_outcomes(passed=1, failed=1)
    found = {model: score for _, model, score, _ in verdicts(contest)}
    assert found == {"fake:full": 1.0, "fake:terse": 0.0}


@pytest.mark.parametrize(
    ("models", "extra", "message"),
    [
        ("--models=fake", "", "select-best needs at least two contestants"),
        (MODELS, "seed: -1", "seed must be a whole number >= 0"),
        (MODELS, "rotate: sometimes", "rotate must be true or false"),
        (MODELS, "choices: {A: 1}", "unknown key 'choices' in select-best assertion"),
    ],
)
def test_bad_select_best_is_a_collection_error_at_its_line(
    contest: Bench, models: str, extra: str, message: str
) -> None:
    contest.eval_file("best", contest_file(extra))
    result = contest.run(models)
    assert result.ret != 0
    result.stdout.fnmatch_lines([f"best.eval.yaml:*{message}*"])
    assert "Traceback" not in result.stdout.str()


def test_contests_give_win_rates_in_the_leaderboard(contest: Bench) -> None:
    """The records a real contest writes are the ones the win rates read: the pick beat the
    two others (2 of 2), each of them lost once (0 of 1)."""
    contest.eval_file("best", contest_file())
    judge_picks(contest, BEST)
    contest.run(MODELS).assert_outcomes(passed=1, failed=2)
    with contest.out("leaderboard.csv").open() as handle:
        board = {row["model"]: row for row in csv.DictReader(handle)}
    assert {m: (float(r["win_rate"]), int(r["n_pairs"])) for m, r in board.items()} == {
        "fake3": (1.0, 2),
        "fake": (0.0, 1),
        "fake4": (0.0, 1),
    }
    report = contest.out("report.html").read_text()
    assert "win rate (95% CI)" in report and "Pairwise" in report


def many_cases(count: int, variants: bool = False) -> str:
    """``count`` cases, each with a select-best assertion; with ``variants``, two prompt
    variants, whose items come case after case: a case's contestants lie far apart."""
    lines = []
    if variants:
        lines += [
            "prompts:",
            '  - {name: plain, prompt: "{{q}}"}',
            '  - {name: polite, prompt: "Please: {{q}}"}',
        ]
    lines.append("cases:")
    for index in range(count):
        question = f"What is the capital of France? ({index})"
        lines.append(f"  - id: q{index}")
        lines.append(f"    vars: {{q: {question!r}}}" if variants else f"    prompt: {question}")
        lines += ["    assert:", "      - type: select-best", "        judges: [fake2]"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("workers", ["0", "2"])
def test_contests_beyond_the_lookahead_all_finish(contest: Bench, workers: str) -> None:
    """With one call in flight per model the look-ahead is a few items, far fewer than the
    contestants of the run: every contest is still judged once, each on its own answers."""
    contest.eval_file("best", many_cases(12, variants=True))
    contest.server.reset()  # the polite prompt's answers differ: one best answer per contest
    contest.server.add_rule(Rule(model="fake-model-3", match="Please", reply="Paris, France."))
    script_answers(contest)
    judge_picks(contest, BEST)
    result = contest.run_subprocess(
        "-n", workers, MODELS, "--concurrency=1", "--repeat=2", "-o", "timeout=120"
    )
    result.assert_outcomes(passed=24, failed=120)  # 24 contests of 6: one pick each
    picked = [(case, model) for case, model, score, _ in verdicts(contest) if score == 1.0]
    assert len(picked) == 24 and {model for _, model in picked} == {"fake3:plain"}
    assert len({case for case, _ in picked}) == 12
    assert len(judge_requests(contest)) == 24 * 6  # each contest in its 6 orders


def test_stopping_at_the_first_failure_does_not_wait_for_contests(contest: Bench) -> None:
    """-x stops after the first loser: the run ends, and no contest is left waiting."""
    contest.eval_file("best", many_cases(5))
    judge_picks(contest, BEST)
    result = contest.run_subprocess("-x", MODELS, "-o", "timeout=120")
    result.assert_outcomes(failed=1)
    assert result.ret == 1
    (record,) = contest.records()
    assert record["assertions"][0]["reason"].startswith("select-best not picked: fake3 was")


def test_a_conversation_is_a_collection_error(contest: Bench) -> None:
    contest.eval_file(
        "best",
        textwrap.dedent(
            """\
            cases:
              - id: chat
                turns:
                  - user: Hello
                  - user: What is the capital of France?
                    assert:
                      - type: select-best
                        judges: [fake2]
            """
        ),
    )
    result = contest.run(MODELS)
    assert result.ret != 0
    result.stdout.fnmatch_lines(["best.eval.yaml:2: case 'chat': select-best compares one answer*"])


def test_a_rerun_keeps_the_contest_verdict(contest: Bench) -> None:
    """pytest-rerunfailures runs a losing contestant again: the contest was judged once, on its
    first answer, and the loss stands (a rerun does not make it pass or unchecked)."""
    contest.eval_file("best", contest_file())
    judge_picks(contest, BEST)
    result = contest.run(MODELS, "--reruns=1")
    result.assert_outcomes(passed=1, failed=2)
    assert result.parseoutcomes()["rerun"] == 2
    found = {model: (score, reason) for _, model, score, reason in verdicts(contest)}
    assert found["fake3"] == (1.0, found["fake3"][1])
    for loser in ("fake", "fake4"):
        score, reason = found[loser]
        assert score == 0.0 and reason.endswith("(judged on this item's first attempt)")
    assert len(judge_requests(contest)) == 3  # one contest, 3 orders


def test_shards_deal_a_contest_as_one(contest: Bench) -> None:
    """--shard K/N keeps a contest's contestants on one shard: each shard judges whole
    contests, none left with one contestant."""
    contest.eval_file("best", TWO_CASES)
    judge_picks(contest, BEST)
    by_shard = {}
    for shard in ("1/2", "2/2"):
        contest.run(MODELS, f"--shard={shard}").assert_outcomes(passed=1, failed=2)
        by_shard[shard] = verdicts(contest)
    assert {case for case, *_ in by_shard["1/2"]} == {"paris"}
    assert {case for case, *_ in by_shard["2/2"]} == {"rome"}
    for found in by_shard.values():
        assert sorted(score for *_, score, _ in found) == [0.0, 0.0, 1.0]


def test_a_serial_file_is_a_collection_error(contest: Bench) -> None:
    contest.eval_file("best", "parallel_safe: false\n" + contest_file())
    result = contest.run(MODELS)
    assert result.ret != 0
    result.stdout.fnmatch_lines(["best.eval.yaml:3: case 'paris': select-best answers*"])


def test_a_deselected_contestant_leaves_its_contest_unheld(contest: Bench) -> None:
    """-k (as --lf after a run: the winner passed) selecting part of a contest: the contest is
    not held among the rest, whose verdicts are unchecked, naming who was left out."""
    contest.eval_file("best", contest_file())
    judge_picks(contest, BEST)
    contest.run(MODELS, "-k", "not fake3").assert_outcomes(skipped=2)
    for _, _, _, reason in verdicts(contest):
        assert reason == (
            "unchecked: its contest is incomplete: paris[fake3-r0] not selected (-k, -m, --lf, "
            "--deselect); select the whole contest"
        )
    assert judge_requests(contest) == []


def test_a_contestant_failing_then_rerun_is_not_a_loss(contest: Bench) -> None:
    """Its first attempt failed, so the contest was judged without it: its rerun's verdict is
    unchecked, not a loss, and makes no pair."""
    contest.server.reset()
    script_answers(contest, {"fake": ANSWERS["fake"], "fake3": ANSWERS["fake3"]})
    contest.server.add_rule(Rule(model="fake-model-4", status=400, error_message="bad", times=1))
    contest.server.add_rule(Rule(model="fake-model-4", reply=ANSWERS["fake4"]))
    contest.eval_file("best", contest_file())
    judge_picks(contest, BEST)
    result = contest.run(MODELS, "--reruns=1", "--max-retries=0")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    found = {model: (score, reason) for _, model, score, reason in verdicts(contest)}
    assert found["fake4"][1].startswith("unchecked: its first attempt failed (")
    with contest.out("leaderboard.csv").open() as handle:
        pairs = {row["model"]: row["n_pairs"] for row in csv.DictReader(handle)}
    assert pairs == {"fake3": "1", "fake": "1", "fake4": "0"}


def test_a_contestant_skipped_at_run_time_does_not_take_the_judge_cost(contest: Bench) -> None:
    """The judge calls are recorded on the first contestant whose item reports, so a
    contestant skipped in its setup (after its answer was judged) does not carry them off."""
    contest.pytester.makeconftest(
        """
        import pytest

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_setup(item):
            if "[fake-r0]" in item.nodeid:
                pytest.skip("skipped at run time")
        """
    )
    contest.eval_file("best", contest_file())
    judge_picks(contest, BEST)
    contest.run(MODELS).assert_outcomes(passed=1, failed=1, skipped=1)
    tokens = {r["model"]: r["judge_tokens"] for r in contest.records() if r["outcome"] != "skipped"}
    assert tokens["fake3"] > 0 and tokens["fake4"] == 0
    assert len(judge_requests(contest)) == 3  # one contest, 3 orders


def test_a_contestant_whose_workdir_fails_leaves_the_contest(contest: Bench) -> None:
    """Started with its contest's first contestant, an agent contestant whose workdir cannot
    be made (a full disk) errors and leaves the contest: the others are judged, none waits."""
    contest.pytester.makeconftest(
        """
        import pytest_llmbench.engine.workdirs as workdirs

        made = workdirs.scratch

        def scratch(config, name):
            if "fake3" in name:
                raise OSError(28, "No space left on device")
            return made(config, name)

        workdirs.scratch = scratch
        """
    )
    contest.eval_file(
        "best",
        "kind: agent\ntools: [read_file]\nmax_turns: 2\n" + contest_file(),
    )
    judge_picks(contest, ANSWERS["fake4"])
    result = contest.run_subprocess(MODELS, "-o", "timeout=60")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    result.stdout.fnmatch_lines(["*fake3: its workdir cannot be made: *No space left on device*"])
    assert "Traceback" not in result.stdout.str()
    found = {model: (score, reason) for _, model, score, reason in verdicts(contest)}
    assert found["fake4"][0] == 1.0 and "of 2 answers" in found["fake4"][1]


def test_contestants_skipped_at_run_time_give_back_their_lookahead(contest: Bench) -> None:
    """A contestant's answer started with its contest's first but whose item is skipped at
    run time is dropped once the run is past it: it does not hold the look-ahead for good."""
    contest.pytester.makeconftest(
        """
        import pytest

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_setup(item):
            if "[fake4-" in item.nodeid:
                pytest.skip("skipped at run time")
        """
    )
    contest.pytester.makepyfile(
        test_zz="""
        from pytest_llmbench.engine.lifetime import get_runtime

        def test_room(request):
            scheduler = get_runtime(request.config).scheduler()
            assert list(scheduler.started()) == []
            assert scheduler.room() == scheduler.lookahead
        """
    )
    contest.eval_file("best", many_cases(7))
    judge_picks(contest, BEST)
    contest.run(MODELS, "--concurrency=1").assert_outcomes(passed=8, failed=7, skipped=7)


@pytest.mark.parametrize("rotate", [True, False])
def test_a_judge_that_picks_by_position_decides_nothing(contest: Bench, rotate: bool) -> None:
    """A judge that always answers A: judged in every rotation, each answer gets one vote and
    the contest is undecided; with rotate: false, it picks whatever is shown first."""
    contest.eval_file("best", contest_file(f"rotate: {str(rotate).lower()}"))
    contest.server.add_rule(Rule(model="fake-model-2", reply=json.dumps({"choice": "A"})))
    result = contest.run(MODELS)
    found = verdicts(contest)
    if rotate:
        result.assert_outcomes(skipped=3)
        assert all(
            r.startswith("unchecked: select-best decided nothing: votes ") for *_, r in found
        )
        assert all("fake 1, fake3 1, fake4 1 over 3 orders" in r for *_, r in found)
        assert len(judge_requests(contest)) == 3
    else:
        result.assert_outcomes(passed=1, failed=2)
        (call,) = [j for r in contest.records() for j in r["judges"]]
        assert call["details"][0]["picked"] == call["details"][0]["shown"][0]
        assert len(judge_requests(contest)) == 1


def test_the_judge_gate_demotes_every_contestants_verdict_of_a_gated_contest(
    contest: Bench,
) -> None:
    # the contest's judge calls are recorded on one contestant only: every contestant's
    # verdict still names the contest's judge, and the gate demotes them all
    from pytest_llmbench.results.reviews import (
        MachineVerdict,
        Review,
        ReviewKey,
        append_review,
        judges_of,
    )

    path = contest.pytester.path / "labels" / "reviews.jsonl"
    criterion = "the most informative answer"
    for case, label, said in (("x1", "fail", True), ("x2", "pass", False)):
        machine = MachineVerdict(said, "select-best", ("fake2",), criterion)
        append_review(path, Review(ReviewKey(case, "m", 0, 0), "d", label, machine=machine))
    contest.eval_file("best", contest_file("seed: 7"))
    judge_picks(contest, BEST)
    result = contest.run(MODELS, "--reviews-dir=labels", "--judge-gate=min_kappa=0.6,min_labels=2")
    result.assert_outcomes(skipped=3)
    records = contest.records()
    assert sum(bool(r["judges"]) for r in records) == 1  # the calls recorded once
    for record in records:
        entry = record["assertions"][0]
        assert (entry["judge_gate"], entry["unchecked"]) == ("demoted", True)
        assert judges_of(record, 0) == ("fake2",)
