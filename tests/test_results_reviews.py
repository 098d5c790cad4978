"""The labels file: keys, answer digests, machine snapshots, the last line winning, clear,
errors naming path:line, and appends that lose nothing when written at once."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from pytest_llmbench.results.reviews import (
    Review,
    ReviewKey,
    ReviewsError,
    answer_digest,
    append_review,
    current_labels,
    judged_positions,
    judges_of,
    load_labels,
    machine_verdict,
    read_reviews,
    review_key,
    review_paths,
)
from pytest_llmbench.results_folder import REVIEWS_FILE


def record(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "nodeid": "evals/qa.eval.yaml::rain[m-r0]",
        "case_hash": "abcd" * 4,
        "model": "m",
        "repeat": 0,
        "outcome": "failed",
        "response": "Water falls.",
        "tool_calls": [],
        "conversation": None,
        "assertions": [
            {"type": "contains", "passed": True, "score": 1.0, "weight": 1.0, "reason": ""},
            {
                "type": "llm-rubric",
                "passed": False,
                "score": 0.2,
                "weight": 1.0,
                "reason": "no",
                "criterion": "mentions evaporation",
            },
        ],
        "judges": [
            {"assertion": 1, "judge": "judge-b", "model_id": "openai/b", "error": None},
            {"assertion": 1, "judge": "judge-a", "model_id": "openai/a", "error": None},
            {"assertion": 1, "judge": "judge-c", "model_id": "openai/c", "error": "timeout"},
        ],
    }
    base.update(fields)
    return base


def label(rec: dict[str, Any], value: str, assertion: int | None = None, **extra: Any) -> Review:
    return Review(
        key=review_key(rec, assertion),
        answer=answer_digest(rec),
        label=value,
        machine=machine_verdict(rec, assertion),
        **extra,
    )


def test_the_digest_follows_the_answer_and_nothing_else() -> None:
    first = record()
    assert answer_digest(first) == answer_digest(record(outcome="passed", repeat=3))
    assert answer_digest(first) != answer_digest(record(response="Water evaporates."))
    called = record(tool_calls=[{"id": "1", "name": "f", "arguments": "{}"}])
    assert answer_digest(called) != answer_digest(first)
    talk = [{"turn": 1, "role": "assistant", "content": "hi", "generated": True}]
    assert answer_digest(record(conversation=talk)) != answer_digest(first)
    assert len(answer_digest(first)) == 16


def test_a_key_is_the_case_hash_or_a_plain_tests_node_id() -> None:
    assert review_key(record(), 1) == ReviewKey("abcd" * 4, "m", 0, 1)
    plain = review_key(record(case_hash=None, nodeid="tests/test_app.py::test_x"))
    assert plain == ReviewKey("tests/test_app.py::test_x", "m", 0, None)


def test_the_machine_snapshot_names_the_judges_that_decided() -> None:
    rec = record()
    snap = machine_verdict(rec, 1)
    # the panel as configured: judge-c failed on this item and stays in its group
    panel = ("judge-a", "judge-b", "judge-c")
    assert (snap.passed, snap.type, snap.judges) == (False, "llm-rubric", panel)
    assert snap.criterion == "mentions evaporation"
    # The item was decided by two checks: its label names no judge.
    assert machine_verdict(rec).judges == () and machine_verdict(rec).passed is False
    alone = record(assertions=[{**rec["assertions"][0], "unchecked": True}, rec["assertions"][1]])
    assert machine_verdict(alone).judges == panel
    assert machine_verdict(rec, 7).passed is None


def test_an_assertions_own_judges_decide_over_the_judge_entries_positions() -> None:
    rec = record()
    # a record whose verdicts name their judges: the judge entries' ``assertion`` (the case's
    # index, another position in a conversation) is not read
    own = [rec["assertions"][0], {**rec["assertions"][1], "judges": ["judge-z"]}]
    moved = record(assertions=own, judges=[{"assertion": 0, "judge": "judge-a", "error": None}])
    assert (judges_of(moved, 0), judges_of(moved, 1)) == ((), ("judge-z",))
    assert judges_of(moved, 5) == ()
    assert judged_positions(moved) == [1] and judged_positions(rec) == [1]


def test_the_snapshot_is_the_machines_verdict_under_a_human_one() -> None:
    rec = record()
    rubric = {**rec["assertions"][1], "passed": True, "verdict_source": "human"}
    labelled = record(
        outcome="passed",
        machine_outcome="failed",
        verdict_source="human",
        assertions=[rec["assertions"][0], {**rubric, "machine_passed": False}],
    )
    assert machine_verdict(labelled, 1).passed is False
    assert machine_verdict(labelled).passed is False


def test_a_comment_with_unicode_line_separators_keeps_its_line(tmp_path: Path) -> None:
    path = tmp_path / REVIEWS_FILE
    rec = record()
    comment = "one\u2028two\u2029three\x85four\rfive"
    append_review(path, label(rec, "fail", comment=comment))
    append_review(path, label(rec, "pass", 1))
    first, second = read_reviews(path)
    assert first.comment == comment and second.key.assertion == 1


def test_the_last_line_wins_and_clear_takes_a_label_back(tmp_path: Path) -> None:
    rec = record()
    path = tmp_path / REVIEWS_FILE
    append_review(path, label(rec, "fail"))
    append_review(path, label(rec, "pass", comment="fine on reflection"))
    append_review(path, label(rec, "unsure", assertion=1))
    labels = load_labels([path])
    assert labels.for_record(rec) is not None
    assert labels.for_record(rec).label == "pass"  # type: ignore[union-attr]
    assert labels.for_record(rec, 1).label == "unsure"  # type: ignore[union-attr]
    append_review(path, label(rec, "clear"))
    assert load_labels([path]).for_record(rec) is None
    assert len(read_reviews(path)) == 4


def test_a_changed_answer_drops_its_label_as_stale(tmp_path: Path) -> None:
    rec = record()
    labels = current_labels([label(rec, "pass")])
    changed = record(response="Something else.")
    assert labels.for_record(changed) is None
    assert labels.stale([changed]) == 1 and labels.stale([rec]) == 0


def test_the_shared_folder_is_read_after_the_runs_own(tmp_path: Path) -> None:
    run, shared = tmp_path / "run", tmp_path / "shared"
    rec = record()
    append_review(run / REVIEWS_FILE, label(rec, "fail"))
    append_review(shared / REVIEWS_FILE, label(rec, "pass"))
    paths = review_paths(run, shared)
    assert paths == [run / REVIEWS_FILE, shared / REVIEWS_FILE]
    assert load_labels(paths).for_record(rec).label == "pass"  # type: ignore[union-attr]
    assert load_labels(review_paths(None, None)).current == {}


def test_a_line_round_trips(tmp_path: Path) -> None:
    rec = record()
    review = label(rec, "fail", 1, comment="wrong: «no»", reviewer="ana", at="2026-11-29T10:00Z")
    path = tmp_path / REVIEWS_FILE
    append_review(path, review)
    (back,) = read_reviews(path)
    assert back == review and back.source == f"{path}:1"


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"case": "c", "model": "m", "answer": "d", "label": "maybe"}', "label 'maybe'"),
        ('{"case": "c", "model": "m", "label": "pass"}', "field 'answer' is missing"),
        ('{"case": "c", "model": "m", "answer": "d", "label": "pass", "repeat": -1}', "repeat"),
        ('{"case": "c", "model": "m", "answer": "d", "label": "pass", "assertion": "1"}', "index"),
        ('{"case": "", "model": "m", "answer": "d", "label": "pass"}', "must not be empty"),
        ('{"case": "c", "model": 3, "answer": "d", "label": "pass"}', "model must be text"),
        (
            '{"case": "c", "model": "m", "answer": "d", "label": "pass", "machine": {"passed": 1}}',
            "machine.passed",
        ),
    ],
)
def test_a_broken_line_is_named_by_file_and_line(tmp_path: Path, line: str, why: str) -> None:
    path = tmp_path / REVIEWS_FILE
    append_review(path, label(record(), "pass"))
    with path.open("a", encoding="utf-8") as stream:
        stream.write("\n" + line + "\n")
    with pytest.raises(ReviewsError) as caught:
        read_reviews(path)
    assert str(caught.value).startswith(f"{path}:3: ")  # line 2 is blank and skipped
    assert why in str(caught.value)


def test_an_append_after_a_hand_edit_without_newline_keeps_its_own_line(tmp_path: Path) -> None:
    path = tmp_path / REVIEWS_FILE
    rec = record()
    path.write_text(json.dumps(label(rec, "fail").to_line()), encoding="utf-8")  # no newline
    append_review(path, label(rec, "pass"))
    assert [r.label for r in read_reviews(path)] == ["fail", "pass"]


def test_appends_at_once_from_threads_lose_no_line(tmp_path: Path) -> None:
    path = tmp_path / REVIEWS_FILE
    comment = "x" * 5000  # longer than a pipe buffer: whole lines need the lock, not luck

    def write(worker: int) -> None:
        for repeat in range(100):
            rec = record(model=f"m{worker}", repeat=repeat)
            append_review(path, label(rec, "pass", comment=comment))

    threads = [threading.Thread(target=write, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    reviews = read_reviews(path)
    assert len(reviews) == 300
    assert len(load_labels([path])) == 300
