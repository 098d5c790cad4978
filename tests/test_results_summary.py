"""results.summary.summarize: every table computed once, equal to the tables computed apart."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from pytest_llmbench.results import summary as lb
from pytest_llmbench.results.record import build_record
from pytest_llmbench.results.stats import case_verdicts


def rec(**values: Any) -> dict[str, Any]:
    values.setdefault("model", "m1")
    values.setdefault("suite", "s1")
    values.setdefault("case_id", "c1")
    values.setdefault("repeat", 0)
    values.setdefault("outcome", "passed")
    values.setdefault("nodeid", f"{values['suite']}::{values['case_id']}[{values['model']}]")
    return build_record(**values)


def one_suite_each() -> list[dict[str, Any]]:
    """m1 and m2 on suite s1, two repeats; m2 judged on a dimension m1 never had."""
    return [
        rec(case_id="c1", repeat=0, score=1.0, latency_s=1.0, cost_usd=0.001),
        rec(case_id="c1", repeat=1, outcome="failed", score=0.0, latency_s=2.0),
        rec(case_id="c2", repeat=0, score=0.5, latency_s=0.5),
        rec(model="m2", case_id="c1", score=0.9, dimensions={"coherence": 4.0}),
        rec(model="m2", case_id="c2", outcome="error", error_kind="timeout"),
    ]


def several_suites() -> list[dict[str, Any]]:
    """m1 also on suite s2, judged there on another dimension."""
    extra = rec(suite="s2", score=0.25, outcome="failed", dimensions={"correctness": 2.0})
    return [*one_suite_each(), extra]


@pytest.mark.parametrize("records", [one_suite_each(), several_suites()])
def test_summary_tables_equal_the_tables_computed_apart(records: list[dict[str, Any]]) -> None:
    summary = lb.summarize(list(reversed(records)))  # arrival order does not matter
    frame = lb.records_frame(sorted(records, key=lb.case_order))
    pd.testing.assert_frame_equal(summary.board, lb.leaderboard(frame))
    pd.testing.assert_frame_equal(summary.all_metrics, lb.all_metrics(frame))
    for model in ("m1", "m2"):
        expected = lb.model_aggregate(frame, model)
        pd.testing.assert_frame_equal(summary.model_table(model), expected)
    assert summary.verdicts == tuple(case_verdicts(records))
    assert summary.models == tuple(lb.leaderboard(frame)["model"])


def test_records_are_summarized_in_case_order() -> None:
    records = several_suites()
    summary = lb.summarize(list(reversed(records)))
    assert list(summary.records) == sorted(records, key=lb.case_order)
