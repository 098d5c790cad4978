"""Effective verdicts: people's labels applied to records, by the pure function and in a run.

The pure function: an item label decides the item; assertion labels re-decide it by the case's
rule (every check passes, or the weighted score reaches the threshold); unsure decides nothing;
a label on another answer is stale and dropped; errors stay errors; applying twice (or other
labels to an already labelled record) is what applying once to the machine's record gives.
The run: the exit status follows a person's label both ways, ``--ignore-reviews`` restores the
machine's verdicts, ``-n 2`` writes the records ``-n 0`` does, a broken labels file is a usage
error naming path:line, and run.json counts what the labels did.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Bench, Rule

from pytest_llmbench.results.effective import (
    effective_record,
    effective_records,
    labels_for_run,
    machine_record,
    reviews_line,
)
from pytest_llmbench.results.record import FIELDS, build_record
from pytest_llmbench.results.reviews import (
    Review,
    ReviewKey,
    answer_digest,
    append_review,
    current_labels,
    review_key,
)
from pytest_llmbench.results_folder import REVIEWS_FILE


def _assertion(passed: bool, score: float | None = None, weight: float = 1.0) -> dict[str, Any]:
    return {
        "type": "contains",
        "passed": passed,
        "score": (1.0 if passed else 0.0) if score is None else score,
        "weight": weight,
        "reason": "",
    }


def _record(
    outcome: str, assertions: list[dict[str, Any]], threshold: float = 1.0, **extra: Any
) -> dict[str, Any]:
    scores = [a["score"] * a["weight"] for a in assertions]
    weights = sum(a["weight"] for a in assertions)
    return build_record(
        nodeid="e.eval.yaml::c[fake]",
        case_id="c",
        case_hash="abcd" * 4,
        model="fake",
        repeat=0,
        outcome=outcome,
        score=sum(scores) / weights if assertions else None,
        threshold=threshold,
        response="the answer",
        assertions=assertions,
        **extra,
    )


def _label(
    record: dict[str, Any], label: str, assertion: int | None = None, answer: str | None = None
) -> Review:
    return Review(
        key=review_key(record, assertion),
        answer=answer_digest(record) if answer is None else answer,
        label=label,
        comment="looks right" if label == "pass" else "wrong city",
        reviewer="ana",
        at="2026-11-29T10:00:00+00:00",
    )


def test_record_fields_default_to_the_machine() -> None:
    record = _record("passed", [_assertion(True)])
    assert FIELDS.index("verdict_source") == FIELDS.index("passed") + 1
    assert (record["verdict_source"], record["machine_outcome"], record["review"]) == (
        "machine",
        None,
        None,
    )


def test_an_item_label_decides_the_item() -> None:
    failed = _record("failed", [_assertion(False)])
    out = effective_record(failed, current_labels([_label(failed, "pass")]))
    assert (out["outcome"], out["passed"], out["verdict_source"]) == ("passed", True, "human")
    assert out["machine_outcome"] == "failed"
    assert out["review"] == {
        "label": "pass",
        "comment": "looks right",
        "reviewer": "ana",
        "at": "2026-11-29T10:00:00+00:00",
    }
    assert out["score"] == 0.0  # an item label decides the outcome, not the measured score
    assert failed["outcome"] == "failed"  # the input is left as it was


def test_an_assertion_label_re_decides_by_the_threshold() -> None:
    # Two checks weighing 1 and 3: the machine fails the heavy one (score 0.25 < 0.5).
    record = _record("failed", [_assertion(True), _assertion(False, weight=3.0)], threshold=0.5)
    out = effective_record(record, current_labels([_label(record, "pass", assertion=1)]))
    assert (out["outcome"], out["score"]) == ("passed", 1.0)
    entry = out["assertions"][1]
    assert (entry["passed"], entry["score"], entry["verdict_source"]) == (True, 1.0, "human")
    assert (entry["machine_passed"], entry["machine_score"]) == (False, 0.0)
    assert out["review"]["assertion"] == 1
    assert "verdict_source" not in out["assertions"][0]
    # A person failing the light one only: score 0.75 reaches 0.5, the item still passes.
    passing = _record("passed", [_assertion(True), _assertion(True, weight=3.0)], threshold=0.5)
    out = effective_record(passing, current_labels([_label(passing, "fail", assertion=0)]))
    assert (out["outcome"], out["score"], out["verdict_source"]) == ("passed", 0.75, "human")
    # Failing the heavy one: 0.25 < 0.5, the item fails.
    out = effective_record(passing, current_labels([_label(passing, "fail", assertion=1)]))
    assert (out["outcome"], out["score"]) == ("failed", 0.25)


def test_a_conversation_is_re_decided_turn_by_turn() -> None:
    turns = [{**_assertion(True), "turn": 1}, {**_assertion(False), "turn": 2}]
    record = _record("failed", turns, threshold=0.5)  # score 0.5, but turn 2 fails alone
    out = effective_record(record, current_labels([_label(record, "pass", assertion=1)]))
    assert (out["outcome"], out["score"]) == ("passed", 1.0)
    failing = _record("passed", [{**t, "passed": True, "score": 1.0} for t in turns])
    out = effective_record(failing, current_labels([_label(failing, "fail", assertion=0)]))
    assert out["outcome"] == "failed"  # turn 1 fails whatever the whole's score


def test_an_item_label_wins_over_assertion_labels() -> None:
    record = _record("failed", [_assertion(False)])
    labels = current_labels([_label(record, "pass", assertion=0), _label(record, "fail")])
    out = effective_record(record, labels)
    assert out["outcome"] == "failed"
    assert out["assertions"][0]["passed"] is True  # the assertion's label still shows


def test_unsure_decides_nothing_and_is_counted() -> None:
    record = _record("failed", [_assertion(False)])
    run = effective_records([record], current_labels([_label(record, "unsure")]))
    assert run.records[0] == record
    assert (run.unsure, run.applied, run.to_pass, run.to_fail) == (1, 0, 0, 0)


def test_a_label_on_another_answer_is_stale() -> None:
    record = _record("failed", [_assertion(False)])
    labels = current_labels([_label(record, "pass", answer="0" * 16)])
    run = effective_records([record], labels)
    assert run.records[0]["outcome"] == "failed"
    assert (run.stale, run.applied, run.labels) == (1, 0, 1)
    assert reviews_line(run.block()) == (
        "reviews: 0 verdicts by people (0 fail->pass, 0 pass->fail), 1 label stale (answer changed)"
    )


def test_errors_are_never_decided() -> None:
    record = build_record(
        nodeid="n", case_hash="ef" * 8, model="fake", outcome="error", error="boom", repeat=0
    )
    assert effective_record(record, current_labels([_label(record, "pass")])) == record


def test_an_unchecked_item_is_decided_by_an_item_label() -> None:
    record = _record("skipped", [], error_kind="unchecked", error="nothing checked")
    out = effective_record(record, current_labels([_label(record, "fail")]))
    assert (out["outcome"], out["machine_outcome"]) == ("failed", "skipped")
    assert out["error_kind"] == "unchecked"  # what the machine did is kept


def test_idempotent_and_other_labels_start_from_the_machine() -> None:
    record = _record("passed", [_assertion(True), _assertion(True, weight=3.0)], threshold=0.5)
    first = current_labels([_label(record, "fail", assertion=1)])
    once = effective_record(record, first)
    assert effective_record(once, first) == once
    assert machine_record(once) == {**record, "verdict_source": "machine"}
    # Other labels given later: as if given to the machine's record.
    later = current_labels([_label(record, "pass", assertion=0)])
    assert effective_record(once, later) == effective_record(record, later)
    assert effective_record(once, current_labels([])) == record


def test_counts_of_a_run() -> None:
    fail = _record("failed", [_assertion(False)])
    passing = {**_record("passed", [_assertion(True)]), "repeat": 1}
    other = {**_record("passed", [_assertion(True)]), "repeat": 2}
    labels = current_labels([_label(fail, "pass"), _label(passing, "fail"), _label(other, "pass")])
    run = effective_records([fail, passing, other], labels, files=["x/reviews.jsonl"])
    assert run.block() == {
        "files": ["x/reviews.jsonl"],
        "labels": 3,
        "applied": 3,
        "overrides": {"to_pass": 1, "to_fail": 1},
        "unsure": 0,
        "stale": 0,
        "ignored": False,
    }
    assert reviews_line(run.block()) == "reviews: 3 verdicts by people (1 fail->pass, 1 pass->fail)"


def test_labels_for_run_reads_folder_then_shared(tmp_path: Path) -> None:
    record = _record("failed", [_assertion(False)])
    run_folder, shared = tmp_path / "run", tmp_path / "shared"
    append_review(run_folder / REVIEWS_FILE, _label(record, "pass"))
    append_review(shared / REVIEWS_FILE, _label(record, "fail"))
    found = labels_for_run([run_folder], shared, ignore=False)
    assert found.files == (str(run_folder / REVIEWS_FILE), str(shared / REVIEWS_FILE))
    assert found.labels.for_record(record) is not None
    assert found.labels.for_record(record).label == "fail"  # type: ignore[union-attr]
    ignored = labels_for_run([run_folder], shared, ignore=True)
    assert (len(ignored.labels), ignored.ignored) == (0, True)
    assert ignored.apply([record]).records[0]["outcome"] == "failed"


# -- in a run -------------------------------------------------------------------------------
SUITE = """
cases:
  - {id: france, prompt: "Capital of France?", expected: Paris, assert: [contains]}
  - {id: japan, prompt: "Capital of Japan?", expected: Tokyo, assert: [contains]}
"""


def _answers(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="France", reply="Paris"))
    bench.server.add_rule(Rule(match="Japan", reply="Kyoto"))


def _by_case(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {record["case_id"]: record for record in records}


def _write_label(folder: Path, record: dict[str, Any], label: str) -> None:
    append_review(folder / REVIEWS_FILE, _label(record, label))


@pytest.fixture
def labelled(bench: Bench) -> Bench:
    bench.eval_file("capitals", SUITE)
    _answers(bench)
    first = bench.run("--models=fake")
    first.assert_outcomes(passed=1, failed=1)
    return bench


def test_a_person_passing_the_only_failure_passes_the_run(labelled: Bench) -> None:
    bench = labelled
    _write_label(bench.out(""), _by_case(bench.records())["japan"], "pass")
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=2)
    assert result.ret == 0
    japan = _by_case(bench.records())["japan"]
    assert (japan["outcome"], japan["verdict_source"], japan["machine_outcome"]) == (
        "passed",
        "human",
        "failed",
    )
    info = json.loads(bench.out("run.json").read_text())
    assert info["reviews"]["overrides"] == {"to_pass": 1, "to_fail": 0}
    assert info["reviews"]["applied"] == 1
    assert "llmbench: reviews: 1 verdict by people (1 fail->pass, 0 pass->fail)" in (
        result.stdout.str()
    )
    # --ignore-reviews: the machine's verdict again.
    ignored = bench.run("--models=fake", "--ignore-reviews")
    assert ignored.ret == 1
    assert _by_case(bench.records())["japan"]["verdict_source"] == "machine"
    assert json.loads(bench.out("run.json").read_text())["reviews"]["ignored"] is True


def test_a_person_failing_a_pass_fails_the_run(labelled: Bench, tmp_path: Path) -> None:
    bench = labelled
    records = _by_case(bench.records())
    shared = bench.pytester.path / "labels"
    _write_label(shared, records["japan"], "pass")
    _write_label(shared, records["france"], "fail")
    result = bench.run("--models=fake", f"--reviews-dir={shared}")
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == 1
    text = result.stdout.str()
    assert "failed by a person's label (ana: wrong city)" in text
    france = _by_case(bench.records())["france"]
    assert (france["outcome"], france["review"]["label"]) == ("failed", "fail")


def test_a_changed_answer_drops_the_label(labelled: Bench) -> None:
    bench = labelled
    _write_label(bench.out(""), _by_case(bench.records())["japan"], "pass")
    bench.server.reset()
    bench.server.add_rule(Rule(match="France", reply="Paris"))
    bench.server.add_rule(Rule(match="Japan", reply="Osaka"))
    result = bench.run("--models=fake")
    assert result.ret == 1
    assert _by_case(bench.records())["japan"]["verdict_source"] == "machine"
    reviews = json.loads(bench.out("run.json").read_text())["reviews"]
    assert (reviews["stale"], reviews["applied"]) == (1, 0)
    assert "1 label stale (answer changed)" in result.stdout.str()


def test_a_broken_labels_file_is_a_usage_error(labelled: Bench) -> None:
    bench = labelled
    path = bench.out(REVIEWS_FILE)
    record = _by_case(bench.records())["japan"]
    _write_label(bench.out(""), record, "pass")
    with path.open("a") as stream:
        stream.write('{"case": "x", "model": \n')
    result = bench.run("--models=fake")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"{path}:2: not JSON" in result.stderr.str()


def test_workers_apply_the_labels_the_controller_read(labelled: Bench) -> None:
    bench = labelled
    records = _by_case(bench.records())
    _write_label(bench.out(""), records["japan"], "pass")
    _write_label(bench.out(""), records["france"], "fail")
    serial = bench.run("--models=fake")
    assert serial.ret == 1
    alone = _comparable(bench.records())
    parallel = bench.run_subprocess("--models=fake", "-n", "2")
    assert parallel.ret == 1
    parallel.assert_outcomes(passed=1, failed=1)
    assert _comparable(bench.records()) == alone
    assert {r["case_id"]: r["outcome"] for r in alone} == {"france": "failed", "japan": "passed"}


def _comparable(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    timings = ("latency_s", "ttft_s", "tokens_per_s", "started_at", "worker", "streamed",
               "rate_limit_wait_s", "cached")  # fmt: skip
    return sorted(
        ({k: v for k, v in r.items() if k not in timings} for r in records),
        key=lambda r: r["nodeid"],
    )


def test_review_key_is_what_the_label_is_about() -> None:
    record = _record("failed", [_assertion(False)])
    assert review_key(record, 0) == ReviewKey("abcd" * 4, "fake", 0, 0)


# -- readers after the run ------------------------------------------------------------------
def _csv(path: Path) -> list[dict[str, str]]:
    import csv

    with path.open(newline="", encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


def test_llmbench_report_applies_labels_given_after_the_run(
    labelled: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_llmbench.cli import main

    bench = labelled
    out = bench.out("")
    written = bench.out("results.jsonl").read_bytes()
    japan = _by_case(bench.records())["japan"]
    append_review(
        out / REVIEWS_FILE,
        Review(
            key=review_key(japan),
            answer=answer_digest(japan),
            label="pass",
            comment="<b>Kyoto</b> was the capital",
            reviewer="ana",
        ),
    )
    assert main(["report", str(out)]) == 0
    verdicts = {row["case_id"]: row for row in _csv(bench.out("case_verdicts.csv"))}
    assert (verdicts["japan"]["verdict"], verdicts["japan"]["verdict_source"]) == (
        "passed",
        "human",
    )
    assert (verdicts["japan"]["human_verdicts"], verdicts["france"]["verdict_source"]) == (
        "1",
        "machine",
    )
    (board,) = _csv(bench.out("leaderboard.csv"))
    assert (board["human_verdicts"], board["n_passed"]) == ("1", "2")
    info = json.loads(bench.out("run.json").read_text())
    assert info["reviews"]["overrides"] == {"to_pass": 1, "to_fail": 0}
    page = bench.out("report.html").read_text()
    assert 'class="person"' in page
    assert "&lt;b&gt;Kyoto&lt;/b&gt; was the capital" in page and "<b>Kyoto</b>" not in page
    assert bench.out("results.jsonl").read_bytes() == written  # the run's own file is kept
    # --ignore-reviews: the machine's verdicts everywhere again.
    assert main(["report", str(out), "--ignore-reviews"]) == 0
    verdicts = {row["case_id"]: row for row in _csv(bench.out("case_verdicts.csv"))}
    assert (verdicts["japan"]["verdict"], verdicts["japan"]["verdict_source"]) == (
        "failed",
        "machine",
    )
    assert json.loads(bench.out("run.json").read_text())["reviews"]["ignored"] is True
    assert 'class="person"' not in bench.out("report.html").read_text()
    capsys.readouterr()


def test_merge_and_baselines_apply_labels_given_after_the_run(
    labelled: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_llmbench.cli import main
    from pytest_llmbench.results import load_labelled

    bench = labelled
    out = bench.out("")
    shared = bench.pytester.path / "shared"
    _write_label(shared, _by_case(bench.records())["japan"], "pass")
    merged = bench.pytester.path / "merged"
    assert main(["merge", str(out), "-o", str(merged), "--reviews-dir", str(shared)]) == 0
    records = [json.loads(line) for line in (merged / "results.jsonl").read_text().splitlines()]
    japan = _by_case(records)["japan"]
    assert (japan["outcome"], japan["verdict_source"]) == ("passed", "human")
    info = json.loads((merged / "run.json").read_text())
    assert (info["exitstatus"], info["reviews"]["applied"]) == (0, 1)
    assert (merged / REVIEWS_FILE).is_file()  # the merged run keeps the labels it applied
    again = bench.pytester.path / "again"
    assert main(["merge", str(out), "-o", str(again), "--reviews-dir", str(shared),
                 "--ignore-reviews"]) == 1  # fmt: skip
    # A baseline is read with its labels (and --reviews-dir's) applied, or without.
    assert _by_case(load_labelled(out, shared))["japan"]["outcome"] == "passed"
    assert _by_case(load_labelled(out, shared, ignore=True))["japan"]["outcome"] == "failed"
    assert _by_case(load_labelled(merged))["japan"]["verdict_source"] == "human"
    capsys.readouterr()


def test_a_broken_labels_file_stops_a_reader(
    labelled: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_llmbench.cli import main

    bench = labelled
    bench.out(REVIEWS_FILE).write_text("not json\n")
    assert main(["report", str(bench.out(""))]) == 2
    assert f"{bench.out(REVIEWS_FILE)}:1: not JSON" in capsys.readouterr().err
