"""Saved runs compared with a new one: reading results folders back and comparing them.

A results folder (its files are owned by :mod:`pytest_llmbench.results_folder`) is what a run
leaves behind. The ``llmbench`` console command (:mod:`pytest_llmbench.cli`) and the
``--baseline`` plugin (:mod:`.baseline_gate`) read it with :func:`load_results` and compare model
by model with :func:`compare_runs`, so both say the same thing about the same two runs.

A regression is *significant* when the score or the pass rate of a model went down and the
paired test says so (``p < 0.05``); a single case that flipped is listed, but does not gate.

Cases pair by ``(suite, case_id)`` *and* their ``case_hash`` (:mod:`pytest_llmbench.fingerprint`),
per model (:func:`pair_cases`):

- *paired*: in both runs with the same hash (or a hash on one side only: a plain test, a crashed
  worker's record); only these enter the paired statistics, the case changes and the gate.
- *changed*: in both runs with different hashes (its prompt, expected answer, assertions or
  parameters were edited): listed, not compared.
- *added*: only the new run has records of it. *removed*: only the baseline has (the case left
  the suite, or this run did not select it): listed, not compared, never a regression.
- *lost*: paired, answered in the baseline, and no repeat of it answered now (every repeat
  errored or was skipped): a regression, so that a run whose items all error does not pass.

A baseline written before records carried ``case_hash`` is paired by id alone, with a warning
(:func:`pairing_note`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..results_folder import ResultsError, ResultsFolder
from .stats import NO_MODEL

if TYPE_CHECKING:
    from .stats import CaseChange, Comparison

_SHOWN_CASES = 20


def load_results(folder: Path) -> list[dict[str, Any]]:
    """Return the records of ``folder/results.jsonl``, in file order (see
    :meth:`.ResultsFolder.read_records`: :class:`ResultsError` for a folder that is none, a
    missing file, a line that is not a JSON record, an empty run)."""
    return ResultsFolder(folder).read_records()


def load_run_info(folder: Path) -> dict[str, Any] | None:
    """Return ``folder/run.json``, or None when the run wrote none."""
    return ResultsFolder(folder).read_run_info()


def model_of(record: Mapping[str, Any]) -> str:
    """The record's model label; plain tests that called no model share :data:`NO_MODEL`."""
    return str(record.get("model") or NO_MODEL)


def models_of(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """The distinct model labels of ``records``, sorted."""
    return sorted({model_of(record) for record in records})


@dataclass(frozen=True)
class ModelComparison:
    """One model in a baseline run and in a new run, case by case."""

    #: The model label (the same in both runs).
    model: str
    #: Paired statistics, new - baseline: the score and the pass-rate comparison.
    comparisons: tuple[Comparison, ...]
    #: Every case both runs answered, regressions first (see :func:`stats.case_changes`).
    changes: tuple[CaseChange, ...]
    #: Paired cases (``suite::case_id``) the baseline answered and the new run did not: every
    #: repeat errored or was skipped. A run whose items all error must not pass as "no change".
    lost: tuple[str, ...] = ()
    #: Cases in both runs whose ``case_hash`` differs (edited since the baseline): not compared.
    changed: tuple[str, ...] = ()
    #: Cases only the new run has: not compared.
    added: tuple[str, ...] = ()
    #: Cases only the baseline has (gone from the suite, or not selected now): not compared, and
    #: not lost.
    removed: tuple[str, ...] = ()
    #: The baseline carries no case hashes (an older run): its cases were paired by id alone.
    by_id: bool = False

    @property
    def regressed(self) -> list[CaseChange]:
        """Cases that passed in the baseline and do not now."""
        return [change for change in self.changes if change.change == "regressed"]

    @property
    def improved(self) -> list[CaseChange]:
        """Cases that did not pass in the baseline and do now."""
        return [change for change in self.changes if change.change == "improved"]

    @property
    def significant_regression(self) -> bool:
        """Whether the score or the pass rate went down significantly, or cases were lost."""
        return bool(self.lost) or any(
            item.diff < 0 and item.significant for item in self.comparisons
        )


def compare_runs(
    baseline: Sequence[Mapping[str, Any]],
    new: Sequence[Mapping[str, Any]],
    models: Iterable[str] | None = None,
) -> list[ModelComparison]:
    """Compare ``new`` with ``baseline`` for each model of both (or each of ``models``), on
    the cases that pair (:func:`pair_cases`)."""
    old_by_model, new_by_model = _by_model(baseline), _by_model(new)
    common = sorted(set(old_by_model) & set(new_by_model))
    chosen = common if models is None else [model for model in models if model in common]
    by_id = not has_case_hashes(baseline)
    return [
        _compare_model(model, old_by_model[model], new_by_model[model], by_id) for model in chosen
    ]


def _compare_model(
    model: str, baseline: list[dict[str, Any]], new: list[dict[str, Any]], by_id: bool
) -> ModelComparison:
    from .stats import case_changes, compare

    pairing = pair_cases(baseline, new, by_id=by_id)
    old, fresh = pairing.baseline, pairing.new
    return ModelComparison(
        model=model,
        comparisons=tuple(compare(old, fresh, model, model)),
        changes=tuple(case_changes(old, fresh, model, model)),
        lost=_lost_cases(old, fresh),
        changed=pairing.changed,
        added=pairing.added,
        removed=pairing.removed,
        by_id=by_id,
    )


def has_case_hashes(records: Iterable[Mapping[str, Any]]) -> bool:
    """Whether ``records`` were written with ``case_hash`` (None for a plain test counts): an
    older run's records lack the field."""
    return any("case_hash" in record for record in records)


@dataclass(frozen=True)
class Pairing:
    """One model's records of two runs, split by :func:`pair_cases`."""

    baseline: list[dict[str, Any]]  #: the baseline's records of the paired cases
    new: list[dict[str, Any]]  #: the new run's records of the paired cases
    changed: tuple[str, ...]  #: ``suite::case_id`` in both runs, with different hashes
    added: tuple[str, ...]  #: only in the new run
    removed: tuple[str, ...]  #: only in the baseline


def pair_cases(
    baseline: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]], *, by_id: bool = False
) -> Pairing:
    """Split one model's records of two runs into the paired cases and the changed, added and
    removed ones (see the module's docstring); ``by_id``: hashes are not looked at."""
    old_cases, new_cases = _case_hashes(baseline), _case_hashes(new)
    both = old_cases.keys() & new_cases.keys()
    changed = set() if by_id else {key for key in both if _differ(old_cases[key], new_cases[key])}
    paired = both - changed
    return Pairing(
        baseline=[record for record in baseline if _case(record) in paired],
        new=[record for record in new if _case(record) in paired],
        changed=_names(changed),
        added=_names(new_cases.keys() - old_cases.keys()),
        removed=_names(old_cases.keys() - new_cases.keys()),
    )


def _case(record: Mapping[str, Any]) -> tuple[str, str]:
    return str(record.get("suite")), str(record.get("case_id"))


def _case_hashes(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], set[str]]:
    """Each case of ``records`` and the hashes its records carry (none for a plain test)."""
    found: dict[tuple[str, str], set[str]] = {}
    for record in records:
        hashes = found.setdefault(_case(record), set())
        if record.get("case_hash"):
            hashes.add(str(record["case_hash"]))
    return found


def _differ(old: set[str], new: set[str]) -> bool:
    """Both sides know the case's hash and it is not the same."""
    return bool(old) and bool(new) and old != new


def _names(cases: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    return tuple(f"{suite}::{case_id}" for suite, case_id in sorted(cases))


#: What the comparison says when the baseline has no case hashes.
BY_ID_NOTE = (
    "the baseline has no case hashes (a run of an older version): its cases are paired by id, "
    "and a case edited since then is compared as if it were the same"
)


def pairing_note(results: Iterable[ModelComparison]) -> str | None:
    """The warning to show once for a comparison paired by id, or None."""
    return BY_ID_NOTE if any(result.by_id for result in results) else None


def _lost_cases(
    baseline: Iterable[Mapping[str, Any]], new: Iterable[Mapping[str, Any]]
) -> tuple[str, ...]:
    """Cases answered (passed or failed) in ``baseline`` that ``new`` did not answer."""

    def answered(records: Iterable[Mapping[str, Any]]) -> set[str]:
        return {
            f"{record.get('suite')}::{record.get('case_id')}"
            for record in records
            if record.get("outcome") in ("passed", "failed")
        }

    return tuple(sorted(answered(baseline) - answered(new)))


def _by_model(records: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    # The label is written into the copies, so that stats sees the same name in both runs.
    grouped: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        label = model_of(record)
        grouped.setdefault(label, []).append({**record, "model": label})
    return grouped


def format_comparison(result: ModelComparison, *, limit: int | None = _SHOWN_CASES) -> list[str]:
    """Lines describing one model: the paired statistics, then the changed cases."""
    counts = (
        f"{len(result.changes)} cases: {len(result.regressed)} regressed, "
        f"{len(result.improved)} improved"
    )
    if result.lost:
        counts += f", {len(result.lost)} no longer answered (errors or skips)"
    lines = [f"{result.model}: {counts}"]
    lines += [f"  {_format_stat(item)}" for item in result.comparisons]
    shown_lost = result.lost if limit is None else result.lost[:limit]
    lines += [f"  not answered now: {case}" for case in shown_lost]
    lines += _unpaired_lines(result, limit)
    for title, changes in (("regressed", result.regressed), ("improved", result.improved)):
        shown = changes if limit is None else changes[:limit]
        lines += [f"  {title}: {_format_change(change)}" for change in shown]
        if len(changes) > len(shown):
            lines.append(f"  ... and {len(changes) - len(shown)} more {title}")
    return lines


#: How each kind of unpaired case is counted and listed: the field, the count's words, the label.
_UNPAIRED = (
    ("changed", "changed since the baseline: not compared", "changed"),
    ("added", "added since the baseline: not compared", "added"),
    ("removed", "not in the new run (removed or not selected): not compared", "removed"),
)


def _unpaired_lines(result: ModelComparison, limit: int | None) -> list[str]:
    """The changed, added and removed cases: a count, then the cases (up to ``limit``)."""
    lines = []
    for field, words, label in _UNPAIRED:
        cases: tuple[str, ...] = getattr(result, field)
        if not cases:
            continue
        lines.append(f"  {len(cases)} {'case' if len(cases) == 1 else 'cases'} {words}")
        shown = cases if limit is None else cases[:limit]
        lines += [f"    {label}: {case}" for case in shown]
        if len(cases) > len(shown):
            lines.append(f"    ... and {len(cases) - len(shown)} more {label}")
    return lines


def _format_stat(item: Comparison) -> str:
    name = "pass rate" if item.metric == "pass_rate" else item.metric
    if not item.n_cases:
        return f"{name:<9}  no case answered in both runs"
    verdict = "significant" if item.significant else "n.s."
    return (
        f"{name:<9}  {item.diff:+.3f} [{item.low:+.3f}, {item.high:+.3f}] "
        f"p={item.p_value:.3g} {verdict} (n={item.n_cases})"
    )


def _format_change(change: CaseChange) -> str:
    return (
        f"{change.suite}::{change.case_id} "
        f"score {_score(change.score_a)} -> {_score(change.score_b)}"
    )


def _score(value: float | None) -> str:
    return "-" if value is None or value != value else f"{value:.2f}"


def switch_models(
    baseline: list[dict[str, Any]], new: list[dict[str, Any]], spec: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """``OLD=NEW``: the baseline's OLD records and the new run's NEW records under one label
    (``llmbench compare --model`` and the viewer's compare page); :class:`ResultsError` when a
    run lacks its model."""
    old, _, replacement = spec.partition("=")
    old, replacement = old.strip(), replacement.strip()
    for name, records, run in ((old, baseline, "baseline"), (replacement, new, "new run")):
        if name not in models_of(records):
            known = ", ".join(models_of(records))
            raise ResultsError(f"model {name!r} is not in the {run} (it has: {known})")
    label = f"{old} -> {replacement}"
    return _relabel(baseline, old, label), _relabel(new, replacement, label), label


def _relabel(records: list[dict[str, Any]], model: str, label: str) -> list[dict[str, Any]]:
    return [{**record, "model": label} for record in records if model_of(record) == model]
