"""The escape battery for environment code (tests/test_agent_escape.py holds run_command's):
an environment module whose tools try to read a provider key set in the host's environment
(directly and through every ``/proc/*/environ``), the ``.env`` beside the module, another
item's workdir, to write outside the workdir and to reach a TCP port listening on 127.0.0.1.

The key is out of reach in every mode (the runner gets the clean environment; unconfined as
root it drops its capabilities, as a command does). The files and the network are bubblewrap's
to guard: those attempts run where it works, and each must fail.
"""

from __future__ import annotations

import asyncio
import socket
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_llmbench.agent.bwrap import bwrap_path
from pytest_llmbench.agent.environment import open_environment, seed_state
from pytest_llmbench.agent.limits import SandboxLimits
from pytest_llmbench.agent.sandbox import Sandbox
from pytest_llmbench.agent.tools import Toolbox
from pytest_llmbench.spec import Environment
from pytest_llmbench.spec.expand_environment import read_module_tools

PLANTED = "sk-PLANTED-env-" + "0f1e2d3c4b5a69788796a5b4c3d2e1f0"

ESCAPE = '''
"""Escape attempts."""
import os
import socket


def env(state: dict, name: str) -> str:
    """A variable's value, or (unset)."""
    return os.environ.get(name, "(unset)")


def peek(state: dict, path: str) -> str:
    """A file's text."""
    with open(path) as file:
        return file.read()


def scribble(state: dict, path: str) -> str:
    """Write a file."""
    with open(path, "w") as file:
        file.write("x")
    return "written"


def dial(state: dict, port: int) -> str:
    """Connect to 127.0.0.1:port."""
    socket.create_connection(("127.0.0.1", port), timeout=2).close()
    return "connected"
'''


@dataclass(frozen=True)
class Host:
    environment: Environment
    workdir: Path
    other_workdir: Path
    dotenv: Path
    port: int


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Host]:
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED)
    project = tmp_path / "project"
    project.mkdir()
    module = project / "escape_env.py"
    module.write_text(textwrap.dedent(ESCAPE))
    dotenv = project / ".env"
    dotenv.write_text(f"OPENAI_API_KEY={PLANTED}\n")
    workdir, other = tmp_path / "work", tmp_path / "other-item"
    workdir.mkdir()
    other.mkdir()
    (other / "notes.txt").write_text("another item's notes")
    tools = read_module_tools(module)  # the tools as collection reads them
    environment = Environment(module, None, "state.json", None, tuple(t.name for t in tools))
    seed_state(environment, {}, workdir)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(0.05)
        yield Host(environment, workdir, other, dotenv, listener.getsockname()[1])
        try:
            connection, _ = listener.accept()
        except TimeoutError:
            return
        connection.close()
        pytest.fail("environment code reached a socket of the host")


def _call(host: Host, mode: str, tool: str, **arguments: object) -> str:
    sandbox = Sandbox(host.workdir, SandboxLimits(), mode)
    inner = Toolbox(host.workdir, [], sandbox, base_dir=host.workdir)

    async def run() -> str:
        async with open_environment(host.environment, host.workdir, sandbox, inner) as toolbox:
            return await toolbox.acall(tool, arguments)

    return asyncio.run(run())


@pytest.mark.parametrize("mode", ["off", "required"])
def test_environment_code_never_sees_the_hosts_variables(host: Host, mode: str) -> None:
    if mode == "required" and bwrap_path() is None:
        pytest.skip("bubblewrap does not work here")
    assert _call(host, mode, "env", name="OPENAI_API_KEY") == "(unset)"
    assert _call(host, mode, "env", name="HOME") == str(host.workdir)  # the clean environment
    # Reading pytest's /proc/<pid>/environ is tested where the key is really in it (set before
    # the parent process started): tests/test_agent_capabilities.py.


needs_bwrap = pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap does not work here")


@needs_bwrap
def test_environment_code_cannot_read_outside_its_view(host: Host) -> None:
    dotenv = _call(host, "required", "peek", path=str(host.dotenv))
    assert dotenv == ""  # covered by an empty file
    other = _call(host, "required", "peek", path=str(host.other_workdir / "notes.txt"))
    assert other.startswith("error: FileNotFoundError")
    module = _call(host, "required", "peek", path=str(host.environment.module))
    assert "def scribble" in module  # its own folder is shown, read-only


@needs_bwrap
def test_environment_code_cannot_write_outside_the_workdir(host: Host) -> None:
    module_dir = host.dotenv.parent
    for target in (module_dir / "planted.py", host.other_workdir / "notes.txt", Path("/usr/x")):
        said = _call(host, "required", "scribble", path=str(target))
        assert said.startswith("error: "), (target, said)
    assert not (module_dir / "planted.py").exists()
    assert (host.other_workdir / "notes.txt").read_text() == "another item's notes"
    assert _call(host, "required", "scribble", path="inside.txt") == "written"
    assert (host.workdir / "inside.txt").read_text() == "x"


@needs_bwrap
def test_environment_code_cannot_reach_the_network(host: Host) -> None:
    said = _call(host, "required", "dial", port=host.port)
    assert said.startswith("error: ") and "Error" in said, said
    # The control: the same tool, unconfined, reaches a port of its own, so the refusal above
    # is bubblewrap's and not a broken probe.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        assert _call(host, "off", "dial", port=listener.getsockname()[1]) == "connected"
