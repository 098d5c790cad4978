"""Our ``state-equals`` (tau-bench's rule) beside tau2-bench's database check, task by task.

    python3 -m venv /tmp/tau2-venv
    /tmp/tau2-venv/bin/pip install 'inspect_ai==0.3.285' toml pyyaml
    /tmp/tau2-venv/bin/pip install --no-deps 'inspect_evals==0.28.0'
    .venv/bin/python benchmarks/tau2_crosscheck.py \\
        --tau2-python /tmp/tau2-venv/bin/python --write benchmarks/tau2-crosscheck.md

tau-bench and tau2-bench are not on PyPI; inspect_evals 0.28.0 ships ``inspect_evals/tau2``,
"closely adapted from tau2-bench": the airline and retail domains (their databases, tasks and
tools) and the scorer whose ``db_match`` replays a task's gold actions on the initial database
(``get_expected_db``: ``calculate`` and ``transfer_to_human_agents`` skipped, an action raising
``ToolError`` skipped silently) and passes when ``expected.db.get_hash() == predicted.db.get_hash()``
(SHA-256 of ``json.dumps(model_dump(), sort_keys=True, default=str)``). Its dependency
``inspect-evals-utils`` is not on PyPI, hence ``--no-deps`` and the three packages the tau2
module imports.

The reference side (``--tau2-side``, in that interpreter, JSON on stdout) makes, for every
retail and airline task that gives gold actions, a few trajectories: the gold one; gold without
each write action; gold with one argument of a write action changed (seeded, from the values the
domain's gold actions give that argument); gold plus a read-only call; gold plus a repeated
write; gold with its writes in another order (where that differs); gold with a whole-number
argument of a write given as a float (where one has such an argument, as a model may write
``2.0``). Each is applied to the initial database through the reference's tool methods, a call
that raises changing nothing (as our environment runner does: it writes the state back only
after a tool returns); the reference's verdict is its hash equality with ``get_expected_db``.
Both databases are kept as JSON only where some trajectory of the task, or the gold replay,
changed a top-level entry (an order, a user, a flight...): equal elsewhere, so the comparison of
the kept entries is the comparison of the whole (the reference side checks that it gives the
same verdict). It also counts the gold actions that raise when replayed (our replay stops there
with an environment error) and the calls that raised after changing the database (kept by the
reference, undone by us).

Ours: :func:`pytest_llmbench.scoring.evaluate_state` of a bare ``state-equals`` on a
:class:`~pytest_llmbench.agent.StateSnapshot` of those JSON states. Where the two differ the
reference side names why, by judging again with our documented difference taken away
(``json-numbers``: whole-number floats written as integers before hashing). The cases and
verdicts go to ``benchmarks/data/tau2-reference.json.gz``, which
tests/test_scoring_final_state_tau2.py checks our verdicts against without the reference.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import hashlib
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "benchmarks" / "data" / "tau2-reference.json.gz"
SEED = 42
DOMAINS = ("retail", "airline")
#: The tools that change the database, per domain (the others only read it).
WRITES = {
    "retail": frozenset({
        "cancel_pending_order", "exchange_delivered_order_items", "modify_pending_order_address",
        "modify_pending_order_items", "modify_pending_order_payment", "modify_user_address",
        "return_delivered_order_items",
    }),
    "airline": frozenset({
        "book_reservation", "cancel_reservation", "send_certificate",
        "update_reservation_baggages", "update_reservation_flights",
        "update_reservation_passengers",
    }),
}  # fmt: skip
#: A read-only call added where the gold trajectory has none to repeat.
DEFAULT_READ: dict[str, tuple[str, dict[str, Any]]] = {
    "retail": ("list_all_product_types", {}),
    "airline": ("list_all_airports", {}),
}
#: What the reference skips when replaying gold actions (not database tools).
SKIPPED = frozenset({"calculate", "transfer_to_human_agents"})
#: Our documented differences from the reference's check, each one the reference side can take
#: away from its own verdict to show that it, and nothing else, parts a verdict.
DIFFERENCES = ("json-numbers",)
COMMAND = (
    ".venv/bin/python benchmarks/tau2_crosscheck.py --tau2-python /tmp/tau2-venv/bin/python"
    " --write benchmarks/tau2-crosscheck.md"
)

Call = dict[str, Any]  # {"name": str, "arguments": dict}


# --- the trajectories (plain Python: made on the reference side) -----------------------------


def trajectories(domain: str, gold: list[Call], pool: dict[str, list[Any]], seed: str
                 ) -> Iterator[tuple[str, list[Call]]]:  # fmt: skip
    """The labelled trajectories of one task, from its gold actions, in a fixed order."""
    rng = random.Random(seed)
    writes = [i for i, call in enumerate(gold) if call["name"] in WRITES[domain]]
    yield "gold", gold
    for i in writes:
        yield f"minus-write-{i}", gold[:i] + gold[i + 1 :]
    if writes:
        changed = _changed_argument(gold, rng.choice(writes), pool, rng)
        if changed is not None:
            yield changed
    reads = [call for call in gold if call["name"] not in WRITES[domain] | SKIPPED]
    name, args = DEFAULT_READ[domain]
    read = copy.deepcopy(rng.choice(reads)) if reads else {"name": name, "arguments": args}
    at = rng.randint(0, len(gold))
    yield "plus-read", [*gold[:at], read, *gold[at:]]
    if writes:
        i = rng.choice(writes)
        yield f"repeat-write-{i}", [*gold[: i + 1], copy.deepcopy(gold[i]), *gold[i + 1 :]]
    reordered = _reordered(gold, writes, rng)
    if reordered is not None:
        yield "reordered-writes", reordered
    for i in writes:
        retyped = _retyped(gold[i]["arguments"])
        if retyped is not None:
            retyped_call = {**gold[i], "arguments": retyped}
            yield f"float-argument-{i}", [*gold[:i], retyped_call, *gold[i + 1 :]]
            break


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict):
        for key in value:
            yield from _leaves(value[key], (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))
    else:
        yield path, value


def _leaf_key(path: tuple[Any, ...]) -> str:
    """The name a leaf's values are pooled under: its last mapping key."""
    return next((str(p) for p in reversed(path) if isinstance(p, str)), "")


def value_pool(domain: str, tasks: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Every value the domain's gold write actions give each argument name, sorted."""
    pool: dict[str, set[str]] = {}
    for task in tasks:
        for call in task["gold"]:
            if call["name"] in WRITES[domain]:
                for path, value in _leaves(call["arguments"]):
                    pool.setdefault(_leaf_key(path), set()).add(json.dumps(value))
    return {key: [json.loads(v) for v in sorted(values)] for key, values in pool.items()}


def _changed_argument(gold: list[Call], index: int, pool: dict[str, list[Any]],
                      rng: random.Random) -> tuple[str, list[Call]] | None:  # fmt: skip
    """Gold with one leaf of write ``index``'s arguments changed: another value the domain
    gives that argument, else a number plus one, a flipped boolean, a string with ``X``."""
    call = copy.deepcopy(gold[index])
    leaves = list(_leaves(call["arguments"]))
    if not leaves:
        return None
    path, value = rng.choice(leaves)
    others = [v for v in pool.get(_leaf_key(path), []) if type(v) is type(value) and v != value]
    if others:
        new = rng.choice(others)
    elif isinstance(value, bool):
        new = not value
    elif isinstance(value, int | float):
        new = value + 1
    else:
        new = f"{value}X"
    holder = call["arguments"]
    for part in path[:-1]:
        holder = holder[part]
    holder[path[-1]] = new
    label = f"changed-argument-{index}-{'/'.join(map(str, path))}"
    return label, [*gold[:index], call, *gold[index + 1 :]]


def _reordered(gold: list[Call], writes: list[int], rng: random.Random) -> list[Call] | None:
    """Gold with its writes shuffled among their places (None: no other order of them)."""
    calls = [json.dumps(gold[i], sort_keys=True) for i in writes]
    if len(set(calls)) < 2:
        return None
    for _ in range(20):
        order = writes[:]
        rng.shuffle(order)
        if [calls[writes.index(i)] for i in order] != calls:
            shuffled = gold[:]
            for place, source in zip(writes, order, strict=True):
                shuffled[place] = gold[source]
            return shuffled
    return None


def _retyped(arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments with their first whole number (not a boolean) as a float, or None."""
    retyped = copy.deepcopy(arguments)
    for path, value in _leaves(retyped):
        if type(value) is int:
            holder: Any = retyped
            for part in path[:-1]:
                holder = holder[part]
            holder[path[-1]] = float(value)
            return retyped
    return None


# --- the reference side: runs in tau2's interpreter ----------------------------------------


def tau2_side() -> None:
    """Every task's trajectories judged by the reference; JSON on stdout."""
    import importlib.metadata

    started = time.monotonic()
    result = {"versions": {"python": sys.version.split()[0],
                           **{name: importlib.metadata.version(name)
                              for name in ("inspect_evals", "inspect_ai", "pydantic")}},
              "domains": {domain: _domain(domain) for domain in DOMAINS}}  # fmt: skip
    result["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(result, separators=(",", ":")))


def _domain(domain: str) -> dict[str, Any]:
    from inspect_evals.tau2.utils import TAU2_DATA_DIR  # type: ignore[import-not-found]

    raw = json.loads((TAU2_DATA_DIR / "domains" / domain / "tasks.json").read_text())
    limit = int(os.environ.get("TAU2_CROSSCHECK_LIMIT", "0")) or None
    tasks = [
        {"id": str(task["id"]), "gold": [{"name": a["name"], "arguments": a["arguments"]}
                                         for a in task["evaluation_criteria"]["actions"]],
         "actions": task["evaluation_criteria"]["actions"]}
        for task in raw
        if (task.get("evaluation_criteria") or {}).get("actions") is not None
    ][:limit]  # fmt: skip
    initial = _tools(domain).db.model_dump()
    texts = {coll: {key: _text(entry) for key, entry in entries.items()}
             for coll, entries in initial.items()}  # fmt: skip
    pool = value_pool(domain, tasks)
    judged = [_task(domain, task, pool, initial, texts) for task in tasks]
    assert _text(_PRISTINE[domain][1]) == _text(initial), "the initial database changed"
    return {"tasks_in_file": len(raw), "tasks": judged}


def _tools(domain: str) -> Any:
    """The domain's tools on a fresh initial database (validated from a dump made once: the
    same database as ``initialize`` loads, without reading the file each time)."""
    from uuid import uuid4

    from inspect_evals.tau2.airline.AirlineAgentTools import (  # type: ignore[import-not-found]
        AirlineAgentTools,
    )
    from inspect_evals.tau2.retail.RetailAgentTools import (  # type: ignore[import-not-found]
        RetailAgentTools,
    )

    kind = RetailAgentTools if domain == "retail" else AirlineAgentTools
    tools = kind(instance=f"crosscheck_{uuid4()}")
    if domain not in _PRISTINE:
        tools.initialize()
        _PRISTINE[domain] = (type(tools.db), tools.db.model_dump())
        return tools
    model, dump = _PRISTINE[domain]
    tools.db = model.model_validate(dump)
    tools.initialized = True
    return tools


_PRISTINE: dict[str, tuple[Any, dict[str, Any]]] = {}


def _text(value: Any) -> str:
    """A value as the reference hashes it."""
    return json.dumps(value, sort_keys=True, default=str)


def _task(domain: str, task: dict[str, Any], pool: dict[str, list[Any]],
          initial: dict[str, Any], texts: dict[str, dict[str, str]]) -> dict[str, Any]:  # fmt: skip
    from inspect_evals.tau2.common.scorer import (  # type: ignore[import-not-found]
        get_expected_db,
    )
    from inspect_evals.tau2.data_model.tasks import Action  # type: ignore[import-not-found]

    actions = [Action.model_validate(a) for a in task["actions"]]
    expected_tools = get_expected_db(domain, actions)
    expected = expected_tools.db.model_dump()
    raising = _raising_gold(domain, task["gold"])
    runs = []
    for label, calls in trajectories(domain, task["gold"], pool, f"{SEED}:{domain}:{task['id']}"):
        predicted_tools, failed, partial = _applied(domain, calls)
        verdict = expected_tools.db.get_hash() == predicted_tools.db.get_hash()
        predicted = predicted_tools.db.model_dump()
        runs.append({"label": label, "calls": calls, "reference": verdict,
                     "failed_calls": failed, "partial_writes": partial,
                     "_predicted": predicted})  # fmt: skip
    states = [expected, *(run["_predicted"] for run in runs)]
    touched = _touched(initial, states)
    if not all(_restricted_verdict(run, expected, touched) for run in runs):
        touched = _touched(initial, states, texts)  # a change Python's == missed (1 == 1.0)
    assert all(_restricted_verdict(run, expected, touched) for run in runs), task["id"]
    kept_initial = _kept(initial, touched)
    kept_expected = _kept(expected, touched)
    for run in runs:
        predicted = _kept(run.pop("_predicted"), touched)
        run["predicted"] = _overrides(kept_initial, predicted)
        run["reference_fixed"] = _text(_whole(predicted)) == _text(_whole(kept_expected))
    return {"id": task["id"], "domain": domain, "gold": task["gold"],
            "gold_raising": raising, "initial": kept_initial,
            "expected": _overrides(kept_initial, _kept(expected, touched)),
            "trajectories": runs}  # fmt: skip


def _applied(domain: str, calls: list[Call]) -> tuple[Any, list[list[Any]], int]:
    """The initial database with ``calls`` made through the reference's tool methods, a call
    that raises changing nothing; the calls that raised ``[index, error]``; and how many of
    those had changed the database before raising (the reference would keep that change)."""
    tools = _tools(domain)
    made: list[Call] = []
    failed: list[list[Any]] = []
    partial = 0
    for index, call in enumerate(calls):
        if call["name"] in SKIPPED:
            continue
        try:
            getattr(tools, call["name"])(**copy.deepcopy(call["arguments"]))
        except Exception as exc:  # ToolError, or a pydantic error on a changed argument
            failed.append([index, f"{type(exc).__name__}: {str(exc)[:200]}"])
            if call["name"] in WRITES[domain]:
                left = tools.db.get_hash()
                tools = _tools(domain)  # undone: the calls that succeeded, made again
                for done in made:
                    getattr(tools, done["name"])(**copy.deepcopy(done["arguments"]))
                partial += tools.db.get_hash() != left
            continue
        made.append(call)
    return tools, failed, partial


def _raising_gold(domain: str, gold: list[Call]) -> list[list[Any]]:
    """The gold actions that raise when replayed in order as the reference replays them."""
    from inspect_ai.tool import ToolError  # type: ignore[import-not-found]

    tools = _tools(domain)
    raising = []
    for index, call in enumerate(gold):
        if call["name"] in SKIPPED:
            continue
        try:
            getattr(tools, call["name"])(**copy.deepcopy(call["arguments"]))
        except ToolError as exc:
            raising.append([index, call["name"], str(exc)[:200]])
    return raising


def _hash(value: Any) -> str:
    return hashlib.sha256(_text(value).encode()).hexdigest()


def _whole(value: Any) -> Any:
    """``value`` with each whole-number float as an integer (our ``1 == 1.0``)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _whole(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole(item) for item in value]
    return value


def _restricted_verdict(run: dict[str, Any], expected: dict[str, Any],
                        touched: dict[str, set[str]]) -> bool:  # fmt: skip
    """Whether the kept entries alone give the reference's verdict on the whole databases."""
    kept = _text(_kept(run["_predicted"], touched)) == _text(_kept(expected, touched))
    return kept is bool(run["reference"])


def _touched(initial: dict[str, Any], states: list[dict[str, Any]],
             texts: dict[str, dict[str, str]] | None = None) -> dict[str, set[str]]:  # fmt: skip
    """The top-level entries any of ``states`` holds differently from ``initial``: by Python's
    ``!=`` (fast), or by the reference's hashed text when ``texts`` (the initial entries')
    are given."""
    touched: dict[str, set[str]] = {coll: set() for coll in initial}
    for state in states:
        for coll, entries in state.items():
            was = initial[coll]
            for key, entry in entries.items():
                if key not in was or (was[key] != entry if texts is None
                                      else texts[coll][key] != _text(entry)):  # fmt: skip
                    touched[coll].add(key)
            touched[coll].update(key for key in was if key not in entries)
    return touched


def _kept(state: dict[str, Any], touched: dict[str, set[str]]) -> dict[str, Any]:
    return {coll: {key: state[coll][key] for key in sorted(keys) if key in state[coll]}
            for coll, keys in touched.items()}  # fmt: skip


def _overrides(initial: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """What ``state`` holds differently from ``initial``: ``{coll: {key: entry, or None when
    gone}}`` (an entry is never null in these databases)."""
    found: dict[str, Any] = {}
    for coll in sorted({*initial, *state}):
        was, now = initial.get(coll, {}), state.get(coll, {})
        changed = {
            key: now.get(key)
            for key in sorted({*was, *now})
            if key not in now or key not in was or _text(was[key]) != _text(now[key])
        }
        if changed:
            found[coll] = changed
    return found  # fmt: skip


# --- ours ----------------------------------------------------------------------------------


def rebuilt(initial: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A kept state from the task's kept initial entries and a trajectory's overrides."""
    state = {coll: dict(entries) for coll, entries in initial.items()}
    for coll, entries in overrides.items():
        target = state.setdefault(coll, {})
        for key, entry in entries.items():
            if entry is None:
                target.pop(key, None)
            else:
                target[key] = entry
    return state


def our_verdicts(task: dict[str, Any]) -> list[bool]:
    """Our ``state-equals`` (no value: the expected actions' state) on each trajectory."""
    from pytest_llmbench.agent import StateSnapshot
    from pytest_llmbench.scoring import evaluate_state, parse_assertion

    assertion = parse_assertion("state-equals")
    expected = rebuilt(task["initial"], task["expected"])
    verdicts = []
    for run in task["trajectories"]:
        snapshot = StateSnapshot(task["initial"], rebuilt(task["initial"], run["predicted"]),
                                 expected)  # fmt: skip
        verdicts.append(bool(evaluate_state(assertion, snapshot).passed))
    return verdicts


def load_reference(path: Path = REFERENCE) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as file:
        loaded: dict[str, Any] = json.load(file)
    return loaded


# --- running both, the comparison and the Markdown ------------------------------------------


def run_tau2(python: str) -> dict[str, Any]:
    command = [python, str(Path(__file__).resolve()), "--tau2-side"]
    env = {**os.environ, "INSPECT_LOG_LEVEL": "warning"}
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"the tau2 side failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@dataclass(frozen=True)
class Judged:
    domain: str
    task: str
    label: str
    ours: bool
    reference: bool
    reference_fixed: bool
    gold_raises: bool


def compare(reference: dict[str, Any]) -> list[Judged]:
    judged = []
    for domain, found in reference["domains"].items():
        for task in found["tasks"]:
            for run, ours in zip(task["trajectories"], our_verdicts(task), strict=True):
                judged.append(Judged(domain, task["id"], run["label"], ours, run["reference"],
                                     run["reference_fixed"], bool(task["gold_raising"])))  # fmt: skip
    return judged


def kind(label: str) -> str:
    """A trajectory's kind: its label without the action index and argument path."""
    for prefix in ("minus-write", "changed-argument", "repeat-write", "float-argument"):
        if label.startswith(prefix):
            return prefix
    return label


KINDS = ("gold", "minus-write", "changed-argument", "plus-read", "repeat-write",
         "reordered-writes", "float-argument")  # fmt: skip


def summary(judged: list[Judged]) -> list[str]:
    lines = ["| domain | trajectory | cases | reference passes | ours passes | agree | differ: "
             "json-numbers | agree without it |", "|---" * 8 + "|"]  # fmt: skip
    for domain in (*DOMAINS, "all"):
        for name in (*KINDS, "all"):
            cell = [j for j in judged if domain in ("all", j.domain) and name in ("all",
                    kind(j.label))]  # fmt: skip
            if not cell:
                continue
            row = [domain, name, len(cell), sum(j.reference for j in cell),
                   sum(j.ours for j in cell), sum(j.ours == j.reference for j in cell),
                   sum(j.ours != j.reference and j.ours == j.reference_fixed for j in cell),
                   sum(j.ours == j.reference_fixed for j in cell)]  # fmt: skip
            lines.append("| " + " | ".join(map(str, row)) + " |")
    return lines


def gold_facts(reference: dict[str, Any]) -> dict[str, int]:
    tasks = [t for found in reference["domains"].values() for t in found["tasks"]]
    runs = [r for t in tasks for r in t["trajectories"]]
    return {
        "tasks": len(tasks),
        "tasks with no actions": sum(not t["gold"] for t in tasks),
        "gold actions": sum(len(t["gold"]) for t in tasks),
        "gold actions raising when replayed": sum(len(t["gold_raising"]) for t in tasks),
        "of them write actions": sum(name in WRITES[t["domain"]] for t in tasks
                                     for _, name, _ in t["gold_raising"]),
        "tasks with a gold action raising": sum(bool(t["gold_raising"]) for t in tasks),
        "gold trajectories the reference fails": sum(
            not r["reference"] for r in runs if r["label"] == "gold"),
        "calls that raised (trajectories)": sum(len(r["failed_calls"]) for r in runs),
        "calls that raised after changing the database": sum(r["partial_writes"] for r in runs),
    }  # fmt: skip


def disagreements(judged: list[Judged]) -> list[str]:
    lines = ["| domain | task | trajectory | ours | reference | reference without our "
             "difference | explained by |", "|---" * 7 + "|"]  # fmt: skip
    for j in judged:
        if j.ours != j.reference:
            why = "json-numbers" if j.ours == j.reference_fixed else "**unexplained**"
            cells = [j.domain, j.task, j.label, _verdict(j.ours), _verdict(j.reference),
                     _verdict(j.reference_fixed), why]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def _verdict(passed: bool) -> str:
    return "pass" if passed else "fail"


def facts(reference: dict[str, Any], judged: list[Judged]) -> dict[str, str]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from report import git_revision

    agree = sum(j.ours == j.reference for j in judged)
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": f"`{COMMAND}`",
        "pytest-llmbench revision": git_revision(),
        "our side": "`evaluate_state` of `pytest_llmbench/scoring/final_state.py` on a bare "
        "`state-equals`",
        "reference side": ", ".join(f"{k} {v}" for k, v in reference["versions"].items())
        + f" ({reference['seconds']} s)",
        "cases": f"{len(judged)} trajectories of "
        f"{sum(len(f['tasks']) for f in reference['domains'].values())} tasks (seed {SEED})",
        "agreement": f"{agree} of {len(judged)}; with our documented difference taken away: "
        f"{sum(j.ours == j.reference_fixed for j in judged)} of {len(judged)}",
    }


def render(facts: dict[str, str], judged: list[Judged], reference: dict[str, Any]) -> str:
    head = ["# Our state-equals beside tau2-bench's database check", "", GENERATED, "",
            "| fact | value |", "|---|---|",
            *(f"| {key} | {value} |" for key, value in facts.items())]  # fmt: skip
    gold = ["| gold actions and raised calls | count |", "|---|---|",
            *(f"| {key} | {value} |" for key, value in gold_facts(reference).items())]  # fmt: skip
    raising = [f"- {t['domain']} task {t['id']}: " + "; ".join(
        f"action {i} `{name}`: {why}" for i, name, why in t["gold_raising"])
        for found in reference["domains"].values() for t in found["tasks"]
        if t["gold_raising"]]  # fmt: skip
    parts = [*head, "", "## Agreement", "", *summary(judged), "", "## Gold actions", "", *gold,
             "", "Tasks whose gold actions raise when replayed (the reference skips the action; "
             "our replay stops with an environment error naming it):", "", *raising, "",
             NOTES.strip(), "", "## Every disagreement", "", *disagreements(judged), ""]  # fmt: skip
    return "\n".join(parts)


GENERATED = (
    "Written by `benchmarks/tau2_crosscheck.py` (see its docstring and `benchmarks/README.md`):"
    " each case is one trajectory of a tau2 retail or airline task applied to the domain's"
    " database through the reference's own tools, judged by the reference's `db_match` rule"
    " (hash of the database against `get_expected_db`'s) and by our bare `state-equals` on the"
    " same two states as JSON. The states (the entries any trajectory of a task changed) and the"
    " reference's verdicts are in `benchmarks/data/tau2-reference.json.gz`;"
    " tests/test_scoring_final_state_tau2.py checks our verdicts against that file."
)

NOTES = """
## What differs, and why we keep it

- **json-numbers**: the reference hashes `json.dumps(model_dump(), sort_keys=True)`, where `2`
  and `2.0` are different text; ours compares JSON values, where they are one number (a JSON
  document cannot tell them apart reliably: many serialisers write `2.0` as `2`). It parts the
  verdicts when a tool stores a number as given and the agent wrote a whole number as a float
  (the `float-argument` trajectories: a pydantic field assigned without validation keeps the
  float). The reference side shows it by hashing both databases with whole-number floats
  written as integers: "agree without it" counts ours against that verdict.
- **a gold action that raises**: the reference's `get_expected_db` skips it silently, so a task
  whose gold actions are wrong still scores; our replay of `expected_actions` stops with an
  environment error naming the action (the case is wrong, not the agent). Those tasks are
  listed above; on them this cross-check compares verdicts on the reference's expected state,
  which our run would not reach.
- **a tool that raises after changing the state**: the reference's tools change pydantic
  objects in place, so a change made before the raise stays; our environment runner writes the
  state back only after a tool returns, so a raising call changes nothing. The trajectories
  here are applied our way (counted above: "calls that raised after changing the database");
  the reference's own replay of gold actions keeps such a change.

The same elsewhere: mapping keys compare in any order (the reference sorts them), lists in
order (both), strings exactly (both), `true` is not `1` (both: the hash writes `true`).
"""


def write_reference(reference: dict[str, Any], path: Path = REFERENCE) -> None:
    data = json.dumps(reference, separators=(",", ":"), sort_keys=True).encode()
    with gzip.GzipFile(path, "wb", compresslevel=9, mtime=0) as file:
        file.write(data)


def main() -> None:
    parser = argparse.ArgumentParser(description="Our state-equals beside tau2-bench's check")
    parser.add_argument("--tau2-python", help="An interpreter with inspect_evals installed")
    parser.add_argument("--write", type=Path, help="Write the Markdown here (and the reference)")
    parser.add_argument("--tau2-side", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tau2-output", type=Path,
                        help="The tau2 side's JSON saved from an earlier run, instead of running it")  # fmt: skip
    args = parser.parse_args()
    if args.tau2_side:
        tau2_side()
        return
    if not args.tau2_python and not args.tau2_output:
        parser.error("--tau2-python (or --tau2-output) is required")
    sys.path.insert(0, str(ROOT))
    if args.tau2_output:
        reference = json.loads(args.tau2_output.read_text())
    else:
        reference = run_tau2(args.tau2_python)
    judged = compare(reference)
    print("\n".join(summary(judged)))
    unexplained = [f"{j.domain}/{j.task}/{j.label}" for j in judged if j.ours != j.reference_fixed]
    if args.write:
        write_reference(reference)
        args.write.write_text(render(facts(reference, judged), judged, reference))
        print(f"wrote {args.write} and {REFERENCE.relative_to(ROOT)}")
    if unexplained:
        sys.exit(f"{len(unexplained)} disagreements no documented difference explains: "
                 f"{unexplained[:10]}")  # fmt: skip


if __name__ == "__main__":
    main()
