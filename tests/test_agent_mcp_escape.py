"""The escape battery for MCP servers (tests/test_agent_escape.py holds run_command's): a stdio
server written here, run under bubblewrap as every stdio server is, whose tools try to read a
provider key set in the host's environment (directly and through ``/proc``), the host project's
``.env``, another item's workdir, and a TCP port listening on 127.0.0.1. Each attempt is
blocked, and the test asserts what the tool returned: the denial. A second run gives the same
server ``env:`` and ``network: true``: the key is then visible (by its digest: records redact
the value) and the port reachable, so the battery can fail.

The same server installed as users install one, a ``uv tool`` venv behind a link in
``~/.local/bin``, has its install prefix shown read-only and nothing more: it cannot write
there, nor read the home's ``.env``, another tool's folder or the rest of ``~/.local``, nor
reach the network; and the agent's own commands do not see that prefix.

Real subprocesses under bubblewrap (which `make test` installs): ``slow``.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Bench, Rule
from mcp_tools import server, virtualenv

pytestmark = pytest.mark.slow

KEY = "sk-escape-0123456789abcdef0123"
DIGEST = hashlib.sha256(KEY.encode()).hexdigest()

SERVER = server(
    '''
import hashlib
import os
import socket

from mcp.server.mcpserver import MCPServer

app = MCPServer("escape")


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


@app.tool()
def env_digest(name: str) -> str:
    """The digest of a variable's value, or (unset)."""
    value = os.environ.get(name)
    return "(unset)" if value is None else _digest(value)

''',
    "hunt",
    "peek",
    "dial",
    "scribble",
)

AGENT = """
kind: agent
include_dirs: [servers]
mcp_servers:
  escape: {{command: python3, args: [escape.py], tool_timeout_s: 20{extra}}}
tools: ["mcp:escape/*"]
max_turns: 3
assert:
  - {{type: icontains, value: done}}
cases:
  - {{id: key, prompt: 'Try (key).', files: {{secret.txt: neighbour-secret}}}}
  - {{id: proc, prompt: 'Try (proc).'}}
  - {{id: dotenv, prompt: 'Try (dotenv).'}}
  - {{id: neighbour, prompt: 'Try (neighbour).'}}
  - {{id: net, prompt: 'Try (net).'}}
"""


def _battery(bench: Bench, port: int, extra: str = "") -> dict[str, str]:
    """Run the five attempts (one item each); what each tool returned, by case."""
    servers = bench.pytester.path / "servers"
    servers.mkdir(exist_ok=True)
    (servers / "escape.py").write_text(SERVER)
    dotenv = bench.pytester.path / ".env"  # the host project's .env, beside the eval file
    dotenv.write_text(f"OPENAI_API_KEY={KEY}\n")
    basetemp = bench.pytester.path / "basetemp"
    # the first item's workdir (pytest's naming, checked below against its record)
    neighbour = basetemp / "key_fake_r0_0" / "workdir" / "secret.txt"
    attempts = {
        "key": ("escape__env_digest", {"name": "OPENAI_API_KEY"}),
        "proc": ("escape__hunt", {"name": "OPENAI_API_KEY"}),
        "dotenv": ("escape__peek", {"path": str(dotenv)}),
        "neighbour": ("escape__peek", {"path": str(neighbour)}),
        "net": ("escape__dial", {"port": port}),
    }
    for case, (tool, arguments) in attempts.items():
        bench.server.add_rule(Rule(match_last=f"({case})", tool_calls=[
            {"name": tool, "arguments": arguments}]))  # fmt: skip
    bench.server.add_rule(Rule(reply="It is done."))
    bench.eval_file("escape", AGENT.format(extra=extra))
    result = bench.run_subprocess("--models=fake", "-n", "0", f"--basetemp={basetemp}")
    result.assert_outcomes(passed=5)
    records = {record["case_id"]: record for record in bench.records()}
    assert Path(records["key"]["workdir"]) / "secret.txt" == neighbour
    assert neighbour.read_text() == "neighbour-secret"  # there to be read, had it been visible
    assert KEY not in bench.out("results.jsonl").read_text()
    return {
        case: next(s["result"] for s in record["timeline"] if s["kind"] == "tool")
        for case, record in records.items()
    }


@pytest.fixture
def listening() -> Iterator[int]:
    """A port where a server listens on 127.0.0.1 (the backlog accepts connections)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    yield int(listener.getsockname()[1])
    listener.close()


def test_a_stdio_server_cannot_reach_the_key_the_host_files_or_the_network(
    bench: Bench, listening: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    said = _battery(bench, listening)
    assert said["key"] == "(unset)"
    # its own PID namespace: only its own processes, none holding the key
    assert said["proc"].startswith("read ") and said["proc"].endswith(": none")
    assert said["dotenv"] == "cannot read: FileNotFoundError"
    assert said["neighbour"] == "cannot read: FileNotFoundError"
    assert said["net"].startswith("cannot connect")


def test_with_env_and_network_the_same_attempts_succeed(
    bench: Bench, listening: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: what env: names and network: true allow is seen, so the battery above
    tests the sandbox, not a broken probe. Files outside the workdir stay out of reach."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    extra = ", network: true, env: {OPENAI_API_KEY: '${OPENAI_API_KEY}'}"
    said = _battery(bench, listening, extra)
    assert said["key"] == DIGEST
    assert DIGEST in said["proc"]  # its own environ
    assert said["net"] == "connected"
    assert said["dotenv"] == said["neighbour"] == "cannot read: FileNotFoundError"


INSTALLED = """
kind: agent
mcp_servers:
  escape: {{command: '{command}', tool_timeout_s: 20}}
tools: [run_command, "mcp:escape/*"]
max_turns: 3
assert:
  - {{type: icontains, value: done}}
cases:
  - {{id: own, prompt: 'Try (own).'}}
  - {{id: home, prompt: 'Try (home).'}}
  - {{id: sibling, prompt: 'Try (sibling).'}}
  - {{id: local, prompt: 'Try (local).'}}
  - {{id: key, prompt: 'Try (key).'}}
  - {{id: net, prompt: 'Try (net).'}}
  - {{id: agent, prompt: 'Try (agent).'}}
"""


def test_a_server_installed_as_a_uv_tool_gets_its_prefix_read_only_and_nothing_more(
    bench: Bench, listening: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    home = Path(os.environ["HOME"])  # pytester's: the project folder
    tool = home / ".local/share/uv/tools/escape"
    module = SERVER.removesuffix("\n\napp.run()\n") + "\n\ndef main() -> None:\n    app.run()\n"
    virtualenv(tool, {"escape_server": module}, {"escape": "escape_server"})
    link = home / ".local/bin/escape"
    link.parent.mkdir(parents=True)
    link.symlink_to(tool / "bin/escape")
    planted = {
        "home": home / ".env",
        "sibling": home / ".local/share/uv/tools/other/secret.txt",
        "local": home / ".local/bin/secret.conf",
    }
    for path in planted.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"OPENAI_API_KEY={KEY}\n")
    attempts = {
        "own": ("escape__scribble", {"path": str(tool / "bin/planted")}),
        **{case: ("escape__peek", {"path": str(path)}) for case, path in planted.items()},
        "key": ("escape__env_digest", {"name": "OPENAI_API_KEY"}),
        "net": ("escape__dial", {"port": listening}),
        "agent": ("run_command", {"command": f"ls {tool}/bin"}),
    }
    for case, (name, arguments) in attempts.items():
        bench.server.add_rule(Rule(match_last=f"({case})", tool_calls=[
            {"name": name, "arguments": arguments}]))  # fmt: skip
    bench.server.add_rule(Rule(reply="It is done."))
    bench.eval_file("installed", INSTALLED.format(command=link))
    bench.run_subprocess("--models=fake", "-n", "0").assert_outcomes(passed=7)
    said = {
        record["case_id"]: next(s["result"] for s in record["timeline"] if s["kind"] == "tool")
        for record in bench.records()
    }
    assert said["own"] == "cannot write: OSError: Read-only file system"
    assert not (tool / "bin/planted").exists()
    for case in planted:
        assert said[case] == "cannot read: FileNotFoundError", case
    assert said["key"] == "(unset)"
    assert said["net"].startswith("cannot connect")
    # the agent's commands: the server's prefix is the server's alone
    assert said["agent"].startswith("exit code: 2") and "No such file or directory" in said["agent"]
    assert KEY not in bench.out("results.jsonl").read_text()
