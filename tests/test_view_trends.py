"""The Trends page of `llmbench view`: series drawn as SVG, flip histories, filters, skipped
folders, escaping; in process on hand-built trends, and through the viewer on real runs."""

from __future__ import annotations

import re
from dataclasses import replace

from pytest_llmbench.results.trend import (
    CaseHistory,
    Drift,
    RunPoint,
    Series,
    SkippedFolder,
    TrendReport,
)
from pytest_llmbench.view.trends import trends_page

RUNS = ("r1", "r2", "r3", "r4")
STEADY = Drift("page-hinkley", False, None, None, None, 0.4, 5.0)
DOWN = Drift("page-hinkley", True, "down", "r4", "r2", 6.5, 5.0)


def point(run: str, passed: int, n: int = 10, *, marks: tuple[str, ...] = (),
          commit: str = "abc1234def9") -> RunPoint:  # fmt: skip
    rate = passed / n
    return RunPoint(run, f"2026-11-2{RUNS.index(run)}T10:00:00Z", commit, ("fake-model",), n,
                    passed, rate, max(rate - 0.2, 0.0), min(rate + 0.2, 1.0), rate, rate - 0.1,
                    rate + 0.1, 1, 0, marks)  # fmt: skip


def hand_report() -> TrendReport:
    """Two series (fake drifting down on qa, other steady on agent) and three cases."""
    qa = Series("fake", "qa.eval.yaml", (point("r1", 9), point("r2", 9, marks=("commit",)),
                point("r3", 5, marks=("model",)), point("r4", 4)), DOWN)  # fmt: skip
    agent = Series("other", "agent.eval.yaml", tuple(point(r, 7) for r in RUNS), STEADY)
    cases = (
        CaseHistory("fake", "qa.eval.yaml", "japan", "h1",
                    (("r1", "pass"), ("r2", "pass"), ("r3", "fail"), ("r4", "fail")),
                    "failing", "r3", 1),
        CaseHistory("fake", "qa.eval.yaml", "<b>rain</b>", "h2",
                    (("r1", "pass"), ("r2", "changed"), ("r3", "pass"), ("r4", "flaky")),
                    "flaky", "r4", 1),
        CaseHistory("other", "agent.eval.yaml", "hello", "h3",
                    tuple((r, "pass") for r in RUNS), "passing", "r1", 0),
    )  # fmt: skip
    skipped = (SkippedFolder("runs/notes", "no results.jsonl: not a run"),)
    return TrendReport(RUNS, (qa, agent), cases, skipped)


def section(page: str, model: str) -> str:
    found = re.search(rf'<section class="series" data-model="{model}".*?</section>', page, re.S)
    assert found, page
    return found.group(0)


def test_a_series_is_drawn_with_one_point_per_run_its_interval_marks_and_drift() -> None:
    page = trends_page(hand_report(), {}, {})
    qa = section(page, "fake")
    assert re.findall(r'<circle class="point" data-run="(\w+)"', qa) == list(RUNS)
    assert qa.count('<line class="ci"') == 4
    assert re.findall(r'class="mark mark-(\w+)" data-run="(\w+)"', qa) == [
        ("commit", "r2"),
        ("model", "r3"),
    ]
    assert re.findall(r'<circle class="drift-at" data-run="(\w+)"', qa) == ["r4"]
    assert "drift down since r2, detected at r4" in qa
    assert "no drift" in section(page, "other") and "drift-at" not in section(page, "other")
    # the table: newest first, with the interval, score and what was left out
    rows = re.findall(r'<tr data-run="(\w+)">(.*?)</tr>', qa)
    assert [run for run, _ in rows] == ["r4", "r3", "r2", "r1"]
    assert "<td>40.0% [20.0%, 60.0%]</td><td>0.400 [0.300, 0.500]</td><td>1</td>" in rows[0][1]
    assert "<td>abc1234def</td>" in rows[0][1] and "<td>model</td>" in rows[1][1]


def test_failing_and_flaky_cases_show_since_when_with_a_cell_per_run() -> None:
    page = trends_page(hand_report(), {}, {"r3": "0/r3"})
    cases = re.search(r'<table class="cases".*?</table>', page, re.S)
    assert cases, page
    rows = dict(re.findall(r'<tr data-case="([^"]+)" class="\w+">(.*?)</tr>', cases.group(0)))
    assert set(rows) == {"japan", "&lt;b&gt;rain&lt;/b&gt;"}  # the passing case is not listed
    assert 'failing since <a href="/run/0/r3">r3</a>' in rows["japan"]
    assert "flaky since r4" in rows["&lt;b&gt;rain&lt;/b&gt;"]  # r4 is not under the roots
    cells = re.findall(
        r'<span class="cell (\w+)" data-run="(\w+)"', rows["&lt;b&gt;rain&lt;/b&gt;"]
    )
    assert cells == [("pass", "r1"), ("changed", "r2"), ("pass", "r3"), ("flaky", "r4")]
    assert "<b>rain</b>" not in page  # a case id is user data
    everything = trends_page(hand_report(), {"cases": "all"}, {})
    assert 'data-case="hello"' in everything


def test_filters_by_model_and_eval_file_keep_the_chosen_series_and_cases() -> None:
    report = hand_report()
    page = trends_page(report, {"model": "other"}, {})
    assert 'data-model="other"' in page and 'data-model="fake"' not in page
    assert "1 of 2 series, 4 runs" in page
    assert 'id="no-cases"' in page  # other's only case passes
    assert '<option value="other" selected>' in page
    page = trends_page(report, {"file": "qa.eval.yaml", "cases": "flips"}, {})
    assert 'data-file="qa.eval.yaml"' in page and 'data-file="agent.eval.yaml"' not in page
    assert 'data-case="japan"' in page
    nothing = trends_page(report, {"model": "fake", "file": "agent.eval.yaml"}, {})
    assert "0 of 2 series" in nothing and "<svg" not in nothing


def test_skipped_folders_are_listed_with_why_and_user_strings_are_escaped() -> None:
    report = hand_report()
    hostile = replace(report.series[0], eval_file='<img src=x onerror="alert(1)">.eval.yaml')
    page = trends_page(replace(report, series=(hostile,)), {}, {})
    assert "<img" not in page and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    skipped = re.search(r'<table class="skipped".*?</table>', page, re.S)
    assert skipped and "runs/notes" in skipped.group(0) and "not a run" in skipped.group(0)
    empty = trends_page(TrendReport((), (), (), ()), {}, {})
    assert "No finished runs here yet" in empty and 'id="skipped"' not in empty
