"""The agent kind's stateful environment (a file's ``environment:``): the state seeded before
the loop, the snapshot made after it, the state assertions' verdicts and the record's ``state``.

The seed is written in the item's preparation and read back at once (the snapshot's
``initial``: what the tools really started from); the final state is read when the item
settles, and the expected one replayed from the case's ``expected_actions`` only when a
``state-equals`` without a ``value`` asks for it, once per case and process (repeats and models
share it). A state that cannot be seeded, read back or replayed is the item's EnvError.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...models import EnvError

if TYPE_CHECKING:
    from ...agent import Sandbox, StateSnapshot
    from ...scoring import Verdict
    from ...spec import Environment, EvalCase
    from ..plan import CallPlan
    from .case_kind import KindResult

#: The seed as read back, by workdir: from an item's preparation to its settling.
_INITIAL: dict[Path, Any] = {}
#: The replayed expected states (or why the replay failed), by case: one replay per process.
_REPLAYED: dict[str, Any] = {}
_LOCK = threading.Lock()


def seed(plan: CallPlan, workdir: Path) -> None:
    """Write the case's seed as the state file, and keep it as read back."""
    from ...agent import read_state, seed_state

    environment = _environment(plan)
    seed_state(environment, plan.case.state_seed, workdir)
    initial = read_state(environment, workdir)
    with _LOCK:
        _INITIAL[workdir.resolve()] = initial


def snapshot(result: KindResult, last_tool: str | None) -> StateSnapshot:
    """The item's states: seeded, final (EnvError naming the file and ``last_tool`` when it
    cannot be read) and, when asked for, expected."""
    from ...agent import StateSnapshot, read_state

    environment = _environment(result.plan)
    assert result.workdir is not None and result.sandbox is not None
    with _LOCK:
        initial = _INITIAL.pop(result.workdir.resolve(), None)
    final = read_state(environment, result.workdir, last_tool)
    expected = None
    if wants_expected(result.plan.case):
        expected = _expected(environment, result.plan.case, result.sandbox)
    return StateSnapshot(initial, final, expected)


def wants_expected(case: EvalCase) -> bool:
    """Whether a ``state-equals`` without a value compares with the replayed actions."""
    asks = any(a.base_type == "state-equals" and a.value is None for a in case.assertions)
    return asks and case.expected_actions is not None


def _expected(environment: Environment, case: EvalCase, sandbox: Sandbox) -> Any:
    """The state the case's ``expected_actions`` leave its seed in (replayed once)."""
    from ...agent import replay_actions

    key = json.dumps(
        [
            str(environment.module),
            environment.state_file,
            case.state_seed,
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
            found = replay_actions(environment, case.state_seed, actions, sandbox)
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
