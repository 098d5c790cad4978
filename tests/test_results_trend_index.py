"""trend.jsonl: the append-only index of the runs under a runs folder."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_llmbench.results import build_trend, read_index, update_index
from pytest_llmbench.results.record import build_record
from pytest_llmbench.results_folder import ResultsError


def _record(case: str, passed: bool, **extra: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "nodeid": f"qa.eval.yaml::{case}[m-r0]",
        "suite": "qa",
        "eval_file": "qa.eval.yaml",
        "case_id": case,
        "case_hash": f"h-{case}",
        "model": "m",
        "model_id": "openai/m",
        "repeat": 0,
        "outcome": "passed" if passed else "failed",
        "score": 1.0 if passed else 0.0,
        "threshold": 1.0,
    }
    values.update(extra)
    return build_record(**values)


def _run(
    folder: Path,
    started_at: str | None,
    records: list[dict[str, Any]],
    commit: str | None = "abc123",
) -> Path:
    folder.mkdir(parents=True)
    text = "".join(json.dumps(record) + "\n" for record in records)
    (folder / "results.jsonl").write_text(text, encoding="utf-8")
    if started_at is not None:
        info = {"started_at": started_at, "source": {"git": {"commit": commit, "dirty": False}}}
        (folder / "run.json").write_text(json.dumps(info), encoding="utf-8")
    return folder


def test_runs_several_levels_deep_are_indexed_oldest_first_with_their_facts(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    late = [_record("x", False, response_model="m-2026-10-01")]
    _run(runs / "b" / "llmbench-results" / "late", "2026-11-02T00:00:00Z", late)
    _run(runs / "a-early", "2026-11-01T00:00:00Z", [_record("x", True)], commit=None)
    index = tmp_path / "cache" / "trend.jsonl"
    update = update_index([runs], index)
    assert update.added == ("a-early", "late")
    lines = [json.loads(line) for line in index.read_text().splitlines()]
    assert [line["run"] for line in lines] == ["a-early", "late"]
    assert lines[0]["commit"] is None and lines[1]["commit"] == "abc123"
    assert lines[1]["folder"] == str(runs / "b" / "llmbench-results" / "late")
    assert lines[1]["items"] == [
        {"eval_file": "qa.eval.yaml", "suite": "qa", "model": "m", "model_id": "openai/m",
         "response_model": "m-2026-10-01", "case_id": "x", "case_hash": "h-x", "repeat": 0,
         "outcome": "failed", "score": 0.0}
    ]  # fmt: skip
    assert lines[0]["items"][0]["response_model"] is None  # the provider named no version
    assert update.skipped == ()


def test_a_second_update_appends_only_new_runs_and_keeps_the_lines_as_they_were(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    _run(runs / "one", "2026-11-01T00:00:00Z", [_record("x", True)])
    index = runs / "trend.jsonl"
    update_index([runs], index)
    before = index.read_text()
    assert update_index([runs], index).added == ()
    assert index.read_text() == before
    _run(runs / "two", "2026-11-02T00:00:00Z", [_record("x", False)])
    update = update_index([runs], index)
    assert update.added == ("two",)
    assert index.read_text().startswith(before)
    assert [entry["run"] for entry in update.entries] == ["one", "two"]


def test_an_unfinished_run_is_listed_then_indexed_once_it_has_finished(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    live = _run(runs / "live", None, [_record("x", True)])
    index = runs / "trend.jsonl"
    update = update_index([runs], index)
    assert update.added == ()
    assert [(s.path, s.reason.split(":")[0]) for s in update.skipped] == [(str(live), "unfinished")]
    (live / "run.json").write_text(json.dumps({"started_at": "2026-11-03T00:00:00Z"}))
    assert update_index([runs], index).added == ("live",)


def test_broken_and_foreign_folders_are_listed_with_why_and_the_rest_indexed(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    _run(runs / "good", "2026-11-01T00:00:00Z", [_record("x", True)])
    bad_line = _run(runs / "bad-line", "2026-11-02T00:00:00Z", [_record("x", True)])
    with open(bad_line / "results.jsonl", "a", encoding="utf-8") as stream:
        stream.write("{not json\n")
    bad_info = _run(runs / "bad-info", None, [_record("x", True)])
    (bad_info / "run.json").write_text("[1, 2")
    orphan = runs / "orphan"
    orphan.mkdir()
    (orphan / "run.json").write_text("{}")
    foreign = runs / "photos" / "2025"
    foreign.mkdir(parents=True)
    (foreign / "cat.jpg").write_bytes(b"\xff\xd8")
    (runs / ".hidden").mkdir()
    update = update_index([runs], runs / "trend.jsonl")
    assert update.added == ("good",)
    reasons = {Path(skipped.path).name: skipped.reason for skipped in update.skipped}
    assert set(reasons) == {"bad-line", "bad-info", "orphan", "photos"}
    assert (
        reasons["bad-line"].startswith("broken: ")
        and "results.jsonl:2: not valid JSON" in reasons["bad-line"]
    )
    assert (
        reasons["bad-info"].startswith("broken: ")
        and "run.json: not a JSON file" in reasons["bad-info"]
    )
    assert reasons["orphan"] == "broken: run.json without results.jsonl"
    assert reasons["photos"].startswith("foreign: ")


def test_people_s_labels_in_the_run_s_folder_decide_the_indexed_verdict(tmp_path: Path) -> None:
    from pytest_llmbench.results import Review, answer_digest, append_review, review_key

    runs = tmp_path / "runs"
    record = _record("x", False, response="Lyon")
    folder = _run(runs / "one", "2026-11-01T00:00:00Z", [record])
    label = Review(review_key(record), answer_digest(record), "pass", reviewer="ann")
    append_review(folder / "reviews.jsonl", label)
    (entry,) = update_index([runs], tmp_path / "with.jsonl").entries
    assert entry["items"][0]["outcome"] == "passed"
    (entry,) = update_index([runs], tmp_path / "without.jsonl", ignore_reviews=True).entries
    assert entry["items"][0]["outcome"] == "failed"


def test_the_index_alone_gives_the_trend_once_the_runs_are_gone(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for day, passed in ((1, True), (2, False)):
        _run(runs / f"r{day}", f"2026-11-0{day}T00:00:00Z", [_record("x", passed)])
    index = tmp_path / "trend.jsonl"
    first = build_trend(update_index([runs], index).entries)
    for day in (1, 2):
        for path in (runs / f"r{day}").iterdir():
            path.unlink()
        (runs / f"r{day}").rmdir()
    again = build_trend(read_index(index))
    assert again == first
    assert [case.verdicts for case in again.cases] == [(("r1", "pass"), ("r2", "fail"))]


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("{broken", "not valid JSON"),
        ("[1]", "not a JSON object"),
        ('{"run": "a", "started_at": "x"}', "not a trend entry (no items)"),
        (
            '{"run": "a", "started_at": "x", "items": [1]}',
            "not a trend entry (items is no list of objects)",
        ),
    ],
)
def test_a_broken_index_line_is_an_error_naming_index_and_line(
    tmp_path: Path, line: str, why: str
) -> None:
    index = tmp_path / "trend.jsonl"
    good = json.dumps({"run": "a", "started_at": "2026", "commit": None, "items": []})
    index.write_text(f"{good}\n\n{line}\n")
    with pytest.raises(ResultsError, match=f"^{re.escape(str(index))}:3: {re.escape(why)}"):
        read_index(index)
    with pytest.raises(ResultsError, match=":3: "):
        update_index([tmp_path], index)  # nothing is appended to an index that cannot be read
    assert index.read_text() == f"{good}\n\n{line}\n"


@pytest.mark.parametrize(
    "cut", ['{"run": "cut', '{"run": "caf\u00e9'.encode()[:-1].decode("latin-1")]
)
def test_an_unfinished_last_line_is_passed_over_and_cut_off_before_appending(
    tmp_path: Path, cut: str
) -> None:
    runs = tmp_path / "runs"
    _run(runs / "one", "2026-11-01T00:00:00Z", [_record("x", True)])
    index = tmp_path / "trend.jsonl"
    good = json.dumps({"run": "old", "started_at": "2026-10-01", "commit": None, "items": []})
    index.write_bytes((good + "\n").encode() + cut.encode("latin-1"))  # an interrupted append
    passed: list[Any] = []
    assert [entry["run"] for entry in read_index(index, passed)] == ["old"]
    assert [(s.path, s.reason) for s in passed] == [
        (f"{index}:2", "an unfinished last line (an append cut short): passed over")
    ]
    update = update_index([runs], index)
    assert update.added == ("one",)
    lines = index.read_text().splitlines()
    assert lines[0] == good and [json.loads(line)["run"] for line in lines] == ["old", "one"]
    assert [(s.path, s.reason.split(": ")[-1]) for s in update.skipped] == [
        (f"{index}:2", "cut off before appending")
    ]


def test_a_broken_line_before_an_unfinished_last_line_is_still_an_error(tmp_path: Path) -> None:
    index = tmp_path / "trend.jsonl"
    good = json.dumps({"run": "old", "started_at": "2026-10-01", "commit": None, "items": []})
    index.write_text(f"{good}\n{{broken\n{good[:20]}")
    with pytest.raises(ResultsError, match=f"^{re.escape(str(index))}:2: not valid JSON"):
        read_index(index)


def test_a_whole_last_line_without_its_newline_is_read_and_kept_on_its_own_line(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    _run(runs / "one", "2026-11-01T00:00:00Z", [_record("x", True)])
    index = tmp_path / "trend.jsonl"
    good = json.dumps({"run": "old", "started_at": "2026-10-01", "commit": None, "items": []})
    index.write_text(good)  # written by hand, no newline at the end
    assert update_index([runs], index).added == ("one",)
    assert [json.loads(line)["run"] for line in index.read_text().splitlines()] == ["old", "one"]


def test_an_update_appends_under_a_lock_and_only_what_another_did_not_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two updates at once: the other one appends the same run between this one's scan and its
    append; this one reads the index again under its lock and appends nothing twice."""
    import fcntl
    import os

    from pytest_llmbench.results import trend_index

    runs = tmp_path / "runs"
    _run(runs / "one", "2026-11-01T00:00:00Z", [_record("x", True)])
    index = tmp_path / "trend.jsonl"
    scan, read = trend_index.scan_runs, trend_index._entries
    locked: list[bool] = []

    def scan_then_the_other_appends(*args: Any, **kwargs: Any) -> Any:
        update = scan(*args, **kwargs)
        with open(index, "a", encoding="utf-8") as stream:
            stream.write(json.dumps(update.entries[-1]) + "\n")
        return update

    def read_noting_the_lock(path: Path, data: bytes) -> Any:
        fd = os.open(index, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            locked.append(True)
        else:
            locked.append(False)
        finally:
            os.close(fd)
        return read(path, data)

    monkeypatch.setattr(trend_index, "scan_runs", scan_then_the_other_appends)
    monkeypatch.setattr(trend_index, "_entries", read_noting_the_lock)
    update = update_index([runs], index)
    assert update.added == ()
    assert [entry["run"] for entry in update.entries] == ["one"]
    assert len(index.read_text().splitlines()) == 1
    assert locked == [True]  # the read before the append holds the index's lock


def test_duplicate_lines_of_an_index_count_once(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for day, passed in ((1, True), (2, False)):
        _run(runs / f"r{day}", f"2026-11-0{day}T00:00:00Z", [_record("x", passed)])
    index = tmp_path / "trend.jsonl"
    update_index([runs], index)
    lines = index.read_text().splitlines()
    index.write_text("\n".join([*lines, lines[1], lines[0]]) + "\n")  # a copy merged by hand
    report = build_trend(read_index(index))
    assert report.runs == ("r1", "r2")
    assert [point.run_id for point in report.series[0].points] == ["r1", "r2"]
    assert [case.verdicts for case in report.cases] == [(("r1", "pass"), ("r2", "fail"))]


def test_the_viewer_counts_an_index_s_duplicates_once_as_the_trend_does(tmp_path: Path) -> None:
    from pytest_llmbench.view.trend_source import read_trend

    runs = tmp_path / "runs"
    _run(runs / "r1", "2026-11-01T00:00:00Z", [_record("x", True)])
    index = runs / "trend.jsonl"
    update_index([runs], index)
    index.write_text(index.read_text() * 2)
    report, links, note = read_trend([runs], None)
    assert links == {"r1": "0/r1"}
    assert report.runs == ("r1",) and len(report.series[0].points) == 1
    assert note.startswith("1 finished runs") and ", 1 of them from" in note


def test_a_run_completed_in_place_is_indexed_again_and_its_newer_entry_counts(
    tmp_path: Path,
) -> None:
    """`llmbench retry-errors` swaps the completed run into the same folder, with the same
    started_at, a new finished_at and one more retry."""
    from pytest_llmbench.results.retry_errors import RETRIES_KEY

    runs = tmp_path / "runs"
    folder = _run(runs / "one", "2026-11-01T00:00:00Z", [_record("x", False, outcome="error")])
    info = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**info, "finished_at": "2026-11-01T01:00:00Z"}))
    index = runs / "trend.jsonl"
    assert update_index([runs], index).added == ("one",)
    (folder / "results.jsonl").write_text(json.dumps(_record("x", True)) + "\n")
    retried = {**info, "finished_at": "2026-11-02T09:00:00Z", RETRIES_KEY: [{"items": 1}]}
    (folder / "run.json").write_text(json.dumps(retried))
    update = update_index([runs], index)
    assert update.added == ("one",)
    assert len(index.read_text().splitlines()) == 2
    assert update_index([runs], index).added == ()  # indexed once per completion
    # a second retry finishing within the same second is a new completion too
    (folder / "run.json").write_text(json.dumps({**retried, RETRIES_KEY: [{}, {}]}))
    assert update_index([runs], index).added == ("one",)
    for entries in (update.entries, update.entries[::-1]):  # the later finish wins, in any order
        report = build_trend(entries)
        assert report.runs == ("one",)
        assert [case.verdicts for case in report.cases] == [(("one", "pass"),)]
        assert report.series[0].points[0].errors == 0


def test_shards_are_passed_over_and_their_merge_indexed(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    shards = []
    for index, case in ((1, "x"), (2, "y")):
        shard = _run(runs / "shard-results" / f"shard-{index}", "2026-11-01T00:00:00Z",
                     [_record(case, True)])  # fmt: skip
        info = json.loads((shard / "run.json").read_text())
        info["config"] = {"shard": {"index": index, "count": 2, "split": {}}}
        (shard / "run.json").write_text(json.dumps(info))
        shards.append(shard)
    merged = _run(runs / "merged", "2026-11-01T00:00:00Z", [_record("x", True), _record("y", True)])
    info = json.loads((merged / "run.json").read_text())
    info.update(config={"models": ["m"]}, merged_from=[{"folder": str(s)} for s in shards])
    (merged / "run.json").write_text(json.dumps(info))
    update = update_index([runs], runs / "trend.jsonl")
    assert update.added == ("merged",)
    assert [(s.path, s.reason.split(":")[0]) for s in update.skipped] == [
        (str(shard), "a shard") for shard in shards
    ]
    (point,) = build_trend(update.entries).series[0].points
    assert (point.n, point.passed) == (2, 2)


def test_an_indexed_run_is_not_read_again(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    folder = _run(runs / "one", "2026-11-01T00:00:00Z", [_record("x", True)])
    index = runs / "trend.jsonl"
    update_index([runs], index)
    (folder / "results.jsonl").write_text("{damaged later\n")
    update = update_index([runs], index)
    assert (update.added, update.skipped) == ((), ())
    assert update.entries[0]["items"][0]["outcome"] == "passed"


def test_scanning_runs_writes_no_index_and_gives_the_same_entries(tmp_path: Path) -> None:
    from pytest_llmbench.results import scan_runs

    runs = tmp_path / "runs"
    _run(runs / "one", "2026-11-01T00:00:00Z", [_record("x", True)])
    (runs / "junk").mkdir()
    scanned = scan_runs([runs])
    assert not (runs / "trend.jsonl").exists()
    assert scanned == update_index([runs], runs / "trend.jsonl")
    assert [Path(s.path).name for s in scanned.skipped] == ["junk"]
