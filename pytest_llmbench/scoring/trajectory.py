"""Matching tool calls against expected ones: arguments and whole trajectories.

Pure functions, shared by the agent checks (:mod:`.agent`) and the function-calling checks:
:func:`args_match` compares one call's arguments with the expected ones, :func:`match_sequence`
pairs expected steps with the calls made under one of the :data:`SEQUENCE_MODES`.

Values are compared as JSON values: numbers by value (``1 == 1.0``, since JSON has one number
type), but a boolean is never a number (``true != 1``); strings exactly; lists element by element
in order; objects key by key, recursively. Nothing is compared as a substring.

Repeated tool names are matched optimally, never greedily: ``in-order`` takes the longest
in-order pairing (a dynamic programme over both sequences), the unordered modes a maximum
bipartite matching (augmenting paths), so taking the first fitting call never blocks a later step.

``subset`` and ``superset`` are named as LangChain's agentevals names them, from the side of what
was made: ``superset`` calls (or arguments) contain at least the expected ones, ``subset`` ones
contain nothing beyond them. Where we differ from agentevals 0.0.9 (optimal pairing, arguments
always compared call against expected, ``true != 1``) is listed in docs/agents.md and checked
case by case by benchmarks/agentevals_crosscheck.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from .bfcl import allowed_mismatch
from .values import json_equal

__all__ = [
    "ARGS_MATCH_MODES",
    "SEQUENCE_MODES",
    "CallLike",
    "ExpectedStep",
    "SequenceMatch",
    "args_match",
    "describe_match",
    "json_equal",
    "match_sequence",
]

#: The ``args_match`` modes: how a call's arguments are compared with the expected ones.
ARGS_MATCH_MODES: tuple[str, ...] = ("exact", "subset", "superset", "ignore", "allowed")
#: The ``mode``s of a sequence of expected steps; the first is the default.
SEQUENCE_MODES: tuple[str, ...] = ("in-order", "strict", "unordered", "subset", "superset")


class CallLike(Protocol):
    """A tool call as made: an agent's ``ToolCall`` or a function-calling reply's call."""

    @property
    def name(self) -> str: ...

    @property
    def arguments(self) -> Mapping[str, Any] | None:
        """The arguments; None when what was sent is not a JSON object."""


@dataclasses.dataclass(frozen=True)
class ExpectedStep:
    """One expected tool call in a trajectory."""

    name: str  #: the tool's name
    args: Mapping[str, Any] | None = None  #: the expected arguments; None: any arguments
    args_match: str = "exact"  #: how ``args`` are compared (one of :data:`ARGS_MATCH_MODES`)
    #: ``allowed`` only: the function's argument schema, for BFCL's rules on required and
    #: declared arguments and types (None: not known, those rules are skipped)
    schema: Mapping[str, Any] | None = None
    #: ``allowed`` only: strings compared after BFCL's normalisation (False: as written)
    normalize_strings: bool = True

    def matches(self, call: CallLike) -> bool:
        """Whether ``call`` is this step: the same name, and arguments as ``args_match`` says."""
        return self.mismatch(call) is None

    def mismatch(self, call: CallLike) -> str | None:
        """Why ``call`` is not this step (``allowed``: the argument and BFCL's rule), or None."""
        if call.name != self.name:
            return f"{call.name} is not {self.name}"
        if self.args is None or self.args_match == "ignore":
            return None
        if call.arguments is None:
            return "the arguments sent are not a JSON object"
        if self.args_match == "allowed":
            found = allowed_mismatch(self.args, call.arguments, self.schema,
                                     normalize_strings=self.normalize_strings)  # fmt: skip
            return None if found is None else str(found)
        if args_match(self.args, call.arguments, self.args_match):
            return None
        return f"the arguments do not match ({self.args_match})"

    def shown(self) -> str:
        """The step as a reason text shows it: ``name`` or ``name(k=v, ...)``."""
        if self.args is None:
            return self.name
        return f"{self.name}({_args_shown(self.args)})"


@dataclasses.dataclass(frozen=True)
class SequenceMatch:
    """How the expected steps paired with the calls made."""

    mode: str  #: the sequence mode used
    matched: tuple[tuple[int, int], ...]  #: (expected index, call index) pairs
    missing: tuple[int, ...]  #: indices of expected steps no call matched
    extra: tuple[int, ...]  #: indices of calls no expected step matched
    passed: bool  #: whether the mode's condition holds
    #: matched pairs over what the mode requires to be matched (1.0 when it asks for nothing)
    score: float


def args_match(expected: Mapping[str, Any], actual: Mapping[str, Any], mode: str) -> bool:
    """Compare a call's arguments with the expected ones under ``mode``.

    - ``exact``: same keys, equal values;
    - ``superset``: the call's arguments contain at least the expected ones: every expected key
      present with an equal value (the call may have more);
    - ``subset``: the call's arguments contain nothing beyond the expected ones: its keys are all
      among the expected ones, with equal values (the call may have fewer);
    - ``ignore``: always true;
    - ``allowed``: each expected key maps to a list of allowed values (BFCL's possible answers),
      judged by BFCL's rules without a schema (:mod:`.bfcl`; an :class:`ExpectedStep` with its
      function's schema adds the schema's rules): the call's keys are all expected, each value
      among its allowed values (strings after BFCL's normalisation), and a key whose allowed
      values lack ``""`` (BFCL's "may be left out") is present.

    Values are equal as JSON values (see the module's docstring). Raises ValueError for an
    unknown mode.
    """
    if mode == "ignore":
        return True
    if mode == "allowed":  # BFCL's rules, without a schema
        return allowed_mismatch(expected, actual, None) is None
    if mode == "exact":
        keys_ok = set(expected) == set(actual)
    elif mode == "superset":
        keys_ok = set(expected) <= set(actual)
    elif mode == "subset":
        keys_ok = set(actual) <= set(expected)
    else:
        raise ValueError(f"unknown args_match {mode!r} ({', '.join(ARGS_MATCH_MODES)})")
    shared = set(expected) & set(actual)
    return keys_ok and all(json_equal(expected[key], actual[key]) for key in shared)


def match_sequence(
    expected_steps: Sequence[ExpectedStep], actual_calls: Sequence[CallLike], mode: str
) -> SequenceMatch:
    """Pair ``expected_steps`` with ``actual_calls`` under ``mode``.

    - ``in-order``: the expected steps are an in-order subsequence of the calls (others may come
      between);
    - ``strict``: the same calls in the same order, nothing else;
    - ``unordered``: the same calls in any order (the same multiset);
    - ``superset``: the calls contain at least the expected ones: every expected step matched by
      a distinct call, in any order (more calls allowed);
    - ``subset``: the calls contain nothing beyond the expected ones: every call matched by a
      distinct expected step, in any order (steps may be left out).

    Raises ValueError for an unknown mode.
    """
    fits = [[step.matches(call) for call in actual_calls] for step in expected_steps]
    if mode == "in-order":
        pairs = _in_order_pairs(fits)
    elif mode == "strict":
        pairs = [(i, i) for i in range(min(len(fits), len(actual_calls))) if fits[i][i]]
    elif mode in ("unordered", "subset", "superset"):
        pairs = _bipartite_pairs(fits, len(actual_calls))
    else:
        raise ValueError(f"unknown mode {mode!r} ({', '.join(SEQUENCE_MODES)})")
    return _result(mode, pairs, len(expected_steps), len(actual_calls))


def _result(
    mode: str, pairs: list[tuple[int, int]], n_expected: int, n_calls: int
) -> SequenceMatch:
    missing = tuple(sorted(set(range(n_expected)) - {i for i, _ in pairs}))
    extra = tuple(sorted(set(range(n_calls)) - {j for _, j in pairs}))
    need_all_expected = mode != "subset"
    need_all_calls = mode in ("strict", "unordered", "subset")
    passed = not (need_all_expected and missing) and not (need_all_calls and extra)
    wanted = max(
        n_expected if need_all_expected else 0,
        n_calls if need_all_calls else 0,
    )
    score = len(pairs) / wanted if wanted else 1.0
    return SequenceMatch(mode, tuple(sorted(pairs)), missing, extra, passed, score)


def _in_order_pairs(fits: list[list[bool]]) -> list[tuple[int, int]]:
    """The longest in-order pairing of steps with calls (an LCS over ``fits``)."""
    n_steps = len(fits)
    n_calls = len(fits[0]) if fits else 0
    best = [[0] * (n_calls + 1) for _ in range(n_steps + 1)]
    for i in range(n_steps - 1, -1, -1):
        for j in range(n_calls - 1, -1, -1):
            take = best[i + 1][j + 1] + 1 if fits[i][j] else 0
            best[i][j] = max(take, best[i + 1][j], best[i][j + 1])
    pairs: list[tuple[int, int]] = []
    i = j = 0
    while i < n_steps and j < n_calls:
        if fits[i][j] and best[i][j] == best[i + 1][j + 1] + 1:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def _bipartite_pairs(fits: list[list[bool]], n_calls: int) -> list[tuple[int, int]]:
    """A maximum matching of steps to distinct calls (Kuhn's augmenting paths)."""
    owner: list[int | None] = [None] * n_calls  # call index -> the step it is matched to

    def augment(step: int, seen: set[int]) -> bool:
        for call in range(n_calls):
            if fits[step][call] and call not in seen:
                seen.add(call)
                holder = owner[call]
                if holder is None or augment(holder, seen):
                    owner[call] = step
                    return True
        return False

    for step in range(len(fits)):
        augment(step, set())
    return [(step, call) for call, step in enumerate(owner) if step is not None]


def _args_shown(args: Mapping[str, Any] | None) -> str:
    if args is None:
        return "<not a JSON object>"
    return ", ".join(f"{key}={value!r}" for key, value in args.items())


def describe_match(
    result: SequenceMatch, expected_steps: Sequence[ExpectedStep], actual_calls: Sequence[CallLike]
) -> str:
    """A reason text: the mode, what matched, which steps are missing and which calls extra."""
    parts = [f"{result.mode}: {len(result.matched)} of {len(expected_steps)} steps matched"]
    if result.matched:
        shown = ", ".join(f"{expected_steps[i].shown()}=call {j + 1}" for i, j in result.matched)
        parts.append(f"matched {shown}")
    if result.missing:
        parts.append("missing " + ", ".join(expected_steps[i].shown() for i in result.missing))
    if result.extra:
        calls = ", ".join(
            f"{actual_calls[j].name}({_args_shown(actual_calls[j].arguments)})"
            for j in result.extra
        )
        parts.append(f"extra calls {calls}")
    return "; ".join(parts)
