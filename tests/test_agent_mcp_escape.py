"""The escape battery for MCP servers (tests/test_agent_escape.py holds run_command's): a stdio
server written here, run under bubblewrap as every stdio server is, whose tools try to read a
provider key set in the host's environment (directly and through ``/proc``), the host project's
``.env``, another item's workdir, and a TCP port listening on 127.0.0.1. Each attempt is
blocked, and the test asserts what the tool returned: the denial. A second run gives the same
server ``env:`` and ``network: true``: the key is then visible (by its digest: records redact
the value) and the port reachable, so the battery can fail.

Real subprocesses under bubblewrap (which `make test` installs): ``slow``.
"""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Bench, Rule
from mcp_tools import server

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


@app.tool()
def hunt(name: str) -> str:
    """The digests of NAME=... in every /proc/*/environ this process can read."""
    found, read = set(), 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as file:
                environ = file.read()
        except OSError:
            continue
        read += 1
        for pair in environ.split(b"\\0"):
            if pair.startswith(name.encode() + b"="):
                found.add(_digest(pair.split(b"=", 1)[1].decode()))
    return f"read {read}: " + (", ".join(sorted(found)) or "none")
''',
    "peek",
    "dial",
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
