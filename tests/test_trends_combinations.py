"""``llmbench trend`` combined with the other ways a run folder comes to be: shards merged with
``llmbench merge``, people's labels given before (and after) a run is indexed, a run completed in
place by ``--retry-errors``, and a second model added in a later run. Each test makes real runs
against the fake server and reads the trend (``--json``) and its index."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest
from conftest import Bench, Rule

from pytest_llmbench.cli import main
from pytest_llmbench.results.reviews import Review, answer_digest, append_review, review_key
from pytest_llmbench.results_folder import REVIEWS_FILE, TREND_FILE

pytestmark = pytest.mark.slow

CAPITALS = """
cases:
  - {id: france, prompt: "Capital of France?", expected: Paris, assert: [contains]}
  - {id: japan, prompt: "Capital of Japan?", expected: Tokyo, assert: [contains]}
  - {id: italy, prompt: "Capital of Italy?", expected: Rome, assert: [contains]}
  - {id: spain, prompt: "Capital of Spain?", expected: Madrid, assert: [contains]}
"""
FILE = "capitals.eval.yaml"


def _answers(bench: Bench, *, outage: tuple[str, ...] = ()) -> None:
    """Japan is answered wrong (Kyoto); the countries in ``outage`` get a 500."""
    bench.server.reset()
    for word in outage:
        bench.server.add_rule(Rule(match=word, status=500, error_message="overloaded"))
    for word, reply in (("France", "Paris"), ("Japan", "Kyoto"), ("Italy", "Rome"),
                        ("Spain", "Madrid")):  # fmt: skip
        bench.server.add_rule(Rule(match=word, reply=reply))


def _run(bench: Bench, folder: str, *args: str) -> pytest.RunResult:
    return bench.pytester.runpytest("-p", "no:cacheprovider", f"--results-dir={folder}", *args)


def _records(folder: Path) -> list[dict[str, Any]]:
    lines = (folder / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _label(folder: Path, record: dict[str, Any], label: str) -> None:
    review = Review(
        key=review_key(record, None),
        answer=answer_digest(record),
        label=label,
        comment="checked by hand",
        reviewer="ana",
        at="2026-11-29T10:00:00+00:00",
    )
    append_review(folder / REVIEWS_FILE, review)


def _trend(capsys: pytest.CaptureFixture[str], *argv: Any) -> dict[str, Any]:
    capsys.readouterr()
    code = main(["trend", *(str(arg) for arg in argv), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    report: dict[str, Any] = json.loads(out)
    return report


def _index(runs: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (runs / TREND_FILE).read_text().splitlines()]


def _series(report: dict[str, Any], model: str) -> list[dict[str, Any]]:
    (series,) = [s for s in report["series"] if s["model"] == model and s["eval_file"] == FILE]
    points: list[dict[str, Any]] = series["points"]
    return points


def _verdicts(report: dict[str, Any], model: str, case: str) -> list[tuple[str, str]]:
    (history,) = [c for c in report["cases"] if (c["model"], c["case_id"]) == (model, case)]
    return [(run, verdict) for run, verdict in history["verdicts"]]


def test_merged_shards_are_one_run_and_labels_count_when_given_before_indexing(
    bench: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    """A whole run (runs/full), then the same suite as two shards (kept outside the runs folder)
    merged with ``llmbench merge`` into runs/merged, where a person passes japan (Kyoto) before
    the first trend. The index holds two runs, the merged one with each case once; its japan is
    the person's pass, the whole run's the machine's fail. A label given on the whole run after
    it was indexed does not reach the index (lines are never rewritten) until a fresh index is
    built from the folders."""
    bench.eval_file("capitals", CAPITALS)
    _answers(bench)
    root = bench.pytester.path
    runs = root / "runs"
    assert _run(bench, "runs/full", "--models=fake").ret == 1
    _run(bench, "shards/s1", "--models=fake", "--shard=1/2")
    _run(bench, "shards/s2", "--models=fake", "--shard=2/2")
    halves = [{r["case_id"] for r in _records(root / "shards" / s)} for s in ("s1", "s2")]
    assert halves[0] and halves[1] and halves[0].isdisjoint(halves[1])
    code = main(["merge", str(root / "shards" / "s1"), str(root / "shards" / "s2"),
                 "-o", str(runs / "merged")])  # fmt: skip
    assert code == 1  # japan fails the machine
    merged = {r["case_id"]: r for r in _records(runs / "merged")}
    _label(runs / "merged", merged["japan"], "pass")

    report = _trend(capsys, runs)
    index = _index(runs)
    assert [entry["run"] for entry in index] == ["full", "merged"] == report["runs"]
    items = {entry["run"]: entry["items"] for entry in index}
    assert sorted(item["case_id"] for item in items["merged"]) == sorted(merged)
    outcomes = {e["run"]: {i["case_id"]: i["outcome"] for i in e["items"]} for e in index}
    assert outcomes["merged"]["japan"] == "passed" and outcomes["full"]["japan"] == "failed"
    points = _series(report, "fake")
    assert [(p["run_id"], p["n"], p["passed"], p["left_out"]) for p in points] == [
        ("full", 4, 3, 0),
        ("merged", 4, 4, 0),
    ]
    assert _verdicts(report, "fake", "japan") == [("full", "fail"), ("merged", "pass")]
    assert report["skipped"] == []

    full = {r["case_id"]: r for r in _records(runs / "full")}
    _label(runs / "full", full["italy"], "fail")
    again = _trend(capsys, runs)
    assert len(_index(runs)) == 2  # nothing appended, nothing rewritten
    assert _verdicts(again, "fake", "italy") == [("full", "pass"), ("merged", "pass")]
    fresh = _trend(capsys, runs, "--index", root / "fresh" / TREND_FILE)
    assert _verdicts(fresh, "fake", "italy") == [("full", "fail"), ("merged", "pass")]
    assert [p["passed"] for p in _series(fresh, "fake")] == [2, 4]


def test_a_run_completed_by_retry_errors_is_indexed_once_and_a_model_added_later_starts_then(
    bench: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    """r1 (model fake) meets an outage on Spain and is completed in place with --retry-errors;
    r2 adds the model fake2. The index holds r1 once, as completed (Spain passed, no error),
    and r2; fake's series has both runs, fake2's only r2, its cases' histories starting there.
    A second trend appends nothing."""
    bench.eval_file("capitals", CAPITALS)
    root = bench.pytester.path
    runs = root / "runs"
    _answers(bench, outage=("Spain",))
    _run(bench, "runs/r1", "--models=fake", "--max-retries=0")
    assert {r["case_id"]: r["outcome"] for r in _records(runs / "r1")}["spain"] == "error"
    _answers(bench)
    retried = _run(bench, "runs/r1", "--models=fake", "--max-retries=0", "--retry-errors=runs/r1")
    retried.stdout.fnmatch_lines(["*completed in place: 1 errored records replaced*"])
    _run(bench, "runs/r2", "--models=fake,fake2")

    report = _trend(capsys, runs)
    index = _index(runs)
    assert [entry["run"] for entry in index] == ["r1", "r2"]
    r1 = {item["case_id"]: item["outcome"] for item in index[0]["items"]}
    assert r1 == {"france": "passed", "japan": "failed", "italy": "passed", "spain": "passed"}
    assert sorted({item["model"] for item in index[1]["items"]}) == ["fake", "fake2"]
    fake = _series(report, "fake")
    assert [(p["run_id"], p["n"], p["passed"], p["errors"]) for p in fake] == [
        ("r1", 4, 3, 0),
        ("r2", 4, 3, 0),
    ]
    assert fake[1]["marks"] == []  # the same model id: no model mark
    (only,) = _series(report, "fake2")
    assert (only["run_id"], only["n"], only["passed"], only["model_versions"]) == (
        "r2",
        4,
        3,
        ["fake-model-2"],  # the version the server said it served (it echoes the request's)
    )
    assert _verdicts(report, "fake2", "japan") == [("r2", "fail")]
    assert _verdicts(report, "fake", "spain") == [("r1", "pass"), ("r2", "pass")]
    (japan2,) = [c for c in report["cases"] if (c["model"], c["case_id"]) == ("fake2", "japan")]
    assert (japan2["state"], japan2["since"], japan2["flips"]) == ("failing", "r2", 0)
    assert report["skipped"] == []
    _trend(capsys, runs)
    assert len(_index(runs)) == 2
