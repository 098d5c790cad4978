"""MCP servers installed the usual ways start in the sandbox (agent/programs.py): a server in a
virtualenv of its own (the real ``mcp-server-time`` from PyPI among them), one behind a
``uv tool`` link in ``~/.local/bin`` (by its path and by its name on PATH), one in the npx
cache's layout run by Node, and a command the sandbox cannot show, which is the item's error
naming it and what the sandbox shows. What a mounted install prefix still keeps out is in the
escape battery (tests/test_agent_mcp_escape.py).

The virtualenvs are made here (``python -m venv``; their dependencies come from this project's
virtualenv, tests/mcp_tools.py ``virtualenv``), outside anything the sandbox shows otherwise
(pytest's temporary folder is under the sandbox's private /tmp). Real servers under bubblewrap,
scripted by the fake model server: ``slow``.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import Bench, Rule
from mcp_tools import NODE_SERVER, server, virtualenv

pytestmark = pytest.mark.slow

#: A server module that lives only in its virtualenv: where it runs from tells what was shown.
PROBE = server(
    '''
import os
import sys

from mcp.server.mcpserver import MCPServer

app = MCPServer("probe")


@app.tool()
def where_from() -> str:
    """The prefix of the Python running the server, and this module's file in it."""
    return f"{sys.prefix} {os.path.relpath(__file__, sys.prefix)}"


def main() -> None:
    app.run()
''',
).removesuffix("\n\napp.run()\n")

SITE = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"

AGENT = """
kind: agent
mcp_servers:
{servers}
tools: [{tools}]
max_turns: 3
cases:
  - id: one
    prompt: Use the servers.
    assert:
      - {{type: icontains, value: done}}
"""


def _agent(bench: Bench, servers: dict[str, str], calls: dict[str, dict[str, str]]) -> None:
    """An agent file with stdio ``servers`` (name: command); in its first turn the model calls
    each tool of ``calls`` (``SERVER__TOOL``: its arguments), then answers."""
    lines = "\n".join(f"  {name}: {{command: '{command}'}}" for name, command in servers.items())
    tools = ", ".join(f'"mcp:{name}/*"' for name in servers)
    bench.eval_file("installed", AGENT.format(servers=lines, tools=tools))
    asked = [{"name": name, "arguments": arguments} for name, arguments in calls.items()]
    bench.server.add_rule(Rule(tool_calls=asked, times=1))
    bench.server.add_rule(Rule(reply="It is done."))


def _results(bench: Bench) -> dict[str, str]:
    """What each tool call of the one item returned, by the tool's recorded name."""
    (record,) = bench.records()
    assert record["outcome"] == "passed", record["error"]
    return {s["name"]: s["result"] for s in record["timeline"] if s["kind"] == "tool"}


def test_a_server_in_a_virtualenv_of_its_own_starts_by_its_absolute_path(
    bench: Bench, tmp_path: Path
) -> None:
    venv = tmp_path / "opt" / "venvs" / "mcp"
    scripts = {"llmbench-probe": "llmbench_probe", "mcp-server-time": "mcp_server_time"}
    bin_folder = virtualenv(venv, {"llmbench_probe": PROBE}, scripts)
    servers = {"probe": bin_folder / "llmbench-probe", "time": bin_folder / "mcp-server-time"}
    calls = {"probe__where_from": {}, "time__get_current_time": {"timezone": "UTC"}}
    _agent(bench, {name: str(path) for name, path in servers.items()}, calls)
    bench.run_subprocess("--models=fake").assert_outcomes(passed=1)
    said = _results(bench)
    assert said["mcp:probe/where_from"] == f"{venv} {SITE}/llmbench_probe.py"
    assert "+00:00" in said["mcp:time/get_current_time"]  # the PyPI server, from the venv's bin


def test_a_uv_tool_link_in_local_bin_starts_by_its_path_and_by_its_name(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`uv tool install` (and pipx) put the tool in a venv under ~/.local/share and a symlink
    in ~/.local/bin: by that link's path, and by its name on this process's PATH."""
    home = Path(os.environ["HOME"])  # pytester's: the project folder
    tool = home / ".local/share/uv/tools/llmbench-probe"
    virtualenv(tool, {"llmbench_probe": PROBE}, {"llmbench-probe": "llmbench_probe"})
    link = home / ".local/bin/llmbench-probe"
    link.parent.mkdir(parents=True)
    link.symlink_to(tool / "bin/llmbench-probe")
    monkeypatch.setenv("PATH", f"{link.parent}:{os.environ['PATH']}")
    _agent(
        bench,
        {"bypath": str(link), "byname": "llmbench-probe"},
        {"bypath__where_from": {}, "byname__where_from": {}},
    )
    bench.run_subprocess("--models=fake").assert_outcomes(passed=1)
    said = _results(bench)
    expected = f"{tool} {SITE}/llmbench_probe.py"
    assert said == {"mcp:bypath/where_from": expected, "mcp:byname/where_from": expected}


@pytest.mark.skipif(shutil.which("node") is None, reason="no Node on this machine")
def test_a_node_server_in_the_npx_cache_starts_with_its_node_modules(bench: Bench) -> None:
    """The npx cache's layout (node_modules/.bin/NAME linking into the package); the script
    runs `#!/usr/bin/env node`. Its node_modules is shown, the rest of the cache is not. Node
    reserves over 1 GB of address space: a server's limit is a multiple of a command's."""
    home = Path(os.environ["HOME"])
    cache = home / ".npm/_npx/0123abcd"
    script = cache / "node_modules/llmbench-node-probe/index.js"
    script.parent.mkdir(parents=True)
    script.write_text(NODE_SERVER)
    script.chmod(0o755)
    (cache / "node_modules/.bin").mkdir()
    entry = cache / "node_modules/.bin/llmbench-node-probe"
    entry.symlink_to("../llmbench-node-probe/index.js")
    (cache / "package-lock.json").write_text("{}")
    npmrc = home / ".npmrc"
    npmrc.write_text("//registry.npmjs.org/:_authToken=npm_secret\n")
    _agent(bench, {"node": str(entry)}, {"node__peek": {"path": str(npmrc)}, "node__whereami": {}})
    bench.run_subprocess("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    steps = [s for s in record["timeline"] if s["kind"] == "tool"]
    assert [s["result"] for s in steps] == [
        "cannot read: ENOENT",  # the home's .npmrc: not shown
        f"{os.path.realpath(str(shutil.which('node')))} {script} 512 MB",
    ]


def test_a_command_the_sandbox_cannot_show_is_an_error_saying_what_it_shows(
    bench: Bench, tmp_path: Path
) -> None:
    missing = tmp_path / "venvs" / "gone" / "bin" / "server"
    _agent(bench, {"gone": str(missing)}, {"gone__anything": {}})
    result = bench.run_subprocess("--models=fake")
    result.assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "tool" and record["score"] is None
    error = record["error"]
    assert error.startswith(
        f"MCP server 'gone': the sandbox cannot show its command '{missing}': "
        f"{missing} does not exist on this machine. The sandbox shows /usr, "
    )
    assert str(Path(sys.prefix).resolve()) in error  # the Python's folders
    assert f", the workdir {record['workdir']} (its HOME) and a private /tmp. " in error
    assert "`command` may be python3 (the Python running pytest), a name on PATH" in error
    assert bench.server.chat_requests() == []  # no model call for an item that cannot run


#: A server that reads its configuration from the home directory at start, as some do.
CONFIGURED = """
import os
import sys


def main() -> None:
    path = os.path.expanduser("~/.config/llmbench-probe.toml")
    try:
        open(path).close()
    except OSError as exc:
        sys.exit(f"cannot read {path}: {exc.strerror}")
"""


def test_a_server_that_exits_at_start_is_told_what_the_sandbox_shows(
    bench: Bench, tmp_path: Path
) -> None:
    """A file it needs outside its install prefix is not there: the error says what is."""
    venv = tmp_path / "venvs" / "configured"
    bin_folder = virtualenv(venv, {"configured": CONFIGURED}, {"configured": "configured"})
    config = Path(os.environ["HOME"]) / ".config/llmbench-probe.toml"
    config.parent.mkdir()
    config.write_text("token = 'x'\n")  # there on the host, not in the sandbox
    _agent(bench, {"configured": str(bin_folder / "configured")}, {"configured__x": {}})
    bench.run_subprocess("--models=fake").assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "tool"
    error = record["error"]
    assert error.startswith("MCP server 'configured': initialize failed: ")
    # HOME in the sandbox is the workdir; the host's is not there
    assert "No such file or directory" in error
    assert "(the sandbox shows /usr, " in error
    assert f", {venv}, the workdir {record['workdir']} (its HOME) and a private /tmp)" in error
