"""The Trends page of `llmbench view`: series drawn as SVG, flip histories, filters, skipped
folders, escaping; in process on hand-built trends, and through the viewer on real runs."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from browser import chromium_page, serving
from conftest import Bench, Rule

from pytest_llmbench.results.trend import (
    CaseHistory,
    Drift,
    RunPoint,
    Series,
    SkippedFolder,
    TrendReport,
)
from pytest_llmbench.results_folder import REVIEWS_FILE, TREND_FILE
from pytest_llmbench.view.trends import trends_page

RUNS = ("r1", "r2", "r3", "r4")
STEADY = Drift("page-hinkley", False, None, None, None, 0.4, 5.0)
DOWN = Drift("page-hinkley", True, "down", "r4", "r2", 6.5, 5.0)
STEADY_SERIES = Series("fake", "qa.eval.yaml", (), STEADY)


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


def section(page: str, model: str, eval_file: str = r"[^\"]*") -> str:
    pattern = rf'<section class="series" data-model="{model}" data-file="{eval_file}".*?</section>'
    found = re.search(pattern, page, re.S)
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
    # a run where nothing was counted (every case changed since) is a hollow mark on the axis
    nothing = replace(point("r1", 0), n=0, passed=0, pass_rate=None, pass_low=None, pass_high=None)
    drawn = trends_page(replace(hand_report(), series=(replace(STEADY_SERIES, points=(
        nothing, point("r2", 5))),)), {}, {})  # fmt: skip
    assert re.findall(r'<circle class="(\w+)" data-run="(\w+)"', drawn) == [
        ("empty", "r1"), ("point", "r2")
    ]  # fmt: skip
    assert "r1: nothing counted (n=0, 1 left out, 0 errors)" in drawn


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


# -- on real runs --------------------------------------------------------------------------------

QA = """
cases:
  - {id: france, prompt: "PROMPT", expected: Paris, assert: [contains]}
  - {id: japan, prompt: "Capital of Japan?", expected: Tokyo, assert: [contains]}
"""
MATH = """
cases:
  - {id: two, prompt: "What is 1 + 1?", expected: "2", assert: [contains]}
"""


def real_run(bench: Bench, root: Path, name: str, *, japan: str, france: str) -> None:
    """A run of fake on qa (france asked as ``france``) and math into ``root/name``."""
    bench.eval_file("qa", QA.replace("PROMPT", france))
    bench.eval_file("math", MATH)
    bench.server.reset()
    bench.server.add_rule(Rule(match="France", reply="Paris"))
    bench.server.add_rule(Rule(match="Japan", reply=japan))
    bench.server.add_rule(Rule(match="1 + 1", reply="2"))
    result = bench.pytester.runpytest(
        "-p", "no:cacheprovider", f"--results-dir={root / name}", "--models=fake"
    )  # fmt: skip
    assert (root / name / "run.json").is_file(), result.stdout.str()[-3000:]


@pytest.fixture
def three_runs(bench: Bench) -> tuple[Bench, Path]:
    """results/r1 (japan right), r2 and r3 (japan wrong; france's prompt edited since r1), and
    a folder that holds no run."""
    root = bench.pytester.path / "results"
    real_run(bench, root, "r1", japan="Tokyo", france="Capital of France?")
    for name in ("r2", "r3"):
        real_run(bench, root, name, japan="Kyoto", france="The capital of France?")
    (root / "notes").mkdir()
    (root / "notes" / "todo.txt").write_text("not a run\n")
    return bench, root


def viewer_client(bench: Bench, root: Path) -> Any:
    from starlette.testclient import TestClient

    from pytest_llmbench.view.app import ViewSettings, create_app

    settings = ViewSettings(roots=[root], project=bench.pytester.path,
                            allowed_hosts=("testserver",))  # fmt: skip
    return TestClient(create_app(settings))


def files_under(root: Path) -> dict[str, int]:
    return {
        str(path.relative_to(root)): path.stat().st_mtime_ns
        for path in root.rglob("*")
        if ".llmbench-view" not in path.parts
    }


def test_the_trends_page_draws_real_runs_and_writes_nothing(
    three_runs: tuple[Bench, Path],
) -> None:
    bench, root = three_runs
    before = files_under(root)
    with viewer_client(bench, root) as client:
        page = client.get("/trends").text
        filtered = client.get("/trends", params={"file": "math.eval.yaml"}).text
    assert files_under(root) == before and not (root / TREND_FILE).exists()
    assert '<a href="/trends">Trends</a>' in page
    qa = section(page, "fake", "qa.eval.yaml")
    assert re.findall(r'<circle class="point" data-run="(\w+)"', qa) == ["r1", "r2", "r3"]
    rows = dict(re.findall(r'<tr data-run="(\w+)">(.*?)</tr>', qa))
    assert '<a href="/run/0/r1">r1</a>' in rows["r1"]
    assert "<td>1</td><td>100.0%" in rows["r1"]  # france's old prompt is left out of r1
    assert re.search(r"<td>50\.0% \[[\d.]+%, [\d.]+%\]</td>", rows["r3"])
    assert 'failing since <a href="/run/0/r2">r2</a>' in page
    skipped = re.search(r'<table class="skipped".*?</table>', page, re.S)
    assert skipped and str(root / "notes") in skipped.group(0)
    assert 'data-file="math.eval.yaml"' in filtered and 'data-file="qa.eval.yaml"' not in filtered
    assert 'data-case="japan"' not in filtered


def test_the_versions_the_provider_served_are_shown_and_a_change_marked(bench: Bench) -> None:
    """One profile (openai/fake-model) in both runs; the provider serves another snapshot in
    r2: the model versions column shows what was served and r2 carries the model mark."""
    root = bench.pytester.path / "results"
    for name, version in (("r1", "fake-model-2026-08-06"), ("r2", "fake-model-2026-11-20")):
        bench.server.served_model = version
        real_run(bench, root, name, japan="Tokyo", france="Capital of France?")
    with viewer_client(bench, root) as client:
        page = client.get("/trends").text
    qa = section(page, "fake", "qa.eval.yaml")
    rows = dict(re.findall(r'<tr data-run="(\w+)">(.*?)</tr>', qa))
    cells = {run: re.findall(r"<td>(.*?)</td>", row) for run, row in rows.items()}
    assert cells["r1"][3] == "fake-model-2026-08-06" and cells["r1"][-1] == ""
    assert cells["r2"][3] == "fake-model-2026-11-20" and cells["r2"][-1] == "model"
    assert "openai/fake-model" not in qa  # the profile's id stands in only when none was served


def test_an_index_keeps_runs_whose_folders_are_gone_and_a_broken_one_is_named(
    three_runs: tuple[Bench, Path],
) -> None:
    from pytest_llmbench.results import update_index

    bench, root = three_runs
    update_index([root], root / TREND_FILE)
    shutil.rmtree(root / "r1")
    with viewer_client(bench, root) as client:
        page = client.get("/trends").text
        qa = section(page, "fake", "qa.eval.yaml")
        assert re.findall(r'<circle class="point" data-run="(\w+)"', qa) == ["r1", "r2", "r3"]
        assert '<tr data-run="r1"><td>r1</td>' in qa  # its folder is gone: no link
        assert f"3 of them from {root / TREND_FILE}" in page
        with open(root / TREND_FILE, "a") as index:
            index.write("{not json\n")
        page = client.get("/trends").text
    qa = section(page, "fake", "qa.eval.yaml")
    assert re.findall(r'<circle class="point" data-run="(\w+)"', qa) == ["r2", "r3"]
    assert f"{root / TREND_FILE}:4: not valid JSON" in page


@pytest.mark.slow
def test_the_trends_page_in_a_browser_filters_by_eval_file(
    three_runs: tuple[Bench, Path],
) -> None:
    bench, root = three_runs
    with serving(bench, root) as url, chromium_page() as page:
        page.goto(url)
        page.click("header >> text=Trends")
        qa = page.locator('section.series[data-file="qa.eval.yaml"]')
        assert qa.locator("svg.trend circle.point").count() == 3
        assert qa.locator("svg.trend circle.point").first.bounding_box()["height"] > 0
        japan = page.locator('#cases tr[data-case="japan"]')
        assert japan.locator("td.state").inner_text() == "failing since r2"
        assert japan.locator("span.cell").evaluate_all("cells => cells.map(c => c.className)") == [
            "cell pass", "cell fail", "cell fail"
        ]  # fmt: skip
        page.select_option('select[name="file"]', "math.eval.yaml")
        with page.expect_navigation():
            page.click("#filters button")
        assert "file=math.eval.yaml" in page.url
        assert page.locator("section.series").count() == 1
        assert page.locator('section.series[data-file="math.eval.yaml"]').count() == 1


def test_the_trend_is_read_again_only_when_a_file_it_came_from_changed(
    three_runs: tuple[Bench, Path],
) -> None:
    from pytest_llmbench.view.trend_source import read_trend

    _, root = three_runs
    first = read_trend([root], None)
    assert read_trend([root], None) is first  # a filter chosen: nothing read again
    shutil.rmtree(root / "r1")
    second = read_trend([root], None)
    assert second is not first and second[0].runs == ("r2", "r3")
    (root / "r3" / REVIEWS_FILE).write_text("")  # a labels file appears
    assert read_trend([root], None) is not second
