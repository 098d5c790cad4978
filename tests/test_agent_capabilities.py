"""Long-lived processes started unconfined (``sandbox: off``) cannot read this process's
environment through ``/proc``, as root too (agent/capabilities.py): a child started through
:func:`~pytest_llmbench.agent.mcp_launch.server_process`, an environment's runner and a stdio
MCP server try to read the provider key of the process that started them.

The key must be in that process's environment from its start (``/proc/PID/environ`` shows
the environment a process was exec'd with, not what it set later), so each attempt runs in a
Python started with the key. A control shows the probe works: a child started plainly reads
it, and, as root, so does one started after the parent made itself non-dumpable (root's
CAP_SYS_PTRACE passes that guard; only dropping the capabilities closes it).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import Bench, Rule
from mcp_tools import server

import pytest_llmbench

KEY = "sk-capabilities-" + "5f4e3d2c1b0a99887766554433221100"
DIGEST = hashlib.sha256(KEY.encode()).hexdigest()
ROOT = os.geteuid() == 0

#: Reads the environment of the process whose pid is its first argument.
READER = """
import sys
try:
    with open(f"/proc/{sys.argv[1]}/environ", "rb") as file:
        print("found" if sys.argv[2].encode() in file.read() else "absent")
except OSError as exc:
    print("denied", type(exc).__name__)
"""

#: The host: started with the key, it starts the reader as ``how`` says and prints its answer.
HOST = """
import asyncio, os, subprocess, sys
from pathlib import Path

from pytest_llmbench.agent.limits import SandboxLimits, protect_this_process
from pytest_llmbench.agent.mcp_launch import server_process
from pytest_llmbench.agent.sandbox import Sandbox

how, reader, workdir = sys.argv[1], sys.argv[2], Path(sys.argv[3])
key = os.environ.pop("OPENAI_API_KEY")  # gone from os.environ, still in /proc/PID/environ
argv = [sys.executable, "-c", reader, str(os.getpid()), key]
sandbox = Sandbox(workdir, SandboxLimits(), "off")
if how == "server_process":
    argv, env = server_process(sandbox, argv, {}, cwd=workdir)
elif how == "non-dumpable":
    protect_this_process()
    env = sandbox.environment()
else:
    env = sandbox.environment()
said = subprocess.run(argv, env=env, cwd=workdir, capture_output=True, text=True, timeout=60)
print(said.stdout.strip() or said.stderr.strip())
"""

#: The host for an environment: its runner's tool reads every /proc/*/environ for the key.
ENVIRONMENT_HOST = """
import asyncio, os, sys
from pathlib import Path

from pytest_llmbench.agent.environment import open_environment, seed_state
from pytest_llmbench.agent.limits import SandboxLimits
from pytest_llmbench.agent.sandbox import Sandbox
from pytest_llmbench.agent.tools import Toolbox
from pytest_llmbench.spec import Environment

module, workdir = Path(sys.argv[1]), Path(sys.argv[2])
key = os.environ.pop("OPENAI_API_KEY")
environment = Environment(module, None, "state.json", None, ("hunt",))
seed_state(environment, {}, workdir)
sandbox = Sandbox(workdir, SandboxLimits(), "off")
inner = Toolbox(workdir, [], sandbox, base_dir=workdir)


async def run() -> str:
    async with open_environment(environment, workdir, sandbox, inner) as toolbox:
        return await toolbox.acall("hunt", {"needle": key, "pid": os.getpid()})


print(asyncio.run(run()))
"""

HUNT = '''
"""Environment code that hunts for a key."""


def hunt(state: dict, needle: str, pid: int) -> str:
    """Whether the environment of process pid holds the needle."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            return "found" if needle.encode() in file.read() else "absent"
    except OSError as exc:
        return f"denied {type(exc).__name__}"
'''


def _host(script: str, *args: str) -> str:
    """What ``script`` prints, run by a Python started with the key in its environment and
    this checkout's package first on its path."""
    checkout = Path(pytest_llmbench.__file__).resolve().parent.parent
    env = {**os.environ, "OPENAI_API_KEY": KEY, "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_child_started_plainly_reads_the_key_so_the_probe_works(tmp_path: Path) -> None:
    assert _host(HOST, "plain", READER, str(tmp_path)) == "found"


@pytest.mark.skipif(not ROOT, reason="only root passes the non-dumpable guard")
def test_as_root_a_non_dumpable_parent_alone_does_not_keep_the_key(tmp_path: Path) -> None:
    assert _host(HOST, "non-dumpable", READER, str(tmp_path)) == "found"


def test_a_process_started_unconfined_through_server_process_cannot_read_the_key(
    tmp_path: Path,
) -> None:
    assert _host(HOST, "server_process", READER, str(tmp_path)) == "denied PermissionError"


def test_an_environment_runner_started_unconfined_cannot_read_the_key(tmp_path: Path) -> None:
    module = tmp_path / "hunt_env.py"
    module.write_text(textwrap.dedent(HUNT))
    workdir = tmp_path / "work"
    workdir.mkdir()
    assert _host(ENVIRONMENT_HOST, str(module), str(workdir)) == "denied PermissionError"


MCP_SERVER = server(
    """
from mcp.server.mcpserver import MCPServer

app = MCPServer("hunter")

""",
    "hunt",
)

MCP_AGENT = """
sandbox: off
kind: agent
include_dirs: [servers]
mcp_servers:
  hunter: {command: python3, args: [hunter.py], tool_timeout_s: 20}
tools: ["mcp:hunter/*"]
max_turns: 3
assert:
  - {type: icontains, value: done}
cases:
  - {id: proc, prompt: Hunt.}
"""


@pytest.mark.slow
def test_a_stdio_server_run_unconfined_cannot_read_the_key_of_pytest(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest, run in a process of its own, is started with the key; the server, with
    ``sandbox: off``, reads every environment it can and finds it in none."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    servers = bench.pytester.path / "servers"
    servers.mkdir()
    (servers / "hunter.py").write_text(MCP_SERVER)
    bench.eval_file("hunt", MCP_AGENT)
    call = {"name": "hunter__hunt", "arguments": {"name": "OPENAI_API_KEY"}}
    bench.server.add_rule(Rule(tool_calls=[call], times=1))
    bench.server.add_rule(Rule(reply="It is done."))
    bench.run_subprocess("--models=fake", "-n", "0").assert_outcomes(passed=1)
    (record,) = bench.records()
    (said,) = [step["result"] for step in record["timeline"] if step["kind"] == "tool"]
    assert said.startswith("read ")  # it read its own, at least
    assert DIGEST not in said


class _FailingPrctl:
    """A ``prctl`` that fails as the kernel would: EINVAL past capability 40, else ``fails``."""

    def __init__(self, fails: int) -> None:
        self.fails = fails

    def prctl(self, option: int, value: int, *_: int) -> int:
        import ctypes
        import errno

        if option == 24 and value > 40:  # PR_CAPBSET_DROP of a number the kernel lacks
            ctypes.set_errno(errno.EINVAL)
            return -1
        if self.fails:
            ctypes.set_errno(self.fails)
            return -1
        return 0


def test_a_drop_that_fails_starts_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unknown capability number is skipped; any other refusal stops the start (the
    program would keep the capabilities)."""
    import errno

    from pytest_llmbench.agent import capabilities

    monkeypatch.setattr(capabilities, "_last_capability", lambda: 63)
    monkeypatch.setattr(capabilities, "libc", lambda: _FailingPrctl(0))
    capabilities.dropper()()  # numbers 41-63 refused as unknown: fine
    monkeypatch.setattr(capabilities, "libc", lambda: _FailingPrctl(errno.EPERM))
    with pytest.raises(OSError, match="cannot drop capability 0"):
        capabilities.dropper()()
    assert capabilities.main(["/bin/true"]) == 126  # and the script execs nothing
