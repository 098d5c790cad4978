"""Checks on an environment's final state: ``state-equals`` and ``state-subset``, and the diff
the record and the viewer show.

Pure functions on JSON values (a SQLite state is read as ``{table: [rows]}`` first):
``state-equals`` holds when the final state equals the expected one (the assertion's ``value``,
else the state the case's ``expected_actions`` leave the seed in, tau-bench's rule);
``state-subset`` when every key and value the assertion gives is in the final state.

SKELETON: the interface every part of issue 42 codes against; bodies come with the checks.
"""

from __future__ import annotations

from typing import Any

#: The assertion types on an environment's final state.
STATE_TYPES: frozenset[str] = frozenset({"state-equals", "state-subset"})
#: The most changes a diff keeps (the record's ``state.diff``); the rest are counted.
MAX_DIFF_CHANGES = 200


def state_diff(before: Any, after: Any) -> list[dict[str, Any]]:
    """What changed from ``before`` to ``after``: one ``{"path", "op", "before", "after"}`` per
    changed leaf (``op``: ``added``, ``removed``, ``changed``), paths as ``orders/#W1/status``,
    in path order, at most :data:`MAX_DIFF_CHANGES`."""
    raise NotImplementedError


def subset_problems(expected: Any, actual: Any) -> list[str]:
    """Where ``actual`` lacks what ``expected`` gives (empty: ``expected`` is a subset)."""
    raise NotImplementedError


def evaluate_state(assertion: Any, snapshot: Any) -> Any:
    """The verdict (a :class:`~.base.Verdict`) of a ``state-equals`` or ``state-subset``
    ``assertion`` on ``snapshot`` (an :class:`~pytest_llmbench.agent.environment.StateSnapshot`:
    its ``final`` state, against the assertion's ``value`` or the snapshot's ``expected``)."""
    raise NotImplementedError


def state_record(snapshot: Any, file: str) -> dict[str, Any]:
    """The record's ``state``: ``{"file", "diff" (seed -> final, :func:`state_diff`),
    "diff_more" (changes cut), "expected_diff" (final -> expected, None without one),
    "final" (None when its JSON passes 100 kB)}``."""
    raise NotImplementedError
