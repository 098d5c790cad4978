"""Labels in and out (results/review_io.py) and the calibration rows of a run
(results/judge_calibration.py), on records built here; the report's section on its rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_llmbench.report.calibration_html import calibration_table
from pytest_llmbench.results.judge_calibration import regroup, run_calibration, write_calibration
from pytest_llmbench.results.review_io import (
    RecordIndex,
    export_text,
    format_of,
    import_reviews,
    pair_with_records,
    read_rows,
)
from pytest_llmbench.results.reviews import (
    MachineVerdict,
    Review,
    ReviewKey,
    ReviewsError,
    answer_digest,
    append_review,
    append_reviews,
    load_labels,
    read_reviews,
    review_key,
)


def record(case: str, passed: bool, *, outcome: str | None = None, **extra: Any) -> dict[str, Any]:
    """A record of one llm-rubric assertion judged by ``judge-a``."""
    return {
        "nodeid": f"e.eval.yaml::{case}[m-r0]",
        "case_id": case,
        "case_hash": f"hash-{case}",
        "model": "m",
        "repeat": 0,
        "response": f"answer {case}",
        "outcome": outcome or ("passed" if passed else "failed"),
        "assertions": [{"type": "llm-rubric", "passed": passed, "criterion": "<b>polite</b>"}],
        "judges": [{"assertion": 0, "judge": "judge-a", "error": None}],
        **extra,
    }


RECORDS = [record("a", True), record("b", False)]
INDEX = RecordIndex.of([("run1", RECORDS)])


def rows(*lines: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(f"f.csv:{i + 2}", line) for i, line in enumerate(lines)]


@pytest.mark.parametrize(
    ("word", "label"),
    [("PASS", "pass"), ("yes", "pass"), ("1", "pass"), ("True", "pass"), ("no", "fail"),
     ("0", "fail"), ("false", "fail"), ("Fail", "fail"), ("unsure", "unsure"),
     ("clear", "clear")],
)  # fmt: skip
def test_labels_are_read_case_insensitively(word: str, label: str) -> None:
    (review,) = import_reviews(rows({"nodeid": RECORDS[0]["nodeid"], "label": word}), INDEX)
    assert review.label == label
    assert review.key == review_key(RECORDS[0], None) and review.run == "run1"
    assert review.answer == answer_digest(RECORDS[0])


def test_every_bad_row_is_named_and_none_is_taken() -> None:
    bad = rows(
        {"nodeid": RECORDS[0]["nodeid"], "label": "pass"},
        {"nodeid": RECORDS[0]["nodeid"], "label": "pass", "assertion": "1"},
        {"nodeid": RECORDS[0]["nodeid"], "label": "pass", "assertion": "-1"},
        {"label": "fail"},
        {"nodeid": RECORDS[1]["nodeid"]},
        {"case": "x", "model": "m", "answer": "d", "label": "pass", "machine": "maybe"},
    )
    with pytest.raises(ReviewsError) as caught:
        import_reviews(bad, INDEX)
    lines = str(caught.value).splitlines()
    assert lines == [
        "5 of 6 row(s) refused, nothing imported:",
        "f.csv:3: assertion 1 is not one of the item's 1",
        "f.csv:4: assertion '-1' is not a whole number >= 0",
        "f.csv:5: names no item: give nodeid (or case, model and answer)",
        "f.csv:6: field 'label' is missing",
        "f.csv:7: machine 'maybe' is none of pass, fail, none",
    ]


def test_a_full_row_needs_no_run() -> None:
    row = {"case": "h", "model": "m", "repeat": "2", "assertion": "0", "answer": "d",
           "label": "fail", "machine": "pass", "assertion_type": "llm-rubric",
           "judges": "j2+j1", "criterion": "Is kind"}  # fmt: skip
    (review,) = import_reviews(rows(row), RecordIndex.of([]))
    assert (review.key.case, review.key.repeat, review.key.assertion) == ("h", 2, 0)
    assert review.machine == MachineVerdict(True, "llm-rubric", ("j1", "j2"), "Is kind")


def test_a_csv_cell_spanning_lines_keeps_the_next_rows_line_number(tmp_path: Path) -> None:
    path = tmp_path / "f.csv"
    path.write_text('nodeid,label,comment\na,pass,"one\ntwo"\n\nb,fail,x\n', encoding="utf-8")
    assert [where for where, _ in read_rows(path, "csv")] == [f"{path}:2", f"{path}:5"]
    path.write_text("nodeid,label\na,pass,extra\n", encoding="utf-8")
    with pytest.raises(ReviewsError, match=r"f.csv:2: more cells than the header has columns"):
        read_rows(path, "csv")
    path.write_text("nodeid,comment\na,x\n", encoding="utf-8")
    with pytest.raises(ReviewsError, match=r"f.csv:1: the header has no 'label' column"):
        read_rows(path, "csv")
    jsonl = tmp_path / "f.jsonl"
    jsonl.write_text('{"label": "pass"}\n\n[1]\n', encoding="utf-8")
    with pytest.raises(ReviewsError, match=r"f.jsonl:3: not a JSON object"):
        read_rows(jsonl, "jsonl")
    with pytest.raises(ReviewsError, match=r"give --format csv\|jsonl"):
        format_of(tmp_path / "f.xlsx", None)
    assert format_of(tmp_path / "f.txt", "csv") == "csv"


def test_export_writes_the_machine_verdict_and_escapes_nothing_it_should_not() -> None:
    review = Review(review_key(RECORDS[0], 0), "d", "pass", comment='say "hi", then\nbye',
                    machine=MachineVerdict(None, "llm-rubric", ("j",), None))  # fmt: skip
    text = export_text([review], "csv")
    assert text.splitlines()[0].startswith("nodeid,case_id,eval_file,model,repeat,assertion,")
    assert ",none," in text and '"say ""hi"", then\nbye"' in text
    assert '"machine": "none"' in export_text([review], "jsonl")


def test_labels_without_a_snapshot_pair_by_key_and_answer_only() -> None:
    same = Review(review_key(RECORDS[0], 0), answer_digest(RECORDS[0]), "fail")
    changed = Review(review_key(RECORDS[1], 0), "another answer", "pass")
    paired, unpaired = pair_with_records([same, changed], INDEX)
    assert unpaired == 1
    assert paired[0].machine == MachineVerdict(True, "llm-rubric", ("judge-a",), "<b>polite</b>")
    assert paired[1].machine is None


def test_a_runs_rows_keep_its_own_judge_groups_and_the_csv_goes_with_them(tmp_path: Path) -> None:
    for rec, label in zip(RECORDS, ("pass", "pass"), strict=True):
        append_review(
            tmp_path / "reviews.jsonl", Review(review_key(rec, 0), answer_digest(rec), label)
        )
    other = MachineVerdict(True, "llm-rubric", ("judge-z",), "other")
    append_review(tmp_path / "reviews.jsonl", Review(review_key(record("z", True), 0), "d",
                                                      "pass", machine=other))  # fmt: skip
    (row,) = run_calibration(RECORDS, load_labels([tmp_path / "reviews.jsonl"]))
    assert (row["judges"], row["tp"], row["fn"], row["note"]) == ("judge-a", 1, 1, "too few labels")
    path = write_calibration([row], tmp_path)
    assert path is not None and path.read_text().startswith("judges,type,criterion,n,")
    assert write_calibration([], tmp_path) is None and not path.exists()
    page = calibration_table([row])
    assert "&lt;b&gt;polite&lt;/b&gt;" in page and "<b>polite" not in page
    assert calibration_table([]) == ""


def test_regroup_pools_by_the_parts_asked_for() -> None:
    reviews = [
        Review(review_key(RECORDS[0], 0), "d", "pass",
               machine=MachineVerdict(True, "llm-rubric", ("j",), "A")),
        Review(review_key(RECORDS[1], 0), "d", "pass",
               machine=MachineVerdict(True, "closed-qa", ("j",), "B")),
    ]  # fmt: skip
    pooled = {r.machine for r in regroup(reviews, ["judge"])}
    assert pooled == {MachineVerdict(True, "*", ("j",), None)}
    assert regroup(reviews, ["judge", "type", "criterion"]) == reviews


def test_a_comment_with_unicode_line_separators_stays_in_its_row(tmp_path: Path) -> None:
    # JSON keeps U+2028, U+2029 and U+0085 raw in a string: only "\n" ends a row
    comment = "one\u2028two\u2029three\x85four"
    review = Review(review_key(RECORDS[0], 0), "d", "pass", comment=comment)
    path = tmp_path / "labels.jsonl"
    path.write_text(export_text([review], "jsonl"), encoding="utf-8")
    ((where, row),) = read_rows(path, "jsonl")
    assert where == f"{path}:1" and row["comment"] == comment
    (back,) = import_reviews([(where, row)], INDEX)
    assert back.comment == comment


@pytest.mark.parametrize("criterion", ["", "  ", "0", " Is polite?\n", None])
def test_jsonl_gives_back_the_very_criterion(tmp_path: Path, criterion: str | None) -> None:
    # another criterion is another judge group: an empty one must not come back as none
    machine = MachineVerdict(True, "llm-rubric", ("j",), criterion)
    review = Review(ReviewKey("h", "m", 0, 0), "d", "pass", machine=machine)
    path = tmp_path / "labels.jsonl"
    path.write_text(export_text([review], "jsonl"), encoding="utf-8")
    (back,) = import_reviews(read_rows(path, "jsonl"), RecordIndex.of([]))
    assert back.machine == machine


@pytest.mark.parametrize("criterion", ["  ", "0", " Is polite?\n", None])
def test_csv_gives_back_the_criterion_and_an_empty_cell_is_none(
    tmp_path: Path, criterion: str | None
) -> None:
    machine = MachineVerdict(False, "llm-rubric", ("a", "b"), criterion)
    review = Review(ReviewKey("h", "m", 0, 0), "d", "fail", machine=machine)
    path = tmp_path / "labels.csv"
    path.write_text(export_text([review], "csv"), encoding="utf-8")
    (back,) = import_reviews(read_rows(path, "csv"), RecordIndex.of([]))
    assert back.machine == machine


def test_an_import_is_appended_whole_and_not_onto_a_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "reviews.jsonl"
    good = [Review(ReviewKey(f"h{n}", "m", 0, None), "d", "pass") for n in range(3)]
    append_reviews(path, good[:1])
    path.write_text(path.read_text(encoding="utf-8").rstrip("\n"), encoding="utf-8")
    append_reviews(path, good[1:])  # the last line gets its newline back first
    assert [r.key.case for r in read_reviews(path)] == ["h0", "h1", "h2"]
    broken = path.read_text(encoding="utf-8") + "{not json\n"
    path.write_text(broken, encoding="utf-8")
    with pytest.raises(ReviewsError, match=r"reviews.jsonl:4: not JSON"):
        append_reviews(path, good)
    assert path.read_text(encoding="utf-8") == broken


def test_a_label_reading_would_refuse_is_not_written(tmp_path: Path) -> None:
    # a record of no model (a plain test that called none) gives a key reading refuses
    path = tmp_path / "reviews.jsonl"
    fine = Review(ReviewKey("h", "m", 0, None), "d", "pass")
    modelless = Review(ReviewKey("t.py::test", "", 0, None), "d", "pass", source="s.csv:3")
    with pytest.raises(ReviewsError, match=r"s.csv:3: cannot be written as a label"):
        append_reviews(path, [fine, modelless])
    assert not path.exists()
