"""Win rates from select-best contests (pytest_llmbench/results/winrates.py) and where they
show: leaderboard.csv, report.html's leaderboard and its win matrix (in headless Chromium).

The records are written by hand in the format a select-best verdict leaves (each contestant's
record holds a ``select-best`` entry scoring 1 for the pick, 0 for the others, ``unchecked``
when the contest was not decided), so no judge is needed.
"""

from __future__ import annotations

import csv
import itertools
import math
from pathlib import Path
from typing import Any

import pytest
from browser import chromium_page

from pytest_llmbench.render.markup import board_markdown, board_table
from pytest_llmbench.report.standalone import write_report
from pytest_llmbench.results.record import build_record
from pytest_llmbench.results.summary import summarize, write_aggregates
from pytest_llmbench.results.winrates import (
    BASELINE,
    SELECT_BEST,
    Pair,
    model_win_rates,
    pairs,
    win_matrix,
)

BOLD = "m<b>x</b>"


def contestant(
    model: str,
    picked: bool,
    case: str = "c1",
    repeat: int = 0,
    outcome: str = "passed",
    unchecked: bool = False,
    extra: tuple[dict[str, Any], ...] = (),
) -> dict[str, Any]:
    """A contestant's record of the select-best contest of ``case`` and ``repeat``."""
    verdict = {
        "type": "select-best",
        "passed": picked,
        "score": 1.0 if picked else 0.0,
        "weight": 1.0,
        "reason": f"{'picked' if picked else 'not picked'} among the contestants",
    }
    if unchecked:
        verdict["unchecked"] = True
    answered = outcome in ("passed", "failed")
    return build_record(
        nodeid=f"best.eval.yaml::{case}[{model}-{repeat}]",
        suite="best",
        eval_file="best.eval.yaml",
        case_id=case,
        model=model,
        profile=model.split(":")[0],
        repeat=repeat,
        outcome=outcome,
        score=(1.0 if picked else 0.0) if answered else None,
        threshold=0.5,
        latency_s=0.2,
        response=f"answer of {model}" if answered else None,
        assertions=[*extra, verdict] if answered else [],
        started_at="2026-01-01T00:00:00+00:00",
    )


def contest(pick: str, *others: str, **fields: Any) -> list[dict[str, Any]]:
    return [contestant(pick, True, **fields), *(contestant(o, False, **fields) for o in others)]


def rates(records: list[dict[str, Any]]) -> dict[str, tuple[float, int]]:
    return {model: (r.rate, r.n) for model, r in model_win_rates(pairs(records)).items()}


def test_the_pick_of_three_wins_two_pairs_and_each_other_loses_one() -> None:
    records = contest("a", "b", "c")
    assert rates(records) == {"a": (1.0, 2), "b": (0.0, 1), "c": (0.0, 1)}
    assert pairs(records) == [
        Pair("a", "b", 1.0, SELECT_BEST),
        Pair("b", "a", 0.0, SELECT_BEST),
        Pair("a", "c", 1.0, SELECT_BEST),
        Pair("c", "a", 0.0, SELECT_BEST),
    ]
    matrix = win_matrix(pairs(records))
    # b and c were both not picked: they never met, so neither has a cell for the other
    assert {model: sorted(row) for model, row in matrix.items()} == {
        "a": ["b", "c"],
        "b": ["a"],
        "c": ["a"],
    }
    # Wilson at 2 of 2, z = 1.96: centre (1 + z²/4) / (1 + z²/2), half (z/2)·(z/2) / (1 + z²/2)
    a = model_win_rates(pairs(records))["a"]
    assert (a.low, a.high) == pytest.approx((0.3424, 1.0), abs=1e-4)


def test_two_contests_add_up() -> None:
    records = [*contest("a", "b", "c"), *contest("b", "a", "c", case="c2")]
    two_thirds = pytest.approx(2 / 3)
    assert rates(records) == {"a": (two_thirds, 3), "b": (two_thirds, 3), "c": (0.0, 2)}
    matrix = win_matrix(pairs(records))
    assert (matrix["a"]["b"].rate, matrix["a"]["b"].n) == (0.5, 2)
    assert (matrix["c"]["a"].rate, matrix["c"]["b"].rate) == (0.0, 0.0)


def test_a_repeat_and_a_second_select_best_are_contests_of_their_own() -> None:
    first = {"type": "select-best", "passed": True, "score": 1.0, "weight": 1.0, "reason": ""}
    records = [
        *contest("a", "b"),
        *contest("b", "a", repeat=1),
        contestant("a", False, case="c3", extra=(first,)),  # a won the first, b the second
        contestant("b", True, case="c3", extra=({**first, "score": 0.0, "passed": False},)),
    ]
    assert rates(records) == {"a": (0.5, 4), "b": (0.5, 4)}


def test_an_undecided_contest_gives_no_pair() -> None:
    records = [
        contestant("a", False, unchecked=True),
        contestant("b", False, unchecked=True),
        contestant("solo", True, case="c2", unchecked=True),  # one contestant: undecided
    ]
    assert pairs(records) == []
    assert model_win_rates(pairs(records)) == {}


def test_an_errored_contestant_is_in_no_pair() -> None:
    records = [*contest("a", "b"), contestant("c", False, outcome="error")]
    assert rates(records) == {"a": (1.0, 1), "b": (0.0, 1)}
    # The pick's own record errored: nobody is known to have lost to it
    lost = [contestant("a", True, case="c2", outcome="error"), contestant("b", False, case="c2")]
    assert pairs(lost) == []
    # A failed item is answered: it is a contestant
    assert rates(contest("a", "b", outcome="failed")) == {"a": (1.0, 1), "b": (0.0, 1)}


def test_record_order_does_not_matter() -> None:
    records = [*contest("a", "b", "c"), *contest("c", "a", case="c2"), *contest("b", "c", repeat=1)]
    expected = pairs(records)
    assert len(expected) == 8
    for order in itertools.permutations(records):
        assert pairs(order) == expected


def test_baseline_and_same_run_opponents_are_told_apart() -> None:
    baseline = build_record(
        model="a",
        outcome="passed",
        assertions=[{"type": "pairwise", "score": 0.5, "passed": True}],
        judges=[{"type": "pairwise", "details": [{"opponent": "b"}]}],
    )
    found = pairs([baseline, *contest("a", "b")])
    assert [pair.source for pair in found] == [BASELINE, SELECT_BEST, SELECT_BEST]
    matrix = win_matrix(found)
    assert sorted(matrix["a"]) == ["b", "b (baseline)"]
    assert (matrix["a"]["b (baseline)"].rate, matrix["a"]["b"].rate) == (0.5, 1.0)
    # The leaderboard's rate is over both sources: a tie and a win
    assert rates([baseline, *contest("a", "b")])["a"] == (0.75, 2)


def test_leaderboard_csv_has_the_win_rate_columns(tmp_path: Path) -> None:
    records = [*contest("a", "b", "c"), *contest("b", "a", "c", case="c2")]
    records.append(contestant("d", False, case="c3", unchecked=True))  # a model with no pair
    write_aggregates(records, tmp_path)
    with (tmp_path / "leaderboard.csv").open() as handle:
        rows = {row["model"]: row for row in csv.DictReader(handle)}
    assert {name: rows[name]["n_pairs"] for name in "abcd"} == {
        "a": "3",
        "b": "3",
        "c": "2",
        "d": "0",
    }
    assert float(rows["a"]["win_rate"]) == pytest.approx(2 / 3)
    assert float(rows["c"]["win_rate"]) == 0.0
    low, high = float(rows["c"]["win_rate_ci_low"]), float(rows["c"]["win_rate_ci_high"])
    assert (low, high) == pytest.approx((0.0, 0.6576), abs=1e-4)  # Wilson at 0 of 2
    assert math.isnan(float(rows["d"]["win_rate"] or "nan"))


def test_the_markdown_leaderboard_shows_the_win_rate_only_with_pairs() -> None:
    records = [*contest("a", "b", "c"), contestant("d", False, case="c3", unchecked=True)]
    header, rows = board_table(summarize(records).board)
    column = header.index("win rate [95% CI]")
    assert header[column - 1] == "answered"
    shown = {row[1]: row[column] for row in rows}
    assert shown == {
        "a": "1.00 [0.34, 1.00] (n=2)",
        "b": "0.00 [0.00, 0.79] (n=1)",  # Wilson at 0 of 1
        "c": "0.00 [0.00, 0.79] (n=1)",
        "d": "-",
    }
    assert "win rate [95% CI]" in board_markdown(summarize(records).board)
    undecided = [contestant("a", True, unchecked=True), contestant("b", False, unchecked=True)]
    assert "win rate [95% CI]" not in board_table(summarize(undecided).board)[0]


@pytest.mark.slow
def test_report_html_shows_the_win_rates_in_chromium(tmp_path: Path) -> None:
    records = [
        *contest(BOLD, "smollm2", "smollm2:concise"),
        *contest(BOLD, "smollm2", case="c2"),
        *contest("smollm2", "smollm2:concise", case="c3"),
    ]
    report = write_report(records, tmp_path)
    with chromium_page(viewport={"width": 1400, "height": 900}) as page:
        page.goto(report.as_uri())
        board = page.locator("table.leaderboard")
        headers = board.locator("th").all_inner_texts()
        assert "win rate (95% CI)" in headers
        column = headers.index("win rate (95% CI)")
        shown = {
            row.locator("td").nth(1).inner_text(): row.locator("td").nth(column).inner_text()
            for row in board.locator("tr").all()[1:]
        }
        assert shown == {
            BOLD: "1.00 [0.44, 1.00] (n=3)",  # Wilson at 3 of 3
            "smollm2": "0.33 [0.06, 0.79] (n=3)",
            "smollm2:concise": "0.00 [0.00, 0.66] (n=2)",
        }
        matrix = page.locator("table.win-matrix")
        assert matrix.locator("th").all_inner_texts() == [
            "model",
            "win rate [95% CI]",
            f"vs {BOLD}",
            "vs smollm2",
            "vs smollm2:concise",
        ]
        cells = {
            row.locator("td").first.inner_text(): row.locator("td").all_inner_texts()[2:]
            for row in matrix.locator("tbody tr").all()
        }
        assert cells == {
            BOLD: ["-", "1.00 (n=2)", "1.00 (n=1)"],
            "smollm2": ["0.00 (n=2)", "-", "1.00 (n=1)"],
            "smollm2:concise": ["0.00 (n=1)", "0.00 (n=1)", "-"],
        }
        note = page.locator("#pairwise p.note").inner_text()
        assert "select-best contests within this run" in note
        assert "baseline" not in note  # no pair against a baseline run
        # The label is text in both tables, never markup
        assert page.locator("table.leaderboard b, table.win-matrix b").count() == 0
