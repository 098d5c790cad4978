"""Stateful tool environments (agent/environment.py and its runner): a JSON and a SQLite
environment changed through the toolbox, the expected state replayed, and each way an
environment fails as the item's EnvError (a tool that raises is the model's to read).

The runner is a real subprocess, confined by bubblewrap where it works (else ``sandbox: off``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from pytest_llmbench.agent.bwrap import bwrap_path
from pytest_llmbench.agent.environment import (
    StateSnapshot,
    open_environment,
    read_state,
    replay_actions,
    seed_state,
)
from pytest_llmbench.agent.limits import SandboxLimits
from pytest_llmbench.agent.sandbox import Sandbox
from pytest_llmbench.agent.tools import Toolbox
from pytest_llmbench.models import EnvError
from pytest_llmbench.spec import Environment, ExpectedAction
from pytest_llmbench.spec.expand_environment import read_module_tools

MODE = "required" if bwrap_path() else "off"

RETAIL = '''
"""A small retail store."""
from __future__ import annotations

import os
import time
from typing import Literal, Optional


def cancel_pending_order(
    state: dict, order_id: str, reason: Literal["no longer needed", "ordered by mistake"]
) -> str:
    """Cancel a pending order."""
    order = state["orders"].get(order_id)
    if order is None:
        raise ValueError(f"order {order_id} not found")
    print("a tool's print must not break the protocol")
    order["status"] = "cancelled"
    return f"order {order_id} cancelled"


def get_order(state: dict, order_id: str, fields: Optional[list[str]] = None) -> dict:
    """Look an order up."""
    return state["orders"][order_id]


def tag_order(state: dict, order_id: str) -> str:
    """Tag an order (with a set: not JSON)."""
    state["orders"][order_id]["tags"] = {"x"}
    return "tagged"


def scribble(state: dict) -> str:
    """Write the state file itself, badly."""
    with open("state.json", "w") as file:
        file.write("{not json")
    return "done"


def die(state: dict) -> str:
    """Exit the runner."""
    os._exit(3)


def nap(state: dict, seconds: float = 60) -> str:
    """Sleep."""
    time.sleep(seconds)
    return "awake"


def _private(state: dict) -> None:
    """Not a tool: private."""


def helper(x: int) -> int:
    """Not a tool: no state."""
    return x
'''

SHOP_SQL = '''
"""A shop in SQLite."""
import sqlite3


def restock(state: sqlite3.Connection, sku: str, count: int) -> str:
    """Add stock."""
    done = state.execute("UPDATE items SET stock = stock + ? WHERE sku = ?", (count, sku))
    if done.rowcount == 0:
        raise KeyError(sku)
    return f"{sku} restocked"


def smash(state: sqlite3.Connection) -> str:
    """Overwrite the database file with garbage."""
    with open("shop.db", "r+b") as file:
        file.write(b"garbage" * 100)
    return "smashed"
'''
SEED_SQL = """
CREATE TABLE items (sku TEXT PRIMARY KEY, stock INTEGER);
INSERT INTO items VALUES ('b', 1), ('a', 5);
"""
ORDERS = {"orders": {"W1": {"status": "pending"}, "W2": {"status": "delivered"}}}


def _environment(folder: Path, source: str, state_file: str = "state.json") -> Environment:
    module = folder / "env" / "retail_env.py"
    module.parent.mkdir(exist_ok=True)
    module.write_text(textwrap.dedent(source))
    tools = read_module_tools(module)  # the tools as collection reads them: the runner serves these
    return Environment(module, None, state_file, None, tuple(t.name for t in tools), tools)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def _json(state: Any) -> bytes:
    return json.dumps(state).encode()


def _sandbox(workdir: Path) -> Sandbox:
    return Sandbox(workdir, SandboxLimits(), MODE)


def _calls(
    environment: Environment,
    workdir: Path,
    calls: list[tuple[str, dict[str, Any]]],
    timeout_s: float = 30.0,
) -> list[str]:
    """Each call's result through the environment's toolbox (a read_file built-in beside)."""
    sandbox = _sandbox(workdir)
    inner = Toolbox(workdir, ["read_file"], sandbox, base_dir=workdir)

    async def run() -> list[str]:
        opened = open_environment(environment, workdir, sandbox, inner, timeout_s=timeout_s)
        async with opened as toolbox:
            return [await toolbox.acall(name, arguments) for name, arguments in calls]

    return asyncio.run(run())


def _schemas(environment: Environment, folder: Path) -> dict[str, Any]:
    """The environment's tools as the model is offered them, by name."""
    workdir = folder / "schemas"
    workdir.mkdir()
    seed_state(environment, None, workdir)
    sandbox = _sandbox(workdir)

    async def listed() -> dict[str, Any]:
        async with open_environment(environment, workdir, sandbox, _NoTools()) as toolbox:
            return {schema["function"]["name"]: schema for schema in toolbox.schemas()}

    return asyncio.run(listed())


class _NoTools:
    """No other tool beside the environment's."""

    names: ClassVar[list[str]] = []

    def schemas(self) -> list[dict[str, Any]]:
        return []


def test_a_json_environment_serves_its_tools_and_keeps_its_state(
    tmp_path: Path, workdir: Path
) -> None:
    environment = _environment(tmp_path, RETAIL)
    seed_state(environment, ORDERS, workdir)
    assert read_state(environment, workdir) == ORDERS
    said = _calls(
        environment,
        workdir,
        [
            ("cancel_pending_order", {"order_id": "W1", "reason": "no longer needed"}),
            ("cancel_pending_order", {"order_id": "W9", "reason": "no longer needed"}),
            ("get_order", {"order_id": "W1"}),
            ("get_order", {"order_id": "W1", "extra": 1}),
            ("read_file", {"path": "state.json"}),
        ],
    )
    assert said[0] == "order W1 cancelled"
    assert said[1] == "error: ValueError: order W9 not found"  # the model reads it
    assert said[2] == '{"status": "cancelled"}'
    assert said[3].startswith("error: TypeError:") and "extra" in said[3]
    assert '"cancelled"' in said[4]  # the built-in reads the same file
    final = read_state(environment, workdir)
    assert final["orders"]["W1"] == {"status": "cancelled"}
    assert final["orders"]["W2"] == ORDERS["orders"]["W2"]


def test_the_tools_are_the_modules_public_state_functions_with_their_schemas(
    tmp_path: Path,
) -> None:
    tools = _schemas(_environment(tmp_path, RETAIL), tmp_path)
    assert list(tools) == [
        "cancel_pending_order",
        "get_order",
        "tag_order",
        "scribble",
        "die",
        "nap",
    ]
    cancel = tools["cancel_pending_order"]["function"]
    assert cancel["description"] == "Cancel a pending order."
    assert cancel["parameters"] == {
        "type": "object",
        "properties": {
            "order_id": {"type": "string"},
            "reason": {"enum": ["no longer needed", "ordered by mistake"]},
        },
        "required": ["order_id", "reason"],
    }
    fields = tools["get_order"]["function"]["parameters"]
    assert fields["properties"]["fields"] == {"type": "array", "items": {"type": "string"}}
    assert fields["required"] == ["order_id"]
    assert tools["nap"]["function"]["parameters"]["properties"]["seconds"] == {"type": "number"}


def test_a_sqlite_environment_commits_each_call_and_reads_back_sorted(
    tmp_path: Path, workdir: Path
) -> None:
    environment = _environment(tmp_path, SHOP_SQL, "shop.db")
    seed_state(environment, SEED_SQL, workdir)
    initial = read_state(environment, workdir)
    assert initial == {"items": [{"sku": "a", "stock": 5}, {"sku": "b", "stock": 1}]}
    said = _calls(
        environment,
        workdir,
        [("restock", {"sku": "b", "count": 4}), ("restock", {"sku": "z", "count": 1})],
    )
    assert said == ["b restocked", "error: KeyError: 'z'"]
    assert read_state(environment, workdir) == {
        "items": [{"sku": "a", "stock": 5}, {"sku": "b", "stock": 5}]
    }


def test_a_sqlite_seed_may_be_tables_of_rows(tmp_path: Path, workdir: Path) -> None:
    environment = _environment(tmp_path, SHOP_SQL, "shop.sqlite")
    rows = {"items": [{"sku": "b", "stock": 2}, {"sku": "a", "stock": 7}]}
    seed_state(environment, rows, workdir)
    assert read_state(environment, workdir) == {
        "items": [{"sku": "a", "stock": 7}, {"sku": "b", "stock": 2}]
    }


def test_without_a_seed_the_cases_own_state_file_is_kept(tmp_path: Path, workdir: Path) -> None:
    environment = _environment(tmp_path, RETAIL)
    (workdir / "state.json").write_text('{"orders": {}}')
    seed_state(environment, None, workdir)
    assert read_state(environment, workdir) == {"orders": {}}
    (workdir / "state.json").unlink()
    seed_state(environment, None, workdir)
    assert read_state(environment, workdir) == {}


def test_replaying_the_expected_actions_gives_the_expected_state(
    tmp_path: Path, workdir: Path
) -> None:
    environment = _environment(tmp_path, RETAIL)
    actions = [
        ExpectedAction("cancel_pending_order", {"order_id": "W1", "reason": "ordered by mistake"})
    ]
    expected = replay_actions(environment, _json(ORDERS), actions, _sandbox(workdir))
    assert expected["orders"]["W1"] == {"status": "cancelled"}
    assert list(workdir.iterdir()) == []  # a scratch folder, not the item's workdir
    snapshot = StateSnapshot(ORDERS, ORDERS, expected)
    assert snapshot.expected != snapshot.final


@pytest.mark.parametrize(
    ("action", "said"),
    [
        (
            ExpectedAction("refund", {}, line=12),
            r"expected action 1 \(refund, line 12\) names no tool",
        ),
        (
            ExpectedAction("cancel_pending_order", {"order_id": "W7", "reason": "x"}),
            r"expected action 1 \(cancel_pending_order\) failed when replayed: ValueError: order W7",
        ),
    ],
)
def test_an_expected_action_that_fails_is_an_environment_error(
    tmp_path: Path, workdir: Path, action: ExpectedAction, said: str
) -> None:
    environment = _environment(tmp_path, RETAIL)
    with pytest.raises(EnvError, match=said) as caught:
        replay_actions(environment, _json(ORDERS), [action], _sandbox(workdir))
    assert caught.value.kind == "environment"


# --- the environment's failures -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "said"),
    [
        (
            "x = 1\nraise RuntimeError('no database')\n",
            r"raised when imported: RuntimeError: no database \(line 2\)",
        ),
        ("import sys\nsys.exit(4)\n", r"raised when imported: SystemExit: 4"),
        ('def helper(x: int) -> int:\n    """No state."""\n    return x\n', r"has no tools"),
        (
            "def bad(state: dict, when: object) -> str:\n    return ''\n",
            r"tool bad: parameter 'when'",
        ),
    ],
    ids=["raises", "exits", "no-tools", "bad-parameter"],
)
def test_a_module_that_cannot_serve_is_an_environment_error(
    tmp_path: Path, workdir: Path, source: str, said: str
) -> None:
    environment = _environment(tmp_path, source)
    seed_state(environment, {}, workdir)
    with pytest.raises(EnvError, match=r"environment retail_env\.py: .*" + said):
        _calls(environment, workdir, [])


@pytest.mark.parametrize(
    ("tool", "said"),
    [
        ("tag_order", r"the tool tag_order left a state that is not JSON-serialisable: "
         r"orders/W1/tags: a value of type set"),
        ("scribble", r"the state file state.json cannot be read after the tool scribble"),
        ("die", r"its runner exited \(status 3\) during the call of die"),
    ],
)  # fmt: skip
def test_a_tool_that_breaks_the_environment_is_an_environment_error(
    tmp_path: Path, workdir: Path, tool: str, said: str
) -> None:
    environment = _environment(tmp_path, RETAIL)
    seed_state(environment, ORDERS, workdir)
    arguments = {"order_id": "W1"} if tool == "tag_order" else {}
    with pytest.raises(EnvError, match=said):
        _calls(environment, workdir, [(tool, arguments)])


def test_a_tool_that_corrupts_a_sqlite_state_is_named(tmp_path: Path, workdir: Path) -> None:
    environment = _environment(tmp_path, SHOP_SQL, "shop.db")
    seed_state(environment, SEED_SQL, workdir)
    with pytest.raises(EnvError, match=r"(smash left the state file shop.db corrupted|"
                       r"cannot be read after the tool smash)"):  # fmt: skip
        _calls(environment, workdir, [("smash", {}), ("restock", {"sku": "a", "count": 1})])
    with pytest.raises(EnvError, match=r"state file shop.db cannot be read \(the last tool "
                       r"called: smash\) \(corrupted\?\)"):  # fmt: skip
        read_state(environment, workdir, last_tool="smash")


def _running_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_tool_that_hangs_is_stopped_at_the_timeout_and_leaves_no_process(
    tmp_path: Path, workdir: Path
) -> None:
    environment = _environment(tmp_path, RETAIL)
    seed_state(environment, ORDERS, workdir)
    with pytest.raises(EnvError, match=r"the call of nap did not finish within 1 s"):
        _calls(environment, workdir, [("nap", {})], timeout_s=1.0)
    assert _running_with(str(environment.module)) == []


def test_a_tool_named_as_another_tool_of_the_file_is_an_environment_error(
    tmp_path: Path, workdir: Path
) -> None:
    environment = _environment(
        tmp_path, 'def read_file(state: dict, path: str) -> str:\n    """x"""\n    return path\n'
    )
    seed_state(environment, {}, workdir)
    with pytest.raises(EnvError, match=r"its tool 'read_file' has the name of another tool"):
        _calls(environment, workdir, [])


@pytest.fixture
def host_secret(tmp_path: Path) -> Iterator[Path]:
    secret = tmp_path / "host" / ".env"
    secret.parent.mkdir()
    secret.write_text("OPENAI_API_KEY=sk-host-secret\n")
    yield secret


def test_the_state_is_never_read_through_a_link_or_from_a_pipe(
    tmp_path: Path, workdir: Path, host_secret: Path
) -> None:
    environment = _environment(tmp_path, RETAIL)
    (workdir / "state.json").symlink_to(host_secret)
    with pytest.raises(EnvError, match="no longer a regular file") as caught:
        read_state(environment, workdir)
    assert "sk-host-secret" not in str(caught.value)
    (workdir / "state.json").unlink()
    os.mkfifo(workdir / "state.json")  # reading it would block
    with pytest.raises(EnvError, match="no longer a regular file"):
        read_state(environment, workdir)
    with pytest.raises(EnvError, match="not inside the workdir"):
        read_state(Environment(environment.module, None, "../state.json", None), workdir)


def test_a_seed_that_cannot_be_a_state_is_an_environment_error(
    tmp_path: Path, workdir: Path
) -> None:
    with pytest.raises(EnvError, match="a JSON state's seed is a mapping, not list"):
        seed_state(_environment(tmp_path, RETAIL), [1, 2], workdir)
    with pytest.raises(EnvError, match="the SQLite seed fails: OperationalError"):
        seed_state(_environment(tmp_path, SHOP_SQL, "shop.db"), "CREATE TABL x;", workdir)


# --- a state file an agent (or a tool) left unreadable ----------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    "text",
    [DEEP, '{"a": NaN}', '{"a": Infinity}', '{"a": [-Infinity]}', "[" * 70 + "]" * 70],
    ids=["recursion", "nan", "infinity", "minus-infinity", "deeper-than-walked"],
)
def test_a_state_too_deep_or_not_finite_is_an_environment_error(
    tmp_path: Path, workdir: Path, text: str
) -> None:
    environment = _environment(tmp_path, RETAIL)
    (workdir / "state.json").write_text(text)
    with pytest.raises(EnvError, match=r"the state file state.json cannot be read") as caught:
        read_state(environment, workdir)
    assert caught.value.kind == "environment"


WRITER = '''
def nest(state: dict) -> str:
    """Write a state nested past any recursion limit."""
    with open("state.json", "w") as file:
        file.write("[" * 100000 + "]" * 100000)
    return "nested"


def nan(state: dict) -> str:
    """Write a NaN into the state file."""
    with open("state.json", "w") as file:
        file.write('{"a": NaN}')
    return "written"
'''


@pytest.mark.parametrize("tool", ["nest", "nan"])
def test_a_tool_writing_a_state_too_deep_or_not_finite_is_fatal_not_a_tool_error(
    tmp_path: Path, workdir: Path, tool: str
) -> None:
    environment = _environment(tmp_path, WRITER)
    seed_state(environment, {}, workdir)
    with pytest.raises(EnvError, match=rf"state.json cannot be read after the tool {tool}"):
        _calls(environment, workdir, [(tool, {})])


def test_a_sqlite_state_holding_infinity_is_an_environment_error(
    tmp_path: Path, workdir: Path
) -> None:
    environment = _environment(tmp_path, SHOP_SQL, "shop.db")
    seed_state(environment, SEED_SQL, workdir, _sandbox(workdir))
    with sqlite3.connect(workdir / "shop.db") as connection:
        connection.execute("UPDATE items SET stock = 9e999 WHERE sku = 'a'")
    with pytest.raises(EnvError, match=r"shop.db cannot be read .*the float inf"):
        read_state(environment, workdir)


# --- no SQL of the eval file in this process ----------------------------------------------------


class _Spying(sqlite3.Connection):
    """A connection that, before closing, says whether it would ATTACH and trust the schema."""

    seen: ClassVar[list[tuple[str, str]]] = []

    def close(self) -> None:
        trusted = self.execute("PRAGMA trusted_schema").fetchone()[0]
        try:
            self.execute("ATTACH DATABASE ':memory:' AS spy")
            attach = "attached"
        except sqlite3.DatabaseError as exc:
            attach = str(exc)
        _Spying.seen.append((attach, f"trusted_schema={trusted}"))
        super().close()


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """What each SQLite connection this process opens connects to."""
    import pytest_llmbench.agent.environment as module

    opened: list[str] = []

    def connect(target: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        opened.append(str(target))
        return sqlite3.connect(target, *args, factory=_Spying, **kwargs)

    spy = type("sqlite3", (), {**vars(sqlite3), "connect": staticmethod(connect)})
    monkeypatch.setattr(module, "sqlite3", spy)
    _Spying.seen = []
    yield opened


@pytest.mark.parametrize(
    "statement",
    ["ATTACH DATABASE '{outside}' AS x; CREATE TABLE x.t (a);", "VACUUM INTO '{outside}';"],
)
def test_a_sqlite_seed_runs_in_the_runner_and_writes_no_other_file(
    tmp_path: Path, workdir: Path, connections: list[str], statement: str
) -> None:
    outside = tmp_path / "outside.db"
    environment = _environment(tmp_path, SHOP_SQL, "shop.db")
    seed = SEED_SQL + statement.format(outside=outside)
    with pytest.raises(EnvError, match=r"the SQLite seed fails: DatabaseError: .*authoriz"):
        seed_state(environment, seed, workdir, _sandbox(workdir))
    assert not outside.exists()
    seed_state(environment, SEED_SQL, workdir, _sandbox(workdir))
    assert read_state(environment, workdir)["items"][0] == {"sku": "a", "stock": 5}
    assert all("mode=ro" in target for target in connections)  # the parent only reads


def test_the_parent_reads_a_planted_database_untrusted_and_without_attach(
    tmp_path: Path, workdir: Path, connections: list[str]
) -> None:
    environment = _environment(tmp_path, SHOP_SQL, "shop.db")
    seed_state(environment, SEED_SQL, workdir, _sandbox(workdir))
    with sqlite3.connect(workdir / "shop.db") as planted:  # as an agent's command could
        planted.executescript(
            "CREATE TABLE log (what TEXT);"
            "CREATE TRIGGER spy AFTER UPDATE ON items BEGIN INSERT INTO log VALUES ('x'); END;"
            "CREATE VIEW everything AS SELECT * FROM items;"
        )
    planted.close()
    before = (workdir / "shop.db").read_bytes()
    state = read_state(environment, workdir)
    assert set(state) == {"items", "log"}  # tables only: no view is read
    assert (workdir / "shop.db").read_bytes() == before
    assert sorted(path.name for path in tmp_path.rglob("*.db")) == ["shop.db"]
    assert _Spying.seen == [("not authorized", "trusted_schema=0")]


# --- what a tool is: collection's names, served or refused --------------------------------------

UNSERVABLE = '''
import functools


async def fetch(state: dict) -> str:
    """An async tool: not served."""
    return "fetched"


def plain(state: dict) -> str:
    """A plain tool."""
    return "plain"


def _wrap(function):
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)
    return wrapper


@_wrap
def wrapped(state: dict) -> str:
    """Decorated without functools.wraps."""
    return "wrapped"


def _to_text(function):
    return "not a function"


@_to_text
def gone(state: dict) -> str:
    """Decorated into a string."""
    return "gone"


def _kept(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)
    return wrapper


@_kept
def kept(state: dict, n: int) -> str:
    """Decorated with functools.wraps: served."""
    return f"kept {n}"


if True:
    def hidden(state: dict) -> str:
        """Inside an if: not a tool for collection, so not served."""
        return "hidden"
'''


@pytest.mark.parametrize(
    ("names", "said"),
    [
        (("plain", "fetch"), r"tool fetch cannot be served: it is an `async def`"),
        (("wrapped",), r"tool wrapped cannot be served: .*first parameter is not `state`"),
        (("gone",), r"tool gone cannot be served: its decorators left str, not a function"),
    ],
)
def test_the_runner_refuses_a_tool_collection_found_that_it_cannot_serve(
    tmp_path: Path, workdir: Path, names: tuple[str, ...], said: str
) -> None:
    # Collection refuses the async one at its line (tests/test_spec_environment.py); the runner
    # still refuses whatever it is handed and cannot serve.
    environment = _environment(tmp_path, UNSERVABLE.replace("async def fetch", "def fetch"))
    assert environment.module is not None
    environment.module.write_text(textwrap.dedent(UNSERVABLE))
    assert set(names) <= {*environment.tool_names, "fetch"}  # collection counts them as tools
    environment = Environment(environment.module, None, "state.json", None, names)
    seed_state(environment, {}, workdir)
    with pytest.raises(EnvError, match=r"environment retail_env\.py: " + said):
        _calls(environment, workdir, [])


def test_the_runner_serves_exactly_the_names_collection_read(tmp_path: Path, workdir: Path) -> None:
    environment = _environment(tmp_path, UNSERVABLE.replace("async def fetch", "def fetch"))
    assert environment.tool_names == ("fetch", "plain", "wrapped", "gone", "kept")
    served = Environment(environment.module, None, "state.json", None, ("plain", "kept"))
    assert list(_schemas(served, tmp_path)) == ["plain", "kept"]
    seed_state(served, {}, workdir)
    said = _calls(served, workdir, [("kept", {"n": 2}), ("hidden", {})])
    assert said[0] == "kept 2"
    assert said[1].startswith("error: unknown tool 'hidden'")


def test_a_replay_starts_from_the_seeded_file_bytes(tmp_path: Path, workdir: Path) -> None:
    environment = _environment(tmp_path, SHOP_SQL, "shop.db")
    seed_state(environment, SEED_SQL, workdir, _sandbox(workdir))
    seeded = (workdir / "shop.db").read_bytes()
    actions = [ExpectedAction("restock", {"sku": "b", "count": 2})]
    expected = replay_actions(environment, seeded, actions, _sandbox(workdir))
    assert expected == {"items": [{"sku": "a", "stock": 5}, {"sku": "b", "stock": 3}]}
    assert (workdir / "shop.db").read_bytes() == seeded  # the item's own file untouched


# --- a tool that raises changes nothing ------------------------------------------------------

HALFWAY = '''
import sqlite3


def cancel_then_fail(state: dict, order_id: str) -> str:
    """Change the state, then raise."""
    state["orders"][order_id]["status"] = "cancelled"
    raise RuntimeError("halfway")


def note(state: dict, text: str) -> str:
    """Keep a note; its answer reads like an error but is a result."""
    state.setdefault("notes", []).append(text)
    return "error: none found, note kept"
'''
HALFWAY_SQL = '''
import sqlite3


def create_then_fail(state: sqlite3.Connection) -> str:
    """DDL runs outside sqlite3's implicit transaction."""
    state.execute("CREATE TABLE extra (x INTEGER)")
    raise RuntimeError("halfway")


def commit_then_fail(state: sqlite3.Connection, sku: str) -> str:
    """Commit a change itself, then raise."""
    state.execute("UPDATE items SET stock = 0 WHERE sku = ?", (sku,))
    state.commit()
    raise RuntimeError("halfway")


def script_then_fail(state: sqlite3.Connection) -> str:
    """executescript commits as it goes."""
    state.executescript("DELETE FROM items; INSERT INTO items VALUES ('z', 9);")
    raise RuntimeError("halfway")
'''


def test_a_json_tool_that_raises_after_changing_the_state_changes_nothing(
    tmp_path: Path, workdir: Path
) -> None:
    environment = _environment(tmp_path, HALFWAY)
    seed_state(environment, ORDERS, workdir)
    said = _calls(environment, workdir, [("cancel_then_fail", {"order_id": "W1"})])
    assert said == ["error: RuntimeError: halfway"]
    assert read_state(environment, workdir) == ORDERS


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [("create_then_fail", {}), ("commit_then_fail", {"sku": "a"}), ("script_then_fail", {})],
)
def test_a_sqlite_tool_that_raises_changes_nothing_even_what_it_committed(
    tmp_path: Path, workdir: Path, tool: str, arguments: dict[str, Any]
) -> None:
    environment = _environment(tmp_path, HALFWAY_SQL, "shop.db")
    seed_state(environment, SEED_SQL, workdir)
    seeded = read_state(environment, workdir)
    said = _calls(environment, workdir, [(tool, arguments)])
    assert said == ["error: RuntimeError: halfway"]
    assert read_state(environment, workdir) == seeded
    assert (
        sqlite3.connect(workdir / "shop.db")
        .execute("SELECT name FROM sqlite_master WHERE name = 'extra'")
        .fetchall()
        == []
    )


def test_a_replayed_tool_whose_result_reads_like_an_error_is_a_result(
    tmp_path: Path, workdir: Path
) -> None:
    """Only a tool that raised fails a replay: a text it returns may say anything."""
    environment = _environment(tmp_path, HALFWAY)
    actions = [ExpectedAction("note", {"text": "call back"})]
    expected = replay_actions(environment, _json(ORDERS), actions, _sandbox(workdir))
    assert expected["notes"] == ["call back"]


def test_the_runner_knows_a_sqlite_state_file_as_collection_does() -> None:
    """The runner is standard library only, so it keeps its own copy of the suffixes."""
    from pytest_llmbench.agent import environment_runner
    from pytest_llmbench.spec import resolved

    assert environment_runner.SQLITE_SUFFIXES == resolved.SQLITE_SUFFIXES
