"""The trend computed from index entries: series of unchanged cases, marks, case histories."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_llmbench.results import build_trend, case_verdict, trend_status
from pytest_llmbench.results.stats import clustered_mean, wilson


def _item(case: str, outcome: str, **extra: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "eval_file": "qa.eval.yaml",
        "suite": "qa",
        "model": "m",
        "model_id": "openai/m",
        "case_id": case,
        "case_hash": f"h-{case}",
        "repeat": 0,
        "outcome": outcome,
        "score": {"passed": 1.0, "failed": 0.0}.get(outcome),
    }
    item.update(extra)
    return item


def _entry(
    run: str, day: int, items: list[dict[str, Any]], commit: str | None = "c1"
) -> dict[str, Any]:
    return {
        "run": run,
        "folder": f"runs/{run}",
        "started_at": f"2026-11-{day:02d}T10:00:00Z",
        "commit": commit,
        "items": items,
    }


def test_a_series_has_one_point_per_run_oldest_first_with_its_intervals() -> None:
    entries = [
        _entry("b", 2, [_item("x", "passed"), _item("y", "failed"), _item("z", "error")]),
        _entry("a", 1, [_item("x", "passed"), _item("y", "passed"), _item("z", "passed")]),
    ]
    report = build_trend(entries)
    assert report.runs == ("a", "b")
    (series,) = report.series
    assert (series.model, series.eval_file) == ("m", "qa.eval.yaml")
    first, second = series.points
    assert (first.run_id, first.n, first.passed, first.pass_rate) == ("a", 3, 3, 1.0)
    assert (second.run_id, second.n, second.passed, second.errors) == ("b", 2, 1, 1)
    # the report's intervals: each case a cluster, never narrower than Wilson's per case
    spread = clustered_mean([[0.0], [1.0]])
    assert spread is not None
    assert (second.pass_low, second.pass_high) == pytest.approx((spread.low, spread.high))
    assert second.score == 0.5 and (second.score_low, second.score_high) == (0.0, 1.0)
    assert (first.score_low, first.score_high) == pytest.approx(wilson(1.0, 3))
    assert second.started_at == "2026-11-02T10:00:00Z" and second.commit == "c1"


def test_only_cases_whose_hash_is_the_latest_are_counted_the_rest_left_out() -> None:
    entries = [
        _entry("a", 1, [_item("x", "passed", case_hash="old"), _item("y", "passed")]),
        _entry("b", 2, [_item("x", "failed", case_hash="new"), _item("y", "passed")]),
    ]
    first, second = build_trend(entries).series[0].points
    assert (first.n, first.left_out, first.pass_rate) == (1, 1, 1.0)
    assert (second.n, second.left_out, second.pass_rate) == (2, 0, 0.5)
    histories = {case.case_id: case for case in build_trend(entries).cases}
    assert histories["x"].verdicts == (("a", "changed"), ("b", "fail"))
    assert histories["x"].case_hash == "new" and histories["x"].flips == 0


def test_marks_say_when_the_commit_or_the_model_version_changed() -> None:
    entries = [
        _entry("a", 1, [_item("x", "passed")], commit="c1"),
        _entry("b", 2, [_item("x", "passed")], commit="c2"),
        _entry("c", 3, [_item("x", "passed", model_id="openai/m-2")], commit="c2"),
        _entry("d", 4, [_item("x", "passed", model_id="openai/m-2")], commit=None),
    ]
    points = build_trend(entries).series[0].points
    assert [point.marks for point in points] == [(), ("commit",), ("model",), ()]
    assert points[2].model_versions == ("openai/m-2",)


def test_the_model_mark_follows_the_versions_the_provider_served() -> None:
    """The profile never changes (``openai/m``); the provider moves its alias to a new
    snapshot between c and d. Runs a and b were indexed before served versions were kept."""
    old, new = "m-2026-08-06", "m-2026-11-20"
    entries = [
        _entry("a", 1, [_item("x", "passed"), _item("y", "passed")]),
        _entry("b", 2, [_item("x", "passed"), _item("y", "passed")]),
        # the first run naming its served version: no change by itself
        _entry("c", 3, [_item("x", "passed", response_model=old), _item("y", "error")]),
        _entry("d", 4, [_item(case, "passed", response_model=new) for case in "xy"]),
        _entry("e", 5, [_item("x", "passed", response_model=new)]),
    ]
    points = build_trend(entries).series[0].points
    assert [point.marks for point in points] == [(), (), (), ("model",), ()]
    # the served versions where known (an errored item's missing one adds nothing), else the id
    assert [point.model_versions for point in points] == [
        ("openai/m",), ("openai/m",), (old,), (new,), (new,)
    ]  # fmt: skip


def test_another_model_id_is_a_change_whatever_was_served() -> None:
    entries = [
        _entry("a", 1, [_item("x", "passed", response_model="m-1")]),
        _entry("b", 2, [_item("x", "passed", model_id="openai/m-2")]),
    ]
    points = build_trend(entries).series[0].points
    assert [point.marks for point in points] == [(), ("model",)]
    assert points[1].model_versions == ("openai/m-2",)


def test_a_run_without_an_eval_file_has_no_point_in_its_series() -> None:
    other = {"eval_file": "math.eval.yaml", "suite": "math"}
    entries = [
        _entry("a", 1, [_item("x", "passed"), _item("p", "passed", **other)]),
        _entry("b", 2, [_item("x", "failed")]),
        _entry("c", 3, [_item("x", "passed"), _item("p", "failed", **other)]),
    ]
    report = build_trend(entries)
    by_file = {series.eval_file: series for series in report.series}
    assert [p.run_id for p in by_file["math.eval.yaml"].points] == ["a", "c"]
    assert [p.run_id for p in by_file["qa.eval.yaml"].points] == ["a", "b", "c"]
    only = build_trend(entries, eval_file="math.eval.yaml")
    assert [s.eval_file for s in only.series] == ["math.eval.yaml"]
    assert {case.eval_file for case in only.cases} == {"math.eval.yaml"}
    assert build_trend(entries, model="nobody").series == ()


def test_case_histories_give_state_since_and_flips() -> None:
    outcomes = {
        "steady": ["passed", "passed", "passed", "passed"],
        "broke": ["passed", "passed", "failed", "failed"],
        "wobbly": ["passed", "failed", "passed", "failed"],
    }
    entries = [
        _entry(f"r{run}", run + 1, [_item(case, seq[run]) for case, seq in outcomes.items()])
        for run in range(4)
    ]
    cases = {case.case_id: case for case in build_trend(entries).cases}
    assert (cases["steady"].state, cases["steady"].since, cases["steady"].flips) == (
        "passing",
        "r0",
        0,
    )
    assert (cases["broke"].state, cases["broke"].since, cases["broke"].flips) == (
        "failing",
        "r2",
        1,
    )
    assert (cases["wobbly"].state, cases["wobbly"].since, cases["wobbly"].flips) == (
        "failing",
        "r3",
        3,
    )
    assert cases["broke"].verdicts == (
        ("r0", "pass"),
        ("r1", "pass"),
        ("r2", "fail"),
        ("r3", "fail"),
    )


def test_repeats_reduce_to_one_verdict_per_run_flaky_since_when_it_began() -> None:
    def repeats(case: str, *outcomes: str) -> list[dict[str, Any]]:
        return [_item(case, outcome, repeat=index) for index, outcome in enumerate(outcomes)]

    entries = [
        _entry("a", 1, repeats("x", "passed", "passed", "passed")),
        _entry("b", 2, repeats("x", "passed", "failed", "passed")),
        _entry("c", 3, repeats("x", "failed", "passed", "skipped")),
    ]
    (case,) = build_trend(entries).cases
    assert case.verdicts == (("a", "pass"), ("b", "flaky"), ("c", "flaky"))
    assert (case.state, case.since, case.flips) == ("flaky", "b", 1)
    # items, not cases, are counted in a point (repeats included, skips left out)
    assert [point.n for point in build_trend(entries).series[0].points] == [3, 3, 2]


def test_case_verdict_follows_the_repeat_rules() -> None:
    assert case_verdict(["passed", "passed"]) == "pass"
    assert case_verdict(["failed", "error"]) == "fail"
    assert case_verdict(["failed", "passed"]) == "flaky"
    assert case_verdict(["error", "error"]) == "error"
    assert case_verdict(["skipped"]) is None


def test_an_error_run_is_the_state_error() -> None:
    entries = [_entry("a", 1, [_item("x", "passed")]), _entry("b", 2, [_item("x", "error")])]
    (case,) = build_trend(entries).cases
    assert (case.state, case.since) == ("error", "b")
    (point,) = build_trend(entries).series[0].points[1:]
    assert (point.n, point.pass_rate, point.errors) == (0, None, 1)


def test_a_drop_over_runs_is_a_drift_and_fails_only_with_the_flag() -> None:
    rates = [10] * 6 + [5] * 4  # passed of 10, run by run
    entries = [
        _entry(
            f"r{run}",
            run + 1,
            [_item(f"c{i}", "passed" if i < passed else "failed") for i in range(10)],
        )
        for run, passed in enumerate(rates)
    ]
    report = build_trend(entries)
    drift = report.series[0].drift
    assert drift.detected and drift.direction == "down" and drift.since_run == "r5"
    assert trend_status(report, fail_on_drift=False) == (0, [])
    status, why = trend_status(report, fail_on_drift=True)
    assert status == 1 and why == [
        f"m on qa.eval.yaml: pass rate drifted down at {drift.at_run} (since r5)"
    ]


def test_a_rise_never_fails_the_trend() -> None:
    rates = [5] * 6 + [10] * 4
    entries = [
        _entry(
            f"r{run}",
            run + 1,
            [_item(f"c{i}", "passed" if i < passed else "failed") for i in range(10)],
        )
        for run, passed in enumerate(rates)
    ]
    report = build_trend(entries)
    assert report.series[0].drift.direction == "up"
    assert trend_status(report, fail_on_drift=True) == (0, [])


def test_repeats_of_a_case_are_one_cluster_in_the_intervals_as_in_the_report() -> None:
    """10 cases x 5 repeats, all passing: the interval is Wilson's over 10 cases (as the
    report's), not over 50 independent items."""
    from pytest_llmbench.results.stats.repeats import summarize_repeats

    items = [
        _item(f"c{case}", "passed", repeat=repeat, score=0.5 + case / 20)
        for case in range(10)
        for repeat in range(5)
    ]
    (point,) = build_trend([_entry("a", 1, items)]).series[0].points
    assert point.n == 50 and point.pass_rate == 1.0
    assert (point.pass_low, point.pass_high) == pytest.approx(wilson(1.0, 10))
    assert point.pass_low < wilson(1.0, 50)[0] - 0.1
    report = summarize_repeats(items)
    assert report.pass_rate is not None and report.score is not None
    assert (point.pass_low, point.pass_high) == pytest.approx(
        (report.pass_rate.low, report.pass_rate.high)
    )
    assert (point.score, point.score_low, point.score_high) == pytest.approx(
        (report.score.estimate, report.score.low, report.score.high)
    )
