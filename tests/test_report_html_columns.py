"""pytest-html 4 integration: our columns in the header, per-row cells and the extras block."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest
from conftest import Bench, Rule

from pytest_llmbench.report.html_columns import HtmlColumns, render_extra

CAPITALS = """
cases:
  - id: france
    prompt: What is the capital of France?
    expected: Paris
    assert:
      - contains
      - {type: not-contains, value: Lyon, weight: 2}
  - id: japan
    prompt: What is the capital of Japan?
    expected: Tokyo
    assert: [contains]
"""


def _report(path: Path) -> tuple[list[str], dict[str, Any]]:
    """The header cells and the decoded data blob of a pytest-html 4 report."""
    text = path.read_text(encoding="utf-8")
    head = re.search(r'<thead id="results-table-head">(.*?)</thead>', text, re.DOTALL)
    assert head is not None
    headers = [
        re.sub(r"<.*?>", "", cell).strip() for cell in re.findall(r"<th.*?</th>", head.group(1))
    ]
    blob = re.search(r'data-jsonblob="(.*?)"', text, re.DOTALL)
    assert blob is not None
    return headers, json.loads(html.unescape(blob.group(1)))


def _cells(row: list[str]) -> dict[str, str]:
    """``col-<name>`` -> text of each results-table cell."""
    found = {}
    for cell in row:
        match = re.match(r'<td class="col-(\w+)">(.*)</td>$', cell, re.DOTALL)
        assert match is not None, cell
        found[match.group(1)] = html.unescape(match.group(2))
    return found


def _extras_html(entry: dict[str, Any]) -> str:
    return "".join(str(extra.get("content", "")) for extra in entry["extras"])


def test_html_report_has_our_columns_cells_and_extras(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="France", reply="Paris <b>&</b> more"))
    bench.server.add_rule(Rule(match="Japan", reply="Kyoto"))
    bench.eval_file("capitals", CAPITALS)
    result = bench.run("--models=fake", "--html=report.html", "--self-contained-html")
    result.assert_outcomes(passed=1, failed=1)
    headers, data = _report(bench.pytester.path / "report.html")
    assert headers[:7] == [
        "Result",
        "Test",
        "Model",
        "Score",
        "Tokens (in/out)",
        "Latency (s)",
        "Cost (USD)",
    ]
    records = {r["case_id"]: r for r in bench.records()}
    tests = data["tests"]
    assert set(tests) == {r["nodeid"] for r in records.values()}
    for case_id, score in (("france", "1.000"), ("japan", "0.000")):
        record = records[case_id]
        (entry,) = tests[record["nodeid"]]
        cells = _cells(entry["resultsTableRow"])
        assert cells["llmModel"] == "fake"
        assert cells["llmScore"] == score
        assert cells["llmTokens"] == f"{record['input_tokens']}/{record['output_tokens']}"
        assert cells["llmCost"] == f"{record['cost_usd']:.6f}"
        assert float(cells["llmLatency"]) == pytest.approx(record["latency_s"], abs=0.006)
        assert entry["llmModel"] == "fake"  # sortable columns are in the row data too
        extras = _extras_html(entry)
        assert html.escape(record["prompt"]) in extras
        assert "<h4>Expected</h4><pre>" + record["expected"] + "</pre>" in extras
    assert records["france"]["input_tokens"] == 6 and records["france"]["output_tokens"] == 3
    france = _extras_html(tests[records["france"]["nodeid"]][0])
    assert "<h4>Response</h4><pre>Paris &lt;b&gt;&amp;&lt;/b&gt; more</pre>" in france
    verdicts = re.findall(
        r"<tr><td>(PASS|FAIL)</td><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td>", france
    )
    assert verdicts == [
        ("PASS", "contains", "1.000", "1.0"),
        ("PASS", "not-contains", "1.000", "2.0"),
    ]
    japan = _extras_html(tests[records["japan"]["nodeid"]][0])
    assert re.findall(r"<tr><td>(PASS|FAIL)</td><td>(.*?)</td>", japan) == [("FAIL", "contains")]
    assert "output does not contain" in japan  # the verdict's reason
    assert "<pre>Kyoto</pre>" in japan


def test_html_error_row_shows_the_error_and_empty_cells(bench: Bench) -> None:
    bench.server.add_rule(Rule(status=401, error_message="bad key given"))
    bench.eval_file("capitals", CAPITALS)
    bench.pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = bench.run(
        "--models=fake", "-k", "france or plain", "--html=report.html", "--self-contained-html"
    )
    result.assert_outcomes(passed=1, errors=1)
    _, data = _report(bench.pytester.path / "report.html")
    (record,) = bench.records()
    entries = data["tests"][record["nodeid"]]
    error_entries = [e for e in entries if "::setup" in _cells(e["resultsTableRow"])["testId"]]
    assert error_entries, entries
    cells = _cells(error_entries[0]["resultsTableRow"])
    assert cells["llmModel"] == "fake"
    assert cells["llmScore"] == "" and cells["llmTokens"] == "" and cells["llmCost"] == ""
    extras = _extras_html(error_entries[0])
    assert "<h4>Error</h4>" in extras and "bad key given" in extras
    assert "<h4>Response</h4>" not in extras
    (plain,) = data["tests"]["test_plain.py::test_plain"]
    plain_cells = _cells(plain["resultsTableRow"])
    assert plain_cells["llmModel"] == "" and plain_cells["llmScore"] == ""


def test_render_extra_escapes_and_lists_verdicts() -> None:
    block = render_extra(
        {
            "prompt": "Is 1 < 2?",
            "response": "yes & no",
            "expected": None,
            "error": None,
            "assertions": [
                {
                    "type": "contains",
                    "passed": False,
                    "score": 0.0,
                    "weight": 1.0,
                    "reason": "missing <tag>",
                },
            ],
        }
    )
    assert "<pre>Is 1 &lt; 2?</pre>" in block and "<pre>yes &amp; no</pre>" in block
    assert "Expected" not in block and "Error" not in block
    assert (
        "<td>FAIL</td><td>contains</td><td>0.000</td><td>1.0</td><td>missing &lt;tag&gt;</td>"
        in block
    )


def test_render_extra_shows_judges_and_dimensions_escaped() -> None:
    block = render_extra(
        {
            "prompt": "p",
            "response": "r",
            "assertions": [
                {"type": "jury", "passed": True, "score": 0.875, "weight": 1.0, "reason": "ok"}
            ],
            "dimensions": {"correctness": 4.5, "brand_<voice>": 3.0},
            "judges": [
                {
                    "assertion": 0,
                    "type": "jury",
                    "judge": "<j1>",
                    "model_id": 'openai/"quoted"',
                    "scores": {"correctness": 4, "brand_<voice>": 3},
                    "reasons": {"correctness": "mostly <b>right</b>", "brand_<voice>": "a & b"},
                    "error": None,
                },
                {
                    "assertion": 0,
                    "type": "jury",
                    "judge": "j2",
                    "model_id": "openai/j2",
                    "scores": {},
                    "reasons": {},
                    "error": "not JSON: <html>",
                },
            ],
        }
    )
    assert "<h4>Dimensions</h4>" in block and "<h4>Judges</h4>" in block
    assert "<tr><td>correctness</td><td>4.5</td></tr>" in block
    assert "<tr><td>brand_&lt;voice&gt;</td><td>3</td></tr>" in block
    assert (
        '<tr><td title="openai/&quot;quoted&quot;">&lt;j1&gt;</td><td>jury</td>'
        "<td>correctness</td><td>4</td><td>mostly &lt;b&gt;right&lt;/b&gt;</td><td></td></tr>"
    ) in block
    assert "<td>brand_&lt;voice&gt;</td><td>3</td><td>a &amp; b</td>" in block
    # A failed judge has no scores: one row with its error.
    assert (
        '<tr><td title="openai/j2">j2</td><td>jury</td><td></td><td></td><td></td>'
        "<td>not JSON: &lt;html&gt;</td></tr>"
    ) in block
    assert "<b>" not in block and "<j1>" not in block and "<html>" not in block


def test_render_extra_without_judges_has_no_judge_tables() -> None:
    block = render_extra({"prompt": "p", "response": "r", "judges": [], "dimensions": {}})
    assert "Judges" not in block and "Dimensions" not in block


def test_token_cell_marks_a_missing_count() -> None:
    columns = HtmlColumns()
    report = SimpleNamespace(
        llmbench_record={
            "model": "m",
            "input_tokens": None,
            "output_tokens": 5,
            "score": None,
            "latency_s": 1.234,
            "cost_usd": None,
        }
    )
    cells = ["<td>result</td>", "<td>id</td>"]
    columns.pytest_html_results_table_row(report, cells)  # type: ignore[arg-type]
    assert cells[2:7] == [
        '<td class="col-llmModel">m</td>',
        '<td class="col-llmScore"></td>',
        '<td class="col-llmTokens">-/5</td>',
        '<td class="col-llmLatency">1.23</td>',
        '<td class="col-llmCost"></td>',
    ]


def test_a_row_removed_by_another_plugin_stays_removed() -> None:
    cells: list[str] = []
    HtmlColumns().pytest_html_results_table_row(SimpleNamespace(llmbench_record={}), cells)  # type: ignore[arg-type]
    assert cells == []


def test_extras_are_built_only_when_an_html_report_is_written(pytester: pytest.Pytester) -> None:
    """Without ``--html`` no extras are rendered: they cost CPU on every report for nothing."""
    without = pytester.parseconfigure()
    assert without.pluginmanager.get_plugin("llmbench-html") is None
    with_html = pytester.parseconfigure("--html=report.html")
    assert isinstance(with_html.pluginmanager.get_plugin("llmbench-html"), HtmlColumns)
