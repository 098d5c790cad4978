"""pass^k first for agent suites: a run with agent items (``agent_steps`` set) ranks its boards
by pass^k (ties: the pass rate) and shows it first among the quality columns, in the leaderboard
CSV, the terminal board, the markdown board and report.html; other runs are as they were."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from pytest_llmbench.render.markup import board_table
from pytest_llmbench.render.terminal import format_leaderboard
from pytest_llmbench.report.html_tables import leaderboard_table
from pytest_llmbench.results import AGENT_BOARD, leaderboard, write_aggregates
from pytest_llmbench.results.record import build_record
from pytest_llmbench.results.summary import records_frame


def rec(model: str, case_id: str, repeat: int, passed: bool, score: float, agent: bool) -> Any:
    return build_record(
        nodeid=f"tasks.eval.yaml::{case_id}[{model}-r{repeat}]",
        suite="tasks",
        case_id=case_id,
        model=model,
        repeat=repeat,
        outcome="passed" if passed else "failed",
        score=score,
        agent_steps=3 if agent else None,
    )


def runs(model: str, case_id: str, passes: int, agent: bool, failed_score: float = 0.0) -> Any:
    """Three repeats of ``case_id``, the first ``passes`` of them passed."""
    return [
        rec(
            model, case_id, repeat, repeat < passes, 1.0 if repeat < passes else failed_score, agent
        )
        for repeat in range(3)
    ]


def reliable_and_flaky(agent: bool) -> list[dict[str, Any]]:
    """``steady`` always passes c1 and never c2 (pass rate 0.5, pass^3 0.5); ``flaky`` passes
    each case 2 times of 3 (pass rate 0.67, pass^3 0)."""
    return [
        *runs("steady", "c1", 3, agent),
        *runs("steady", "c2", 0, agent),
        *runs("flaky", "c1", 2, agent),
        *runs("flaky", "c2", 2, agent),
    ]


@pytest.mark.parametrize(
    ("agent", "order"), [(True, ["steady", "flaky"]), (False, ["flaky", "steady"])]
)
def test_an_agent_run_ranks_by_pass_hat_k(agent: bool, order: list[str]) -> None:
    board = leaderboard(records_frame(reliable_and_flaky(agent)))
    assert board["model"].tolist() == order
    assert board.attrs[AGENT_BOARD] is agent
    hats = dict(zip(board["model"], board["pass_hat_k"], strict=True))
    assert hats["steady"] == pytest.approx(0.5) and hats["flaky"] == pytest.approx(0.0)


def test_a_pass_hat_k_tie_is_broken_by_the_pass_rate_not_the_score() -> None:
    # both pass^3 0.5; "scored" fails c2 with high scores (score 0.95, pass rate 0.5),
    # "passing" passes c2 once (score 0.67, pass rate 0.67)
    records = [
        *runs("scored", "c1", 3, True),
        *runs("scored", "c2", 0, True, failed_score=0.9),
        *runs("passing", "c1", 3, True),
        *runs("passing", "c2", 1, True),
    ]
    board = leaderboard(records_frame(records))
    assert board["model"].tolist() == ["passing", "scored"]
    assert board["pass_hat_k"].tolist() == pytest.approx([0.5, 0.5])
    plain = [{**record, "agent_steps": None} for record in records]
    assert leaderboard(records_frame(plain))["model"].tolist() == ["scored", "passing"]


@pytest.mark.parametrize("agent", [True, False])
def test_the_leaderboard_csv_puts_pass_hat_k_first_for_agents_only(
    tmp_path: Path, agent: bool
) -> None:
    records = reliable_and_flaky(agent)
    written = write_aggregates(records, tmp_path)
    assert written is not None
    with written.leaderboard.open(encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    header = rows[0]
    at = header.index("pass_rate")
    if agent:
        assert header[at - 2 : at] == ["pass_hat_k", "k"]
        assert [row[header.index("model")] for row in rows[1:]] == ["steady", "flaky"]
    else:
        assert header.index("pass_hat_k") > header.index("score_mean") > at
        assert [row[header.index("model")] for row in rows[1:]] == ["flaky", "steady"]


@pytest.mark.parametrize("agent", [True, False])
def test_the_terminal_markdown_and_html_boards_show_pass_hat_k_first(agent: bool) -> None:
    board = leaderboard(records_frame(reliable_and_flaky(agent)))
    header, *rows = format_leaderboard(board)
    if agent:
        assert header.split()[:4] == ["#", "model", "pass^k", "score"]
        assert rows[0].split()[:4] == ["1", "steady", "0.50", "k=3"]
    else:
        assert "pass^k" not in header
    columns, cells = board_table(board)
    assert ("pass^k" in columns) is agent
    if agent:
        assert columns[2] == "pass^k" and cells[0][2] == "0.500"
    html = leaderboard_table(board)
    first = html.index(">pass^k")
    assert (first < html.index(">score")) is agent


@pytest.mark.parametrize("agent", [True, False])
def test_a_by_axis_csv_puts_pass_hat_k_first_for_agents_only(tmp_path: Path, agent: bool) -> None:
    records = [
        {**record, "prompt_variant": "terse" if record["model"] == "steady" else "chatty"}
        for record in reliable_and_flaky(agent)
    ]
    written = write_aggregates(records, tmp_path)
    assert written is not None and "prompt_variant" in written.grouped
    with written.grouped["prompt_variant"].open(encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    at = header.index("pass_rate")
    if agent:
        assert header[at - 2 : at] == ["pass_hat_k", "k"]
    else:
        assert header.index("pass_hat_k") > at
