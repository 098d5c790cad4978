"""Tests for pytest_llmbench.results.summary: aggregation rules, ranking, CSV files, terminal table."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import Bench, assert_imported_lazily

from pytest_llmbench import results as lb
from pytest_llmbench.render import terminal as boardtext
from pytest_llmbench.render.markup import INCOMPLETE_NOTE
from pytest_llmbench.render.terminal import format_judges, format_leaderboard
from pytest_llmbench.results import stats
from pytest_llmbench.results.record import FIELDS, build_record
from pytest_llmbench.results.stats import case_verdicts
from pytest_llmbench.results.stats.agreement import dimension_agreement


def rec(**values: Any) -> dict[str, Any]:
    """A complete record; model m1, suite s1, case c1, repeat 0, passed unless told."""
    values.setdefault("model", "m1")
    values.setdefault("suite", "s1")
    values.setdefault("case_id", "c1")
    values.setdefault("repeat", 0)
    values.setdefault("outcome", "passed")
    values.setdefault("nodeid", f"{values['suite']}::{values['case_id']}[{values['model']}]")
    return build_record(**values)


def suite_s1() -> list[dict[str, Any]]:
    """Five items of m1/s1. Error and skipped items carry values that must not leak into means."""
    return [
        rec(
            case_id="c1",
            repeat=0,
            score=1.0,
            latency_s=1.0,
            ttft_s=0.2,
            input_tokens=10,
            output_tokens=20,
            cost_usd=0.001,
            tokens_per_s=10.0,
            tool_call_count=1,
        ),
        rec(
            case_id="c1",
            repeat=1,
            outcome="failed",
            score=0.5,
            latency_s=2.0,
            input_tokens=12,
            output_tokens=30,
            cost_usd=0.002,
            tokens_per_s=20.0,
            transport_retries=1,
        ),
        rec(
            case_id="c2",
            repeat=0,
            outcome="error",
            latency_s=50.0,
            ttft_s=9.0,
            input_tokens=5,
            cost_usd=0.0005,
            tokens_per_s=999.0,
            transport_retries=3,
            error="boom",
            error_kind="provider",
        ),
        rec(
            case_id="c2",
            repeat=1,
            outcome="skipped",
            score=0.0,
            latency_s=100.0,
            ttft_s=7.0,
            input_tokens=1000,
            output_tokens=1000,
            cost_usd=1.0,
            transport_retries=7,
            tool_call_count=9,
        ),
        rec(
            case_id="c3",
            repeat=0,
            score=None,
            latency_s=3.0,
            ttft_s=0.4,
            input_tokens=8,
            output_tokens=10,
            cost_usd=0.003,
            tool_call_count=2,
        ),
    ]


def sample_records() -> list[dict[str, Any]]:
    return [
        *suite_s1(),
        rec(
            suite="s2",
            case_id="c1",
            score=0.8,
            latency_s=0.5,
            input_tokens=4,
            output_tokens=6,
            cost_usd=0.001,
        ),
        rec(model="m2", case_id="c1", outcome="failed", score=0.25, latency_s=1.5),
    ]


def row_of(frame: pd.DataFrame, **keys: Any) -> pd.Series:
    mask = pd.Series(True, index=frame.index)
    for name, value in keys.items():
        mask &= frame[name] == value
    (index,) = frame.index[mask]
    return frame.loc[index]


# --- records_frame -------------------------------------------------------------------------


def test_records_frame_has_record_fields_and_numeric_nan() -> None:
    frame = lb.records_frame(suite_s1())
    assert list(frame.columns) == [*FIELDS, "graded_outcome", "graded_score"]
    assert len(frame) == 5
    assert frame["score"].dtype == "float64"
    assert pd.isna(frame["score"].iloc[4])
    assert pd.isna(frame["output_tokens"].iloc[2])


def test_records_frame_of_nothing_is_empty_with_columns() -> None:
    frame = lb.records_frame([])
    assert frame.empty
    assert list(frame.columns) == [*FIELDS, "graded_outcome", "graded_score"]
    assert lb.aggregate(frame, ["model"]).columns.tolist() == ["model", *lb.METRIC_COLUMNS]


# --- aggregate rules -----------------------------------------------------------------------


def test_metric_columns_order() -> None:
    frame = lb.all_metrics(lb.records_frame(sample_records()))
    assert list(frame.columns) == ["model", "suite", *lb.METRIC_COLUMNS]
    assert lb.METRIC_COLUMNS[0] == "n_items" and lb.METRIC_COLUMNS[-1] == "k"
    # Coverage, the incomplete mark and multiple-choice accuracy sit beside the pass rate.
    pass_rate = lb.METRIC_COLUMNS.index("pass_rate")
    assert lb.METRIC_COLUMNS[pass_rate : pass_rate + 5] == (
        "pass_rate",
        "coverage",
        "incomplete",
        "mc_n",
        "mc_accuracy",
    )
    # The repeat statistics come right after the judge totals, before any dim_* column.
    assert lb.METRIC_COLUMNS[-13:] == (
        "n_cached",
        "batched_items",
        "judge_cost_usd_total",
        "judge_tokens_total",
        "judge_errors",
        "score_ci_low",
        "score_ci_high",
        "pass_rate_ci_low",
        "pass_rate_ci_high",
        "n_flaky",
        "pass_at_k",
        "pass_hat_k",
        "k",
    )
    # with reasoning and cached input tokens' total and mean, batched_items, n_stopped_early,
    # human_verdicts
    assert len(lb.METRIC_COLUMNS) == 51
    # The repeats --stop-early spared, beside the skipped items they are among.
    skipped = lb.METRIC_COLUMNS.index("n_skipped")
    assert lb.METRIC_COLUMNS[skipped + 1] == "n_stopped_early"


def test_counts_and_rates_count_errors_as_failures_by_default() -> None:
    row = row_of(lb.all_metrics(lb.records_frame(sample_records())), model="m1", suite="s1")
    assert (row["n_items"], row["n_cases"], row["n_repeats"]) == (5, 3, 2)
    assert (row["n_passed"], row["n_failed"], row["n_errors"], row["n_skipped"]) == (2, 1, 1, 1)
    assert row["error_rate"] == pytest.approx(1 / 4)
    # The error is a failure: 2 passed of 4 run (the skipped item is not run).
    assert row["pass_rate"] == pytest.approx(2 / 4)
    # ... scored 0: 1.0, 0.5 and 0.0 (the passed item without a score has none; ddof=1 std).
    assert row["score_mean"] == pytest.approx(0.5)
    assert row["score_std"] == pytest.approx(0.5)
    # 3 of the 4 items run got an answer; 1 error in 4 is more than 10%.
    assert row["coverage"] == pytest.approx(3 / 4)
    assert row["incomplete"]


def test_counts_and_rates_leave_errors_out_with_skip() -> None:
    frame = lb.records_frame(sample_records(), errors_count_as="skip")
    row = row_of(lb.all_metrics(frame), model="m1", suite="s1")
    assert (row["n_passed"], row["n_failed"], row["n_errors"], row["n_skipped"]) == (2, 1, 1, 1)
    assert row["error_rate"] == pytest.approx(1 / 4)
    assert row["pass_rate"] == pytest.approx(2 / 3)
    # Only the answered items with a score: 1.0 and 0.5 (ddof=1 std).
    assert row["score_mean"] == pytest.approx(0.75)
    assert row["score_std"] == pytest.approx(math.sqrt(0.125))
    # Coverage and the incomplete mark do not depend on the policy: they show what it hides.
    assert row["coverage"] == pytest.approx(3 / 4)
    assert row["incomplete"]


def test_incomplete_is_more_than_a_tenth_of_errors() -> None:
    answered = [rec(case_id=f"c{i}", score=1.0) for i in range(9)]
    one_in_ten = lb.leaderboard(lb.records_frame([*answered, rec(case_id="e", outcome="error")]))
    assert not one_in_ten.iloc[0]["incomplete"] and one_in_ten.iloc[0]["coverage"] == 0.9
    two_in_eleven = [
        *answered,
        rec(case_id="e", outcome="error"),
        rec(case_id="f", outcome="error"),
    ]
    assert lb.leaderboard(lb.records_frame(two_in_eleven)).iloc[0]["incomplete"]


def test_a_model_that_mostly_errored_does_not_rank_first() -> None:
    """The issue's case: 28 errors of 33 items ranked #1 because errors were left out."""
    flaky_api = [rec(model="flaky-api", case_id=f"c{i}", score=1.0) for i in range(5)]
    flaky_api += [rec(model="flaky-api", case_id=f"c{i}", outcome="error") for i in range(5, 33)]
    steady = [rec(model="steady", case_id=f"c{i}", score=1.0) for i in range(30)]
    steady += [
        rec(model="steady", case_id=f"c{i}", outcome="failed", score=0.0) for i in range(30, 33)
    ]
    board = lb.leaderboard(lb.records_frame([*flaky_api, *steady]))
    assert board["model"].tolist() == ["steady", "flaky-api"]
    flaky = board.iloc[1]
    assert flaky["pass_rate"] == pytest.approx(5 / 33) and flaky["score_mean"] == pytest.approx(
        5 / 33
    )
    assert flaky["coverage"] == pytest.approx(5 / 33) and flaky["incomplete"]
    # With skip the errors are left out and flaky-api ranks first, but its row says why.
    skipped = lb.leaderboard(lb.records_frame([*flaky_api, *steady], errors_count_as="skip"))
    assert skipped["model"].tolist() == ["flaky-api", "steady"]
    lines = format_leaderboard(skipped)
    assert lines[0].split() == [
        "#",
        "model",
        "score",
        "[95%",
        "CI]",
        "pass",
        "answered",
        "cost",
        "$",
        "p50",
        "s",
        "ttft",
        "s",
    ]
    assert " 5/33 ! " in lines[1] and " 33/33 " in lines[2]
    assert lines[-1].startswith("! incomplete: more than 10% of the items errored")


def test_totals_include_errors_means_only_answers() -> None:
    row = row_of(lb.all_metrics(lb.records_frame(sample_records())), model="m1", suite="s1")
    assert row["input_tokens_total"] == 10 + 12 + 5 + 8
    assert row["output_tokens_total"] == 20 + 30 + 10
    assert row["input_tokens_mean"] == pytest.approx((10 + 12 + 8) / 3)
    assert row["output_tokens_mean"] == pytest.approx(20.0)
    assert row["cost_usd_total"] == pytest.approx(0.001 + 0.002 + 0.0005 + 0.003)
    assert row["cost_usd_mean"] == pytest.approx(0.006 / 3)
    assert row["tool_call_count_total"] == 3
    assert row["transport_retries_total"] == 4


def test_totals_include_what_earlier_attempts_of_a_rerun_item_spent() -> None:
    """pytest-rerunfailures paid for every attempt; the record keeps the final one's numbers."""
    earlier = {"outcome": "failed", "cost_usd": 0.02, "input_tokens": 10, "output_tokens": 7}
    records = [
        rec(case_id="c1", cost_usd=0.01, input_tokens=10, output_tokens=5, attempts=[earlier] * 2),
        rec(case_id="c2", cost_usd=0.01, input_tokens=10, output_tokens=5),
    ]
    (row,) = lb.leaderboard(lb.records_frame(records)).to_dict("records")
    assert row["cost_usd_total"] == pytest.approx(0.01 + 0.01 + 2 * 0.02)
    assert (row["input_tokens_total"], row["output_tokens_total"]) == (40, 24)
    # Means describe the final answers.
    assert row["cost_usd_mean"] == pytest.approx(0.01) and row["output_tokens_mean"] == 5


def test_latency_and_ttft_stats_use_linear_percentiles() -> None:
    row = row_of(lb.all_metrics(lb.records_frame(sample_records())), model="m1", suite="s1")
    assert row["latency_s_mean"] == pytest.approx(2.0)
    assert row["latency_s_p50"] == pytest.approx(2.0)
    assert row["latency_s_p95"] == pytest.approx(2.9)
    assert row["ttft_s_mean"] == pytest.approx(0.3)
    assert row["ttft_s_p50"] == pytest.approx(0.3)
    assert row["ttft_s_p95"] == pytest.approx(0.39)
    assert row["ttft_n"] == 2
    assert row["tokens_per_s_mean"] == pytest.approx(15.0)


def test_all_metrics_rows_sorted_by_model_then_suite() -> None:
    records = list(reversed(sample_records()))
    frame = lb.all_metrics(lb.records_frame(records))
    assert list(zip(frame["model"], frame["suite"], strict=False)) == [
        ("m1", "s1"),
        ("m1", "s2"),
        ("m2", "s1"),
    ]


def test_missing_values_give_nan_not_zero() -> None:
    records = [rec(outcome="error"), rec(case_id="c2", outcome="skipped")]
    frame = lb.records_frame(records, errors_count_as="skip")
    row = lb.aggregate(frame, ["model"]).iloc[0]
    assert row["error_rate"] == pytest.approx(1.0)
    for name in ("pass_rate", "score_mean", "cost_usd_total", "latency_s_p50", "ttft_s_mean"):
        assert math.isnan(row[name]), name
    assert pd.isna(row["input_tokens_total"])
    assert row["ttft_n"] == 0
    assert row["transport_retries_total"] == 0
    # Counted as a failure (the default), the error gives a pass rate and a score of 0.
    graded = lb.aggregate(lb.records_frame(records), ["model"]).iloc[0]
    assert (graded["pass_rate"], graded["score_mean"], graded["coverage"]) == (0.0, 0.0, 0.0)


def test_error_rate_nan_when_everything_skipped() -> None:
    row = lb.aggregate(lb.records_frame([rec(outcome="skipped")]), ["model"]).iloc[0]
    assert (row["n_items"], row["n_skipped"]) == (1, 1)
    assert math.isnan(row["error_rate"])


def test_frames_stay_unrounded() -> None:
    frame = lb.records_frame(sample_records(), errors_count_as="skip")
    row = row_of(lb.all_metrics(frame), model="m1", suite="s1")
    assert row["pass_rate"] == 2 / 3
    assert row["pass_rate"] != round(2 / 3, 6)


# --- model_aggregate -----------------------------------------------------------------------


def test_model_aggregate_has_suite_rows_and_all_row() -> None:
    frame = lb.model_aggregate(lb.records_frame(sample_records()), "m1")
    assert list(frame.columns) == ["suite", *lb.METRIC_COLUMNS]
    assert frame["suite"].tolist() == ["s1", "s2", "__all__"]
    total = frame.iloc[-1]
    # c1 of s1 and c1 of s2 are different cases.
    assert (total["n_items"], total["n_cases"], total["n_passed"]) == (6, 4, 3)
    # The error of s1 counts as a failure scored 0.
    assert total["score_mean"] == pytest.approx((1.0 + 0.5 + 0.0 + 0.8) / 4)
    assert total["cost_usd_total"] == pytest.approx(0.0075)


def test_model_aggregate_unknown_model_raises() -> None:
    with pytest.raises(KeyError, match="nope"):
        lb.model_aggregate(lb.records_frame(sample_records()), "nope")


# --- leaderboard ranking -------------------------------------------------------------------


def ranking_records() -> list[dict[str, Any]]:
    return [
        rec(model="a", score=0.9),
        rec(model="a", case_id="c2", outcome="failed", score=0.9),
        rec(model="b", score=0.9),
        rec(model="c", score=0.5, cost_usd=0.01),
        rec(model="d", score=0.5, cost_usd=0.001),
        rec(model="f", score=0.7),
        rec(model="e", score=0.7),
        rec(model="aa-errors", outcome="error"),
        rec(model="y-noscore", score=None),
    ]


def test_leaderboard_ranks_with_tie_breaks_and_nan_last() -> None:
    board = lb.leaderboard(lb.records_frame(ranking_records()))
    assert board.columns.tolist()[:2] == ["rank", "model"]
    assert board["rank"].tolist() == list(range(1, 9))
    # score desc; then pass rate desc (b > a); then cost asc (d < c); then name (e < f);
    # the all-error model scores 0 (errors count as failures); NaN score last.
    assert board["model"].tolist() == ["b", "a", "e", "f", "d", "c", "aa-errors", "y-noscore"]
    skipped = lb.leaderboard(lb.records_frame(ranking_records(), errors_count_as="skip"))
    # Left out, the errors leave aa-errors without a score or a pass rate: last.
    assert skipped["model"].tolist()[-2:] == ["y-noscore", "aa-errors"]


def test_leaderboard_is_one_row_per_model() -> None:
    board = lb.leaderboard(lb.records_frame(sample_records()))
    assert board["model"].tolist() == ["m1", "m2"]
    assert board.iloc[0]["n_items"] == 6
    assert board.iloc[1]["score_mean"] == pytest.approx(0.25)


# --- model_dir_name ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("openai/gpt-4o-mini", "openai-gpt-4o-mini"),
        ("local/smollm2", "local-smollm2"),
        ("model v1.5:free", "model-v1.5-free"),
        ("a  b//c", "a-b-c"),
        ("a--b", "a-b"),
        ("../etc/passwd", "etc-passwd"),
        ("..", "model"),
        ("", "model"),
        ("-.-", "model"),
        ("ünï", "n"),
        ("Keep_Case.2", "Keep_Case.2"),
    ],
)
def test_model_dir_name(model: str, expected: str) -> None:
    assert lb.model_dir_name(model) == expected


# --- write_aggregates ----------------------------------------------------------------------


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def csv_header(path: Path) -> list[str]:
    with path.open(newline="") as handle:
        return next(csv.reader(handle))


def test_write_aggregates_none_without_records(tmp_path: Path) -> None:
    assert lb.write_aggregates([], tmp_path / "out") is None
    assert not (tmp_path / "out").exists()


def test_write_aggregates_file_layout(tmp_path: Path) -> None:
    records = [*sample_records(), rec(model="openai/gpt-4o-mini", score=1.0)]
    written = lb.write_aggregates(records, tmp_path / "out")
    assert written is not None
    assert written.all_metrics == tmp_path / "out" / "all_metrics.csv"
    assert written.leaderboard == tmp_path / "out" / "leaderboard.csv"
    assert dict(written.per_model) == {
        "m1": tmp_path / "out" / "m1" / "aggregate_metrics.csv",
        "m2": tmp_path / "out" / "m2" / "aggregate_metrics.csv",
        "openai/gpt-4o-mini": tmp_path / "out" / "openai-gpt-4o-mini" / "aggregate_metrics.csv",
    }
    assert all(path.is_file() for path in written.per_model.values())


def test_written_csv_headers_and_values(tmp_path: Path) -> None:
    written = lb.write_aggregates(sample_records(), tmp_path)
    assert written is not None
    assert csv_header(written.all_metrics) == ["model", "suite", *lb.METRIC_COLUMNS]
    assert csv_header(written.leaderboard) == ["rank", "model", *lb.METRIC_COLUMNS]
    assert csv_header(written.per_model["m1"]) == ["suite", *lb.METRIC_COLUMNS]
    row = read_csv(written.all_metrics)[0]
    assert (row["model"], row["suite"]) == ("m1", "s1")
    assert row["pass_rate"] == "0.5"
    assert row["score_std"] == "0.5"
    assert (row["coverage"], row["incomplete"]) == ("0.75", "True")
    assert row["input_tokens_total"] == "35"
    assert row["n_items"] == "5"
    m2 = read_csv(written.all_metrics)[2]
    assert m2["cost_usd_total"] == "" and m2["ttft_s_p50"] == ""
    assert [r["suite"] for r in read_csv(written.per_model["m1"])] == ["s1", "s2", "__all__"]
    assert [r["model"] for r in read_csv(written.leaderboard)] == ["m1", "m2"]


def test_dir_name_collisions_get_suffix(tmp_path: Path) -> None:
    records = [
        rec(model="openai:gpt-4o"),
        rec(model="openai/gpt-4o"),
        rec(model="M"),
        rec(model="m"),
    ]
    written = lb.write_aggregates(records, tmp_path)
    assert written is not None
    dirs = {model: path.parent.name for model, path in written.per_model.items()}
    # Sorted by model name: "/" sorts before ":", "M" before "m"; case-insensitive collision.
    assert dirs == {
        "openai/gpt-4o": "openai-gpt-4o",
        "openai:gpt-4o": "openai-gpt-4o-2",
        "M": "M",
        "m": "m-2",
    }
    assert read_csv(written.per_model["openai:gpt-4o"])[-1]["n_items"] == "1"


# --- format_leaderboard --------------------------------------------------------------------


def test_format_leaderboard_table() -> None:
    records = [
        rec(model="alpha", score=1.0, cost_usd=0.0012, latency_s=1.234, ttft_s=0.5),
        rec(model="beta/long-name", outcome="error"),
    ]
    lines = format_leaderboard(lb.leaderboard(lb.records_frame(records, errors_count_as="skip")))
    # One answered item: a single case, so the Wilson interval of one observation:
    # p = 1, n = 1: low = 1 / (1 + z^2) = 0.21, not the point [1.00, 1.00].
    assert lines == [
        "#  model              score [95% CI]    pass  answered  cost $  p50 s  ttft s",
        "1  alpha           1.00 [0.21, 1.00]  100.0%       1/1  0.0012   1.23    0.50",
        "2  beta/long-name                  -       -     0/1 !       -      -       -",
        INCOMPLETE_NOTE,
    ]
    # No model with an error: no answered column (every item was answered).
    assert "answered" not in format_leaderboard(lb.leaderboard(lb.records_frame(records[:1])))[0]


def test_format_leaderboard_truncates() -> None:
    records = [rec(model=name, score=score) for name, score in (("x", 0.1), ("y", 0.2), ("z", 0.3))]
    lines = format_leaderboard(lb.leaderboard(lb.records_frame(records)), max_rows=2)
    assert len(lines) == 4
    assert lines[1].split()[:3] == ["1", "z", "0.30"]
    assert lines[2].split()[:2] == ["2", "y"]
    assert lines[-1] == "... 1 more model(s)"


# --- import cost ---------------------------------------------------------------------------


def test_import_does_not_load_pandas() -> None:
    assert_imported_lazily("pytest_llmbench.results.summary", "m.records_frame([])", "pandas")


def test_records_without_a_model_aggregate_under_their_own_label(tmp_path: Path) -> None:
    records = [
        build_record(suite="s", case_id="a", model=None, outcome="passed", score=1.0),
        build_record(suite="s", case_id="b", model="m", outcome="failed", score=0.0),
    ]
    written = lb.write_aggregates(records, tmp_path)
    assert written is not None
    board = lb.leaderboard(lb.records_frame(records))
    assert list(board["model"]) == ["(no model)", "m"]
    assert set(written.per_model) == {"(no model)", "m"}


def test_cached_answers_and_rate_limit_waits_are_counted() -> None:
    records = [
        build_record(suite="s", case_id="a", model="m", outcome="passed", score=1.0, cached=True),
        build_record(
            suite="s", case_id="b", model="m", outcome="passed", score=1.0, rate_limit_wait_s=1.5
        ),
        build_record(suite="s", case_id="c", model="m", outcome="error", rate_limit_wait_s=2.0),
    ]
    (row,) = lb.leaderboard(lb.records_frame(records)).to_dict("records")
    assert row["n_cached"] == 1
    assert row["rate_limit_wait_s_total"] == pytest.approx(3.5)


# --- judges --------------------------------------------------------------------------------


def judge(name: str, scores: dict[str, float], error: str | None = None) -> dict[str, Any]:
    """A judge entry of assertion 0, shaped as the record contract says."""
    return {
        "assertion": 0,
        "type": "llm-rubric" if "rubric" in scores else "jury",
        "judge": name,
        "model_id": f"openai/{name}",
        "scores": scores,
        "reasons": {key: f"{name} says so" for key in scores},
        "error": error,
        "call_attempts": 1,
        "input_tokens": 8,
        "output_tokens": 2,
        "cost_usd": None,
        "latency_s": 0.1,
        "cached": False,
    }


def judged_records() -> list[dict[str, Any]]:
    """m1: two answered jury items, a judge error item, a skipped item; m2: rubric + old record."""
    old = rec(model="m2", case_id="c2", score=1.0)
    for name in ("judges", "dimensions", "judge_cost_usd", "judge_tokens"):
        del old[name]  # results written before judges existed
    return [
        rec(
            case_id="c1",
            judges=[
                judge("j1", {"correctness": 4, "coherence": 5}),
                judge("j2", {"correctness": 5, "coherence": 5}),
            ],
            dimensions={"correctness": 4.5, "coherence": 5.0},
            judge_tokens=30,
            judge_cost_usd=0.002,
        ),
        rec(
            case_id="c2",
            outcome="failed",
            judges=[
                judge("j1", {"correctness": 2, "coherence": 4}),
                judge("j2", {"correctness": 3, "coherence": 5}),
                judge("j3", {}, error="timeout"),
            ],
            dimensions={"correctness": 2.5, "coherence": 4.5},
            judge_tokens=40,
        ),
        rec(
            case_id="c3",
            outcome="error",
            error_kind="judge",
            judges=[judge("j1", {}, error="not JSON"), judge("j2", {}, error="timeout")],
            judge_tokens=10,
            judge_cost_usd=0.001,
        ),
        rec(
            case_id="c4",
            outcome="skipped",
            judges=[judge("j1", {}, error="must not count")],
            dimensions={"correctness": 1.0, "zeal": 1.0},
            judge_tokens=1000,
            judge_cost_usd=1.0,
        ),
        rec(
            model="m2",
            judges=[judge("j1", {"rubric": 0.8})],
            dimensions={"rubric": 0.8},
            judge_tokens=5,
            judge_cost_usd=0.0005,
        ),
        old,
    ]


DIM_COLUMNS = ["dim_correctness_mean", "dim_coherence_mean", "dim_rubric_mean"]


def test_judge_totals_count_errors_but_not_skips() -> None:
    frame = lb.all_metrics(lb.records_frame(judged_records()))
    m1, m2 = row_of(frame, model="m1"), row_of(frame, model="m2")
    # c2's cost is unknown (None); c4 is skipped: 0.002 + 0.001.
    assert m1["judge_cost_usd_total"] == pytest.approx(0.003)
    assert m1["judge_tokens_total"] == 30 + 40 + 10
    assert m1["judge_errors"] == 1 + 2
    # The old record has no judge fields: it adds nothing and breaks nothing.
    assert m2["judge_cost_usd_total"] == pytest.approx(0.0005)
    assert (m2["judge_tokens_total"], m2["judge_errors"], m2["n_items"]) == (5, 0, 2)


def test_dimension_means_are_dynamic_columns_over_answered_items() -> None:
    frame = lb.all_metrics(lb.records_frame(judged_records()))
    # Standard jury dimensions in contract order (correctness before coherence), then A-Z;
    # "zeal" only appears on a skipped item, so it has no column.
    assert list(frame.columns) == ["model", "suite", *lb.METRIC_COLUMNS, *DIM_COLUMNS]
    m1, m2 = row_of(frame, model="m1"), row_of(frame, model="m2")
    assert m1["dim_correctness_mean"] == pytest.approx(3.5)
    assert m1["dim_coherence_mean"] == pytest.approx(4.75)
    assert math.isnan(m1["dim_rubric_mean"])
    assert m2["dim_rubric_mean"] == pytest.approx(0.8)  # the old record has no dimensions
    assert math.isnan(m2["dim_correctness_mean"])


def test_dimension_columns_in_leaderboard_and_model_aggregate() -> None:
    frame = lb.records_frame(judged_records())
    board = lb.leaderboard(frame)
    assert board.columns.tolist() == ["rank", "model", *lb.METRIC_COLUMNS, *DIM_COLUMNS]
    per_model = lb.model_aggregate(frame, "m1")
    # A model's own file has the dimensions that model was judged on.
    assert per_model.columns.tolist() == [
        "suite",
        *lb.METRIC_COLUMNS,
        "dim_correctness_mean",
        "dim_coherence_mean",
    ]
    assert per_model.iloc[-1]["dim_coherence_mean"] == pytest.approx(4.75)


def test_records_without_judges_have_no_dimension_columns() -> None:
    frame = lb.all_metrics(lb.records_frame(sample_records()))
    assert list(frame.columns) == ["model", "suite", *lb.METRIC_COLUMNS]
    row = row_of(frame, model="m1", suite="s1")
    assert (row["judge_tokens_total"], row["judge_errors"]) == (0, 0)
    assert pd.isna(row["judge_cost_usd_total"])


def test_agreement_frame_hand_checked() -> None:
    frame = lb.agreement_frame(dimension_agreement(judged_records()))
    assert frame.columns.tolist() == ["dimension", "alpha", "units", "judges", "values"]
    rows = {row["dimension"]: row for row in frame.to_dict("records")}
    assert list(rows) == ["correctness", "coherence", "rubric"]
    # correctness units (4, 5), (2, 3): D_o = (2 + 2) / 4 = 1; mean 3.5, squares sum 5,
    # D_e = 2 * 5 / (4 - 1) = 10/3; alpha = 1 - 3/10 = 0.7.
    assert rows["correctness"]["alpha"] == pytest.approx(0.7)
    # coherence units (5, 5), (4, 5): D_o = 2 / 4 = 0.5; mean 4.75, squares sum 0.75,
    # D_e = 2 * 0.75 / 3 = 0.5; alpha = 0: no better than chance.
    assert rows["coherence"]["alpha"] == pytest.approx(0.0)
    assert (rows["coherence"]["units"], rows["coherence"]["judges"]) == (2, 2)
    assert math.isnan(rows["rubric"]["alpha"]) and rows["rubric"]["units"] == 0


def test_write_aggregates_with_judges(tmp_path: Path) -> None:
    written = lb.write_aggregates(judged_records(), tmp_path)
    assert written is not None
    assert written.judge_agreement == tmp_path / "judge_agreement.csv"
    assert read_csv(written.judge_agreement) == [
        {"dimension": "correctness", "alpha": "0.7", "units": "2", "judges": "2", "values": "4"},
        {"dimension": "coherence", "alpha": "0.0", "units": "2", "judges": "2", "values": "4"},
        {"dimension": "rubric", "alpha": "", "units": "0", "judges": "0", "values": "0"},
    ]
    assert csv_header(written.all_metrics)[-3:] == DIM_COLUMNS
    assert csv_header(written.leaderboard)[-3:] == DIM_COLUMNS
    m2 = read_csv(written.per_model["m2"])
    assert csv_header(written.per_model["m2"])[-1] == "dim_rubric_mean"
    assert m2[-1]["dim_rubric_mean"] == "0.8" and m2[-1]["judge_cost_usd_total"] == "0.0005"
    m1 = {row["model"]: row for row in read_csv(written.all_metrics)}["m1"]
    assert m1["dim_rubric_mean"] == "" and m1["judge_errors"] == "3"


def test_write_aggregates_without_judges_writes_no_agreement(tmp_path: Path) -> None:
    written = lb.write_aggregates(sample_records(), tmp_path)
    assert written is not None and written.judge_agreement is None
    assert not (tmp_path / "judge_agreement.csv").exists()


def test_format_judges() -> None:
    lines = format_judges(lb.records_frame(judged_records()), dimension_agreement(judged_records()))
    assert lines == [
        "dimension     mean                      alpha  units",
        "correctness  3.500                      0.700      2",
        "coherence    4.750                      0.000      2",
        "rubric       0.800  n/a (fewer than 2 judges)      0",
        "judge errors: 3 (excluded from scores); judge tokens: 85; judge cost: $0.0035",
    ]


def test_format_judges_no_variation_and_unknown_cost() -> None:
    same = {"correctness": 5}
    records = [
        rec(judges=[judge("j1", same), judge("j2", same)], dimensions={"correctness": 5.0}),
        rec(case_id="c2", judges=[judge("j1", same), judge("j2", same)], dimensions=same),
    ]
    lines = format_judges(lb.records_frame(records), dimension_agreement(records))
    assert lines[1].split(maxsplit=2) == ["correctness", "5.000", "n/a (no variation)      2"]
    assert lines[-1] == (
        "judge errors: 0 (excluded from scores); judge tokens: 0; judge cost: unknown"
    )


def test_format_judges_empty_without_judges() -> None:
    assert format_judges(lb.records_frame(sample_records()), ()) == []
    assert format_judges(lb.records_frame([]), ()) == []


# --- repeat statistics ---------------------------------------------------------------------


def repeat_records(model: str = "m1", suite: str = "s1") -> list[dict[str, Any]]:
    """Six cases of two repeats: four pass twice, one is flaky, one fails twice.

    Passed items score 1.0 and failed ones 0.5, so every score and pass rate is hand-checkable.
    """
    runs = {"a": "PP", "b": "PP", "c": "PP", "d": "PP", "e": "PF", "f": "FF"}
    return [
        rec(
            model=model,
            suite=suite,
            case_id=case,
            repeat=index,
            outcome="passed" if mark == "P" else "failed",
            score=1.0 if mark == "P" else 0.5,
        )
        for case, marks in runs.items()
        for index, mark in enumerate(marks)
    ]


def test_ci_columns_are_clustered_by_case() -> None:
    records = [
        *repeat_records(),
        rec(case_id="g", outcome="error"),
        rec(case_id="h", outcome="skipped"),
    ]
    # Errors left out, as with --errors-count-as=skip: the clusters are the answered repeats.
    (row,) = lb.leaderboard(lb.records_frame(records, "skip")).to_dict("records")
    t5 = 2.570581835636  # t(0.975, 6 cases - 1)
    # Pass: 0/1 clusters [1,1] x4, [1,0], [0,0]: m = 9/12 = 0.75; deviation sums 0.5 (x4), -0.5,
    # -1.5 -> squares 1.0 + 0.25 + 2.25 = 3.5; var = 6/5 * 3.5 / 12^2; high clamps at 1.
    assert row["pass_rate"] == 0.75
    assert row["pass_rate_ci_low"] == pytest.approx(0.75 - t5 * math.sqrt(1.2 * 3.5 / 144))
    assert row["pass_rate_ci_high"] == 1.0
    # Score: clusters [1,1] x4, [1,0.5], [0.5,0.5]: m = 10.5/12 = 0.875; deviation sums 0.25 (x4),
    # -0.25, -0.75 -> squares 0.25 + 0.0625 + 0.5625 = 0.875; var = 6/5 * 0.875 / 144.
    assert row["score_mean"] == pytest.approx(0.875)
    # CR1 gives 0.875 - t5 * sqrt(1.2 * 0.875 / 144) = 0.6555, narrower than the Wilson floor on
    # 6 cases: centre (0.875 + z²/12) / (1 + z²/6), half z*sqrt(0.875*0.125/6 + z²/144) / (...)
    # = 0.4754 below it. The wider of the two is kept.
    assert 0.875 - t5 * math.sqrt(1.2 * 0.875 / 144) > row["score_ci_low"]
    assert row["score_ci_low"] == pytest.approx(stats.wilson(0.875, 6)[0])
    assert row["score_ci_low"] == pytest.approx(0.4754, abs=1e-4)
    assert row["score_ci_high"] == 1.0


def test_flaky_and_pass_at_k_columns() -> None:
    records = [*repeat_records(), rec(case_id="g", outcome="error")]
    (row,) = lb.leaderboard(lb.records_frame(records, "skip")).to_dict("records")
    assert (row["n_flaky"], row["k"]) == (1, 2)
    # pass@2 per case: 1 (x4), flaky 1 - C(1,2)/C(2,2) = 1, never 0 -> 5/6.
    # pass^2 per case: 1 (x4), C(1,2)/C(2,2) = 0, 0 -> 4/6. The error-only case is left out.
    assert row["pass_at_k"] == pytest.approx(5 / 6)
    assert row["pass_hat_k"] == pytest.approx(4 / 6)


def test_k_is_the_fewest_answered_repeats() -> None:
    records = [
        *repeat_records(),
        rec(case_id="short", repeat=0, outcome="passed", score=1.0),
        rec(case_id="short", repeat=1, outcome="error"),
    ]
    (row,) = lb.leaderboard(lb.records_frame(records, "skip")).to_dict("records")
    # k = 1: pass@1 = pass^1 = mean per-case pass rate = (4 + 0.5 + 0 + 1) / 7.
    assert row["k"] == 1
    assert row["pass_at_k"] == pytest.approx(5.5 / 7) == row["pass_hat_k"]


def test_repeat_columns_without_answers_are_empty(tmp_path: Path) -> None:
    records = [rec(outcome="error"), rec(case_id="c2", outcome="skipped")]
    written = lb.write_aggregates(records, tmp_path, lb.summarize(records, "skip"))
    assert written is not None
    (row,) = read_csv(written.leaderboard)
    for name in ("score_ci_low", "pass_rate_ci_high", "pass_at_k", "k"):
        assert row[name] == "", name
    assert row["n_flaky"] == "0"


def test_ci_per_suite_row_and_all_row() -> None:
    records = [*repeat_records(suite="s1"), *repeat_records(suite="s2")]
    frame = lb.model_aggregate(lb.records_frame(records), "m1")
    s1, total = frame.iloc[0], frame.iloc[-1]
    # Twice the cases with the same values: same mean, narrower interval (12 clusters).
    assert total["pass_rate"] == s1["pass_rate"] == 0.75
    assert total["pass_rate_ci_low"] > s1["pass_rate_ci_low"]
    assert (s1["n_flaky"], total["n_flaky"]) == (1, 2)


def test_case_verdicts_csv(tmp_path: Path) -> None:
    records = [*repeat_records(), rec(case_id="g", outcome="error"), rec(model="m2", case_id="a")]
    written = lb.write_aggregates(records, tmp_path)
    assert written is not None and written.case_verdicts == tmp_path / "case_verdicts.csv"
    assert csv_header(written.case_verdicts) == list(lb.VERDICT_COLUMNS)
    rows = read_csv(written.case_verdicts)
    assert [(r["model"], r["case_id"], r["verdict"]) for r in rows] == [
        ("m1", "a", "passed"),
        ("m1", "b", "passed"),
        ("m1", "c", "passed"),
        ("m1", "d", "passed"),
        ("m1", "e", "flaky"),
        ("m1", "f", "failed"),
        ("m1", "g", "error"),
        ("m2", "a", "passed"),
    ]
    flaky, error = rows[4], rows[6]
    assert (flaky["suite"], flaky["n"], flaky["passed"], flaky["errors"]) == ("s1", "2", "1", "0")
    assert flaky["pass_rate"] == "0.5"
    assert (error["n"], error["errors"], error["pass_rate"]) == ("0", "1", "")


def clear_winner_records() -> list[dict[str, Any]]:
    """Eight cases: 'good' passes all, 'bad' fails all, 'close' fails one."""
    return [
        rec(
            model=model, case_id=f"c{i}", outcome=outcome, score=1.0 if outcome == "passed" else 0.0
        )
        for i in range(8)
        for model, outcome in (
            ("good", "passed"),
            ("bad", "failed"),
            ("close", "failed" if i == 0 else "passed"),
        )
    ]


def test_comparisons_csv_best_against_each_other_model(tmp_path: Path) -> None:
    written = lb.write_aggregates(clear_winner_records(), tmp_path)
    assert written is not None and written.comparisons == tmp_path / "comparisons.csv"
    assert csv_header(written.comparisons) == list(lb.COMPARISON_COLUMNS)
    rows = read_csv(written.comparisons)
    # Leaderboard order: good, close, bad; both metrics for each pair.
    assert [(r["model_a"], r["model_b"], r["metric"]) for r in rows] == [
        ("good", "close", "score"),
        ("good", "close", "pass_rate"),
        ("good", "bad", "score"),
        ("good", "bad", "pass_rate"),
    ]
    close_score, close_pass, bad_score, bad_pass = rows
    # close: one of 8 cases differs: McNemar p = 1 and the bootstrap floor 2^0 = 1.
    assert (close_score["diff"], close_score["p_value"], close_score["significant"]) == (
        "-0.125",
        "1.0",
        "False",
    )
    assert close_pass["p_value"] == "1.0"
    # bad: 8 discordant pairs: McNemar p = 2 / 2^8 = 0.0078125; score floor 2^(1-8) the same.
    assert (bad_pass["n_cases"], bad_pass["diff"], bad_pass["p_value"]) == ("8", "-1.0", "0.007812")
    assert (bad_score["ci_low"], bad_score["ci_high"], bad_score["significant"]) == (
        "-1.0",
        "-1.0",
        "True",
    )


def test_comparisons_csv_with_one_model_has_only_the_header(tmp_path: Path) -> None:
    written = lb.write_aggregates(repeat_records(), tmp_path)
    assert written is not None and written.comparisons is not None
    assert written.comparisons.read_text().splitlines() == [",".join(lb.COMPARISON_COLUMNS)]


def test_format_leaderboard_vs_top_column() -> None:
    records = clear_winner_records()
    board = lb.leaderboard(lb.records_frame(records))
    comparisons = lb.top_comparisons(records, board["model"].tolist())
    lines = format_leaderboard(board, comparisons=comparisons)
    assert lines[0].split("  ")[-1] == "vs #1"
    # The top row has no vs #1 cell: it ends with its (missing) TTFT.
    assert lines[1].startswith("1  good ") and lines[1].endswith("  -")
    assert len(lines[1]) < len(lines[2])
    # close: one case of 8 differs, -1/8 = -0.125 (rounded half to even), not significant.
    assert lines[2].startswith("2  close") and lines[2].endswith("-0.12 p=1.00 n.s.")
    assert lines[3].startswith("3  bad") and lines[3].endswith("-1.00 p<0.01 *")
    # 8 cases all passing / all failing: the Wilson floor, 8 / (8 + z^2) = 0.68.
    assert "1.00 [0.68, 1.00]" in lines[1] and "0.00 [0.00, 0.32]" in lines[3]


def test_format_leaderboard_fits_100_columns() -> None:
    long_name = "openrouter/meta-llama/llama-3.1-405b-instruct"
    records = [
        {**record, "model": long_name if record["model"] == "close" else record["model"]}
        for record in clear_winner_records()
    ]
    for record in records:
        record.update(cost_usd=1.23456, latency_s=12.5, ttft_s=1.25)
    board = lb.leaderboard(lb.records_frame(records))
    lines = format_leaderboard(
        board, comparisons=lb.top_comparisons(records, board["model"].tolist())
    )
    assert max(len(line) for line in lines) <= 100
    assert "openr...05b-instruct" in lines[2]


def test_a_long_contestant_keeps_its_variant_suffix() -> None:
    cell = boardtext._model_cell("openrouter/meta-llama/llama-3.1-405b:terse@t0.2")
    assert len(cell) <= 20 and cell.endswith("terse@t0.2")


# --- issue 7: variants, grouping, multiple choice, latency-only runs ---------------------------


ISSUE7_FIELDS = (
    "profile",
    "prompt_variant",
    "temperature",
    "optimized",
    "optimization",
    "eval_type",
    "model_tags",
    "images",
    "solver",
    "choice",
)


def vrec(**values: Any) -> dict[str, Any]:
    """:func:`rec` with issue-7 fields (profile, temperature, model_tags, choice, eval_type...)
    set after the build, so the tests hold whether or not record.FIELDS lists them yet."""
    extra = {key: values.pop(key) for key in list(values) if key not in FIELDS}
    return {**rec(**values), **extra}


def matrix_records() -> list[dict[str, Any]]:
    """Two deployment variants of one model, two prompts on one of them, a temperature."""
    aws = {"provider": "aws"}
    return [
        vrec(model="nova_fast:p1@t0.2", case_id="a", score=1.0, profile="nova_fast",
             cost_usd=0.01, model_tags={**aws, "tier": "fast"}, temperature=0.2,
             prompt_variant="p1"),
        vrec(model="nova_fast:p1@t0.2", case_id="b", score=0.0, outcome="failed",
             profile="nova_fast", model_tags={**aws, "tier": "fast"}, temperature=0.2,
             prompt_variant="p1"),
        vrec(model="nova_flex:p1", case_id="a", score=1.0, profile="nova_flex",
             model_tags={**aws, "tier": "flex"}, prompt_variant="p1"),
        vrec(model="nova_flex:p2", case_id="a", score=1.0, profile="nova_flex",
             model_tags={**aws, "tier": "flex"}, prompt_variant="p2"),
        vrec(model="nova_flex:p2", case_id="b", outcome="error", profile="nova_flex",
             model_tags={**aws, "tier": "flex"}, prompt_variant="p2"),
    ]  # fmt: skip


def test_grouped_by_each_axis() -> None:
    frame = lb.records_frame(matrix_records())
    by_profile = lb.grouped(frame, "profile")
    assert by_profile.columns.tolist()[:3] == ["rank", "profile", "n_items"]
    assert by_profile.columns.tolist()[2:] == list(lb.METRIC_COLUMNS)
    assert by_profile["profile"].tolist() == ["nova_flex", "nova_fast"]  # 0.67 beats 0.5
    flex = row_of(by_profile, profile="nova_flex")
    # The error counts as a failure scored 0: (1 + 1 + 0) / 3.
    assert (flex["n_items"], flex["n_errors"], flex["score_mean"]) == (3, 1, pytest.approx(2 / 3))
    by_prompt = lb.grouped(frame, "prompt_variant")
    assert by_prompt["prompt_variant"].tolist() == ["p1", "p2"]  # 0.67 beats 0.5 (1 and an error)
    assert lb.grouped(frame, "temperature")["temperature"].tolist() == ["(none)", "0.2"]
    by_tier = lb.grouped(frame, "tag:tier")
    assert by_tier.columns[1] == "tag_tier" and by_tier["tag_tier"].tolist() == ["flex", "fast"]
    assert lb.grouped(frame, "tag:provider")["tag_provider"].tolist() == ["aws"]
    assert lb.grouped(frame, "tag:nope")["tag_nope"].tolist() == ["(none)"]
    # Records before eval types were quality evals.
    assert lb.grouped(frame, "eval_type")["eval_type"].tolist() == ["quality"]
    by_model = lb.grouped(frame, "model")
    assert by_model.drop(columns="rank").equals(lb.leaderboard(frame).drop(columns="rank"))


def test_grouped_works_on_old_records_and_no_records() -> None:
    old_records = [
        {key: value for key, value in record.items() if key not in ISSUE7_FIELDS}
        for record in sample_records()
    ]
    frame = lb.records_frame(old_records)
    # A frame read by an older reader lacks the columns altogether.
    frame = frame.drop(columns=[name for name in ISSUE7_FIELDS if name in frame])
    (row,) = lb.grouped(frame, "profile").to_dict("records")
    assert (row["rank"], row["profile"], row["n_items"]) == (1, "(none)", 7)
    assert lb.grouped(frame, "tag:region")["tag_region"].tolist() == ["(none)"]
    empty = lb.grouped(lb.records_frame([]), "temperature")
    assert empty.empty and empty.columns.tolist()[:2] == ["rank", "temperature"]
    assert lb.varied_axes(frame) == []
    assert (lb.leaderboard(frame)["mc_n"] == 0).all() and not lb.is_latency_only(frame)
    assert lb.varied_axes(lb.records_frame(old_records)) == []


@pytest.mark.parametrize("axis", ["models", "tag:", "region", ""])
def test_grouped_unknown_axis_lists_the_known_ones(axis: str) -> None:
    with pytest.raises(ValueError, match=r"unknown group axis .*known: model, profile, "
                       r"prompt_variant, temperature, eval_type, tag:<name>"):  # fmt: skip
        lb.grouped(lb.records_frame(sample_records()), axis)


def test_write_aggregates_writes_a_file_per_varied_axis(tmp_path: Path) -> None:
    records = matrix_records()
    frame = lb.records_frame(records)
    # One profile at 0.2, the other sending none: no temperature the run varied to.
    assert lb.varied_axes(frame) == ["profile", "prompt_variant", "tag:tier"]
    warmer = vrec(model="nova_flex:p2@t0.7", case_id="a", score=1.0, profile="nova_flex",
                  temperature=0.7, prompt_variant="p2")  # fmt: skip
    assert "temperature" in lb.varied_axes(lb.records_frame([*records, warmer]))
    written = lb.write_aggregates(records, tmp_path)
    assert written is not None
    assert {axis: path.name for axis, path in written.grouped.items()} == {
        "profile": "by_profile.csv",
        "prompt_variant": "by_prompt_variant.csv",
        "tag:tier": "by_tag_tier.csv",
    }
    assert sorted(p.name for p in tmp_path.glob("by_*.csv")) == sorted(
        p.name for p in written.grouped.values()
    )
    assert csv_header(written.grouped["tag:tier"]) == ["rank", "tag_tier", *lb.METRIC_COLUMNS]
    rows = read_csv(written.grouped["prompt_variant"])
    assert [(r["rank"], r["prompt_variant"], r["n_items"]) for r in rows] == [
        ("1", "p1", "3"),
        ("2", "p2", "2"),
    ]
    # One value everywhere: no file.
    single = lb.write_aggregates(sample_records(), tmp_path / "single")
    assert single is not None and dict(single.grouped) == {}
    assert not list((tmp_path / "single").glob("by_*.csv"))


def test_an_axis_that_only_renames_the_models_gets_no_file(tmp_path: Path) -> None:
    # Two plain profiles: by profile and by tier would be the leaderboard again.
    records = [
        vrec(model=name, case_id=case, score=1.0, profile=name,
             model_tags={"tier": tier, "provider": "aws"})
        for name, tier in (("a", "fast"), ("b", "flex"))
        for case in ("x", "y")
    ]  # fmt: skip
    assert lb.varied_axes(lb.records_frame(records)) == []
    # A third model on a tier already taken makes the tier worth a table, not the profiles.
    records.append(vrec(model="c", score=0.5, profile="c", model_tags={"tier": "fast"}))
    assert lb.varied_axes(lb.records_frame(records)) == ["tag:provider", "tag:tier"]


def test_an_axis_varied_on_purpose_gets_a_file_even_for_one_model() -> None:
    # One model under --temperature-variations: each contestant is one temperature, yet the
    # user asked for that axis, and by_temperature.csv is what the README promises.
    records = [
        vrec(model=f"a@t{t}", case_id=case, score=1.0, profile="a", temperature=t)
        for t in (0.2, 0.7)
        for case in ("x", "y")
    ]
    assert lb.varied_axes(lb.records_frame(records)) == ["temperature"]
    # Two profiles that each set their own temperature: nobody varied it, no table.
    fixed = [
        vrec(model=name, case_id="x", score=1.0, profile=name, temperature=t)
        for name, t in (("a", 0.0), ("b", 0.7))
    ]
    assert lb.varied_axes(lb.records_frame(fixed)) == []


def mc(chosen: str | None, answer: str = "B") -> dict[str, Any]:
    return {"chosen": chosen, "answer": answer, "correct": chosen == answer}


def test_multiple_choice_accuracy() -> None:
    records = [
        vrec(model="m", case_id="a", choice=mc("B"), score=1.0),
        vrec(model="m", case_id="b", choice=mc("C"), outcome="failed", score=0.0),
        vrec(model="m", case_id="c", choice=mc(None), outcome="failed", score=0.0),
        vrec(model="m", case_id="d", choice=mc("B"), score=1.0),
        vrec(model="m", case_id="e", choice=mc("B"), outcome="error"),  # not answered
        vrec(model="m", case_id="f", score=1.0),  # not multiple choice
        vrec(model="n", case_id="a", score=0.5, choice=None),
    ]
    # Errors left out: m's score (0.6) then ranks above n's (0.5).
    board = lb.leaderboard(lb.records_frame(records, errors_count_as="skip"))
    m, n = row_of(board, model="m"), row_of(board, model="n")
    assert (m["mc_n"], m["mc_accuracy"]) == (4, 0.5)
    assert n["mc_n"] == 0 and math.isnan(n["mc_accuracy"])
    lines = format_leaderboard(board)
    assert lines[0].split()[5:7] == ["pass", "MC"] and "MC acc" in lines[0]
    assert lines[1].split()[:2] == ["1", "m"] and " 50.0% " in lines[1]
    assert lines[2].split()[6] == "-"  # n has no multiple-choice item
    # Without any multiple-choice item the table is the one it always was.
    old = format_leaderboard(lb.leaderboard(lb.records_frame(sample_records())))
    assert "MC acc" not in old[0]


def latency_records() -> list[dict[str, Any]]:
    def timed(model: str, case: str, latency: float, **more: Any) -> dict[str, Any]:
        return vrec(model=model, case_id=case, eval_type="latency", latency_s=latency, **more)

    return [
        timed("slow", "a", 3.0, ttft_s=1.0, tokens_per_s=10.0, cost_usd=0.001),
        timed("slow", "b", 5.0, ttft_s=1.5, tokens_per_s=12.0, cost_usd=0.001),
        timed("fast", "a", 1.0, ttft_s=0.25, tokens_per_s=50.0, cost_usd=0.01),
        timed("fast", "b", 1.2, tokens_per_s=40.0, cost_usd=0.01),
        timed("cheap", "a", 1.5, cost_usd=0.0),
        timed("cheap", "b", 1.5, cost_usd=0.0),
        timed("fast2", "a", 1.5, cost_usd=0.5),
        timed("fast2", "b", 1.5, cost_usd=0.5),
        timed("broken", "a", math.nan, outcome="error"),
    ]


def test_latency_only_board_ranks_by_latency_and_shows_timing() -> None:
    frame = lb.records_frame(latency_records())
    assert lb.is_latency_only(frame) and not lb.is_latency_only(lb.records_frame(sample_records()))
    board = lb.leaderboard(frame)
    # p50 ascending; a tie at 1.5 s goes to the cheaper one; no latency sorts last.
    assert board["model"].tolist() == ["fast", "cheap", "fast2", "slow", "broken"]
    lines = format_leaderboard(board, comparisons=lb.top_comparisons(latency_records(), []))
    assert lines == [
        "#  model   ttft p50 s (n)  p50 s  p95 s  tok/s  errors  cost $",
        "1  fast          0.25 (1)   1.10   1.19   45.0       0  0.0200",
        "2  cheap                -   1.50   1.50      -       0  0.0000",
        "3  fast2                -   1.50   1.50      -       0  1.0000",
        "4  slow          1.25 (2)   4.00   4.90   11.0       0  0.0020",
        "5  broken               -      -      -      -     1 !       -",
        INCOMPLETE_NOTE,
    ]
    by_tier = lb.grouped(frame, "eval_type")
    assert by_tier.attrs[lb.LATENCY_ONLY] and by_tier["eval_type"].tolist() == ["latency"]


def test_mixed_runs_rank_by_score() -> None:
    records = [*latency_records()[:2], vrec(model="q", score=0.5, eval_type="quality")]
    board = lb.leaderboard(lb.records_frame(records))
    assert board["model"].tolist() == ["q", "slow"]
    assert "score [95% CI]" in format_leaderboard(board)[0]


# --- summarize: every table once ----------------------------------------------------------------


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


def test_named_metrics_reach_the_leaderboard_aggregates_and_report(bench: Bench) -> None:
    """record_score(value, name=...) (and post_process's metrics, the same record field) are
    averaged per model into leaderboard.csv, aggregate_metrics.csv and the report."""
    bench.pytester.makepyfile(
        test_named="""
        import pytest

        @pytest.mark.parametrize("value", [0.25, 0.75])
        def test_bleu(llm, record_score, value):
            llm.complete("hi")
            record_score(value, name="bleu")
            record_score(1.0)
        """
    )
    bench.run("--models=fake,fake2").assert_outcomes(passed=4)
    board = {row["model"]: row for row in read_csv(bench.out("leaderboard.csv"))}
    assert float(board["fake"]["metric_bleu_mean"]) == pytest.approx(0.5)
    assert float(board["fake2"]["metric_bleu_mean"]) == pytest.approx(0.5)
    (per_model,) = [
        p for p in bench.out("").glob("*/aggregate_metrics.csv") if "fake2" not in str(p)
    ]
    assert [row["metric_bleu_mean"] for row in read_csv(per_model)][-1] == "0.5"
    report = bench.out("report.html").read_text()
    assert "<th" in report and ">bleu<" in report


def test_a_plain_test_without_a_temperature_makes_no_temperature_axis() -> None:
    """`llmbench init`'s first run: eval items at temperature 0, a plain test that sent none;
    its report showed "By temperature: 0 vs (none)"."""
    records = [
        vrec(model="local/smollm2", case_id=name, score=1.0, profile="local/smollm2",
             temperature=0.0)
        for name in ("france", "japan", "copy")
    ] + [vrec(model="local/smollm2", case_id="test_italy", score=1.0, profile="local/smollm2")]  # fmt: skip
    assert "temperature" not in lb.varied_axes(lb.records_frame(records))
