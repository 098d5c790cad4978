"""Our trajectory matcher beside LangChain's agentevals, case by case.

    python3 -m venv /tmp/agentevals-venv
    /tmp/agentevals-venv/bin/pip install 'agentevals==0.0.9'
    .venv/bin/python benchmarks/agentevals_crosscheck.py \\
        --agentevals-python /tmp/agentevals-venv/bin/python --write benchmarks/agentevals-crosscheck.md

The cases are made here, deterministically: hand-written pairs of an expected trajectory and the
calls made (extra, missing, reordered and repeated calls; extra, missing and different arguments;
nested values; ``1`` against ``1.0`` and ``true``; empty trajectories; first-fit traps) and pairs
made by a seeded generator that edits an expected trajectory, each judged under every match mode
(strict, unordered, subset, superset) and every argument mode (exact, ignore, subset, superset).

Ours is :func:`pytest_llmbench.scoring.trajectory.match_sequence`, one step per expected call with
the case's ``args_match``. agentevals runs from the interpreter given (it is not a dependency of
the project), in a subprocess of this script (``--agentevals-side``) that prints JSON: its
``create_trajectory_match_evaluator`` on OpenAI-style messages, one assistant message per call
(then the tool's result) and a final answer, the arguments as JSON text.

Where the two differ, the agentevals side names why, by running agentevals again with one of our
documented differences taken away (:data:`DIFFERENCES`): the pairing searched over every order of
the calls instead of first fit, the arguments compared call against expected in every mode, and
booleans kept apart from numbers. The case, agentevals' verdict, its verdict without those three
and the smallest set of them that explains a difference go to
``benchmarks/data/agentevals-reference.jsonl``, which tests/test_scoring_trajectory.py checks our
verdicts against without agentevals installed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "benchmarks" / "data" / "agentevals-reference.jsonl"
MODES = ("strict", "unordered", "subset", "superset")
ARGS_MODES = ("exact", "ignore", "subset", "superset")
#: Our documented differences from agentevals 0.0.9, each a change the agentevals side can make
#: to its own run to show that this difference, and nothing else, parts a verdict.
DIFFERENCES = ("order", "orientation", "json-types")
SEED = 36
GENERATED_PAIRS = 20
COMMAND = (
    ".venv/bin/python benchmarks/agentevals_crosscheck.py"
    " --agentevals-python /tmp/agentevals-venv/bin/python"
    " --write benchmarks/agentevals-crosscheck.md"
)

Call = tuple[str, dict[str, Any]]


# --- the cases -------------------------------------------------------------------------------


def c(name: str, **args: Any) -> Call:
    return (name, args)


NESTED = {"tags": ["a", "b"], "limit": 5}
#: (label, expected calls, calls made), written to cover one situation each.
PAIRS: list[tuple[str, list[Call], list[Call]]] = [
    ("same-one", [c("search", q="cats")], [c("search", q="cats")]),
    ("same-two", [c("search", q="cats"), c("read", path="a")],
     [c("search", q="cats"), c("read", path="a")]),
    ("reordered", [c("search", q="cats"), c("read", path="a")],
     [c("read", path="a"), c("search", q="cats")]),
    ("extra-call-last", [c("search", q="cats")], [c("search", q="cats"), c("read", path="a")]),
    ("extra-call-first", [c("search", q="cats")], [c("read", path="a"), c("search", q="cats")]),
    ("missing-call", [c("search", q="cats"), c("read", path="a")], [c("search", q="cats")]),
    ("replaced-call", [c("search", q="cats"), c("read", path="a")],
     [c("search", q="cats"), c("write", path="a")]),
    ("repeated-swapped", [c("search", q="a"), c("search", q="b")],
     [c("search", q="b"), c("search", q="a")]),
    ("repeated-made-twice", [c("search", q="a")], [c("search", q="a"), c("search", q="a")]),
    ("repeated-expected-twice", [c("search", q="a"), c("search", q="a")], [c("search", q="a")]),
    ("repeated-other-args", [c("search", q="a"), c("search", q="b")],
     [c("search", q="a"), c("search", q="c")]),
    ("extra-argument", [c("write", path="a")], [c("write", path="a", mode="w")]),
    ("missing-argument", [c("write", path="a", mode="w")], [c("write", path="a")]),
    ("different-value", [c("write", path="a")], [c("write", path="b")]),
    ("different-key", [c("write", path="a")], [c("write", file="a")]),
    ("extra-and-missing-argument", [c("write", path="a", mode="w")],
     [c("write", path="a", text="hi")]),
    ("nested-same", [c("query", filter=NESTED)],
     [c("query", filter={"limit": 5, "tags": ["a", "b"]})]),
    ("nested-list-order", [c("query", filter=NESTED)],
     [c("query", filter={"tags": ["b", "a"], "limit": 5})]),
    ("nested-extra-key", [c("query", filter=NESTED)],
     [c("query", filter={**NESTED, "offset": 0})]),
    ("nested-extra-key-and-argument", [c("query", filter=NESTED)],
     [c("query", filter={**NESTED, "offset": 0}, page=1)]),
    ("number-1-vs-1.0", [c("count", n=1)], [c("count", n=1.0)]),
    ("nested-1-vs-1.0", [c("count", n=[1, {"k": 2}])], [c("count", n=[1.0, {"k": 2.0}])]),
    ("true-vs-1", [c("flag", on=True)], [c("flag", on=1)]),
    ("false-vs-0", [c("flag", on=False)], [c("flag", on=0)]),
    ("nested-true-vs-1", [c("flag", on=[True])], [c("flag", on=[1])]),
    ("string-vs-number", [c("count", n=1)], [c("count", n="1")]),
    ("null-vs-missing", [c("write", path="a", mode=None)], [c("write", path="a")]),
    ("null-vs-empty-string", [c("write", path=None)], [c("write", path="")]),
    ("big-int-vs-float", [c("count", n=9007199254740992.0)], [c("count", n=9007199254740993)]),
    ("name-case", [c("search", q="cats")], [c("Search", q="cats")]),
    ("no-arguments", [c("ping")], [c("ping")]),
    ("empty-both", [], []),
    ("empty-expected", [], [c("ping")]),
    ("empty-made", [c("ping")], []),
    # First fit pairs the loose expected call with the call the strict one needed.
    ("first-fit-trap-made", [c("search", q="a"), c("search", q="a", n=2)],
     [c("search", q="a", n=2), c("search", q="a")]),
    ("first-fit-trap-expected", [c("search", q="a", n=2), c("search", q="a")],
     [c("search", q="a"), c("search", q="a", n=2)]),
    ("three-mixed", [c("search", q="a"), c("read", path="x"), c("write", path="y", text="t")],
     [c("read", path="x", enc="utf8"), c("write", path="y", text="t"), c("search", q="a")]),
]  # fmt: skip

NAMES = ("search", "fetch")
KEYS = ("q", "n", "opts")
VALUES: tuple[Any, ...] = (
    "cats", "dogs", 1, 1.0, 2, True, False, 0, None, "1", [1, 2], [2, 1], {"k": 1}, {"k": 1.0},
)  # fmt: skip


def generated_pairs(
    count: int = GENERATED_PAIRS, seed: int = SEED
) -> list[tuple[str, list[Call], list[Call]]]:
    """Pairs made by editing a random expected trajectory one to three times."""
    rng = random.Random(seed)
    pairs: list[tuple[str, list[Call], list[Call]]] = []
    for index in range(count):
        expected = [_random_call(rng) for _ in range(rng.randint(1, 3))]
        made = [(name, dict(args)) for name, args in expected]
        edits = [rng.choice(tuple(EDITS)) for _ in range(rng.randint(1, 3))]
        for edit in edits:
            EDITS[edit](rng, made)
        pairs.append((f"gen{index:02d}-{'+'.join(edits)}", expected, made))
    return pairs


def _random_call(rng: random.Random) -> Call:
    keys = rng.sample(KEYS, rng.randint(0, 2))
    return (rng.choice(NAMES), {key: rng.choice(VALUES) for key in keys})


def _drop(rng: random.Random, made: list[Call]) -> None:
    if made:
        made.pop(rng.randrange(len(made)))


def _add(rng: random.Random, made: list[Call]) -> None:
    made.insert(rng.randint(0, len(made)), _random_call(rng))


def _repeat(rng: random.Random, made: list[Call]) -> None:
    if made:
        name, args = rng.choice(made)
        made.insert(rng.randint(0, len(made)), (name, dict(args)))


def _swap(rng: random.Random, made: list[Call]) -> None:
    if len(made) > 1:
        i, j = rng.sample(range(len(made)), 2)
        made[i], made[j] = made[j], made[i]


def _add_arg(rng: random.Random, made: list[Call]) -> None:
    if made:
        made[rng.randrange(len(made))][1]["extra"] = rng.choice(VALUES)


def _drop_arg(rng: random.Random, made: list[Call]) -> None:
    with_args = [args for _, args in made if args]
    if with_args:
        args = rng.choice(with_args)
        del args[rng.choice(sorted(args))]


def _retype(rng: random.Random, made: list[Call]) -> None:
    """A whole number becomes the same number as a float, or a boolean Python calls equal."""
    for _, args in made:
        for key, value in sorted(args.items()):
            if type(value) is int:
                args[key] = float(value) if rng.random() < 0.6 else bool(value)
                return


EDITS: dict[str, Callable[[random.Random, list[Call]], None]] = {
    "drop": _drop,
    "add": _add,
    "repeat": _repeat,
    "swap": _swap,
    "add-arg": _add_arg,
    "drop-arg": _drop_arg,
    "retype": _retype,
}


def make_cases() -> list[dict[str, Any]]:
    """Every pair under every mode and argument mode, in a fixed order."""
    cases = []
    for label, expected, made in [*PAIRS, *generated_pairs()]:
        for mode, args_mode in itertools.product(MODES, ARGS_MODES):
            cases.append(
                {
                    "id": f"{label}/{mode}/{args_mode}",
                    "mode": mode,
                    "args_match": args_mode,
                    "expected": [[name, args] for name, args in expected],
                    "calls": [[name, args] for name, args in made],
                }
            )
    ids = [case["id"] for case in cases]
    assert len(set(ids)) == len(ids), "case ids must be unique"
    return cases


# --- ours ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MadeCall:
    name: str
    arguments: dict[str, Any]


def our_verdict(case: dict[str, Any]) -> bool:
    """Our verdict: one step per expected call, with the case's ``args_match``."""
    from pytest_llmbench.scoring.trajectory import ExpectedStep, match_sequence

    steps = [ExpectedStep(name, args, case["args_match"]) for name, args in case["expected"]]
    calls = [MadeCall(name, args) for name, args in case["calls"]]
    return match_sequence(steps, calls, case["mode"]).passed


# --- agentevals: a subprocess in its own interpreter -----------------------------------------


def run_agentevals(python: str, cases: list[dict[str, Any]]) -> dict[str, Any]:
    command = [python, str(Path(__file__).resolve()), "--agentevals-side"]
    env = {**os.environ, "LANGSMITH_TRACING": "false", "LANGCHAIN_TRACING_V2": "false"}
    done = subprocess.run(command, input=json.dumps(cases), env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"the agentevals side failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def agentevals_side() -> None:
    """Runs inside agentevals' interpreter: every case judged, JSON on stdout."""
    import importlib.metadata

    cases = json.loads(sys.stdin.read())
    verdicts = {case["id"]: _judge_case(case) for case in cases}
    names = ("agentevals", "openevals", "langchain-core")
    versions = {name: importlib.metadata.version(name) for name in names}
    print(json.dumps({"versions": {"python": sys.version.split()[0], **versions},
                      "verdicts": verdicts}))  # fmt: skip


def _judge_case(case: dict[str, Any]) -> dict[str, Any]:
    """agentevals' verdict, its verdict without our documented differences, and the smallest
    set of those differences that turns the one into the other."""
    raw = _judged(case, frozenset())
    fixed = _judged(case, frozenset(DIFFERENCES))
    differs_by: list[str] = []
    if raw != fixed:
        combos = (
            combo for size in (1, 2, 3) for combo in itertools.combinations(DIFFERENCES, size)
        )
        found = next(combo for combo in combos if _judged(case, frozenset(combo)) == fixed)
        differs_by = list(found)
    return {"agentevals": raw, "agentevals_fixed": fixed, "differs_by": differs_by}


_SWAPPED = {"subset": "superset", "superset": "subset"}


def _judged(case: dict[str, Any], fixes: frozenset[str]) -> bool:
    """agentevals' verdict on ``case``, with the ``fixes`` of :data:`DIFFERENCES` made."""
    mode, args_mode = case["mode"], case["args_match"]
    expected, made = _calls(case["expected"]), _calls(case["calls"])
    if "json-types" in fixes:  # a boolean stays a boolean: never equal to 1 or 0
        expected, made = _tag_booleans(expected), _tag_booleans(made)
    if mode == "unordered" and fixes & {"order", "orientation"}:
        # agentevals' unordered is exactly its superset and its subset, both: fix each half.
        halves = [{**case, "mode": half} for half in ("superset", "subset")]
        return all(_judged(half, fixes) for half in halves)
    if mode == "subset" and "orientation" in fixes:
        # agentevals' subset compares each call's arguments with the roles swapped (the
        # expected arguments as the call's): swapping the mode back compares call to expected.
        args_mode = _SWAPPED.get(args_mode, args_mode)
    if "order" in fixes and mode in ("superset", "subset"):
        return _any_order(mode, args_mode, expected, made)
    return _evaluate(mode, args_mode, expected, made)


def _any_order(mode: str, args_mode: str, expected: list[Call], made: list[Call]) -> bool:
    """Whether first fit passes for some order of the side it searches: a pairing exists."""
    if mode == "superset":  # each expected call takes the first fitting call made
        return any(_evaluate(mode, args_mode, expected, list(order))
                   for order in itertools.permutations(made))  # fmt: skip
    return any(_evaluate(mode, args_mode, list(order), made)
               for order in itertools.permutations(expected))  # fmt: skip


def _evaluate(mode: str, args_mode: str, expected: list[Call], made: list[Call]) -> bool:
    from agentevals.trajectory.match import create_trajectory_match_evaluator

    evaluator = create_trajectory_match_evaluator(
        trajectory_match_mode=mode, tool_args_match_mode=args_mode
    )
    result = evaluator(outputs=_messages(made), reference_outputs=_messages(expected))
    return bool(result["score"])


def _messages(calls: Sequence[Call]) -> list[dict[str, Any]]:
    """A trajectory as agentevals reads one: each call its own assistant message, answered by a
    tool message, then a final answer."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Do the task."}]
    for index, (name, args) in enumerate(calls):
        call = {"id": f"call_{index}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)}}  # fmt: skip
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "content": "ok", "tool_call_id": f"call_{index}"})
    messages.append({"role": "assistant", "content": "Done."})
    return messages


def _calls(raw: list[list[Any]]) -> list[Call]:
    return [(str(name), dict(args)) for name, args in raw]


def _tag_booleans(calls: list[Call]) -> list[Call]:
    return [(name, {key: _tagged(value) for key, value in args.items()}) for name, args in calls]


def _tagged(value: Any) -> Any:
    if isinstance(value, bool):
        return f"\x00bool:{value}"
    if isinstance(value, list):
        return [_tagged(item) for item in value]
    if isinstance(value, dict):
        return {key: _tagged(item) for key, item in value.items()}
    return value


# --- the comparison and the Markdown ---------------------------------------------------------


@dataclass(frozen=True)
class Judged:
    case: dict[str, Any]
    ours: bool
    agentevals: bool
    agentevals_fixed: bool
    differs_by: tuple[str, ...]


def compare(cases: list[dict[str, Any]], theirs: dict[str, Any]) -> list[Judged]:
    judged = []
    for case in cases:
        verdict = theirs[case["id"]]
        judged.append(Judged(case, our_verdict(case), verdict["agentevals"],
                             verdict["agentevals_fixed"], tuple(verdict["differs_by"])))  # fmt: skip
    return judged


def write_reference(judged: list[Judged], path: Path = REFERENCE) -> None:
    lines = []
    for item in judged:
        verdicts = {"agentevals": item.agentevals, "agentevals_fixed": item.agentevals_fixed,
                    "differs_by": list(item.differs_by)}  # fmt: skip
        lines.append(json.dumps({**item.case, **verdicts}, separators=(",", ":")))
    path.write_text("\n".join(lines) + "\n")


def summary(judged: list[Judged]) -> list[str]:
    head = "| mode | args_match | cases | agree with agentevals | differ: " + " | differ: ".join(
        DIFFERENCES
    )
    lines = [head + " | agree with agentevals without those |", "|---" * 8 + "|"]
    for mode, args_mode in [*itertools.product(MODES, ARGS_MODES), ("all", "all")]:
        cell = [j for j in judged if mode in ("all", j.case["mode"])
                and args_mode in ("all", j.case["args_match"])]  # fmt: skip
        agree = sum(j.ours == j.agentevals for j in cell)
        by = [sum(name in j.differs_by for j in cell if j.ours != j.agentevals) for name in
              DIFFERENCES]  # fmt: skip
        fixed = sum(j.ours == j.agentevals_fixed for j in cell)
        row = [mode, args_mode, str(len(cell)), str(agree), *map(str, by), str(fixed)]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _shown(calls: list[list[Any]]) -> str:
    """Calls as ``name(key=value, ...)``, each value as JSON text (``1.0`` stays ``1.0``)."""
    if not calls:
        return "(none)"
    shown = ", ".join(
        f"{name}({', '.join(f'{key}={json.dumps(value)}' for key, value in args.items())})"
        for name, args in calls
    )
    return shown.replace("|", "\\|")


def disagreements(judged: list[Judged]) -> list[str]:
    lines = ["| case | expected | made | ours | agentevals | explained by |", "|---" * 6 + "|"]
    for j in judged:
        if j.ours != j.agentevals:
            why = ", ".join(j.differs_by) or "**unexplained**"
            cells = [j.case["id"], _shown(j.case["expected"]), _shown(j.case["calls"]),
                     _verdict(j.ours), _verdict(j.agentevals), why]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def _verdict(passed: bool) -> str:
    return "pass" if passed else "fail"


def facts(theirs: dict[str, Any], judged: list[Judged]) -> dict[str, str]:
    from report import git_revision

    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": f"`{COMMAND}`",
        "pytest-llmbench revision": git_revision(),
        "our side": _our_side(),
        "agentevals side": ", ".join(f"{k} {v}" for k, v in theirs["versions"].items()),
        "cases": f"{len(judged)}: {len(PAIRS)} written pairs and {GENERATED_PAIRS} generated "
        f"(seed {SEED}), each under {len(MODES)} modes x {len(ARGS_MODES)} argument modes",
    }


def _our_side() -> str:
    """Where our verdicts come from: the one module that gives them, committed or not."""
    module = "pytest_llmbench/scoring/trajectory.py"
    done = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", module],
                          capture_output=True, text=True, check=False)  # fmt: skip
    state = "with uncommitted changes" if done.stdout.strip() else "as committed"
    return f"`match_sequence` of `{module}`, {state}"


def render(facts: dict[str, str], judged: list[Judged]) -> str:
    head = ["# Our trajectory matcher beside agentevals'", "", GENERATED, "", "| fact | value |",
            "|---|---|", *(f"| {key} | {value} |" for key, value in facts.items())]  # fmt: skip
    parts = [*head, "", "## Agreement", "", *summary(judged), "", NOTES.strip(), ""]
    return "\n".join([*parts, "## Every disagreement", "", *disagreements(judged), ""])


GENERATED = (
    "Written by `benchmarks/agentevals_crosscheck.py` (see its docstring and"
    " `benchmarks/README.md`): each case is an expected trajectory and the calls made, judged by"
    " our `match_sequence` and by agentevals' `create_trajectory_match_evaluator` under the same"
    " mode and argument mode. The cases and agentevals' verdicts are in"
    " `benchmarks/data/agentevals-reference.jsonl`; tests/test_scoring_trajectory.py checks our"
    " verdicts against that file."
)

NOTES = """
"agree with agentevals without those" counts the cases where our verdict is agentevals' own
verdict once the agentevals side takes our three documented differences away from its run (see
below); a "differ" column counts the disagreements that the named difference, taken away alone
(or with the others named in the last table), explains.

## What differs, and why we keep it

Both name the modes from the side of what was made: `superset` calls (or arguments) contain at
least the expected ones, extras allowed; `subset` ones contain nothing beyond the expected ones,
some may be left out. agentevals 0.0.9 implements that with three quirks we do not copy:

- **order**: agentevals pairs first fit: each expected call (in `superset`; each call made in
  `subset`) takes the first unused call that fits. With `subset`/`superset` arguments one call
  can fit two expected calls, and first fit may take the one a later call needed: the verdict
  then depends on the order of calls in a mode that claims to ignore order (`first-fit-trap-*`
  pass in one order and fail in the other). Ours takes a maximum matching. The agentevals side
  shows it by trying every order of the searched side: some order passes exactly when a pairing
  exists.
- **orientation**: agentevals' `subset` mode (and the second half of `unordered`, which is its
  `superset` and `subset` both) calls the argument matcher with the two calls' roles swapped, so
  there `tool_args_match_mode="superset"` accepts a call with fewer arguments and rejects one
  with an extra argument: the opposite of what the same name means in its `superset` and
  `strict` modes and in its README ("a tool call [...] contain[s] a subset/superset of args
  compared to a reference tool call"). Ours compares the call's arguments with the expected ones
  in every mode. The agentevals side shows it by passing the other argument mode to its `subset`
  half.
- **json-types**: agentevals compares values with Python's `==`, where `True == 1` and
  `False == 0`; ours compares JSON values, where a boolean is never a number (a tool declaring
  an integer does not take `true`). Both take `1 == 1.0`. The agentevals side shows it by turning
  booleans into tagged strings on both sides.

Not in the cases, because the two cannot be compared there: agentevals' `strict` compares
messages (the same number with the same roles; calls within one message in any order); ours
compares the list of calls alone, in order. agentevals' per-tool overrides (field lists, custom
functions) have no counterpart; our `args_match` is per step, a step without `args` matches any
arguments, and we add the `in-order` mode and the `allowed` argument mode, which agentevals
lacks. agentevals scores 0 or 1; ours also gives the share of steps paired.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description="Our trajectory matcher beside agentevals'")
    parser.add_argument("--agentevals-python", help="An interpreter with agentevals installed")
    parser.add_argument("--write", type=Path, help="Write the Markdown here (and the reference)")
    parser.add_argument("--agentevals-side", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.agentevals_side:
        agentevals_side()
        return
    if not args.agentevals_python:
        parser.error("--agentevals-python is required")
    sys.path.insert(0, str(ROOT))
    cases = make_cases()
    theirs = run_agentevals(args.agentevals_python, cases)
    judged = compare(cases, theirs["verdicts"])
    print("\n".join(summary(judged)))
    unexplained = [j.case["id"] for j in judged if j.ours != j.agentevals_fixed]
    if args.write:
        write_reference(judged)
        args.write.write_text(render(facts(theirs, judged), judged))
        print(f"wrote {args.write} and {REFERENCE.relative_to(ROOT)}")
    if unexplained:
        sys.exit(f"{len(unexplained)} disagreements no documented difference explains: "
                 f"{unexplained[:10]}")  # fmt: skip


if __name__ == "__main__":
    main()
