"""An agent item's environment state in `llmbench view` and report.html (report/state_html.py):
the seed-to-final diff (path, seed, final) and, on a failed state-equals, where the final state
differs from the expected one; every value escaped; nothing for items without a state."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_llmbench.report.html_tables import cases_table
from pytest_llmbench.results.record import FIELDS, build_record
from pytest_llmbench.results_folder import ResultsFolder
from pytest_llmbench.scoring import evaluate_state, parse_assertion, state_record
from pytest_llmbench.view.app import ViewSettings, create_app

SEED = {"orders": {"W1001": {"status": "pending", "note": "<b>fragile</b>"}}}
FINAL = {"orders": {"W1001": {"status": "refunded", "note": "<b>fragile</b>"}}}
EXPECTED = {"orders": {"W1001": {"status": "cancelled", "note": "<b>fragile</b>"}}}


@dataclass(frozen=True)
class Snapshot:
    initial: Any
    final: Any
    expected: Any = None


def agent_record(**fields: Any) -> dict[str, Any]:
    """An agent item whose run refunded an order the case expected cancelled."""
    snapshot = Snapshot(SEED, FINAL, EXPECTED)
    equals = parse_assertion("state-equals")
    verdict = evaluate_state(equals, snapshot)
    values: dict[str, Any] = {
        "nodeid": "retail.eval.yaml::cancel[fake-r0]",
        "suite": "retail",
        "case_id": "cancel",
        "model": "fake",
        "outcome": "failed",
        "score": 0.0,
        "response": "done",
        "assertions": [verdict.to_dict()],
        "state": state_record(snapshot, "state.json", (equals,)),
    }
    return build_record(**{**values, **fields})


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Any]:
    from starlette.testclient import TestClient

    plain = build_record(nodeid="qa.eval.yaml::a[fake-r0]", suite="qa", case_id="a",
                         model="fake", outcome="passed", score=1.0, response="Paris")  # fmt: skip
    ResultsFolder(tmp_path / "r").write_records([agent_record(), plain])
    settings = ViewSettings(roots=[tmp_path], project=tmp_path, allowed_hosts=("testserver",))
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def rows(page: str, table: str) -> list[list[str]]:
    """The cells of each row of the first ``<table class="table">`` in ``page``, as text."""
    body = page.split(f'<table class="{table}">', 1)[1].split("</table>", 1)[0]
    found = re.findall(r"<tr>(.*?)</tr>", body)
    return [[html.unescape(re.sub(r"<[^>]+>", "", cell)) for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row)]
            for row in found]  # fmt: skip


def test_the_record_carries_the_state_and_other_items_none() -> None:
    assert "state" in FIELDS
    assert build_record(nodeid="x", outcome="passed")["state"] is None
    assert agent_record()["state"]["diff"][0]["path"] == "orders/W1001/status"


def test_the_item_page_shows_the_diff_and_the_expected_differences(client: Any) -> None:
    page = client.get("/run/0/r/item", params={"nodeid": "retail.eval.yaml::cancel[fake-r0]"})
    assert page.status_code == 200
    shown = page.text
    assert "<h4>state (state.json)</h4>" in shown
    assert rows(shown, "state-diff") == [
        ["path", "change", "seed", "final"],
        ["orders/W1001/status", "changed", '"pending"', '"refunded"'],
    ]
    assert "final state vs expected (state-equals failed)" in shown
    assert rows(shown, "state-expected") == [
        ["path", "change", "final", "expected"],
        ["orders/W1001/status", "changed", '"refunded"', '"cancelled"'],
    ]
    assert "div.state td.added" in shown  # the tables' look comes with the page


def test_an_item_without_a_state_shows_none(client: Any) -> None:
    page = client.get("/run/0/r/item", params={"nodeid": "qa.eval.yaml::a[fake-r0]"})
    assert page.status_code == 200 and "<h4>state" not in page.text


def test_report_html_shows_the_state_with_the_items_transcript() -> None:
    table = cases_table([agent_record()])
    assert rows(table, "state-diff")[1] == [
        "orders/W1001/status",
        "changed",
        '"pending"',
        '"refunded"',
    ]


def test_an_unchanged_state_a_match_and_escaping() -> None:
    same = Snapshot(SEED, SEED, SEED)
    equals = (parse_assertion("state-equals"),)
    record = agent_record(state=state_record(same, "state.json", equals), outcome="passed")
    table = cases_table([record])
    assert "the run left the state as seeded" in table
    assert "the final state equals the expected state" in table
    added = Snapshot({}, {"<k>": "<script>x</script>"})
    escaped = cases_table([agent_record(state=state_record(added, "<s>.json"))])
    assert "<script>x" not in escaped and "&lt;script&gt;" in escaped
    assert "state (&lt;s&gt;.json)" in escaped
    assert rows(escaped, "state-diff")[1][:3] == ["<k>", "added", "(absent)"]


def test_a_string_is_quoted_so_that_it_never_looks_like_a_list() -> None:
    strings = Snapshot({"tag": "[x]"}, {"tag": '{"a": 1}'})
    table = cases_table([agent_record(state=state_record(strings, "state.json"))])
    assert rows(table, "state-diff")[1] == ["tag", "changed", '"[x]"', '"{\\"a\\": 1}"']
    big = Snapshot({}, {"blob": ["x" * 50] * 100})
    clipped = cases_table([agent_record(state=state_record(big, "state.json"))])
    assert rows(clipped, "state-diff")[1][3].startswith('["xxx')  # JSON text, not quoted again


def test_the_item_page_escapes_the_state(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    added = Snapshot({"note": "plain"}, {"note": "<script>x</script>", "<k>": 1})
    record = agent_record(state=state_record(added, "<s>.json"))
    ResultsFolder(tmp_path / "r").write_records([record])
    settings = ViewSettings(roots=[tmp_path], project=tmp_path, allowed_hosts=("testserver",))
    with TestClient(create_app(settings)) as test_client:
        page = test_client.get("/run/0/r/item", params={"nodeid": record["nodeid"]})
    assert page.status_code == 200
    assert "<script>x" not in page.text and "&lt;script&gt;x" in page.text
    assert "<k>" not in page.text and "state (&lt;s&gt;.json)" in page.text
    assert ["note", "changed", '"plain"', '"<script>x</script>"'] in rows(page.text, "state-diff")
