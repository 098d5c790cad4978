"""An agent file's ``environment:``, its cases' ``state:`` and ``expected_actions:``, and the
state assertions, as collection resolves and checks them (load_spec, errors at their lines)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from conftest import Bench

from pytest_llmbench.spec.load import load_spec
from pytest_llmbench.spec.resolved import EvalFileError, LoadedEval

MODULE = '''\
"""A small retail store."""
import json

LIMIT = 3


def cancel_pending_order(state: dict, order_id: str, reason: str = "no longer needed") -> str:
    """Cancel a pending order."""
    state["orders"][order_id]["status"] = "cancelled"
    return f"order {order_id} cancelled"


def find_user(state, *, email: str, **extra) -> str:
    return "ana_1"


def _helper(state):
    return None


def not_a_tool(order_id: str) -> str:
    return order_id


class Store:
    def method(self, state):
        return None
'''

SEED = {"orders": {"W1001": {"status": "pending"}}}

FILE = """\
kind: agent
environment:
  module: retail_env.py
  seed: file://seed.json
tools: []
cases:
  - id: cancel
    prompt: Cancel order W1001.
    expected_actions:
      - {name: cancel_pending_order, arguments: {order_id: W1001}}
      - {name: find_user, kwargs: {email: ana@example.com, anything: 1}}
    assert:
      - state-equals
      - {type: state-subset, value: {orders: {W1001: {status: cancelled}}}}
  - id: own-state
    prompt: Look around.
    state: {orders: {}}
    assert:
      - {type: state-equals, value: file://expected.json}
"""


def project(tmp_path: Path, text: str = FILE, module: str = MODULE) -> Path:
    (tmp_path / "retail_env.py").write_text(module, encoding="utf-8")
    (tmp_path / "seed.json").write_text(json.dumps(SEED), encoding="utf-8")
    (tmp_path / "expected.json").write_text('{"orders": {"W1": {}}}', encoding="utf-8")
    path = tmp_path / "retail.eval.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load(tmp_path: Path, text: str = FILE, module: str = MODULE) -> LoadedEval:
    return load_spec(project(tmp_path, text, module))


def error_of(tmp_path: Path, text: str, module: str = MODULE) -> EvalFileError:
    with pytest.raises(EvalFileError) as info:
        load(tmp_path, text, module)
    return info.value


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def test_the_environment_is_resolved_with_its_tools_read_from_the_source(tmp_path: Path) -> None:
    loaded = load(tmp_path)
    assert loaded.agent is not None
    environment = loaded.agent.environment
    assert environment is not None
    assert environment.module == tmp_path / "retail_env.py"
    assert (environment.server, environment.state_file, environment.sqlite) == (
        None,
        "state.json",
        False,
    )
    assert environment.seed == SEED
    assert environment.tool_names == ("cancel_pending_order", "find_user")
    cancel = environment.tool("cancel_pending_order")
    assert cancel is not None
    assert (cancel.parameters, cancel.required, cancel.line) == (
        ("order_id", "reason"),
        ("order_id",),
        7,
    )
    find = environment.tool("find_user")
    assert find is not None and find.any_keyword and find.required == ("email",)


def test_each_case_starts_from_its_state_or_the_seed_with_its_actions(tmp_path: Path) -> None:
    text = FILE
    cancel, own = load(tmp_path, text).cases
    assert cancel.state_seed == SEED
    assert [(action.name, dict(action.arguments)) for action in cancel.expected_actions] == [
        ("cancel_pending_order", {"order_id": "W1001"}),
        ("find_user", {"email": "ana@example.com", "anything": 1}),
    ]
    assert cancel.expected_actions[0].line == line_of(text, "{name: cancel_pending_order")
    assert own.state_seed == {"orders": {}} and own.expected_actions is None  # not given


def test_a_state_file_value_is_read_at_collection(tmp_path: Path) -> None:
    own = load(tmp_path).cases[1]
    (check,) = own.assertions
    assert check.value == {"orders": {"W1": {}}}


def test_the_module_is_among_the_files_the_cases_were_read_from(tmp_path: Path) -> None:
    assert all(tmp_path / "retail_env.py" in case.sources for case in load(tmp_path).cases)


def test_no_tools_are_needed_beside_an_environment(tmp_path: Path) -> None:
    loaded = load(tmp_path, FILE.replace("tools: []\n", ""))
    assert loaded.agent is not None and loaded.agent.tools == ()


def test_a_sqlite_state_takes_sql_text_or_tables_of_rows(tmp_path: Path) -> None:
    (tmp_path / "seed.sql").write_text("CREATE TABLE t (a INTEGER);", encoding="utf-8")
    text = FILE.replace("seed: file://seed.json", "state: shop.db\n  seed: file://seed.sql")
    text = text.replace("state: {orders: {}}", "state: {t: [{a: 1}]}")
    cancel, own = load(tmp_path, text).cases
    assert cancel.state_seed == "CREATE TABLE t (a INTEGER);"
    assert own.state_seed == {"t": [{"a": 1}]}
    bad = error_of(tmp_path, text.replace("state: {t: [{a: 1}]}", "state: {t: 3}"))
    assert bad.line == line_of(text, "state: {t: [{a: 1}]}")
    assert "table 't' is not a list of objects" in bad.message


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "at", "says"),
    [
        (("kind: agent\n", ""), "environment:", "'environment' needs `kind: agent`"),
        (("module: retail_env.py", "module: shop.py"), "module: shop.py",
         "'shop.py' is not a Python file"),
        (("module: retail_env.py", "module: retail_env.py\n  server: files"),
         "environment:", "exactly one of `module`"),
        (("seed: file://seed.json", "seed: file://missing.json"), "seed: file://",
         "cannot read 'missing.json'"),
        (("seed: file://seed.json", "seed: [1, 2]"), "seed:", "seed:"),
        (("seed: file://seed.json", "state: ../state.json"), "seed: file://",
         "must be a relative path inside the workdir"),
        (("seed: file://seed.json", "state: state.txt"), "seed: file://",
         ".json file (a JSON document)"),
        (("{name: cancel_pending_order,", "{name: cancel_order,"), "{name: cancel_order",
         "'cancel_order' is not a tool of retail_env.py (cancel_pending_order, find_user)"),
        (("arguments: {order_id: W1001}", "arguments: {order: W1001}"), "{order: W1001}",
         "cancel_pending_order takes no argument 'order' (it takes order_id, reason)"),
        (("arguments: {order_id: W1001}", "arguments: {reason: x}"), "{reason: x}",
         "cancel_pending_order needs the argument 'order_id'"),
        (("state: {orders: {}}", "state: orders.json"), "state: orders.json",
         "a mapping, or file://NAME"),
        (("value: file://expected.json", "value: file://nothing.json"), "file://nothing.json",
         "state-equals: cannot read 'nothing.json'"),
    ],
)  # fmt: skip
def test_environment_problems_are_errors_at_their_lines(
    tmp_path: Path, change: tuple[str, str], at: str, says: str
) -> None:
    text = FILE.replace(*change)
    assert text != FILE
    error = error_of(tmp_path, text)
    assert says in error.message
    if at == "seed: file://":  # the key changed with the value: find the new one
        at = change[1].split("\n")[0][:6]
    assert error.line == line_of(text, at), error


def test_a_module_that_does_not_parse_is_an_error_at_its_own_line(tmp_path: Path) -> None:
    error = error_of(tmp_path, FILE, MODULE + "\ndef broken(state:\n")
    assert error.path == tmp_path / "retail_env.py"
    assert error.line == len(MODULE.splitlines()) + 2
    assert str(error).startswith(f"{tmp_path / 'retail_env.py'}:")


def test_a_module_without_tools_is_an_error(tmp_path: Path) -> None:
    error = error_of(tmp_path, FILE, "def helper(order_id):\n    return order_id\n")
    assert "defines no tool" in error.message
    assert error.line == line_of(FILE, "module: retail_env.py")


def test_an_mcp_server_environment_must_be_a_stdio_server_of_its_own(tmp_path: Path) -> None:
    servers = "mcp_servers:\n  files: {command: python, args: [server.py]%s}\n"
    text = FILE.replace("module: retail_env.py", "server: files")
    text = text.replace("{name: find_user, kwargs: {email: ana@example.com, anything: 1}}",
                        "{name: anything_at_all}")  # fmt: skip
    # a server has no module to replay the actions through: its state-equals gives a value
    text = text.replace("      - state-equals\n", "      - {type: state-equals, value: {}}\n")
    loaded = load(tmp_path, servers % "" + text)
    assert loaded.agent is not None and loaded.agent.environment is not None
    assert loaded.agent.environment.server == "files"
    assert loaded.agent.environment.tool_names == ()  # known when the server runs
    shared = error_of(tmp_path, servers % ", shared: true" + text)
    assert "`shared`" in shared.message
    assert shared.line == line_of(servers + text, "server: files")
    unknown = error_of(tmp_path, text)
    assert "'files' is no MCP server of the file" in unknown.message


@pytest.mark.parametrize("key", ["state: {a: 1}", "expected_actions: [{name: x}]"])
def test_a_case_state_or_actions_need_an_environment(tmp_path: Path, key: str) -> None:
    text = f"kind: agent\ntools: [read_file]\ncases:\n  - id: c\n    prompt: hi\n    {key}\n"
    error = error_of(tmp_path, text)
    assert error.line == 6 and "needs the file's `environment:`" in error.message


@pytest.mark.parametrize(
    "text",
    [
        "cases:\n  - prompt: hi\n    assert:\n      - {type: state-subset, value: {a: 1}}\n",
        "kind: agent\ntools: [read_file]\ncases:\n  - prompt: hi\n    assert:\n"
        "      - state-equals\n",
    ],
)
def test_state_assertions_need_an_agent_environment(tmp_path: Path, text: str) -> None:
    error = error_of(tmp_path, text)
    assert "needs `kind: agent` with an `environment:`" in error.message
    assert error.line == line_of(text, "state-")


TURN_STATE = """\
kind: agent
environment: {module: retail_env.py, seed: file://seed.json}
tools: []
cases:
  - id: talk
    expected_actions: []
    {conversation}
"""


@pytest.mark.parametrize(
    "conversation",
    [
        "turns:\n      - user: Cancel W1001.\n        assert:\n          - state-equals\n",
        "simulated_user:\n      instructions: You are Ana.\n      assert:\n"
        "        - {type: not-state-subset, value: {orders: {}}}\n",
    ],
    ids=["turn", "simulated-user"],
)
def test_a_state_assertion_on_a_turn_is_an_error_at_its_line(
    tmp_path: Path, conversation: str
) -> None:
    text = TURN_STATE.replace("{conversation}", conversation)
    error = error_of(tmp_path, text)
    assert error.line == line_of(text, "state-")
    assert "checked on the final state: put it in the case's assert:" in error.message
    assert error.message.startswith("`") and "state-" in error.message.split(":")[0]


def test_state_equals_without_a_value_needs_expected_actions(tmp_path: Path) -> None:
    text = FILE.replace("{type: state-equals, value: file://expected.json}", "state-equals")
    error = error_of(tmp_path, text)
    assert error.line == line_of(text, "- id: own-state")
    assert "case 'own-state': `state-equals` without a value" in error.message


# --- dataset rows ----------------------------------------------------------------------------


def test_dataset_rows_give_state_and_expected_actions_columns(tmp_path: Path) -> None:
    rows = [
        {"id": "r1", "prompt": "cancel", "state": {"orders": {"W2": {"status": "pending"}}},
         "expected_actions": [{"name": "cancel_pending_order", "arguments": {"order_id": "W2"}}]},
        {"id": "r2", "prompt": "look"},
    ]  # fmt: skip
    (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    text = FILE[: FILE.index("cases:")] + "dataset: rows.jsonl\nassert: [state-equals]\n"
    error = error_of(tmp_path, text)  # r2 has no expected actions
    assert "case 'r2'" in error.message
    (tmp_path / "rows.csv").write_text(
        "id,prompt,state,expected_actions\n"
        'r1,cancel,"{""orders"": {}}","[{""name"": ""cancel_pending_order"", '
        '""arguments"": {""order_id"": ""W2""}}]"\n'
    )
    r1, *_ = load(tmp_path, text.replace("rows.jsonl", "rows.csv")).cases
    assert r1.state_seed == {"orders": {}}
    assert r1.expected_actions[0].arguments == {"order_id": "W2"}
    bad = text.replace("rows.jsonl", "bad.csv")
    (tmp_path / "bad.csv").write_text('id,prompt,expected_actions\nr1,x,"[{""name"": ""nope""}]"\n')
    error = error_of(tmp_path, bad)
    assert "dataset row 'r1' (line 2)" in error.message and "'nope' is not a tool" in error.message


def test_a_state_column_is_plain_data_without_an_environment(tmp_path: Path) -> None:
    (tmp_path / "rows.csv").write_text("id,prompt,state\nr1,hi,oregon\n")
    path = tmp_path / "plain.eval.yaml"
    path.write_text("dataset: rows.csv\n", encoding="utf-8")
    (case,) = load_spec(path).cases
    assert case.state_seed is None and case.vars["state"] == "oregon"


# --- case hashes -----------------------------------------------------------------------------

#: Agent files written before environments, and their case hashes then (computed on the commit
#: before issue 42's interfaces): an environment must change none of them.
EARLIER_HASHES = {
    "kind: agent\ntools: [read_file, write_file]\nmax_steps: 4\ncases:\n  - id: a\n"
    "    prompt: Write hello.txt\n    assert:\n      - {type: file-exists, value: hello.txt}\n":
    "5da6b77ff3ed89ce",
    'kind: agent\ntools: [read_file, "mcp:files/*"]\nmcp_servers:\n'
    "  files: {command: python, args: [server.py]}\ncases:\n  - id: a\n    prompt: Read it\n"
    "    assert: [{type: contains, value: x}]\n": "ebf9ac7ea2d31a5f",
    'cases:\n  - id: a\n    prompt: What is 2+2?\n    expected: "4"\n': "999c82c07b9e2510",
}  # fmt: skip


@pytest.mark.parametrize("text", list(EARLIER_HASHES))
def test_files_without_an_environment_hash_as_before(tmp_path: Path, text: str) -> None:
    path = tmp_path / "old.eval.yaml"
    path.write_text(text, encoding="utf-8")
    assert load_spec(path).cases[0].case_hash == EARLIER_HASHES[text]


def test_the_seed_the_actions_and_the_module_change_a_case_hash(tmp_path: Path) -> None:
    first = load(tmp_path).cases[0].case_hash
    assert load(tmp_path).cases[0].case_hash == first
    moved = FILE.replace("order_id: W1001", "order_id: W1002")
    assert load(tmp_path, moved).cases[0].case_hash != first
    changed = MODULE.replace("LIMIT = 3", "LIMIT = 4")
    assert load(tmp_path, FILE, changed).cases[0].case_hash != first
    path = project(tmp_path)
    (tmp_path / "seed.json").write_text(json.dumps({"orders": {}}), encoding="utf-8")
    assert load_spec(path).cases[0].case_hash != first


# --- through pytest --------------------------------------------------------------------------


def test_collection_reports_an_unknown_action_at_its_line_and_collects_the_rest(
    bench: Bench,
) -> None:
    bench.pytester.makepyfile(retail_env=MODULE)
    (bench.pytester.path / "seed.json").write_text(json.dumps(SEED), encoding="utf-8")
    (bench.pytester.path / "expected.json").write_text("{}", encoding="utf-8")
    bench.eval_file("good", FILE)
    bad = FILE.replace("{name: find_user,", "{name: find_users,")
    bench.eval_file("bad", bad)
    result = bench.pytester.runpytest(
        "--collect-only", "-q", "-p", "no:cacheprovider", "--models=fake"
    )
    result.stdout.fnmatch_lines([
        f"bad.eval.yaml:{line_of(bad, 'find_users')}: case 'cancel': expected_actions: "
        "'find_users' is not a tool of retail_env.py (cancel_pending_order, find_user)",
    ])  # fmt: skip
    result.stdout.fnmatch_lines(
        ["good.eval.yaml::cancel[[]fake-r0[]]", "good.eval.yaml::own-state*"]
    )


def test_no_expected_actions_is_a_case_whose_state_must_stay_as_seeded(tmp_path: Path) -> None:
    # tau-bench's rule for a task without actions (a lookup, a refusal): the expected state is
    # the seed; `expected_actions: []` is given, not missing, so a bare state-equals is allowed.
    text = FILE.replace(
        "      - {name: cancel_pending_order, arguments: {order_id: W1001}}\n"
        "      - {name: find_user, kwargs: {email: ana@example.com, anything: 1}}\n",
        "",
    ).replace("    expected_actions:\n", "    expected_actions: []\n")
    cancel, own = load(tmp_path, text).cases
    assert cancel.expected_actions == () and own.expected_actions is None
    missing = text.replace("    expected_actions: []\n", "")
    assert "expected_actions" in str(error_of(tmp_path, missing))


def test_an_async_tool_is_an_error_at_its_line_in_the_module(tmp_path: Path) -> None:
    module = MODULE + '\n\nasync def fetch(state: dict, order_id: str) -> str:\n    """Fetch."""\n'
    found = error_of(tmp_path, FILE, module)
    assert found.path == tmp_path / "retail_env.py"
    assert found.line == line_of(module, "async def fetch")
    assert "`async def`" in str(found)


def test_a_tool_defined_twice_is_its_last_definition(tmp_path: Path) -> None:
    """Python binds the last ``def`` of a name, and the runner serves that one: collection
    checks expected actions against it."""
    module = (
        MODULE
        + "\n\ndef find_user(state, email: str, region: str = 'eu', **extra):\n    return 1\n"
    )
    loaded = load(tmp_path, module=module)
    assert loaded.agent is not None and loaded.agent.environment is not None
    environment = loaded.agent.environment
    assert environment.tool_names == ("cancel_pending_order", "find_user")
    find = environment.tool("find_user")
    assert find is not None
    assert (find.parameters, find.required) == (("email", "region"), ("email",))


@pytest.mark.parametrize("column", ["state", "expected_actions"])
def test_a_dataset_cell_nested_too_deep_is_an_error_at_its_row(tmp_path: Path, column: str) -> None:
    text = FILE[: FILE.index("cases:")] + "dataset: deep.csv\nassert: [state-equals]\n"
    deep = '"' + "[" * 100_000 + '"'
    (tmp_path / "deep.csv").write_text(f"id,prompt,{column}\nr1,x,{deep}\n")
    error = error_of(tmp_path, text)
    assert "dataset row 'r1' (line 2)" in error.message
    assert "nested more than" in error.message


def test_a_jsonl_state_nested_too_deep_is_an_error_at_its_line(tmp_path: Path) -> None:
    state: dict[str, object] = {}
    inner = state
    for _ in range(100):
        inner["x"] = {}
        inner = inner["x"]  # type: ignore[assignment]
    row = {"id": "r1", "prompt": "x", "state": state, "expected_actions": []}
    (tmp_path / "deep.jsonl").write_text(json.dumps(row) + "\n")
    text = FILE[: FILE.index("cases:")] + "dataset: deep.jsonl\nassert: [state-equals]\n"
    error = error_of(tmp_path, text)
    assert "deep.jsonl:1: state." in error.message and "nested more than" in error.message
