"""MCP servers as an agent's tool source (agent/mcp.py): the real ``mcp-server-time`` from PyPI
end to end, and a small server written here (on the SDK's ``MCPServer``) for the errors.

The fake model server scripts the model's tool calls; the servers, the sandbox (bubblewrap
where it works) and the checks are real. Servers are real subprocesses: ``slow``.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from conftest import Bench, Rule
from mcp_tools import server

pytestmark = pytest.mark.slow

TIME_AGENT = """
kind: agent
mcp_servers:
  time: {command: python3, args: [-m, mcp_server_time, --local-timezone, UTC]}
tools: [read_file, "mcp:time/get_*"]
max_turns: 4
cases:
  - id: now
    prompt: What time is it in UTC?
    assert:
      - {type: tool-called, value: "mcp:time/get_current_time"}
      - {type: tool-sequence, value: ["mcp:time/get_current_time"], mode: strict}
      - {type: not-tool-called, value: read_file}
      - {type: icontains, value: "it is"}
"""

#: A server of the tests: one tool per behaviour; ``exit`` as its argument makes it fail at start.
SERVER = server(
    '''
import os
import sys
import time

if sys.argv[1:] == ["exit"]:
    print("cannot open the database", file=sys.stderr)
    sys.exit(3)

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

app = MCPServer("probe")


@app.tool()
def echo_env(name: str) -> str:
    """The value of an environment variable, or (unset)."""
    return os.environ.get(name, "(unset)")


@app.tool()
def refuse(reason: str) -> str:
    """Always fails, with the reason."""
    raise ToolError(f"refused: {reason}")
''',
    "peek",
    "dial",
    "where",
    "die",
    "nap",
)

#: TIME_AGENT's checks as file-level assertions (for files of many cases).
ASSERTIONS = """max_turns: 4
assert:
  - {type: tool-called, value: "mcp:time/get_current_time"}
  - {type: tool-sequence, value: ["mcp:time/get_current_time"], mode: strict}
  - {type: not-tool-called, value: read_file}
  - {type: icontains, value: "it is"}"""

PROBE_AGENT = """
kind: agent
include_dirs: [servers]
mcp_servers:
  probe: {{command: python3, args: [probe.py{args}], tool_timeout_s: 2{extra}}}
tools: ["mcp:probe/{glob}"]
max_turns: 3
cases:
  - id: one
    prompt: Use the probe.
    assert:
      - {{type: tool-called, value: "mcp:probe/{tool}"}}
"""


def _probe_file(
    bench: Bench, *, tool: str, glob: str = "*", args: str = "", extra: str = ""
) -> None:
    (bench.pytester.path / "servers").mkdir(exist_ok=True)
    (bench.pytester.path / "servers" / "probe.py").write_text(SERVER)
    text = PROBE_AGENT.format(tool=tool, glob=glob, args=args, extra=extra)
    bench.eval_file("probe", text)


def _script(bench: Bench, name: str, arguments: dict[str, object], after: str) -> None:
    """Turn 1 calls ``name``; once its result (holding ``after``) is back, the model answers."""
    bench.server.add_rule(Rule(tool_calls=[{"name": name, "arguments": arguments}], times=1))
    bench.server.add_rule(Rule(match_last=after, reply="It is done."))


def _time_run(bench: Bench, *args: str) -> list[dict[str, object]]:
    _script(bench, "time__get_current_time", {"timezone": "UTC"}, "+00:00")
    bench.eval_file("time", TIME_AGENT)
    result = bench.run_subprocess("--models=fake", *args)
    result.assert_outcomes(passed=1)
    return bench.records()


def test_the_pypi_time_server_answers_an_agent_item(bench: Bench) -> None:
    (record,) = _time_run(bench, "-n", "0")
    assert record["tool_counts"] == {"mcp:time/get_current_time": 1}
    (step,) = [s for s in record["timeline"] if s["kind"] == "tool"]
    assert step["name"] == "mcp:time/get_current_time" and step["error"] is False
    assert '"timezone": "UTC"' in step["result"] and "+00:00" in step["result"]
    assert all(verdict["passed"] for verdict in record["assertions"])
    # The model was offered the selected tools under model-safe names, with their schemas.
    first = bench.server.chat_requests()[0].body
    offered = {tool["function"]["name"]: tool["function"] for tool in first["tools"]}
    assert set(offered) == {"read_file", "time__get_current_time"}  # get_* only
    assert offered["time__get_current_time"]["parameters"]["required"] == ["timezone"]
    tool_message = next(m for m in record["transcript"] if m["role"] == "tool")
    assert "+00:00" in tool_message["content"]


def test_the_time_server_under_xdist_gives_the_same_verdicts(bench: Bench) -> None:
    """Four items (a session each) on two real workers, then in one process: same verdicts."""
    cases = "\n".join(
        f"  - {{id: at-{n}, prompt: 'What time is it in UTC? ({n})'}}" for n in range(4)
    )
    text = TIME_AGENT.split("cases:")[0].replace("max_turns: 4", ASSERTIONS)
    bench.eval_file("time", f"{text}cases:\n{cases}\n")
    bench.server.add_rule(
        Rule(
            match_last="What time",  # the prompt: turn 1
            tool_calls=[{"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}],
        )
    )
    bench.server.add_rule(Rule(match_last="+00:00", reply="It is done."))
    verdicts = {}
    for workers in ("2", "0"):
        bench.run_subprocess("--models=fake", "-n", workers).assert_outcomes(passed=4)
        assert len(bench.records()) == 4  # this run's
        verdicts[workers] = {
            r["case_id"]: (r["outcome"], r["tool_counts"], [v["passed"] for v in r["assertions"]])
            for r in bench.records()
        }
    assert verdicts["2"] == verdicts["0"]
    assert verdicts["0"]["at-3"] == ("passed", {"mcp:time/get_current_time": 1}, [True] * 4)


def test_a_tool_error_result_is_the_models_to_read(bench: Bench) -> None:
    _probe_file(bench, tool="refuse")
    _script(bench, "probe__refuse", {"reason": "no"}, "refused: no")
    bench.run_subprocess("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    (step,) = [s for s in record["timeline"] if s["kind"] == "tool"]
    assert step["error"] is True and step["result"].startswith("error: ")
    assert "refused: no" in step["result"]


def test_a_server_that_exits_at_start_is_an_item_error_of_kind_tool(bench: Bench) -> None:
    _probe_file(bench, tool="nap", args=", exit")
    bench.server.add_rule(Rule(reply="never asked"))
    result = bench.run_subprocess("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*llmbench tool error: MCP server 'probe': initialize failed*"])
    (record,) = bench.records()
    assert record["outcome"] == "error" and record["error_kind"] == "tool"
    assert record["score"] is None
    assert "MCP server 'probe'" in record["error"]
    assert "cannot open the database" in record["error"]  # its stderr, the cause
    assert bench.server.chat_requests() == []  # the model was never called


def test_a_slow_tool_call_is_cut_at_tool_timeout_s(bench: Bench) -> None:
    _probe_file(bench, tool="nap")
    _script(bench, "probe__nap", {"seconds": 60}, "woke up")
    result = bench.run_subprocess("--models=fake")
    result.assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "tool"
    assert "MCP server 'probe': the call of nap did not finish within 2 s" in record["error"]
    assert record["agent_steps"] == 1  # what it did before the error is kept


def test_a_glob_matching_no_tool_is_an_error_naming_the_tools(bench: Bench) -> None:
    _probe_file(bench, tool="nap", glob="search*")
    bench.server.add_rule(Rule(reply="never asked"))
    bench.run_subprocess("--models=fake").assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "tool"
    assert (
        "mcp:probe/search* matches none of its tools (echo_env, refuse, peek, dial, where, die, nap)"
        in record["error"]
    )


SECRET = "sk-test-0123456789abcdef"


def test_a_host_variable_reaches_the_server_only_when_env_names_it(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    _probe_file(bench, tool="echo_env")
    _script(bench, "probe__echo_env", {"name": "OPENAI_API_KEY"}, "")
    bench.run_subprocess("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    (step,) = [s for s in record["timeline"] if s["kind"] == "tool"]
    assert step["result"] == "(unset)"


def test_a_variable_env_names_reaches_the_server_and_no_record(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROBE_KEY", SECRET)
    _probe_file(bench, tool="echo_env", extra=", env: {PROBE_KEY: '${PROBE_KEY}'}")
    _script(bench, "probe__echo_env", {"name": "PROBE_KEY"}, "")
    bench.run_subprocess("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    (step,) = [s for s in record["timeline"] if s["kind"] == "tool"]
    assert step["result"] != "(unset)" and "REDACTED" in step["result"]
    assert SECRET not in bench.out("results.jsonl").read_text()


# --- collection errors ----------------------------------------------------------------------

BAD = """
kind: agent
mcp_servers:
  time: {command: python3}
tools: [%s]
cases:
  - {id: one, prompt: hi}
"""


@pytest.mark.parametrize(
    ("servers", "tools", "message"),
    [
        ("time: {command: python3}", '"mcp:docs/search"',
         "*probe.eval.yaml:4: tools: 'mcp:docs/search' names the unknown MCP server 'docs' (time)"),
        ("time: {args: [x]}", '"mcp:time/*"',
         "*probe.eval.yaml:3: *give either `command` (stdio) or `url` (HTTP), not neither"),
        ("time: {command: x, url: 'http://127.0.0.1:1/mcp'}", '"mcp:time/*"',
         "*probe.eval.yaml:3: *give either `command` (stdio) or `url` (HTTP), not both"),
        ("time: {command: x, tool_timeout: 3}", '"mcp:time/*"',
         "*probe.eval.yaml:3: *unknown key 'tool_timeout' (did you mean 'tool_timeout_s'?)"),
        ("time: {command: x, tool_timeout_s: soon}", '"mcp:time/*"',
         "*probe.eval.yaml:3: mcp_servers.time.tool_timeout_s: *number*"),
        ("time: {url: 'http://127.0.0.1:1/mcp', network: true}", '"mcp:time/*"',
         "*probe.eval.yaml:3: *`network` is for a stdio server (`command`), not `url`"),
        ("time: {command: x}", '"mcp:time"',
         "*probe.eval.yaml:4: *tool 'mcp:time': an MCP server's tools are 'mcp:SERVER/GLOB'"),
    ],
)  # fmt: skip
def test_bad_mcp_input_is_a_collection_error_at_its_line(
    bench: Bench, servers: str, tools: str, message: str
) -> None:
    text = BAD.replace("time: {command: python3}", servers) % tools
    bench.eval_file("probe", text)
    result = bench.run("--models=fake", "--collect-only")
    result.stdout.fnmatch_lines([message])
    assert "Traceback" not in result.stdout.str()


def test_mcp_servers_need_kind_agent(bench: Bench) -> None:
    bench.eval_file("plain", "mcp_servers:\n  time: {command: x}\ncases:\n  - {prompt: hi}\n")
    result = bench.run("--models=fake", "--collect-only")
    result.stdout.fnmatch_lines(["*plain.eval.yaml:1: 'mcp_servers' needs `kind: agent`"])


def test_an_http_server_that_refuses_the_connection_is_an_item_error(bench: Bench) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    text = TIME_AGENT.replace(
        "time: {command: python3, args: [-m, mcp_server_time, --local-timezone, UTC]}",
        f"time: {{url: 'http://127.0.0.1:{port}/mcp', startup_timeout_s: 5}}",
    )
    bench.eval_file("time", text)
    bench.server.add_rule(Rule(reply="never asked"))
    bench.run_subprocess("--models=fake").assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "tool"
    assert "MCP server 'time'" in record["error"] and "ConnectError" in record["error"]


def test_the_servers_enter_the_case_hash_only_when_given(tmp_path: Path) -> None:
    from pytest_llmbench.spec.load import load_spec

    def case_hash(name: str, text: str) -> str | None:
        path = tmp_path / f"{name}.eval.yaml"
        path.write_text(text)
        return load_spec(path).cases[0].case_hash

    utc = case_hash("utc", TIME_AGENT)
    paris = case_hash("paris", TIME_AGENT.replace("UTC]", "Europe/Paris]"))
    assert utc != paris
    without = "kind: agent\ntools: [read_file]\ncases:\n  - {id: now, prompt: hi}\n"
    unused = without.replace("kind: agent\n", "kind: agent\nmcp_servers: {}\n")
    assert case_hash("without", without) == case_hash("unused", unused)


def _tool_result(bench: Bench) -> str:
    (record,) = bench.records()
    assert record["outcome"] == "passed"
    (step,) = [s for s in record["timeline"] if s["kind"] == "tool"]
    return str(step["result"])


def test_a_stdio_server_sees_no_host_file_outside_its_workdir(bench: Bench) -> None:
    """Under bubblewrap (which `make test` installs) as run_command is."""
    planted = bench.pytester.path / "host.env"
    planted.write_text("OPENAI_API_KEY=sk-planted-on-the-host")
    _probe_file(bench, tool="peek")
    _script(bench, "probe__peek", {"path": str(planted)}, "")
    bench.run_subprocess("--models=fake").assert_outcomes(passed=1)
    assert _tool_result(bench) == "cannot read: FileNotFoundError"


@pytest.mark.parametrize(
    ("network", "said"), [("", "cannot connect"), (", network: true", "connected")]
)
def test_a_stdio_server_reaches_the_network_only_with_network_true(
    bench: Bench, network: str, said: str
) -> None:
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        _probe_file(bench, tool="dial", extra=network)
        _script(bench, "probe__dial", {"port": port}, "")
        bench.run_subprocess("--models=fake").assert_outcomes(passed=1)
    assert _tool_result(bench).startswith(said)


def test_a_server_that_dies_during_a_call_is_an_item_error(bench: Bench) -> None:
    _probe_file(bench, tool="die")
    _script(bench, "probe__die", {}, "")
    bench.run_subprocess("--models=fake").assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "tool" and record["score"] is None
    assert "MCP server 'probe': the call of die failed" in record["error"]
    assert record["agent_steps"] == 1 and record["agent_stopped"] == "error"


def test_a_server_that_never_answers_initialize_is_cut_at_startup_timeout_s(
    bench: Bench,
) -> None:
    silent = "import time; time.sleep(600)"
    text = TIME_AGENT.replace(
        "time: {command: python3, args: [-m, mcp_server_time, --local-timezone, UTC]}",
        f"time: {{command: python3, args: [-c, '{silent}'], startup_timeout_s: 2}}",
    )
    bench.eval_file("time", text)
    bench.server.add_rule(Rule(reply="never asked"))
    bench.run_subprocess("--models=fake").assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "tool"
    assert "MCP server 'time': initialize did not finish within 2 s" in record["error"]


def test_mcp_tools_go_through_the_tool_shim(bench: Bench) -> None:
    """For models without tool calling: the MCP tool's name and schema in the shim's prompt,
    its call read from the reply's JSON."""
    call = '{"tool": "time__get_current_time", "arguments": {"timezone": "UTC"}}'
    bench.server.add_rule(Rule(match_last="+00:00", reply='{"answer": "It is done."}'))
    bench.server.add_rule(Rule(reply=call))
    bench.eval_file("time", TIME_AGENT.replace("max_turns: 4", "max_turns: 4\ntool_shim: always"))
    bench.run_subprocess("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["tool_counts"] == {"mcp:time/get_current_time": 1}
    assert record["response"] == "It is done."
    first = bench.server.chat_requests()[0].body
    assert "tools" not in first  # offered in the prompt, not natively
    assert "time__get_current_time" in first["messages"][0]["content"]


#: Counts, when each item is finished, the processes that still hold the marker.
COUNT_AFTER_ITEM = """
from pathlib import Path

MARKER = %r


def pytest_runtest_logfinish(nodeid, location):
    alive = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\\0", b" ").decode()
        except OSError:  # not a process, or gone meanwhile
            continue
        if entry.name.isdigit() and MARKER in cmdline:
            alive.append(cmdline)
    Path("alive-after-item.txt").write_text(str(len(alive)))
"""


@pytest.mark.parametrize(
    ("tool", "arguments", "outcome"),
    [("echo_env", {"name": "HOME"}, "passed"), ("nap", {"seconds": 60}, "error")],
)
def test_the_server_is_gone_when_its_item_ends(
    bench: Bench, tool: str, arguments: dict[str, object], outcome: str
) -> None:
    """The session is closed and the server (bwrap and all) stopped by the time the item is
    reported: when it passes, and when it errors with a tool call still running."""
    marker = f"llmbench-probe-{uuid.uuid4().hex}"
    bench.pytester.makeconftest(COUNT_AFTER_ITEM % marker)
    _probe_file(bench, tool=tool, args=f", {marker}")
    _script(bench, f"probe__{tool}", arguments, "")
    bench.run_subprocess("--models=fake")
    (record,) = bench.records()
    assert record["outcome"] == outcome
    assert (bench.pytester.path / "alive-after-item.txt").read_text() == "0"


def test_without_bwrap_a_stdio_server_needs_sandbox_off(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """bwrap missing (PATH holds nothing): the item is a sandbox error before any model call,
    as for commands; with `sandbox: off` the server runs, its environment still clean."""
    monkeypatch.setenv("PATH", str(tmp_path))  # pytest runs by its full path
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    _probe_file(bench, tool="echo_env")
    _script(bench, "probe__echo_env", {"name": "OPENAI_API_KEY"}, "")
    result = bench.run_subprocess("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*llmbench sandbox error: bubblewrap is not installed*"])
    assert bench.server.chat_requests() == []
    assert bench.records()[0]["error_kind"] == "sandbox"
    text = (bench.pytester.path / "probe.eval.yaml").read_text()
    bench.eval_file("probe", text.replace("kind: agent", "kind: agent\nsandbox: off"))
    bench.run_subprocess("--models=fake").assert_outcomes(passed=1)
    assert _tool_result(bench) == "(unset)"


def test_a_stdio_server_starts_in_its_cwd_inside_the_workdir(bench: Bench) -> None:
    (bench.pytester.path / "servers" / "data").mkdir(parents=True)
    _probe_file(bench, tool="where")
    text = (bench.pytester.path / "probe.eval.yaml").read_text()
    text = text.replace("args: [probe.py]", "args: [../probe.py], cwd: data")
    bench.eval_file("probe", text)
    _script(bench, "probe__where", {}, "")
    bench.run_subprocess("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert _tool_result(bench) == str(Path(record["workdir"]) / "data")


def test_an_unset_variable_in_env_is_an_item_error_naming_it(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LLMBENCH_PROBE_UNSET", raising=False)
    _probe_file(bench, tool="echo_env", extra=", env: {K: 'x-${LLMBENCH_PROBE_UNSET}'}")
    bench.server.add_rule(Rule(reply="never asked"))
    bench.run_subprocess("--models=fake").assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "tool"
    assert (
        "MCP server 'probe': env K uses ${LLMBENCH_PROBE_UNSET}, which is not set"
        in (record["error"])
    )
