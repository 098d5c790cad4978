"""The results folder's one owner: its file names, one reader and one writer of each file.

What a run writes is read back by the same code that `llmbench merge`, the baseline, the report
and the viewer use; a folder that is none, a broken line and a half-written line are told apart.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Bench, Rule

from pytest_llmbench.results.baseline import load_results
from pytest_llmbench.results_folder import (
    FILE_NAMES,
    PROGRESS_FILE,
    RESULTS_FILE,
    RUN_FILE,
    ResultsError,
    ResultsFolder,
)
from pytest_llmbench.view.runs import load_run

RECORD = {"schema": 2, "suite": "s", "case_id": "c", "outcome": "passed", "answer": "é <b>"}


def test_records_written_are_read_back_as_they_were(tmp_path: Path) -> None:
    folder = ResultsFolder(tmp_path / "run")
    other = {**RECORD, "case_id": "d", "score": 0.5}
    path = folder.write_records([RECORD, other])
    assert path == tmp_path / "run" / RESULTS_FILE
    assert "é" in path.read_text(encoding="utf-8")  # as written by a run: not ASCII-escaped
    assert folder.read_records() == [RECORD, other]
    assert folder.read_records_so_far() == [RECORD, other]
    folder.write_run_info({"exitstatus": 1, "when": tmp_path})
    assert folder.read_run_info() == {"exitstatus": 1, "when": str(tmp_path)}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"suite": "s"', ":1: not valid JSON"),
        ("[1, 2]\n", ":1: not a JSON object"),
        ('{"suite": "s", "outcome": "passed"}\n', ":1: not a record (no case_id)"),
        ("\n\n", ": no records (an empty run)"),
    ],
)
def test_a_broken_results_file_is_an_error_naming_file_and_line(
    tmp_path: Path, text: str, message: str
) -> None:
    folder = ResultsFolder(tmp_path)
    folder.results.write_text(text, encoding="utf-8")
    with pytest.raises(ResultsError) as caught:
        folder.read_records()
    assert str(caught.value).startswith(f"{folder.results}{message}")


def test_a_run_still_writing_is_read_up_to_its_last_whole_line(tmp_path: Path) -> None:
    folder = ResultsFolder(tmp_path)
    line = json.dumps(RECORD)
    folder.results.write_text(f"{line}\nnot json\n[1]\n{line[:10]}", encoding="utf-8")
    assert folder.read_records_so_far() == [RECORD]
    with pytest.raises(ResultsError, match=":2: not valid JSON"):
        folder.read_records()  # the strict reader does not skip a broken line


def test_a_folder_that_is_none_is_named(tmp_path: Path) -> None:
    with pytest.raises(ResultsError) as gone:
        ResultsFolder(tmp_path / "gone").read_records()
    assert str(gone.value) == f"{tmp_path / 'gone'}: no such results folder"
    with pytest.raises(ResultsError) as empty:
        ResultsFolder(tmp_path).read_records()
    assert str(empty.value) == f"{tmp_path / RESULTS_FILE}: no such file (not a results folder?)"
    assert not ResultsFolder(tmp_path).has_results()
    assert ResultsFolder(tmp_path).read_run_info() is None
    (tmp_path / RUN_FILE).write_text("[]")
    with pytest.raises(ResultsError, match="not a JSON object"):
        ResultsFolder(tmp_path).read_run_info()
    assert ResultsFolder(tmp_path).read_json(RUN_FILE) is None  # the lenient reader


def test_the_progress_file_is_replaced_whole_and_removed(tmp_path: Path) -> None:
    folder = ResultsFolder(tmp_path)
    folder.write_progress({"pid": 1, "done": 2})
    assert folder.read_json(PROGRESS_FILE) == {"pid": 1, "done": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == [PROGRESS_FILE]  # no .tmp left
    folder.remove_progress()
    assert list(tmp_path.iterdir()) == []


def test_a_run_writes_the_files_the_owner_names_and_every_reader_agrees(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="France", reply="Paris"))
    bench.eval_file("qa", "cases:\n  - {id: fr, prompt: 'Capital of France?', expected: Paris}\n")
    out = bench.pytester.path / "out"
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=1)
    written = {p.name for p in out.iterdir() if p.is_file()}
    assert written <= set(FILE_NAMES) and {RESULTS_FILE, RUN_FILE} <= written
    assert PROGRESS_FILE not in written  # removed once the run is over
    records = load_results(out)
    assert [r["case_id"] for r in records] == ["fr"]
    assert load_run([bench.pytester.path], "0/out").records == records  # the viewer's reading
    assert ResultsFolder(out).read_run_info()["gate_inputs"] == {  # type: ignore[index]
        "exitstatus": 0,
        "other_failures": 0,
        "cut_short": False,
    }
