"""MCP over streamable HTTP (agent/mcp.py) against a real server on 127.0.0.1: an SDK server
(``MCPServer``, the SDK's FastMCP) run by uvicorn in a subprocess, behind a check of the
``Authorization`` header that ``headers:`` sends with a ``${VAR}`` read from the environment.

The token must reach the server and nothing the run writes: the results folder (results.jsonl,
run.json, report.html, CSVs), the response cache and pytest's output are searched for it.
Real subprocesses and sockets: ``slow``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Bench, Rule

pytestmark = pytest.mark.slow

TOKEN = "docs-token-7f3a9c1e5b2d4680"

#: The server: its port as argv[1], the token it wants in DOCS_TOKEN (its own environment).
SERVER = '''
import os
import sys

import uvicorn
from mcp.server.mcpserver import MCPServer

app = MCPServer("docs")
SEEN = {"authorization": ""}
SESSIONS = set()


@app.tool()
def search(query: str) -> str:
    """Search the docs."""
    return f"found: {query}"


@app.tool()
def sessions() -> str:
    """How many MCP sessions have called so far."""
    return f"{len(SESSIONS)} sessions"


@app.tool()
def echo_auth() -> str:
    """The Authorization header of the request (a server that leaks what it was sent)."""
    return SEEN["authorization"]


inner = app.streamable_http_app()
WANTED = f"Bearer {os.environ['DOCS_TOKEN']}".encode()


async def guarded(scope, receive, send):
    if scope["type"] == "http":
        sent = dict(scope["headers"]).get(b"authorization", b"")
        if sent != WANTED:
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        SEEN["authorization"] = sent.decode()
        session = dict(scope["headers"]).get(b"mcp-session-id")
        if session:
            SESSIONS.add(session)
    await inner(scope, receive, send)


uvicorn.run(guarded, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
'''

AGENT = """
kind: agent
mcp_servers:
  docs: {{url: "http://127.0.0.1:{port}/mcp", {headers}startup_timeout_s: 10}}
tools: ["mcp:docs/*"]
max_turns: 3
cases:
  - id: one
    prompt: Search the docs.
    assert:
      - {{type: tool-called, value: "mcp:docs/{tool}"}}
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def docs_server(tmp_path: Path) -> Iterator[int]:
    """The HTTP MCP server on a free port of 127.0.0.1, until the test ends."""
    script = tmp_path / "docs_server.py"
    script.write_text(SERVER)
    port = _free_port()
    env = {**os.environ, "DOCS_TOKEN": TOKEN}
    proc = subprocess.Popen([sys.executable, str(script), str(port)], env=env)
    try:
        for _ in range(200):  # until it listens (or it died)
            if proc.poll() is not None:
                pytest.fail(f"the docs server exited with {proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("the docs server did not listen")
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def _run(bench: Bench, port: int, tool: str, headers: str) -> pytest.RunResult:
    bench.eval_file("docs", AGENT.format(port=port, tool=tool, headers=headers))
    return bench.run_subprocess("--models=fake", "-n", "0", "--cache=use")


def _leaks(root: Path) -> list[str]:
    """The files under ``root`` that hold the token."""
    found = []
    for path in root.rglob("*"):
        if path.is_file() and TOKEN.encode() in path.read_bytes():
            found.append(str(path.relative_to(root)))
    return found


AUTH = "headers: {Authorization: 'Bearer ${DOCS_TOKEN}'}, "


def test_an_http_server_gets_the_header_and_the_token_is_written_nowhere(
    bench: Bench, docs_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCS_TOKEN", TOKEN)
    bench.server.add_rule(Rule(match_last="Search the docs", tool_calls=[
        {"name": "docs__echo_auth", "arguments": {}}]))  # fmt: skip
    bench.server.add_rule(Rule(reply="It is done."))
    result = _run(bench, docs_server, "echo_auth", AUTH)
    result.assert_outcomes(passed=1)
    (record,) = bench.records()
    (step,) = [s for s in record["timeline"] if s["kind"] == "tool"]
    # the server got the token (it echoes the header), the record shows it redacted
    assert step["result"].startswith("Bearer ") and "REDACTED" in step["result"]
    assert (bench.out("run.json")).exists() and (bench.out("report.html")).exists()
    assert _leaks(bench.pytester.path) == []  # results, report, cache, logs: anywhere
    assert TOKEN not in result.stdout.str() + result.stderr.str()
    # the model was sent the redacted result, never the token
    assert all(TOKEN not in str(r.body) for r in bench.server.chat_requests())


def test_an_http_server_that_rejects_the_request_is_an_item_error_naming_the_status(
    bench: Bench, docs_server: int
) -> None:
    bench.server.add_rule(Rule(reply="never asked"))
    result = _run(bench, docs_server, "search", "")
    result.assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "tool" and record["score"] is None
    assert (
        "MCP server 'docs'" in record["error"]
        and "the server answered HTTP 401 Unauthorized" in record["error"]
    )
    assert bench.server.chat_requests() == []


def test_a_wrong_token_is_rejected_and_not_written(
    bench: Bench, docs_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "wrong-token-0a1b2c3d4e5f"
    monkeypatch.setenv("DOCS_TOKEN", wrong)
    bench.server.add_rule(Rule(reply="never asked"))
    result = _run(bench, docs_server, "search", AUTH)
    result.assert_outcomes(errors=1)
    (record,) = bench.records()
    assert (
        record["error_kind"] == "tool"
        and "the server answered HTTP 401 Unauthorized" in record["error"]
    )
    everything = "".join(
        p.read_text(errors="replace") for p in bench.pytester.path.rglob("*") if p.is_file()
    )
    assert wrong not in everything + result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize(("shared", "most"), [("shared: true, ", "1 sessions"),
                                              ("", "2 sessions")])  # fmt: skip
def test_a_shared_http_server_has_one_session_for_the_items(
    bench: Bench, docs_server: int, monkeypatch: pytest.MonkeyPatch, shared: str, most: str
) -> None:
    monkeypatch.setenv("DOCS_TOKEN", TOKEN)
    text = AGENT.format(port=docs_server, tool="sessions", headers=AUTH + shared)
    bench.eval_file(
        "docs",
        text.replace("cases:", "assert: [{type: tool-called, value: 'mcp:docs/sessions'}]\ncases:")
        + "  - {id: two, prompt: Search the docs again.}\n",
    )
    bench.server.add_rule(Rule(match_last="Search the docs", tool_calls=[
        {"name": "docs__sessions", "arguments": {}}]))  # fmt: skip
    bench.server.add_rule(Rule(reply="It is done."))
    bench.run_subprocess("--models=fake", "-n", "0").assert_outcomes(passed=2)
    said = sorted(
        next(s["result"] for s in record["timeline"] if s["kind"] == "tool")
        for record in bench.records()
    )
    assert said[-1] == most
