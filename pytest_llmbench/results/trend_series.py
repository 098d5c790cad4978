"""A trend computed from the index's entries (:mod:`.trend_index`): series, case histories.

:func:`build_trend` turns the entries (one per run) into a :class:`.trend.TrendReport`:

- a series per model and eval file, one point per run that has items of it, oldest first.
  Only the items of cases whose ``case_hash`` equals the latest run's for that case are
  counted; the others are counted in the point's ``left_out``. A run without the eval file (or
  the model) has no point in that series. A point's pass rate is over its answered items
  (errors and skips apart), its score the mean of the scored items, each with the 95% interval
  the report gives (:func:`.stats.intervals.clustered_mean`: a case's repeats are one cluster,
  never narrower than Wilson's with one observation per case); ``marks`` say that the commit
  (``commit``) or the model versions (``model``) changed since the previous point. A point's
  model versions are, for each model id its items called, the versions the provider said
  served them (the items' ``response_model``), else the model id itself when none said (an
  older index line, a provider that names none). The ``model`` mark follows the served
  versions where both points know them, else the model ids: a run that starts recording served
  versions is no change by itself;
- the drift test (:func:`.stats.drift.page_hinkley`) over each series' pass rates;
- a history per case of each model: its verdict in each run that has it (repeats reduced as
  the run's repeat verdicts are: pass, fail, flaky, error; ``changed`` when the case's hash
  was not the latest one's), the latest state and the run since which it has held, and how
  many times it flipped.

Pure: entries in, values out; runs are ordered by ``started_at``, then by name, and each run
is counted once (:func:`.trend_index.latest_entries`: duplicates and a retried run's older
entry are passed over).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .stats.drift import DEFAULT_PARAMS, DriftParams, page_hinkley
from .stats.intervals import clustered_mean
from .stats.repeats import NO_MODEL, pass_clusters, score_clusters
from .trend import CaseHistory, RunPoint, Series, SkippedFolder, TrendReport
from .trend_index import latest_entries

#: A case's verdict in a run, from its repeats' outcomes (see :func:`case_verdict`).
PASS, FAIL, FLAKY, ERROR, CHANGED = "pass", "fail", "flaky", "error", "changed"
#: The state a latest verdict puts a case in.
_STATES = {PASS: "passing", FAIL: "failing", FLAKY: "flaky", ERROR: "error"}

_SeriesKey = tuple[str, str]  # (model, eval_file)
_CaseKey = tuple[str, str, str]  # (model, eval_file, case_id)


def build_trend(
    entries: Iterable[Mapping[str, Any]],
    *,
    model: str | None = None,
    eval_file: str | None = None,
    skipped: Sequence[SkippedFolder] = (),
    params: DriftParams = DEFAULT_PARAMS,
) -> TrendReport:
    """The trend of ``entries`` (index lines, any order); only ``model``'s and ``eval_file``'s
    series and cases when given. ``skipped`` is passed on to the report."""
    runs = sorted(
        latest_entries(entries), key=lambda entry: (str(entry.get("started_at")), str(entry["run"]))
    )
    # Each series' and each case's items, run by run (runs by index, oldest first).
    by_series: dict[_SeriesKey, dict[int, list[Mapping[str, Any]]]] = {}
    by_case: dict[_CaseKey, dict[int, list[Mapping[str, Any]]]] = {}
    latest: dict[_CaseKey, Any] = {}  # each case's hash in the latest run that has it
    for index, run in enumerate(runs):
        for item in run["items"]:
            if _keep(item, model, eval_file):
                case = _case_key(item)
                by_series.setdefault(case[:2], {}).setdefault(index, []).append(item)
                by_case.setdefault(case, {}).setdefault(index, []).append(item)
                latest[case] = item.get("case_hash")
    series = [_series(key, runs, by_series[key], latest, params) for key in sorted(by_series)]
    cases = [_history(key, runs, by_case[key], latest[key]) for key in sorted(by_case)]
    return TrendReport(
        runs=tuple(str(run["run"]) for run in runs),
        series=tuple(series),
        cases=tuple(case for case in cases if case is not None),
        skipped=tuple(skipped),
    )


def _keep(item: Mapping[str, Any], model: str | None, eval_file: str | None) -> bool:
    return (model is None or _model(item) == model) and (
        eval_file is None or str(item.get("eval_file")) == eval_file
    )


def _model(item: Mapping[str, Any]) -> str:
    value = item.get("model")
    return NO_MODEL if value is None else str(value)


def _case_key(item: Mapping[str, Any]) -> _CaseKey:
    return (_model(item), str(item.get("eval_file")), str(item.get("case_id")))


def _series(
    key: _SeriesKey,
    runs: Sequence[Mapping[str, Any]],
    by_run: Mapping[int, Sequence[Mapping[str, Any]]],
    latest: Mapping[_CaseKey, Any],
    params: DriftParams,
) -> Series:
    points: list[RunPoint] = []
    called: _Called | None = None
    for index in sorted(by_run):
        previous = (points[-1], called) if points and called is not None else None
        called = _called(by_run[index])
        points.append(_point(runs[index], by_run[index], latest, previous, called))
    rated = [point for point in points if point.pass_rate is not None]
    drift = page_hinkley(
        [point.pass_rate for point in rated if point.pass_rate is not None],
        [point.run_id for point in rated],
        params,
    )
    return Series(model=key[0], eval_file=key[1], points=tuple(points), drift=drift)


def _point(
    run: Mapping[str, Any],
    items: Sequence[Mapping[str, Any]],
    latest: Mapping[_CaseKey, Any],
    previous: tuple[RunPoint, _Called] | None,
    called: _Called,
) -> RunPoint:
    kept = [item for item in items if item.get("case_hash") == latest[_case_key(item)]]
    answered = [item for item in kept if item.get("outcome") in ("passed", "failed")]
    passed = sum(1 for item in answered if item.get("outcome") == "passed")
    n = len(answered)
    rate = clustered_mean(pass_clusters(answered))
    score = clustered_mean(score_clusters(answered))
    commit = run.get("commit")
    versions = tuple(sorted({version for model_id in called for version in called[model_id]
                             or (model_id,)}))  # fmt: skip
    marks: list[str] = []
    if previous is not None:
        before, before_called = previous
        if commit and before.commit and commit != before.commit:
            marks.append("commit")
        if _versions_changed(before_called, called):
            marks.append("model")
    return RunPoint(
        run_id=str(run["run"]),
        started_at=run.get("started_at"),
        commit=str(commit) if commit else None,
        model_versions=versions,
        n=n,
        passed=passed,
        pass_rate=passed / n if n else None,
        pass_low=None if rate is None else rate.low,
        pass_high=None if rate is None else rate.high,
        score=None if score is None else score.estimate,
        score_low=None if score is None else score.low,
        score_high=None if score is None else score.high,
        left_out=len(items) - len(kept),
        errors=sum(1 for item in kept if item.get("outcome") == "error"),
        marks=tuple(marks),
    )


#: Each model id a point's items called, with the versions the provider said served them
#: (empty: none said).
_Called = dict[str, frozenset[str]]


def _called(items: Iterable[Mapping[str, Any]]) -> _Called:
    """The model ids ``items`` called, each with the served versions its items name."""
    called: dict[str, set[str]] = {}
    for item in items:
        if item.get("model_id"):
            served = called.setdefault(str(item["model_id"]), set())
            if item.get("response_model"):
                served.add(str(item["response_model"]))
    return {model_id: frozenset(served) for model_id, served in called.items()}


def _versions_changed(before: _Called, now: _Called) -> bool:
    """Whether the model versions changed between two points (neither empty): other model ids
    called, or a model id the provider served in other versions (compared only where both
    points name the served versions)."""
    if not before or not now:
        return False
    if set(before) != set(now):
        return True
    return any(before[key] and now[key] and before[key] != now[key] for key in now)


def case_verdict(outcomes: Iterable[str]) -> str | None:
    """A case's verdict in one run from its repeats' outcomes, by the repeat rules: ``pass``
    (every answered repeat passed), ``fail`` (none did), ``flaky`` (some did), ``error`` (no
    answered repeat, an error); None when every repeat was skipped."""
    answered = [outcome for outcome in outcomes if outcome in ("passed", "failed", "error")]
    passes = [outcome == "passed" for outcome in answered if outcome != "error"]
    if not passes:
        return ERROR if answered else None
    if all(passes):
        return PASS
    return FLAKY if any(passes) else FAIL


def _history(
    key: _CaseKey,
    runs: Sequence[Mapping[str, Any]],
    by_run: Mapping[int, Sequence[Mapping[str, Any]]],
    latest: Any,
) -> CaseHistory | None:
    verdicts: list[tuple[str, str]] = []
    for index in sorted(by_run):
        run, found = runs[index], by_run[index]
        if any(item.get("case_hash") != latest for item in found):
            verdicts.append((str(run["run"]), CHANGED))
            continue
        verdict = case_verdict(str(item.get("outcome")) for item in found)
        if verdict is not None:
            verdicts.append((str(run["run"]), verdict))
    if not verdicts or verdicts[-1][1] == CHANGED:
        return None
    last = verdicts[-1][1]
    since = verdicts[-1][0]
    for run_id, verdict in reversed(verdicts):
        if verdict != last:
            break
        since = run_id
    return CaseHistory(
        model=key[0],
        eval_file=key[1],
        case_id=key[2],
        case_hash=latest,
        verdicts=tuple(verdicts),
        state=_STATES[last],
        since=since,
        flips=_flips([verdict for _, verdict in verdicts]),
    )


def _flips(verdicts: Sequence[str]) -> int:
    """Changes between consecutive answered verdicts (pass, fail, flaky) of one hash: errors
    and older hashes' verdicts are passed over."""
    answered = [verdict for verdict in verdicts if verdict in (PASS, FAIL, FLAKY)]
    return sum(1 for before, after in itertools.pairwise(answered) if before != after)
