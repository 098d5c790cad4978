"""The agent kind's stateful environment (a file's ``environment:``): the state seeded before
the loop, the snapshot made after it, the state assertions' verdicts and the record's ``state``.

The seed is written in the item's preparation and read back at once (the snapshot's
``initial``: what the tools really started from, and the bytes of the file as seeded, whatever
put it there: the seed, the case's ``state:`` or its ``files:``); the final state is read when
the item settles, and the expected one replayed on a copy of the seeded file only when a
``state-equals`` without a ``value`` asks for it, once per seeded file's digest, module and
actions in a process (repeats and models share it). A state that cannot be seeded, read back
or replayed is the item's EnvError. An item an error ended keeps, at best, its seed-to-final
diff (:func:`partial_snapshot`); the seeded state kept for an item is dropped on every path.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...models import EnvError

if TYPE_CHECKING:
    from ...agent import Sandbox, SeededState, StateSnapshot
    from ...scoring import Verdict
    from ...spec import Environment, EvalCase
    from ..plan import CallPlan
    from .case_kind import KindResult

#: The state file as seeded, by workdir: from an item's preparation to its settling (or its
#: error, or the budget's skip).
_INITIAL: dict[Path, SeededState] = {}
#: The replayed expected states (or why the replay failed), by case: one replay per process.
_REPLAYED: dict[str, Any] = {}
_LOCK = threading.Lock()


def seed(plan: CallPlan, workdir: Path, sandbox: Sandbox) -> None:
    """Write the case's seed as the state file (a SQLite one by a runner confined by
    ``sandbox``), and keep the file as seeded."""
    from ...agent import read_seeded, seed_state

    environment = _environment(plan)
    seed_state(environment, plan.case.state_seed, workdir, sandbox)
    seeded = read_seeded(environment, workdir)
    with _LOCK:
        _INITIAL[workdir.resolve()] = seeded


def forget(workdir: Path | None) -> SeededState | None:
    """The state kept for the item in ``workdir`` as seeded, no longer kept (None: none)."""
    if workdir is None:
        return None
    with _LOCK:
        return _INITIAL.pop(workdir.resolve(), None)


def snapshot(result: KindResult, last_tool: str | None) -> StateSnapshot:
    """The item's states: seeded, final (EnvError naming the file and ``last_tool`` when it
    cannot be read) and, when asked for, expected."""
    from ...agent import StateSnapshot, read_state

    environment = _environment(result.plan)
    assert result.workdir is not None and result.sandbox is not None
    seeded = forget(result.workdir)
    final = read_state(environment, result.workdir, last_tool)
    expected = None
    if seeded is not None and wants_expected(result.plan.case):
        expected = _expected(environment, result.plan.case, seeded, result.sandbox)
    return StateSnapshot(seeded.value if seeded is not None else None, final, expected)


def partial_snapshot(result: KindResult) -> StateSnapshot | None:
    """Best effort, for an item an error ended: its seeded and final states, where the state
    file can still be read (no replay: the expected state is left out); None otherwise."""
    from ...agent import StateSnapshot, read_state

    seeded = forget(result.workdir)
    if seeded is None or result.workdir is None:
        return None
    try:
        final = read_state(_environment(result.plan), result.workdir)
    except EnvError:
        return None
    return StateSnapshot(seeded.value, final)


def wants_expected(case: EvalCase) -> bool:
    """Whether a ``state-equals`` without a value compares with the replayed actions."""
    asks = any(a.base_type == "state-equals" and a.value is None for a in case.assertions)
    return asks and case.expected_actions is not None


def _expected(
    environment: Environment, case: EvalCase, seeded: SeededState, sandbox: Sandbox
) -> Any:
    """The state the case's ``expected_actions`` leave the seeded file in (replayed once;
    none: the seeded state, without starting a runner)."""
    from ...agent import replay_actions

    if not case.expected_actions:
        return seeded.value

    key = json.dumps(
        [
            str(environment.module),
            environment.state_file,
            seeded.digest,
            [[action.name, action.arguments] for action in case.expected_actions or ()],
        ],
        sort_keys=True,
        default=str,
    )
    with _LOCK:
        known = key in _REPLAYED
        found = _REPLAYED.get(key)
    if not known:
        try:
            actions = case.expected_actions or ()
            found = replay_actions(environment, seeded.content, actions, sandbox)
        except EnvError as exc:
            found = exc
        with _LOCK:
            _REPLAYED[key] = found
    if isinstance(found, EnvError):
        raise EnvError(found.message)
    return found


def state_verdicts(result: KindResult) -> dict[int, Verdict]:
    """The verdicts of the case's ``state-equals`` and ``state-subset``, by assertion index."""
    from ...scoring import STATE_TYPES, evaluate_state

    snapshot = result.state_snapshot
    return {
        index: evaluate_state(assertion, snapshot)
        for index, assertion in enumerate(result.plan.case.assertions)
        if assertion.base_type in STATE_TYPES
    }


def state_fields(result: KindResult) -> dict[str, Any]:
    """The record's ``state``, when the item has a snapshot."""
    from ...scoring import state_record

    if result.state_snapshot is None:
        return {}
    file = _environment(result.plan).state_file
    return {"state": state_record(result.state_snapshot, file, result.plan.case.assertions)}


def _environment(plan: CallPlan) -> Environment:
    assert plan.agent is not None and plan.agent.environment is not None
    return plan.agent.environment
