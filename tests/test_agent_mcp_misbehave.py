"""MCP servers that misbehave (agent/mcp.py) never hang or crash the run: garbage on stdout
before and after the handshake, megabytes flooded on stdout or stderr, a server that exits
after a flood, and a call of one that never answers. Each item ends within its timeouts (small
here: ``startup_timeout_s``, ``tool_timeout_s``) as a pass or an error of kind ``tool`` naming
the server and the cause, the items after it still run, and no server process is left.

The servers are one script written here, its behaviour chosen by its argument, run under
bubblewrap as every stdio server is. Real subprocesses: ``slow``.
"""

from __future__ import annotations

import uuid

import pytest
from conftest import Bench, Rule
from mcp_tools import server

pytestmark = pytest.mark.slow

SERVER = server(
    '''
import os
import sys
import time

MODE = sys.argv[1]
MB = 1024 * 1024
if MODE == "garbage":
    print("this is not JSON-RPC {{{", flush=True)
    print('{"jsonrpc": "2.0", "method": "nonsense"}', flush=True)
elif MODE == "floodout":
    sys.stdout.write("x" * (8 * MB))  # one line of 8 MB, no newline: the handshake is lost
    sys.stdout.flush()
elif MODE == "flooderr-exit":
    sys.stderr.write("e" * (8 * MB) + "\\nthe last words of the server\\n")
    sys.stderr.flush()
    sys.exit(2)

from mcp.server.mcpserver import MCPServer

app = MCPServer("misbehave")


@app.tool()
def junk() -> str:
    """Prints garbage on stdout (the transport), then answers."""
    os.write(1, b"garbage after the handshake\\n\\x00\\xff not json\\n")
    return "answered after junk"


@app.tool()
def flood_stderr() -> str:
    """Writes 8 MB to stderr, then answers."""
    for _ in range(8):
        os.write(2, b"s" * MB)
    return "answered after the flood"


@app.tool()
def hang() -> str:
    """Never answers."""
    while True:
        time.sleep(1)



@app.tool()
def fine() -> str:
    """Answers."""
    return "all fine"
''',
    "fill",
)

#: One eval file per behaviour: (server argument, tool called).
FILES = {
    "a_garbage": ("garbage", "junk"),
    "b_floodout": ("floodout", "fine"),
    "c_flooderr": ("ok", "flood_stderr"),
    "d_flooderr_exit": ("flooderr-exit", "fine"),
    "e_hang": ("ok", "hang"),
    "f_after": ("ok", "fine"),
}

AGENT = """
kind: agent
include_dirs: [servers]
mcp_servers:
  {name}: {{command: python3, args: [misbehave.py, {mode}, {marker}], startup_timeout_s: 8,
           tool_timeout_s: 4}}
tools: ["mcp:{name}/*"]
max_turns: 3
cases:
  - id: one
    prompt: Call ({name}).
    assert:
      - {{type: tool-called, value: "mcp:{name}/{tool}"}}
"""

#: Counts the processes holding an item's marker after it (the servers of later items may
#: have started ahead), and those holding any at the very end.
COUNT = """
from pathlib import Path

import pytest

MARKER = %r


def _alive(marker=MARKER):
    alive = 0
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\\0", b" ").decode()
        except OSError:
            continue
        alive += entry.name.isdigit() and marker in cmdline
    return alive


def pytest_runtest_logfinish(nodeid, location):
    suite = nodeid.split(".")[0]  # its server's marker (later items' servers may be up)
    with open("alive-after-items.txt", "a") as log:
        log.write(f"{suite} {_alive(f'{MARKER}-{suite}')}\\n")


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    Path("alive-at-end.txt").write_text(str(_alive()))
"""


def test_misbehaving_servers_end_as_items_and_leave_no_process(bench: Bench) -> None:
    marker = f"llmbench-misbehave-{uuid.uuid4().hex}"
    bench.pytester.makeconftest(COUNT % marker)
    (bench.pytester.path / "servers").mkdir()
    (bench.pytester.path / "servers" / "misbehave.py").write_text(SERVER)
    for name, (mode, tool) in FILES.items():
        server = name.replace("_", "-")
        text = AGENT.format(name=server, mode=mode, marker=f"{marker}-{name}", tool=tool)
        bench.eval_file(name, text)
        bench.server.add_rule(Rule(match_last=f"({server})", tool_calls=[
            {"name": f"{server}__{tool}", "arguments": {}}]))  # fmt: skip
    bench.server.add_rule(Rule(reply="It is done."))
    result = bench.run_subprocess("--models=fake", "-n", "0")
    records = {record["suite"]: record for record in bench.records()}
    assert sorted(records) == sorted(FILES)
    said = {suite: (r["outcome"], r["error_kind"], r["error"]) for suite, r in records.items()}

    # Garbage lines on stdout are skipped: the handshake and the call still work.
    assert said["a_garbage"][0] == "passed", said["a_garbage"]
    # A flood on stdout buries the handshake: cut at startup_timeout_s, naming the server.
    outcome, kind, error = said["b_floodout"]
    assert (outcome, kind) == ("error", "tool")
    assert "MCP server 'b-floodout'" in error and "within 8 s" in error
    # A flood on stderr is drained (the server is not blocked) and the call answered.
    assert said["c_flooderr"][0] == "passed", said["c_flooderr"]
    # A server that floods stderr and exits: its error quotes the end of what it said, only.
    outcome, kind, error = said["d_flooderr_exit"]
    assert (outcome, kind) == ("error", "tool")
    assert "MCP server 'd-flooderr-exit'" in error and "the last words of the server" in error
    assert len(error) < 2000
    # A call never answered is cut at tool_timeout_s.
    outcome, kind, error = said["e_hang"]
    assert (outcome, kind) == ("error", "tool")
    assert "MCP server 'e-hang': the call of hang did not finish within 4 s" in error
    # The item after all of them runs, and passes.
    assert said["f_after"][0] == "passed", said["f_after"]
    result.assert_outcomes(passed=3, errors=3)

    # No server outlives its item, nor the run.
    after_items = (bench.pytester.path / "alive-after-items.txt").read_text().split("\n")
    assert [line.split()[1] for line in after_items if line] == ["0"] * len(FILES)
    assert (bench.pytester.path / "alive-at-end.txt").read_text() == "0"
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


FORK = '''
import os
import time

from mcp.server.mcpserver import MCPServer

app = MCPServer("forker")


@app.tool()
def fork_many(n: int) -> str:
    """Forks n sleeping children; says how many it could start."""
    started = 0
    for _ in range(n):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        started += 1
    return f"started {started}"


app.run()
'''


def test_a_stdio_server_cannot_start_more_processes_than_the_cap(bench: Bench) -> None:
    """The sandbox's process cap (64, a pids cgroup as root, RLIMIT_NPROC otherwise) binds
    a server as it binds a command; the children go when its item ends."""
    (bench.pytester.path / "servers").mkdir()
    (bench.pytester.path / "servers" / "forker.py").write_text(FORK)
    bench.eval_file(
        "forker",
        AGENT.format(name="forker", mode="x", marker="y", tool="fork_many").replace(
            "misbehave.py", "forker.py"
        ),
    )
    bench.server.add_rule(Rule(match_last="(forker)", tool_calls=[
        {"name": "forker__fork_many", "arguments": {"n": 200}}]))  # fmt: skip
    bench.server.add_rule(Rule(reply="It is done."))
    bench.run_subprocess("--models=fake", "-n", "0").assert_outcomes(passed=1)
    (record,) = bench.records()
    (step,) = [s for s in record["timeline"] if s["kind"] == "tool"]
    started = int(str(step["result"]).removeprefix("started "))
    assert 0 < started < 64


def test_a_server_filling_the_workdir_is_stopped_at_the_disk_limit(bench: Bench) -> None:
    """The workdir is watched while the item's stdio servers run, against the sandbox's
    max_entries (20,000) as for a command: the call is stopped and the item is an error."""
    (bench.pytester.path / "servers").mkdir()
    (bench.pytester.path / "servers" / "misbehave.py").write_text(SERVER)
    text = AGENT.format(name="filler", mode="ok", marker="z", tool="fill")
    bench.eval_file("filler", text.replace("tool_timeout_s: 4", "tool_timeout_s: 120"))
    bench.server.add_rule(Rule(match_last="(filler)", tool_calls=[
        {"name": "filler__fill", "arguments": {"entries": 25000}}]))  # fmt: skip
    bench.server.add_rule(Rule(reply="It is done."))
    bench.run_subprocess("--models=fake", "-n", "0").assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "tool"
    assert (
        "MCP server 'filler': the workdir holds more than 20000 entries, the sandbox's limit; "
        "the call of fill was stopped" in record["error"]
    )
