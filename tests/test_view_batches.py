"""Batched answers in `llmbench view` and the pytest-html rows (view/pages.py,
report/html_columns.py): an item's facts say it was batched and show no latency; a live run's
page shows progress.json's ``batches`` block; every value from the files is escaped."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pytest_llmbench.report.html_columns import _cell_value, batch_note, render_extra
from pytest_llmbench.results.record import build_record
from pytest_llmbench.results_folder import ResultsFolder
from pytest_llmbench.view.pages import batches_table, item_page, run_page
from pytest_llmbench.view.runs import Run, load_run

BATCHES = {
    "submitted": 3,
    "in_progress": 1,
    "done": 1,
    "failed": 1,
    "items_written": 1200,
    "lines": 1500,
    "oldest_created_at": 1_795_975_200.0,  # 2026-11-29 18:00:00 UTC
}


def _record(**fields: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "nodeid": "qa.eval.yaml::france[fake-r0]",
        "suite": "qa",
        "case_id": "france",
        "model": "fake",
        "outcome": "passed",
        "score": 1.0,
        "response": "Paris",
        "cost_usd": 0.000135,
    }
    return build_record(**{**values, **fields})


BATCHED = {"batched": True, "batch_id": "batch_<b>&1", "batch_wait_s": 5400.4}


def _run(tmp_path: Path, progress: dict[str, Any] | None, finished: bool = False) -> Run:
    folder = ResultsFolder(tmp_path)
    folder.write_records([_record(**BATCHED), _record(case_id="japan", latency_s=1.5)])
    if progress is not None:
        (tmp_path / "progress.json").write_text(json.dumps(progress))
    if finished:
        (tmp_path / "run.json").write_text(json.dumps({"exitstatus": 0}))
    return load_run([tmp_path], "0/")


def test_the_item_page_says_batched_with_its_batch_and_no_latency(tmp_path: Path) -> None:
    run = _run(tmp_path, None)
    stale = _record(**BATCHED, latency_s=5400.0, ttft_s=5400.0)  # timings a writer left
    page = item_page(run, stale)
    assert (
        "<tr><th>answered</th><td>batched (batch batch_&lt;b&gt;&amp;1, waited 5400 s)</td></tr>"
        in page
    )
    assert "<th>latency_s</th>" not in page and "<th>ttft_s</th>" not in page
    assert "batch_<b>" not in page
    live = item_page(run, _record(latency_s=1.5, ttft_s=0.2))
    assert "<th>latency_s</th><td>1.5</td>" in live and "batched" not in live


def test_a_live_runs_page_shows_the_batches_block(tmp_path: Path) -> None:
    progress = {"pid": os.getpid(), "line": "llmbench: waiting on 1 batch", "batches": BATCHES}
    run = _run(tmp_path, progress)
    assert run.status == "running"
    page = run_page(run, {})
    assert '<table class="batches" id="batches">' in page
    cells = "<td>3</td><td>1</td><td>1</td><td>1</td><td>1500</td><td>1200</td>"
    assert f"<tr>{cells}<td>2026-11-29 18:00:00 UTC</td></tr></table>" in page
    assert "<th>batches submitted</th>" in page and "<th>answers read</th>" in page


def test_the_batches_block_is_absent_without_batches_or_once_the_run_finished(
    tmp_path: Path,
) -> None:
    plain = {"pid": os.getpid(), "line": "llmbench: 1/2 items"}
    assert 'id="batches"' not in run_page(_run(tmp_path / "a", plain), {})
    done = {"pid": os.getpid(), "batches": BATCHES}
    finished = _run(tmp_path / "b", done, finished=True)
    assert finished.status == "finished" and 'id="batches"' not in run_page(finished, {})


def test_the_batches_block_escapes_what_progress_json_holds() -> None:
    html = batches_table({"submitted": "<script>alert(1)</script>", "oldest_created_at": None})
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<td>-</td>" in html  # a count the engine did not write, and no oldest batch
    assert batches_table(None) == "" and batches_table(["not", "a", "block"]) == ""


def test_pytest_html_rows_say_batched_instead_of_a_latency() -> None:
    batched, live = _record(**BATCHED), _record(latency_s=1.5)
    assert _cell_value(batched, "latency_s", "{:.2f}") == "batched"
    assert _cell_value(live, "latency_s", "{:.2f}") == "1.50"
    extra = render_extra(batched)
    assert (
        '<p class="llmbench-batched">batched (batch batch_&lt;b&gt;&amp;1, waited 5400 s)</p>'
        in extra
    )
    assert "llmbench-batched" not in render_extra(live)
    assert batch_note({"batched": True}) == "batched (batch unknown)"
