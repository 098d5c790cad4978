"""The standalone HTML report: contents, escaping, determinism, a real browser, the plugin."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import FRANCE, Bench, Rule

from pytest_llmbench.report.html_tables import CASE_ROWS_LIMIT
from pytest_llmbench.report.standalone import write_report
from pytest_llmbench.results.record import build_record

CHROMIUM = Path("/usr/bin/chromium")
REPO_ROOT = Path(__file__).resolve().parents[1]
SCREENSHOT_COPY = REPO_ROOT / "test-output" / "report-screenshot.png"
XSS = "<script>alert(1)</script>"
SECTIONS = (
    "Run", "Leaderboard", "Scores", "Latency", "Cost", "Judges", "Errors", "Matrix", "Cases"
)  # fmt: skip
#: Every chart, when the run has data for all of them.
ALL_CHARTS = (
    "leaderboard",
    "score-heatmap",
    "task-heatmap",
    "latency-percentiles",
    "latency-distribution",
    "tokens-per-s",
    "cost-vs-score",
    "cost-breakdown",
    "judge-radar",
    "error-breakdown",
)
JURY = ("correctness", "completeness", "relevance", "format", "coherence", "following_instructions")


def item(model: str, suite: str, case_id: str, repeat: int, passed: bool, **extra: Any) -> dict:
    """A complete answered record; ``extra`` overrides any field."""
    values: dict[str, Any] = {
        "nodeid": f"{suite}.eval.yaml::{case_id}[{model}-r{repeat}]",
        "suite": suite,
        "eval_file": f"{suite}.eval.yaml",
        "case_id": case_id,
        "model": model,
        "model_id": f"openai/{model}",
        "repeat": repeat,
        "outcome": "passed" if passed else "failed",
        "score": 1.0 if passed else 0.25,
        "threshold": 1.0,
        "ttft_s": 0.05 + 0.01 * repeat,
        "latency_s": 0.4 + 0.1 * repeat,
        "input_tokens": 20,
        "output_tokens": 8,
        "tokens_per_s": 40.0 + repeat,
        "cost_usd": 0.001,
        "streamed": True,
        "prompt": f"Question {case_id}?",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": f"Question {case_id}?"},
        ],
        "response": "Paris" if passed else "Lyon",
        "expected": "Paris",
        "assertions": [
            {"type": "contains", "passed": passed, "score": 1.0 if passed else 0.0, "weight": 1.0}
        ],
        "started_at": "2026-01-01T00:00:00+00:00",
    }
    # Each model is its own profile (no prompt or temperature variant), on its own tier.
    values["profile"] = model
    values["model_tags"] = {"provider": "test", "tier": "priority" if model == "alpha" else "flex"}
    values.update(extra)
    return build_record(**values)


def jury(score: int) -> dict[str, Any]:
    """What a two-judge jury leaves on a record: judge entries, dimensions, judge cost."""
    judges = [
        {
            "assertion": 1,
            "type": "jury",
            "judge": name,
            "model_id": f"openai/{name}",
            "scores": dict.fromkeys(JURY, score),
            "reasons": dict.fromkeys(JURY, f"{name} says <b>fine</b>"),
            "error": None,
            "cost_usd": 0.0005,
        }
        for name in ("judge-a", "judge-b")
    ]
    return {
        "judges": judges,
        "dimensions": dict.fromkeys(JURY, float(score)),
        "judge_cost_usd": 0.001,
    }


def sample_records() -> list[dict[str, Any]]:
    """Two models, three repeats, two suites, task types, juries, an error, an XSS answer."""
    records = []
    for model, strong in (("alpha", True), ("beta", False)):
        for repeat in range(3):
            task = {"task_type": "qa", "task_criteria": "short"}
            records.append(
                item(
                    model,
                    "capitals",
                    "france",
                    repeat,
                    strong,
                    task=task,
                    **jury(4 if strong else 2),
                )
            )
            records.append(item(model, "capitals", "japan", repeat, repeat < 2, task=task))
            passed = strong or repeat == 0
            choice = {"chosen": "B" if passed else "C", "answer": "B", "correct": passed}
            records.append(item(model, "math", "add", repeat, passed, choice=choice))
    records.append(
        item("beta", "math", "xss", 0, False, response=XSS, error=None, expected="<i>nothing</i>")
    )
    records.append(
        item(
            "beta",
            "math",
            "mul",
            0,
            False,
            outcome="error",
            score=None,
            error="provider said 500 <oops>",
            error_kind="provider",
            latency_s=None,
            ttft_s=None,
        )
    )
    return records


RUN_INFO = {
    "started_at": "2026-01-01T00:00:00+00:00",
    "finished_at": "2026-01-01T00:01:00+00:00",
    "args": ["evals/", "--models=alpha,beta", "-k", "a b"],
    "exitstatus": 1,
    "versions": {"python": "3.11.9", "pytest": "8.3.0", "litellm": None},
}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of :func:`sample_records`, written once for the module."""
    out = tmp_path_factory.mktemp("report")
    return write_report(sample_records(), out, title="Sample <run>", run_info=RUN_INFO)


def chart_ids(text: str) -> list[str]:
    return re.findall(r'<div id="chart-([a-z-]+)" class="plotly-graph-div"', text)


# -- contents -------------------------------------------------------------------------------


def test_report_is_one_self_contained_file(report: Path) -> None:
    import base64
    import gzip

    bundle_tool = REPO_ROOT / "tools" / "plotly-bundle" / "package.json"
    plotly_js = json.loads(bundle_tool.read_text())["devDependencies"]["plotly.js"]
    text = report.read_text(encoding="utf-8")
    assert report.name == "report.html"
    assert not re.search(r"<script[^>]*\bsrc\s*=", text, re.IGNORECASE)
    assert not re.search(r"<link[^>]*https?://", text, re.IGNORECASE)
    # plotly.js inlined once: the partial bundle, of the version tools/plotly-bundle builds.
    (packed,) = re.findall(
        r'<script type="application/gzip;base64" id="llmbench-plotly">(.*?)<', text
    )
    source = gzip.decompress(base64.b64decode(packed)).decode()
    assert source.startswith(f"/* plotly.js v{plotly_js} (MIT), partial bundle")
    assert "Plotly" in source and len(source) > 1_000_000
    # The whole library took 4.8 MB a report; the bundle and this run's data take a fraction.
    assert len(text.encode()) < 1_000_000


def test_report_has_every_section_and_one_div_per_chart(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    for heading in SECTIONS:
        assert f"<h2>{heading}</h2>" in text
    assert sorted(chart_ids(text)) == sorted(ALL_CHARTS)
    assert text.count('class="plotly-graph-div"') == len(ALL_CHARTS)
    assert 'class="note"' in text  # the flaky-cases table's absence is never silent
    # japan for both models (2 of 3 passed), add for beta (1 of 3)
    assert "<h3>Flaky cases (3)</h3>" in text


def test_record_text_is_escaped(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    assert XSS not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&lt;i&gt;nothing&lt;/i&gt;" in text
    assert "provider said 500 &lt;oops&gt;" in text
    assert "judge-a says &lt;b&gt;fine&lt;/b&gt;" in text
    assert "<title>Sample &lt;run&gt;</title>" in text


def test_run_facts_and_leaderboard_with_intervals(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    assert "<dt>Started</dt><dd>2026-01-01T00:00:00+00:00</dd>" in text
    assert "pytest evals/ --models=alpha,beta -k &#x27;a b&#x27;" in text
    assert "python 3.11.9, pytest 8.3.0" in text and "litellm" not in text.split("Versions")[1][:80]
    assert "<dt>Items</dt><dd>20 (11 passed, 8 failed, 1 error, 0 skipped)</dd>" in text
    board = text.split('<table class="leaderboard">')[1].split("</table>")[0]
    assert "score (95% CI)" in board and "pass rate (95% CI)" in board
    rows = re.findall(
        r"<tr><td class=\"num\">(\d)</td><td>(\w+)</td><td class=\"num\">([^<]*)", board
    )
    assert [(rank, model) for rank, model, _ in rows] == [("1", "alpha"), ("2", "beta")]
    assert re.fullmatch(r"0\.\d{3} \[0\.\d{3}, [01]\.\d{3}\]", rows[1][2])


def test_leaderboard_shows_coverage_and_marks_a_mostly_errored_model(tmp_path: Path) -> None:
    # flaky answers 2 of 10 (right both times), steady 10 of 10 (8 right): errors are failures.
    records = [
        item("flaky", "s", f"c{index}", 0, True)
        if index < 2
        else item("flaky", "s", f"c{index}", 0, False, outcome="error", score=None)
        for index in range(10)
    ]
    records += [item("steady", "s", f"c{index}", 0, index < 8) for index in range(10)]
    text = write_report(records, tmp_path).read_text(encoding="utf-8")
    board = text.split('<table class="leaderboard">')[1].split("</table>")[0]
    assert "<th>answered</th>" in board or ">answered</th>" in board
    rows = re.findall(r"<tr><td class=\"num\">(\d)</td><td>(\w+)</td>", board)
    assert [model for _, model in rows] == ["steady", "flaky"]
    assert ">10/10</td>" in board and ">2/10 !</td>" in board
    assert "! incomplete: more than 10% of the items errored" in text


def test_leaderboard_chart_has_ci_error_bars(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    script = text.split('id="chart-leaderboard"')[1].split("</script>")[0]
    assert '"arrayminus":[' in script and '"symmetric":false' in script


def test_paired_comparisons_with_the_leader(tmp_path: Path) -> None:
    # alpha passes 8 cases that beta fails: significant for both metrics.
    records = [
        item(model, "s", f"c{index}", 0, model == "alpha")
        for model in ("alpha", "beta")
        for index in range(8)
    ]
    text = write_report(records, tmp_path).read_text(encoding="utf-8")
    table = text.split('<table class="comparisons">')[1].split("</table>")[0]
    assert table.count("<td>beta vs alpha</td>") == 2
    assert table.count("<td>significant</td>") == 2
    assert '<td class="num">-0.750</td>' in table  # score 0.25 - 1.0


def test_transcript_holds_messages_verdicts_and_judges(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    start = text.index('<tr><td>capitals</td><td>france</td><td>alpha</td><td class="num">0</td>')
    row = text[start : text.index("</details>", start)]
    assert "<h4>system</h4><pre>Be brief.</pre>" in row
    assert "<h4>user</h4><pre>Question france?</pre>" in row
    assert "<h4>Prompt</h4>" not in row  # the messages show it already
    assert "<h4>Response</h4><pre>Paris</pre>" in row and "<h4>Expected</h4>" in row
    assert "<td>PASS</td><td>contains</td>" in row
    assert row.count("<td>jury</td><td>correctness</td><td>4</td>") == 2  # one row per judge


def test_absent_data_gives_notes_not_charts(tmp_path: Path) -> None:
    records = [
        item("solo", "s", f"c{index}", 0, True, ttft_s=None, cost_usd=None, streamed=False)
        for index in range(3)
    ]
    text = write_report(records, tmp_path).read_text(encoding="utf-8")
    assert chart_ids(text) == [
        "leaderboard",
        "score-heatmap",
        "task-heatmap",
        "latency-percentiles",
        "latency-distribution",
        "tokens-per-s",
    ]
    for note in (
        "No model has both a known cost and a score.",
        "No cost is known for any model or judge call.",
        "No jury ran in this run.",
        "No item had an error.",
        "No flaky case",
    ):
        assert note in text
    assert "(none)" in text  # task type of cases without a task


def test_no_records_still_gives_a_page(tmp_path: Path) -> None:
    text = write_report([], tmp_path).read_text(encoding="utf-8")
    assert "This run has no records." in text and not chart_ids(text)


def without_generation_time(text: str) -> str:
    return re.sub(r"<dt>Generated</dt><dd>[^<]*</dd>", "", text)


def test_same_records_give_the_same_file(tmp_path: Path) -> None:
    records = sample_records()
    first = write_report(records, tmp_path / "a", run_info=RUN_INFO).read_text(encoding="utf-8")
    random.Random(7).shuffle(records)  # xdist delivers records in any order
    second = write_report(records, tmp_path / "b", run_info=RUN_INFO).read_text(encoding="utf-8")
    assert without_generation_time(first) == without_generation_time(second)
    assert "<dt>Generated</dt>" in first


def many_records(count: int) -> list[dict[str, Any]]:
    models = ("m1", "m2", "m3", "m4")
    return [
        item(
            models[index % 4],
            f"suite{index % 7}",
            f"case{index // 4 % 500}",
            index // 2000,
            index % 3 != 0,
            latency_s=0.1 + (index % 97) / 100,
        )
        for index in range(count)
    ]


@pytest.mark.slow
def test_ten_thousand_records_make_a_report_whose_case_table_is_capped(tmp_path: Path) -> None:
    records = many_records(10_000)
    text = write_report(records, tmp_path).read_text(encoding="utf-8")
    table = text.split('<table class="cases">')[1]
    assert table.count("<details>") == CASE_ROWS_LIMIT
    assert f"Showing the first {CASE_ROWS_LIMIT:,} of 10,000 items" in text
    assert len(chart_ids(text)) == 8  # no jury, no error


# -- a real browser -------------------------------------------------------------------------


def chromium(url: str, *flags: str, profile: Path) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium on ``url``; fail (never skip) when it is not installed."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium "
            "(apt-get install -y --no-install-recommends chromium), as .ci/run does"
        )
    command = [
        str(CHROMIUM),
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=10000",
        f"--user-data-dir={profile}",
        *flags,
        url,
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def console_errors(stderr: str) -> list[str]:
    return [
        line
        for line in stderr.splitlines()
        if "CONSOLE" in line and ("ERROR" in line or "Uncaught" in line)
    ]


@pytest.mark.slow
def test_console_error_check_catches_a_broken_page(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    result = chromium(page.as_uri(), "--dump-dom", profile=tmp_path / "profile")
    assert console_errors(result.stderr), result.stderr[-3000:]


@pytest.mark.slow
def test_report_renders_in_headless_chromium(report: Path, tmp_path: Path) -> None:
    result = chromium(report.as_uri(), "--dump-dom", profile=tmp_path / "profile")
    assert console_errors(result.stderr) == []
    # Without the inlined plotly.js, whose source names the same classes.
    dom = re.sub(r"<script\b.*?</script>", "", result.stdout, flags=re.DOTALL)
    # plotly marks each drawn chart js-plotly-plot and draws its svg.main-svg layers in it.
    assert dom.count("js-plotly-plot") == len(ALL_CHARTS)
    assert dom.count('class="main-svg"') >= len(ALL_CHARTS)
    for name in ALL_CHARTS:
        drawn = dom.split(f'id="chart-{name}"')[1].split('id="chart-')[0]
        assert 'class="main-svg"' in drawn, f"chart {name} was not drawn"
    assert XSS not in dom  # the escaped answer stayed text


@pytest.mark.slow
def test_report_screenshot(report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    result = chromium(
        report.as_uri(),
        f"--screenshot={shot}",
        "--window-size=1400,3000",
        profile=tmp_path / "profile",
    )
    assert console_errors(result.stderr) == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 50_000  # a blank page is a few kB
    SCREENSHOT_COPY.parent.mkdir(exist_ok=True)
    shutil.copyfile(shot, SCREENSHOT_COPY)  # kept for people to look at


# -- the plugin -----------------------------------------------------------------------------


def test_a_run_writes_the_report_and_names_it(bench: Bench) -> None:
    bench.eval_file("geo", FRANCE)
    bench.server.add_rule(Rule(match="France", reply="Paris"))
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=1)
    path = bench.out("report.html")
    result.stdout.fnmatch_lines([f"llmbench: report {path}"])
    text = path.read_text(encoding="utf-8")
    assert "<td>geo</td><td>france</td><td>fake</td>" in text
    assert "<dt>Command</dt><dd>pytest -p no:cacheprovider" in text  # from run.json


def test_a_broken_report_keeps_the_exit_status(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Path:
        raise RuntimeError("no disk")

    monkeypatch.setattr("pytest_llmbench.report.standalone.write_report", broken)
    bench.eval_file("geo", FRANCE)
    bench.server.add_rule(Rule(match="France", reply="Paris"))
    result = bench.run("--models=fake")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["llmbench: report not written: RuntimeError: no disk"])
    assert not bench.out("report.html").exists()


def test_no_records_no_report(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain(): pass")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*llmbench: report*")


# -- issue 7: variants, multiple choice, latency-only runs --------------------------------------


def test_multiple_choice_accuracy_and_no_variants_section(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    # math/add is multiple choice: alpha chose right 3 times of 3, beta once.
    board = text.split('<table class="leaderboard">')[1].split("</table>")[0]
    assert '<th class="num">MC accuracy</th>' in board
    assert '<td class="num">100.0%</td>' in board and '<td class="num">33.3%</td>' in board
    # Profile and tier name the same two groups as the models: no Variants section repeats them.
    assert "<h2>Variants</h2>" not in text


def matrix_records() -> list[dict[str, Any]]:
    """Two profiles on two tiers, two prompts each: four contestants."""
    return [
        item(
            f"{profile}:{prompt}",
            "s",
            case,
            0,
            passed,
            profile=profile,
            prompt_variant=prompt,
            model_tags={"tier": tier},
        )
        for profile, tier in (("nova", "flex"), ("claude", "priority"))
        for prompt, passed in (("short", True), ("long", False))
        for case in ("c1", "c2")
    ]


def test_variants_section_has_a_table_and_a_chart_per_axis(tmp_path: Path) -> None:
    text = write_report(matrix_records(), tmp_path).read_text(encoding="utf-8")
    section = text.split('<section id="variants">')[1].split("</section>")[0]
    assert re.findall(r"<h3>([^<]+)</h3>", section) == [
        "By profile",
        "Score per profile (95% CI)",
        "By prompt_variant",
        "Score per prompt_variant (95% CI)",
        "By tag:tier",
        "Score per tag:tier (95% CI)",
    ]
    prompts = section.split('<table class="grouped by-prompt_variant">')[1].split("</table>")[0]
    assert "<th>prompt_variant</th>" in prompts and "score (95% CI)" in prompts
    assert re.findall(r'<tr><td class="num">(\d)</td><td>(\w+)</td>', prompts) == [
        ("1", "short"),
        ("2", "long"),
    ]
    assert chart_ids(section) == ["by-profile", "by-prompt-variant", "by-tag-tier"]
    script = section.split('id="chart-by-prompt-variant"')[1].split("</script>")[0]
    assert '"arrayminus":[' in script  # the score's CI
    assert "MC accuracy" not in text
    assert '<a href="#variants">Variants</a>' in text


def latency_records() -> list[dict[str, Any]]:
    """Two deployment variants each of two models timed on three prompts, no score."""
    return [
        item(
            f"{name}_{tier}",
            "timing",
            f"c{index}",
            0,
            True,
            eval_type="latency",
            score=None,
            threshold=None,
            assertions=[],
            latency_s=(0.5 if tier == "priority" else 1.5) + index / 10 + len(name) / 100,
            profile=f"{name}_{tier}",
            model_tags={"tier": tier, "variant": tier, "provider": provider},
        )
        for name, provider in (("nova", "aws"), ("claude", "anthropic"))
        for tier in ("flex", "priority")
        for index in range(3)
    ]


@pytest.fixture(scope="module")
def latency_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_report(latency_records(), tmp_path_factory.mktemp("latency"))


LATENCY_CHARTS = [
    "by-tag-provider",
    "by-tag-tier",
    "by-tag-variant",
    "latency-percentiles",
    "latency-distribution",
    "tokens-per-s",
    "cost-breakdown",
]


def test_latency_only_report_has_no_score_sections(latency_report: Path) -> None:
    text = latency_report.read_text(encoding="utf-8")
    headings = re.findall(r"<h2>([^<]+)</h2>", text)
    assert headings == [
        "Run", "Leaderboard", "Variants", "Latency", "Cost", "Errors", "Matrix", "Cases"
    ]  # fmt: skip
    assert chart_ids(text) == LATENCY_CHARTS
    assert "<dt>Eval type</dt><dd>latency only: no scores</dd>" in text
    board = text.split('<table class="leaderboard">')[1].split("</table>")[0]
    assert "score" not in board and "pass rate" not in board
    assert '<th class="num">latency p95 s</th>' in board
    # The fastest first.
    assert re.findall(r"<td>(\w+_\w+)</td>", board) == [
        "nova_priority",
        "claude_priority",
        "nova_flex",
        "claude_flex",
    ]
    assert "Paired comparisons" not in text
    tiers = text.split('<table class="grouped by-tag_tier">')[1].split("</table>")[0]
    assert re.findall(r"<td>(\w+)</td>", tiers) == ["priority", "flex"]
    assert "score" not in tiers and '<th class="num">latency p95 s</th>' in tiers
    assert "<h3>Latency p50 (s) per tag:tier</h3>" in text


@pytest.mark.slow
def test_latency_only_report_renders_in_headless_chromium(
    latency_report: Path, tmp_path: Path
) -> None:
    result = chromium(latency_report.as_uri(), "--dump-dom", profile=tmp_path / "profile")
    assert console_errors(result.stderr) == []
    dom = re.sub(r"<script\b.*?</script>", "", result.stdout, flags=re.DOTALL)
    assert dom.count("js-plotly-plot") == len(LATENCY_CHARTS)
    for name in LATENCY_CHARTS:
        drawn = dom.split(f'id="chart-{name}"')[1].split('id="chart-')[0]
        assert 'class="main-svg"' in drawn, f"chart {name} was not drawn"


def test_the_bundle_holds_every_trace_type_the_charts_draw() -> None:
    """charts.py builds traces with ``_trace("<type>", ...)``; each of those trace types must be
    in the partial plotly.js bundle (tools/plotly-bundle/entry.js), or it draws blank."""
    import gzip
    from importlib import resources

    from pytest_llmbench.report.charts import TRACE_TYPES
    from pytest_llmbench.report.standalone import PLOTLY_BUNDLE

    package = resources.files("pytest_llmbench.report")
    bundle = gzip.decompress(package.joinpath("assets", PLOTLY_BUNDLE).read_bytes()).decode()
    bundled = set(re.findall(r'moduleType:"trace",name:"(\w+)"', bundle))
    source = package.joinpath("charts.py").read_text()
    used = set(re.findall(r'_trace\(\s*"(\w+)"', source))
    assert used == set(TRACE_TYPES) == {"bar", "box", "heatmap", "scatter", "scatterpolar"}
    assert used <= bundled


def test_the_chart_template_is_plotlys_own() -> None:
    """The committed template (tools/chart_template.py) is plotly.py's plotly_white for the
    trace types drawn, as plotly.py (a dev dependency) has it now."""
    import importlib.util

    from pytest_llmbench.report.charts import TEMPLATE_FILE, chart_template

    spec = importlib.util.spec_from_file_location(
        "chart_template", REPO_ROOT / "tools" / "chart_template.py"
    )
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert json.loads(TEMPLATE_FILE.read_text()) == chart_template() == tool.template()
    assert chart_template()["layout"]["plot_bgcolor"] == "white"


def test_a_report_run_imports_no_plotly_py(tmp_path: Path) -> None:
    """Figures are plotly.js JSON built as data: plotly.py (seconds of validation) never loads."""
    code = (
        "import sys\n"
        "from pytest_llmbench.report.standalone import write_report\n"
        f"from pathlib import Path\nrecords = {[item('m', 'qa', 'c', 0, True)]!r}\n"
        f"write_report(records, Path({str(tmp_path)!r}))\n"
        "print('plotly' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]
    assert "plotly-graph-div" in (tmp_path / "report.html").read_text()


# -- the case x model matrix --------------------------------------------------------------------


def matrix_rows(html: str) -> dict[str, str]:
    """Each matrix row's case id -> its whole ``<tr>`` (as written, or as the browser left it)."""
    table = html.split('id="matrix"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr (data-suite=.*?)</tr>", table, flags=re.DOTALL)
    return {re.findall(r"<td[^>]*>([^<]*)</td>", row)[1]: row for row in rows}


def test_the_matrix_has_a_row_per_case_and_a_column_per_model(report: Path) -> None:
    html = report.read_text(encoding="utf-8")
    header = html.split('id="matrix"', 1)[1].split("</tr>", 1)[0]
    assert re.findall(r"<th>([^<]*)</th>", header) == ["suite", "case", "alpha", "beta"]
    rows = matrix_rows(html)
    assert sorted(rows) == ["add", "france", "japan", "mul", "xss"]
    cells = {case: re.findall(r'<td class="(\w+)"', row) for case, row in rows.items()}
    assert cells["france"] == ["passed", "failed"]
    assert cells["japan"] == ["mixed", "mixed"]  # a repeat failed: 2 of 3 passed
    assert "<b>2/3</b>" in rows["japan"]
    assert cells["xss"] == ["skipped", "failed"]  # alpha never ran it
    assert cells["mul"] == ["skipped", "error"]
    assert 'data-flags="errors"' in rows["mul"]
    assert 'data-flags="failures flaky"' in rows["japan"]
    assert "provider said 500 &lt;oops&gt;" in rows["mul"]  # an error cell shows why
    assert XSS not in html.split('id="matrix"', 1)[1].split("</table>", 1)[0]


def hidden_cases(dom: str) -> set[str]:
    return {case for case, row in matrix_rows(dom).items() if "display: none" in row}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fragment", "visible"),
    [
        ("show=errors", {"mul"}),
        ("show=flaky&suite=math", {"add"}),
        ("q=lyon", {"france", "japan", "add", "mul"}),  # where some answer says Lyon
        ("show=failures&suite=capitals", {"france", "japan"}),
    ],
)
def test_the_matrix_filters_in_headless_chromium(
    report: Path, tmp_path: Path, fragment: str, visible: set[str]
) -> None:
    result = chromium(f"{report.as_uri()}#{fragment}", "--dump-dom", profile=tmp_path / "p")
    assert console_errors(result.stderr) == []
    everything = {"add", "france", "japan", "mul", "xss"}
    assert everything - hidden_cases(result.stdout) == visible
    assert f"{len(visible)} of 5 cases" in result.stdout
