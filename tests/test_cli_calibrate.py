"""``llmbench calibrate``, ``llmbench reviews export|import`` and the session end's
``judge_calibration.csv`` and report section, on runs made against the fake server.

The run: six cases, each answered "Answer N" by ``fake`` and judged by ``fake2`` with one
llm-rubric; the judge fails answers 5 and 6 and passes the others. People (labels written here)
pass 1, 2, 3 and 5 and fail 4 and 6: tp = 3 (1, 2, 3), fp = 1 (4), fn = 1 (5), tn = 1 (6).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Bench, Rule

from pytest_llmbench.cli import main
from pytest_llmbench.results.reviews import (
    Review,
    ReviewKey,
    answer_digest,
    append_review,
    load_labels,
    machine_verdict,
    review_key,
)

CASES = "\n".join(
    f"  - id: q{n}\n    prompt: Question {n}\n    assert:\n"
    f"      - {{type: llm-rubric, value: Is a good answer, judges: [fake2]}}"
    for n in range(1, 7)
)
#: What people said of each case's answer.
PEOPLE = {"q1": "pass", "q2": "pass", "q3": "pass", "q4": "fail", "q5": "pass", "q6": "fail"}


def judged_run(bench: Bench, *args: str) -> pytest.RunResult:
    for n in range(1, 7):
        bench.server.add_rule(Rule(model="fake-model", match=f"Question {n}", reply=f"Answer {n}"))
    for n in (5, 6):
        bench.server.add_rule(
            Rule(model="fake-model-2", match=f"Answer {n}", reply='{"score": 0.0, "reason": "no"}')
        )
    bench.server.add_rule(Rule(model="fake-model-2", reply='{"score": 1.0, "reason": "yes"}'))
    bench.eval_file("judged", f"cases:\n{CASES}\n")
    return bench.run("--models=fake", *args)


def label_run(records: list[dict[str, Any]], path: Path, snapshot: bool = True) -> None:
    """People's labels on each record's judged assertion, appended to ``path``."""
    for record in records:
        append_review(
            path,
            Review(
                key=review_key(record, 0),
                answer=answer_digest(record),
                label=PEOPLE[record["case_id"]],
                nodeid=record["nodeid"],
                case_id=record["case_id"],
                reviewer="ada",
                comment=f"on {record['case_id']}, <b>sure</b>",
                machine=machine_verdict(record, 0) if snapshot else None,
            ),
        )


def call(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def labelled(bench: Bench) -> Bench:
    """The run in ./out, its labels in the shared folder ./labels."""
    judged_run(bench).assert_outcomes(passed=4, failed=2)
    label_run(bench.records(), bench.pytester.path / "labels" / "reviews.jsonl")
    return bench


# -- calibrate --------------------------------------------------------------------------------
def test_calibrate_prints_the_judge_against_people(
    labelled: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = call(capsys, "calibrate", "out", "--reviews-dir", "labels")
    assert code == 0, err
    head, row = out.splitlines()
    assert head.split()[:3] == ["judge", "group", "n"]
    # kappa: po = 4/6, judge passes 4/6, people 4/6: pe = (16+4)/36 = 5/9,
    # kappa = (6/9 - 5/9) / (4/9) = 0.25
    assert row.startswith('fake2 llm-rubric "Is a good answer"')
    assert " 6 " in row and "+0.25 [" in row and "too few labels (< 50)" in row
    assert "6 label(s) in force" in err
    code, out, _ = call(capsys, "calibrate", "out", "--reviews-dir", "labels", "--format", "json")
    data = json.loads(out)
    (group,) = data["groups"]
    assert (group["tp"], group["fp"], group["fn"], group["tn"]) == (3, 1, 1, 1)
    assert group["kappa"] == pytest.approx(0.25) and group["tpr"] == pytest.approx(0.75)
    assert group["fpr"] == pytest.approx(0.5) and group["note"] == "too few labels"
    code, out, _ = call(
        capsys, "calibrate", "out", "--reviews-dir", "labels", "--format", "csv",
        "--min-labels", "5", "--by", "judge",
    )  # fmt: skip
    (row,) = csv.DictReader(out.splitlines())
    assert (row["judges"], row["type"], row["criterion"], row["note"]) == ("fake2", "*", "", "")


def test_labels_without_a_machine_verdict_are_paired_with_the_records(
    bench: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    judged_run(bench).assert_outcomes(passed=4, failed=2)
    capsys.readouterr()
    path = bench.out("reviews.jsonl")
    label_run(bench.records(), path, snapshot=False)
    stranger = Review(ReviewKey("no-such-case", "fake", 0, 0), "0" * 16, "pass")
    append_review(path, stranger)
    code, out, err = call(capsys, "calibrate", "out", "--format", "json")
    assert code == 0
    (group,) = json.loads(out)["groups"]
    assert (group["n"], group["tp"], group["fp"], group["fn"], group["tn"]) == (6, 3, 1, 1, 1)
    assert "1 label(s) keep no machine verdict and match no record" in err


def test_calibrate_refuses_bad_input_with_exit_2(
    labelled: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = call(capsys, "calibrate", "out")
    assert code == 2 and "llmbench: no labels in out/reviews.jsonl" in err
    code, _, err = call(capsys, "calibrate", "labels")
    assert code == 2 and "labels" in err  # a folder that is no run
    broken = Path("labels/reviews.jsonl")
    broken.write_text(broken.read_text() + '{"case": "x"\n', encoding="utf-8")
    code, _, err = call(capsys, "calibrate", "out", "--reviews-dir", "labels")
    assert code == 2 and "labels/reviews.jsonl:7: not JSON" in err
    code, _, err = call(capsys, "calibrate", "out", "--by", "colour")
    assert code == 2 and "--by 'colour'" in err


# -- the session end --------------------------------------------------------------------------
def test_the_run_writes_judge_calibration_csv_and_a_report_section(bench: Bench) -> None:
    judged_run(bench).assert_outcomes(passed=4, failed=2)
    assert not bench.out("judge_calibration.csv").exists()
    assert "Judges against people" not in bench.out("report.html").read_text()
    label_run(bench.records(), bench.pytester.path / "labels" / "reviews.jsonl")
    bench.run("--models=fake", "--reviews-dir=labels")
    with bench.out("judge_calibration.csv").open(encoding="utf-8") as stream:
        (row,) = csv.DictReader(stream)
    assert (row["judges"], row["type"], row["n"]) == ("fake2", "llm-rubric", "6")
    assert float(row["kappa"]) == pytest.approx(0.25)
    assert (row["tp"], row["fp"], row["fn"], row["tn"], row["note"]) == (
        "3", "1", "1", "1", "too few labels",
    )  # fmt: skip
    page = bench.out("report.html").read_text()
    assert '<section id="judges-against-people"><h2>Judges against people</h2>' in page
    assert "+0.25 [" in page and "Is a good answer" in page
    bench.run("--models=fake", "--reviews-dir=labels", "--ignore-reviews")
    assert not bench.out("judge_calibration.csv").exists()
    assert "Judges against people" not in bench.out("report.html").read_text()


def test_a_broken_labels_file_stops_the_run_before_anything_is_written(bench: Bench) -> None:
    labels = bench.pytester.path / "labels"
    labels.mkdir()
    (labels / "reviews.jsonl").write_text('{"case": "x", "model": 3}\n', encoding="utf-8")
    result = judged_run(bench, "--reviews-dir=labels")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*/labels/reviews.jsonl:1: field 'label' is missing*"])
    assert not bench.out("judge_calibration.csv").exists()


# -- export and import ------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_export_then_import_gives_the_same_labels(
    labelled: Bench, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    out_file = Path(f"labels.{fmt}")
    code, out, err = call(
        capsys, "reviews", "export", "out", "--reviews-dir", "labels", "--format", fmt,
        "-o", out_file,
    )  # fmt: skip
    assert code == 0, err
    code, out, err = call(capsys, "reviews", "import", out_file, "--reviews-dir", "copy")
    assert code == 0, err
    assert "imported 6 label(s) into copy/reviews.jsonl" in out
    before = load_labels([Path("labels/reviews.jsonl")]).current
    after = load_labels([Path("copy/reviews.jsonl")]).current
    assert after == before and len(after) == 6


def test_a_spreadsheet_of_node_ids_and_words_is_filled_from_the_run(
    bench: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    judged_run(bench).assert_outcomes(passed=4, failed=2)
    capsys.readouterr()
    records = {r["case_id"]: r for r in bench.records()}
    words = {"q1": "Yes", "q2": "1", "q3": "TRUE", "q4": "no", "q5": "Pass", "q6": "FALSE"}
    sheet = Path("sheet.csv")
    with sheet.open("w", encoding="utf-8", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["nodeid", "assertion", "label", "comment"])
        for case, word in words.items():
            writer.writerow([records[case]["nodeid"], "0", word, "by hand"])
    code, out, err = call(capsys, "reviews", "import", sheet, "--into", "out")
    assert code == 0, err
    labels = load_labels([bench.out("reviews.jsonl")])
    for case, record in records.items():
        review = labels.for_record(record, 0)
        assert review is not None and review.label == PEOPLE[case] and review.comment == "by hand"
        assert review.machine == machine_verdict(record, 0) and review.run == "out"
    code, out, err = call(capsys, "calibrate", "out", "--format", "json")
    (group,) = json.loads(out)["groups"]
    assert (group["tp"], group["fp"], group["fn"], group["tn"]) == (3, 1, 1, 1)


def test_bad_rows_are_named_by_their_line_and_nothing_is_imported(
    bench: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    judged_run(bench).assert_outcomes(passed=4, failed=2)
    capsys.readouterr()
    known = bench.records()[0]["nodeid"]
    sheet = Path("sheet.csv")
    sheet.write_text(
        "nodeid,label,comment\n"
        f"{known},pass,fine\n"
        'judged.eval.yaml::nope[fake],fail,"two\nlines"\n'
        f"{known},maybe,?\n",
        encoding="utf-8",
    )
    code, _, err = call(capsys, "reviews", "import", sheet, "--into", "out")
    assert code == 2
    assert "2 of 3 row(s) refused, nothing imported" in err
    assert "sheet.csv:3: names no item of the runs given ('judged.eval.yaml::nope[fake]')" in err
    assert "sheet.csv:5: label 'maybe' is none of" in err
    assert not bench.out("reviews.jsonl").exists()
    code, _, err = call(capsys, "reviews", "import", sheet, "--reviews-dir", "labels")
    assert code == 2 and "sheet.csv:2: names no item of the runs given" in err
