"""Conversations in the readers of records: report.html, the leaderboard's latency columns and
`llmbench view`'s matrix and item page (in Debian's chromium).

Runs against the fake server write real conversation records: a three-turn case whose second
reply fails its check and holds ``<script>``, and a two-turn case that passes.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import chromium_page, viewing
from conftest import Bench, Rule

from pytest_llmbench.report.conversation_html import conversation_html
from pytest_llmbench.report.standalone import render_report
from pytest_llmbench.results.aggregation import CONVERSATION_COLUMNS, METRIC_COLUMNS
from pytest_llmbench.results.summary import summarize

REPO_ROOT = Path(__file__).resolve().parent.parent
SCREENSHOT_COPY = REPO_ROOT / "test-output" / "view-conversation.png"
XSS = "<script>alert(1)</script>"
TALK = """
system: You are the support bot of ACME.
cases:
  - id: support
    turns:
      - user: Hello, I am Ada.
        assert: [{type: icontains, value: hello}]
      - user: What is your name?
        weight: 2
        assert: [{type: regex, value: "Alice"}]
      - user: Goodbye.
        assert: [{type: icontains, value: bye}]
  - id: greet
    turns:
      - user: Good morning.
        assert: [{type: icontains, value: morning}]
      - user: Is the shop open?
        assert: [{type: icontains, value: open}]
"""


def script(bench: Bench) -> None:
    server = bench.server
    server.add_rule(Rule(match="I am Ada", reply="Hello Ada, I am Bot."))
    server.add_rule(Rule(match="your name", reply=f"My name is Bot. {XSS}", delay_s=0.05))
    server.add_rule(Rule(match="Goodbye", reply="Bye now!"))
    server.add_rule(Rule(match="Good morning", reply="Good morning to you."))
    server.add_rule(Rule(match="shop open", reply="Yes, we are open."))


@pytest.fixture
def talked(bench: Bench) -> Bench:
    """A run of both conversations on `fake`, its results in ./out."""
    script(bench)
    bench.eval_file("talk", TALK)
    # Every call streamed: each reply has its time to the first token.
    bench.run("--models=fake", "--stream=all").assert_outcomes(passed=1, failed=1)
    return bench


def _record(bench: Bench, case_id: str) -> dict[str, Any]:
    (found,) = [record for record in bench.records() if record["case_id"] == case_id]
    return found


# -- report.html ---------------------------------------------------------------------------------


def test_the_report_shows_the_transcript_with_each_turns_verdicts(talked: Bench) -> None:
    page = talked.out("report.html").read_text()
    support = page.split('<ol class="conversation">')
    assert len(support) == 3  # one transcript per conversation item
    items = re.findall(r'<li class="([a-z ]+)" data-turn="(\d)">', page)
    assert ("assistant failing", "2") in items  # the failing turn's reply, highlighted
    assert [css for css, _ in items].count("assistant failing") == 1
    assert ("user", "1") in items and ("assistant", "3") in items
    assert "<b>FAIL</b> regex (weight 2.0): no match for &#x27;Alice&#x27;" in page
    assert "<b>PASS</b> icontains (weight 1.0)" in page
    assert '<p class="failed">failed at turn 2/3</p>' in page
    # Every message once: the last call's history is not shown again as the item's messages.
    assert page.count("What is your name?") == 1
    assert page.count("<pre>You are the support bot of ACME.</pre>") == 2
    # The reply holding a script shows as text: escaped wherever it appears.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert XSS not in page


def test_the_reports_matrix_names_the_first_failing_turn(talked: Bench) -> None:
    page = talked.out("report.html").read_text()
    matrix = page.split('<table class="matrix" id="matrix">')[1].split("</table>")[0]
    rows = {re.findall(r">(\w+)</td>", row)[1]: row for row in matrix.split("<tr ")[1:]}
    assert '<td class="failed" ' in rows["support"]
    assert '<span class="turn">failed at turn 2/3:</span> Bye now!' in rows["support"]
    assert "failed at turn" not in rows["greet"]


def test_the_report_is_the_same_for_the_same_records(talked: Bench) -> None:
    records = talked.records()
    shuffled = random.Random(3).sample(records, len(records))

    def without_time(page: str) -> str:
        return re.sub(r"<dt>Generated</dt><dd>[^<]*</dd>", "", page)

    first, second = render_report(records), render_report(shuffled)
    assert without_time(first) == without_time(second)
    assert '<ol class="conversation">' in first


def test_a_simulated_users_conversation_says_how_it_ended(talked: Bench) -> None:
    record = _record(talked, "greet")
    assert "ended" not in conversation_html(record)
    shown = conversation_html({**record, "conversation_stopped": "goal"})
    assert shown.startswith(
        '<p class="ended">Simulated user; ended: goal (the simulated user said its stop marker)'
    )
    assert "ended: max_turns (max_turns reached)" in conversation_html(
        {**record, "conversation_stopped": "max_turns"}
    )
    assert "failed at turn" not in shown  # greet passed


# -- the leaderboard's latency columns -----------------------------------------------------------


def test_the_leaderboard_has_per_turn_and_per_conversation_latency(talked: Bench) -> None:
    import pandas as pd

    board = pd.read_csv(talked.out("leaderboard.csv"))
    # The existing columns stay as they were, the new ones come after them.
    assert list(board.columns[: len(METRIC_COLUMNS) + 2]) == ["rank", "model", *METRIC_COLUMNS]
    assert list(board.columns[-len(CONVERSATION_COLUMNS) :]) == list(CONVERSATION_COLUMNS)
    records = talked.records()
    replies = pd.Series(
        [e["latency_s"] for r in records for e in r["conversation"] if e["generated"]]
    )
    assert len(replies) == 5
    whole = pd.Series([record["latency_s"] for record in records])
    (row,) = board.to_dict("records")
    assert row["turn_latency_s_p50"] == pytest.approx(replies.quantile(0.5), abs=1e-6)
    assert row["turn_latency_s_p95"] == pytest.approx(replies.quantile(0.95), abs=1e-6)
    assert row["conversation_latency_s_p50"] == pytest.approx(whole.quantile(0.5), abs=1e-6)
    assert row["conversation_latency_s_p95"] == pytest.approx(whole.quantile(0.95), abs=1e-6)
    ttfts = pd.Series([e["ttft_s"] for r in records for e in r["conversation"] if e["generated"]])
    assert len(ttfts) == 5 and ttfts.notna().all()
    assert row["turn_ttft_s_p50"] == pytest.approx(ttfts.quantile(0.5), abs=1e-6)
    assert row["turn_ttft_s_p95"] == pytest.approx(ttfts.quantile(0.95), abs=1e-6)
    # The turn-2 reply waited 50 ms on the server: the slowest reply is at least that slow.
    assert row["turn_latency_s_p95"] >= 0.04
    page = talked.out("report.html").read_text()
    assert "turn latency p50 s" in page and "conversation latency p95 s" in page
    assert "turn TTFT p95 s" in page


def test_only_models_with_conversations_get_conversation_latency(talked: Bench) -> None:
    talk = talked.records()
    plain = [
        {**record, "model": "other", "conversation": None, "nodeid": record["nodeid"] + "x"}
        for record in talk
    ]
    board = summarize([*talk, *plain]).board.set_index("model")
    assert not board.loc["fake", list(CONVERSATION_COLUMNS)].isna().any()
    assert board.loc["other", list(CONVERSATION_COLUMNS)].isna().all()
    # A run without conversations has none of the columns.
    columns = summarize(plain).board.columns
    assert not set(CONVERSATION_COLUMNS) & set(columns)
    per_model = summarize([*talk, *plain])
    assert set(CONVERSATION_COLUMNS) <= set(per_model.model_table("fake").columns)
    assert not set(CONVERSATION_COLUMNS) & set(per_model.model_table("other").columns)


# -- llmbench view, in chromium ------------------------------------------------------------------


@pytest.fixture
def viewer(talked: Bench) -> Iterator[str]:
    with viewing(talked, "talk") as url:
        yield url


@pytest.fixture
def page(viewer: str) -> Iterator[Any]:
    with chromium_page(viewport={"width": 1280, "height": 900}) as page:
        yield page


@pytest.mark.slow
def test_the_viewer_shows_where_a_conversation_failed_and_its_transcript(
    page: Any, viewer: str
) -> None:
    page.goto(viewer + "run/0/talk")
    support = page.locator("#matrix tr[data-case=support] td").nth(2)
    assert support.inner_text().startswith("failed at turn 2/3")
    assert "failed at turn" not in page.inner_text("#matrix tr[data-case=greet]")
    support.locator("a").click()
    talk = page.locator("ol.conversation")
    assert talk.locator(":scope > li").count() == 6
    failing = talk.locator("li.failing")
    assert failing.count() == 1
    shown = failing.inner_text()
    assert shown.startswith("[2] assistant")
    assert XSS in shown  # the reply's script is text on the page, never run
    assert "FAIL regex (weight 2.0): no match for 'Alice'" in shown
    first = talk.locator("li[data-turn='1'].assistant").inner_text()
    assert "Hello Ada, I am Bot." in first and "PASS icontains (weight 1.0)" in first
    assert re.search(r"latency \d+\.\d{3} s", first)
    assert "[3] user" in talk.inner_text() and "Bye now!" in talk.inner_text()
    assert page.inner_text("main").count("What is your name?") == 1
    # The failing turn is highlighted: a red edge, not the other replies' blue.
    edge = failing.evaluate("li => getComputedStyle(li).borderLeftColor")
    assert edge == "rgb(207, 34, 46)"
    shot = page.locator("main").screenshot()
    assert shot[:8] == b"\x89PNG\r\n\x1a\n"
    SCREENSHOT_COPY.parent.mkdir(exist_ok=True)
    SCREENSHOT_COPY.write_bytes(shot)  # kept for people to look at (docs/view-conversation.png)
