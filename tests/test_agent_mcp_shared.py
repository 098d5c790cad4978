"""``shared: true`` MCP servers (agent/mcp_pool.py): one start per process (per xdist worker),
its session reused by the items there, its own scratch folder, closed at the end of the run,
and not restarted once it died.

The server is written here and run with ``python3 -c`` (a shared server has no item workdir to
copy a script into); each start leaves a ``started-*`` file in the folder it runs in, which the
test counts. Real subprocesses under bubblewrap, real xdist workers: ``slow``.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from conftest import Bench, Rule
from mcp_tools import server

pytestmark = pytest.mark.slow

SERVER = server(
    """
import os, time, uuid
open(f"started-{uuid.uuid4().hex}", "w").close()  # in the folder it runs in
from mcp.server.mcpserver import MCPServer
app = MCPServer("shared")
""",
    "where",
    "peek",
    "die",
    "fill",
    "nap",
)


def _agent(cases: list[str], *, marker: str = "") -> str:
    args = json.dumps(["-c", SERVER, *([marker] if marker else [])])
    listed = "\n".join(f"  - {{id: {case}, prompt: 'Use the probe ({case}).'}}" for case in cases)
    return f"""
kind: agent
mcp_servers:
  probe: {{command: python3, args: {args}, shared: true, tool_timeout_s: 25}}
tools: ["mcp:probe/*"]
max_turns: 3
assert:
  - {{type: icontains, value: done}}
cases:
{listed}
"""


def _call_then_answer(bench: Bench, name: str, arguments: dict[str, object]) -> None:
    """Every item: turn 1 calls ``name``, turn 2 (after a tool result) answers."""
    bench.server.add_rule(Rule(match_last="Use the probe", tool_calls=[
        {"name": name, "arguments": arguments}]))  # fmt: skip
    bench.server.add_rule(Rule(reply="It is done."))


def _starts(basetemp: Path) -> dict[str, int]:
    """Server starts per process: ``main``, or the xdist worker's folder (``popen-gwN``)."""
    found: dict[str, int] = {}
    for started in basetemp.rglob("started-*"):
        first = started.relative_to(basetemp).parts[0]
        worker = first if first.startswith("popen-") else "main"
        found[worker] = found.get(worker, 0) + 1
    return found


def _results(bench: Bench) -> list[str]:
    steps = [[s for s in record["timeline"] if s["kind"] == "tool"] for record in bench.records()]
    return [str(step["result"]) for (step,) in steps]


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_shared_server_starts_once_per_process(bench: Bench, workers: str) -> None:
    cases = [f"item-{n}" for n in range(4)]
    bench.eval_file("probe", _agent(cases))
    _call_then_answer(bench, "probe__where", {})
    basetemp = bench.pytester.path / "basetemp"
    result = bench.run_subprocess("--models=fake", "-n", workers, f"--basetemp={basetemp}")
    result.assert_outcomes(passed=4)
    records = bench.records()
    processes = {str(record["worker"]) for record in records}
    assert len(processes) == (2 if workers == "2" else 1)
    # one start in each process that ran items, whatever the number of items there
    assert _starts(basetemp) == dict.fromkeys(_starts(basetemp), 1)
    assert len(_starts(basetemp)) == len(processes)
    # it runs in a scratch folder of its own, not in an item's workdir
    folders = set(_results(bench))
    assert len(folders) == len(processes)
    for folder in folders:
        assert Path(folder).name.startswith("mcp_probe")
        assert all(not record["workdir"].startswith(folder) for record in records)


def test_a_shared_server_does_not_see_the_items_workdirs(bench: Bench) -> None:
    bench.eval_file(
        "probe", _agent(["one"]).replace("(one).'}", "(one).', files: {secret.txt: s3cr3t}}")
    )
    basetemp = bench.pytester.path / "basetemp"
    # the item's own workdir, under the same basetemp: known before the run (pytest's naming)
    planted = basetemp / "one_fake_r0_0" / "workdir" / "secret.txt"
    _call_then_answer(bench, "probe__peek", {"path": str(planted)})
    bench.run_subprocess("--models=fake", "-n", "0", f"--basetemp={basetemp}")
    (record,) = bench.records()
    assert Path(record["workdir"]) / "secret.txt" == planted  # the path tried is the real one
    assert planted.read_text() == "s3cr3t"
    assert _results(bench) == ["cannot read: FileNotFoundError"]


#: Counts, at the end of the session, the processes that still hold the marker.
COUNT_AT_END = """
from pathlib import Path

import pytest

MARKER = %r


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    alive = 0
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\\0", b" ").decode()
        except OSError:
            continue
        alive += entry.name.isdigit() and MARKER in cmdline
    Path("alive-at-end.txt").write_text(str(alive))
"""


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_shared_server_is_stopped_when_the_run_ends(bench: Bench, workers: str) -> None:
    """The plugin's unconfigure stops the shared server; the conftest's, run last, finds no
    process left that holds the marker."""
    marker = f"llmbench-shared-{uuid.uuid4().hex}"
    bench.pytester.makeconftest(COUNT_AT_END % marker)
    bench.eval_file("probe", _agent(["one", "two", "three", "four"], marker=marker))
    _call_then_answer(bench, "probe__where", {})
    bench.run_subprocess("--models=fake", "-n", workers).assert_outcomes(passed=4)
    assert (bench.pytester.path / "alive-at-end.txt").read_text() == "0"


def test_a_shared_server_that_died_is_not_restarted(bench: Bench) -> None:
    """Item one kills the server; item two's call (a long nap, cut by the death, or made
    after it) is an error of kind tool too, and the server started once."""
    bench.eval_file("probe", _agent(["one", "two"]))
    bench.server.add_rule(Rule(match_last="(one)", tool_calls=[
        {"name": "probe__die", "arguments": {}}]))  # fmt: skip
    bench.server.add_rule(Rule(match_last="(two)", tool_calls=[
        {"name": "probe__nap", "arguments": {"seconds": 20}}]))  # fmt: skip
    bench.server.add_rule(Rule(reply="It is done."))
    basetemp = bench.pytester.path / "basetemp"
    result = bench.run_subprocess("--models=fake", "-n", "0", f"--basetemp={basetemp}")
    result.assert_outcomes(errors=2)
    one, two = bench.records()
    assert one["error_kind"] == two["error_kind"] == "tool"
    assert "MCP server 'probe': the call of die failed" in one["error"]
    assert "MCP server 'probe'" in two["error"] and "nap" in two["error"]
    assert _starts(basetemp) == {"main": 1}


def test_a_shared_server_filling_its_scratch_folder_is_stopped(bench: Bench) -> None:
    """Its scratch folder is watched against the sandbox's max_entries (20,000): the server
    is stopped, the call running is the item's error saying why."""
    bench.eval_file("probe", _agent(["one"]))
    _call_then_answer(bench, "probe__fill", {"entries": 25000})
    bench.run_subprocess("--models=fake", "-n", "0").assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "tool"
    assert (
        "MCP server 'probe': its scratch folder holds more than 20000 entries, the sandbox's "
        "limit; it was stopped" in record["error"]
    )


def test_a_shared_server_that_cannot_start_errors_each_item(bench: Bench) -> None:
    text = _agent(["one", "two"]).replace('"-c", ', '"-c", "import sys; sys.exit(4)", "-x", ')
    bench.eval_file("probe", text)
    bench.server.add_rule(Rule(reply="never asked"))
    bench.run_subprocess("--models=fake", "-n", "0").assert_outcomes(errors=2)
    for record in bench.records():
        assert record["error_kind"] == "tool"
        assert "MCP server 'probe'" in record["error"] and "initialize failed" in record["error"]
    assert bench.server.chat_requests() == []


def test_the_pool_bounds_the_items_running_their_own_servers() -> None:
    """McpPool.slot: with a bound of 2, a third item waits until one of the two ends."""
    import asyncio

    from pytest_llmbench.agent.mcp_pool import McpPool

    pool = McpPool(lambda name: Path("/nonexistent"), max_running=2)
    running, peak = 0, 0

    async def item() -> None:
        nonlocal running, peak
        async with pool.slot():
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0)  # the others get their turn to try
            await asyncio.sleep(0)
            running -= 1

    async def five() -> None:
        await asyncio.gather(*(item() for _ in range(5)))

    asyncio.run(five())
    assert peak == 2
