"""A bare ``state-equals`` beside tau2-bench's database check, on the reference's own data: the
trajectories of benchmarks/tau2_crosscheck.py (every retail and airline task of inspect_evals'
tau2, each trajectory applied through the reference's tools), judged by the reference when the
file was written. No reference installed: the states and its verdicts are in the file."""

from __future__ import annotations

import copy
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_llmbench.agent import StateSnapshot
from pytest_llmbench.scoring import evaluate_state, parse_assertion

REFERENCE = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "tau2-reference.json.gz"


@pytest.fixture(scope="module")
def tasks() -> list[dict[str, Any]]:
    with gzip.open(REFERENCE, "rt", encoding="utf-8") as file:
        reference = json.load(file)
    return [task for found in reference["domains"].values() for task in found["tasks"]]


def rebuilt(initial: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A state from a task's kept initial entries and the entries that differ (None: gone)."""
    state = {coll: dict(entries) for coll, entries in initial.items()}
    for coll, entries in overrides.items():
        for key, entry in entries.items():
            if entry is None:
                state.setdefault(coll, {}).pop(key, None)
            else:
                state.setdefault(coll, {})[key] = entry
    return state


def judged(tasks: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any], bool]]:
    """Each trajectory (``domain/task/label``, its reference record) with our verdict."""
    assertion = parse_assertion("state-equals")
    for task in tasks:
        expected = rebuilt(task["initial"], task["expected"])
        for run in task["trajectories"]:
            final = rebuilt(task["initial"], run["predicted"])
            verdict = evaluate_state(assertion, StateSnapshot(task["initial"], final, expected))
            yield f"{task['domain']}/{task['id']}/{run['label']}", run, verdict.passed


def test_the_reference_data_covers_both_domains_and_both_verdicts(
    tasks: list[dict[str, Any]],
) -> None:
    runs = [run for task in tasks for run in task["trajectories"]]
    assert {task["domain"] for task in tasks} == {"retail", "airline"}
    assert any(run["reference"] for run in runs) and not all(run["reference"] for run in runs)
    for task in tasks:  # a read-only call changes nothing: the verdict is the gold one's
        verdicts = {run["label"]: run["reference"] for run in task["trajectories"]}
        assert verdicts["plus-read"] is verdicts["gold"], task["id"]


def test_our_verdicts_equal_tau2s_but_for_the_documented_difference(
    tasks: list[dict[str, Any]],
) -> None:
    """Ours equals the reference's hash verdict on every trajectory, or, where it does not, the
    reference's verdict with whole-number floats written as integers (``json-numbers``:
    docs/agents-with-users.md): ``2 == 2.0`` for us, not in a hash of JSON text."""
    wrong, parted = [], []
    for name, run, ours in judged(tasks):
        if ours is not run["reference_fixed"]:
            wrong.append(name)
        if ours is not run["reference"]:
            parted.append(name)
            assert run["reference"] is not run["reference_fixed"], name
    assert not wrong, f"{len(wrong)} trajectories part from tau2: {wrong[:10]}"
    assert all("float-argument" in name for name in parted), parted


def test_a_changed_value_in_a_passing_final_state_fails(tasks: list[dict[str, Any]]) -> None:
    """The check can fail: one value of an entry the gold trajectory changed, changed again."""
    assertion = parse_assertion("state-equals")
    checked = 0
    for task in tasks:
        gold = next(run for run in task["trajectories"] if run["label"] == "gold")
        changed = {coll: entries for coll, entries in gold["predicted"].items() if entries}
        if not gold["reference"] or not changed:
            continue
        coll, entries = sorted(changed.items())[0]
        key, entry = sorted(entries.items())[0]
        if not isinstance(entry, dict):
            continue
        final = rebuilt(task["initial"], gold["predicted"])
        final[coll][key] = {**copy.deepcopy(entry), "_tampered": True}
        expected = rebuilt(task["initial"], task["expected"])
        verdict = evaluate_state(assertion, StateSnapshot(task["initial"], final, expected))
        assert not verdict.passed and "_tampered" in verdict.reason, task["id"]
        checked += 1
    assert checked > 10
