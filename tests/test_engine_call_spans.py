"""The call spans of an item, in-process (engine/call_spans.py, engine/model_spans.py and the
agent's agent/tool_spans.py): every call through the pacer timed and kept for its item while
export is on, the ``traceparent`` its request carries, and nothing kept or sent while it is off.

No pytest session runs here: the pacer and the Answerer call the local fake server, as in
tests/test_engine_pacing_direct.py and tests/test_engine_answer.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from engine_support import (
    FAKE2,
    PLAIN,
    SHOUT,
    SIMULATED,
    SOLVER,
    answer_of,
    answerer,
    loaded,
    plan_of,
)
from fakeserver import FakeLLMServer, Rule
from test_engine_pacing_direct import NODE, ask, hide_secret, profile, run, settings

from pytest_llmbench.agent import Sandbox, SandboxLimits, use_span_notes
from pytest_llmbench.agent.tool_spans import CURRENT_PARENT_SPAN, span_notes
from pytest_llmbench.engine import call_spans
from pytest_llmbench.engine.call_spans import (
    CURRENT_NODEID,
    CallSpans,
    item_span_id,
    item_trace,
    trace_ids,
    traceparent,
)
from pytest_llmbench.engine.model_spans import span_kind
from pytest_llmbench.engine.pacing import CallPacer
from pytest_llmbench.engine.plan import GradedSpec
from pytest_llmbench.models.item_errors import ProviderError
from pytest_llmbench.models.providers.trace_header import OUTGOING_TRACEPARENT, with_traceparent

RUN_ID = "llmbench-1234-abcd"


@pytest.fixture
def spans() -> Iterator[CallSpans]:
    """Export on in this process for the test (its call spans kept), off again after."""
    kept = call_spans.enable(trace_ids(RUN_ID), content=False)
    try:
        yield kept
    finally:
        call_spans.disable()


def header_parent(headers: dict[str, str]) -> tuple[str, str]:
    """(trace id, span id) of a request's ``traceparent`` header."""
    version, trace_id, span_id, flags = headers["traceparent"].split("-")
    assert (version, flags) == ("00", "01")
    return trace_id, span_id


# -- the ids every process derives alike --------------------------------------------------------


def test_every_process_of_a_run_derives_the_same_ids() -> None:
    ids = trace_ids(RUN_ID)
    assert ids == trace_ids(RUN_ID)  # a worker derives what the controller does
    assert len(ids.trace_id) == 32 and len(ids.run_span_id) == 16
    assert trace_ids("llmbench-1234-other").trace_id != ids.trace_id
    item = item_span_id(ids.trace_id, NODE)
    assert item == item_span_id(ids.trace_id, NODE) != item_span_id(ids.trace_id, NODE + "x")
    assert traceparent(ids.trace_id, item) == f"00-{ids.trace_id}-{item}-01"


def test_export_off_keeps_nothing_and_sends_no_traceparent(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    assert call_spans.active() is None and span_notes() is None
    pacer = CallPacer(settings(tmp_path), n_workers=1)
    fake = profile(fake_llm)
    token = CURRENT_NODEID.set(NODE)
    try:
        run(lambda: pacer.paced(ask(pacer, fake)))
    finally:
        CURRENT_NODEID.reset(token)
    (request,) = fake_llm.chat_requests()
    assert "traceparent" not in request.headers
    assert item_trace(NODE, 1, 2) is None
    assert call_spans.item_traceparent(NODE) is None
    pacer.close()


def test_enable_and_disable_hand_the_agent_stage_its_notes() -> None:
    kept = call_spans.enable(trace_ids(RUN_ID), content=True)
    try:
        assert call_spans.active() is kept and span_notes() is kept
    finally:
        call_spans.disable()
    assert call_spans.active() is None and span_notes() is None


def test_the_outgoing_traceparent_is_a_header_only_while_set() -> None:
    assert with_traceparent(None) is None
    assert with_traceparent({"x-a": "1"}) == {"x-a": "1"}
    token = OUTGOING_TRACEPARENT.set("00-" + "a" * 32 + "-" + "b" * 16 + "-01")
    try:
        assert with_traceparent({"x-a": "1"}) == {
            "x-a": "1",
            "traceparent": OUTGOING_TRACEPARENT.get(),
        }
    finally:
        OUTGOING_TRACEPARENT.reset(token)
    assert call_spans.outgoing_traceparent() is OUTGOING_TRACEPARENT


# -- model calls through the pacer ---------------------------------------------------------------


def test_a_call_is_one_span_of_its_item_named_by_its_traceparent(
    tmp_path: Path, fake_llm: FakeLLMServer, spans: CallSpans
) -> None:
    fake_llm.add_rule(Rule(reply="Paris is the answer", cached_tokens=2))
    pacer = CallPacer(settings(tmp_path), n_workers=1)
    fake = profile(fake_llm)

    async def main() -> None:
        CURRENT_NODEID.set(NODE)
        await pacer.paced(ask(pacer, fake))

    run(main)
    (span,) = spans.take(NODE)
    assert spans.take(NODE) == []  # taken once
    (request,) = fake_llm.chat_requests()
    assert header_parent(request.headers) == (spans.ids.trace_id, span["span_id"])
    assert (span["kind"], span["name"], span["parent_id"], span["error"]) == (
        "chat",
        "openai/fake-model",
        None,
        None,
    )
    assert 0 < span["start_ns"] <= span["end_ns"]
    said = span["attributes"]
    assert said["model"] == "fake" and said["provider"] == "openai"
    assert said["input_tokens"] == 3 and said["output_tokens"] == 4
    assert (said["cached_input_tokens"], said["cache_hit"]) == (2, False)
    assert said["finish_reason"] == "stop" and said["cost_usd"] > 0
    assert "input" not in said and "output" not in said  # no content unless asked
    assert "role" not in said
    pacer.close()


def test_a_cache_hit_is_a_span_and_the_traceparent_is_not_in_the_key(
    tmp_path: Path, fake_llm: FakeLLMServer, spans: CallSpans
) -> None:
    pacer = CallPacer(settings(tmp_path, cache_mode="use"), n_workers=1)
    fake = profile(fake_llm)

    async def main() -> None:
        CURRENT_NODEID.set(NODE)
        for _ in range(2):  # two spans, two traceparents: one cache key all the same
            await pacer.paced(ask(pacer, fake))

    run(main)
    assert len(fake_llm.chat_requests()) == 1
    hit = pacer.cached(ask(pacer, fake, nodeid="other.eval.yaml::c[fake-r0]"))
    assert not isinstance(hit, type(ask(pacer, fake))) and hit.cached
    called, again = spans.take(NODE)
    assert [called["attributes"]["cache_hit"], again["attributes"]["cache_hit"]] == [False, True]
    assert "ttft_s" not in again["attributes"]  # a hit measured no model
    (read_here,) = spans.take("other.eval.yaml::c[fake-r0]")  # the calling thread's lookup
    assert read_here["attributes"]["cache_hit"] is True
    pacer.close()


def test_a_failed_call_is_a_span_with_its_error_and_kind(
    tmp_path: Path, fake_llm: FakeLLMServer, spans: CallSpans
) -> None:
    fake_llm.add_rule(Rule(status=401, error_message="bad key"))
    pacer = CallPacer(settings(tmp_path), n_workers=1)
    fake = profile(fake_llm)

    async def main() -> None:
        CURRENT_NODEID.set(NODE)
        await pacer.paced(ask(pacer, fake))

    with pytest.raises(ProviderError) as raised:
        run(main)
    (span,) = spans.take(NODE)
    assert span["error"] == raised.value.message
    assert span["attributes"]["error_kind"] == raised.value.kind
    assert "input_tokens" not in span["attributes"]
    pacer.close()


def test_content_is_kept_only_when_asked_and_always_redacted(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    fake_llm.add_rule(Rule(reply="the key is SECRET"))
    pacer = CallPacer(settings(tmp_path), n_workers=1, redact=hide_secret)
    fake = profile(fake_llm)
    spans = call_spans.enable(trace_ids(RUN_ID), content=True)

    async def main() -> None:
        CURRENT_NODEID.set(NODE)
        await pacer.paced(ask(pacer, fake, "my key is SECRET"))

    try:
        run(main)
    finally:
        call_spans.disable()
    (span,) = spans.take(NODE)
    said = span["attributes"]
    assert json.loads(said["input"]) == [{"role": "user", "content": "my key is [hidden]"}]
    assert said["output"] == "the key is [hidden]"
    pacer.close()


def test_each_role_is_its_kind_of_span(tmp_path: Path, fake_llm: FakeLLMServer) -> None:
    pacer = CallPacer(settings(tmp_path), n_workers=1)
    request = ask(pacer, profile(fake_llm))
    kinds = {
        role: span_kind(replace(request, role=role))
        for role in ("chat", "interpreter", "judge", "optimizer", "user_sim")
    }
    assert kinds == {
        "chat": "chat",
        "interpreter": "chat",
        "judge": "judge",
        "optimizer": "judge",
        "user_sim": "user_sim",
    }
    assert span_kind(replace(request, embed=True, role="judge")) == "embeddings"


def test_an_interpreters_call_says_its_role(
    tmp_path: Path, fake_llm: FakeLLMServer, spans: CallSpans
) -> None:
    pacer = CallPacer(settings(tmp_path), n_workers=1)
    request = replace(ask(pacer, profile(fake_llm)), role="interpreter")

    async def main() -> None:
        CURRENT_NODEID.set(NODE)
        await pacer.paced(request)

    run(main)
    (span,) = spans.take(NODE)
    assert (span["kind"], span["attributes"]["role"]) == ("chat", "interpreter")
    pacer.close()


def test_item_trace_spans_the_report_and_the_calls_started_before_it(spans: CallSpans) -> None:
    early = {"span_id": "1" * 16, "start_ns": 100, "end_ns": 400, "kind": "chat"}
    spans.add(NODE, early)
    trace = item_trace(NODE, 300, 500)
    assert trace == {
        "trace_id": spans.ids.trace_id,
        "span_id": item_span_id(spans.ids.trace_id, NODE),
        "parent_id": spans.ids.run_span_id,
        "start_ns": 100,
        "end_ns": 500,
        "calls": [early],
    }
    assert item_trace(NODE, 300, 500)["calls"] == []  # type: ignore[index]


# -- the Answerer: every call of an item's answer is the item's ----------------------------------


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(default_reply="fine") as started:
        yield started


JUDGED = """
cases:
  - id: france
    prompt: What is the capital of France?
    assert:
      - {type: llm-rubric, value: names Paris}
"""


def test_an_answer_and_its_judges_calls_are_the_items_spans(
    tmp_path: Path, server: FakeLLMServer, spans: CallSpans
) -> None:
    server.add_rule(Rule(model="fake-model-2", reply='{"score": 0.9, "reason": "names it"}'))
    spec = loaded(tmp_path, JUDGED)
    assertion = spec.cases[0].assertions[0]
    assert assertion.graded is not None
    plan = plan_of(spec, graded=(GradedSpec(0, assertion, assertion.graded, (FAKE2,)),))
    answer_of(answerer(tmp_path, server.base_url), plan)
    found = spans.take(plan.nodeid)
    assert [span["kind"] for span in found] == ["chat", "judge"]
    assert found[1]["attributes"]["model"] == "fake2"
    requests = server.chat_requests()
    parents = {header_parent(request.headers)[1] for request in requests}
    assert parents == {span["span_id"] for span in found}


def test_an_items_calls_started_ahead_on_another_task_are_still_its_own(
    tmp_path: Path, server: FakeLLMServer, spans: CallSpans
) -> None:
    spec = loaded(tmp_path, PLAIN)
    engine = answerer(tmp_path, server.base_url)
    plans = [plan_of(spec, repeat=n, nodeid=f"{spec.path.name}::france[fake-r{n}]") for n in (0, 1)]
    coroutines = [engine.answer(plan, None, stream=False) for plan in plans]

    async def main() -> None:  # both started at once, as look-ahead does, none awaited in order
        await asyncio.gather(*coroutines)  # type: ignore[arg-type]

    asyncio.run(main())
    for plan in plans:
        assert [span["kind"] for span in spans.take(plan.nodeid)] == ["chat"], plan.nodeid


def test_a_solver_is_given_its_items_traceparent_when_export_is_on(
    tmp_path: Path, server: FakeLLMServer
) -> None:
    # A module name of its own: another test's shout.py may be imported already.
    solver = SHOUT.replace("reply.text.upper()", "str(case.traceparent)")
    (tmp_path / "traceshout.py").write_text(solver)
    plan = plan_of(loaded(tmp_path, SOLVER.replace("shout:solve", "traceshout:solve")))
    off = answer_of(answerer(tmp_path, server.base_url), plan)
    assert off.completion.text == "None"
    spans = call_spans.enable(trace_ids(RUN_ID), content=False)
    try:
        on = answer_of(answerer(tmp_path, server.base_url), plan)
    finally:
        call_spans.disable()
    item = item_span_id(spans.ids.trace_id, plan.nodeid)
    assert on.completion.text == traceparent(spans.ids.trace_id, item)
    found = spans.take(plan.nodeid)
    assert sorted(span["kind"] for span in found) == ["chat", "solver"]
    solver = next(span for span in found if span["kind"] == "solver")
    assert (solver["name"], solver["parent_id"], solver["error"]) == (
        "traceshout:solve",
        None,
        None,
    )


# -- the agent's tools and their commands ---------------------------------------------------------

COMMANDS = """
kind: agent
tools: [read_file, run_command]
sandbox: off
cases:
  - id: look
    prompt: Read a.txt and count its words
    expected: done
"""


def test_an_agents_tool_calls_and_their_commands_are_spans(
    tmp_path: Path, server: FakeLLMServer, spans: CallSpans
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "a.txt").write_text("forty-two words")
    server.add_rule(Rule(match_last="counted", reply="done"))  # the command's output: done
    server.add_rule(
        Rule(
            match_last="forty-two",
            tool_calls=[{"name": "run_command", "arguments": {"command": "echo counted"}}],
        )
    )
    server.add_rule(
        Rule(match="Read a.txt", tool_calls=[{"name": "read_file", "arguments": {"path": "a.txt"}}])
    )
    plan = plan_of(loaded(tmp_path, COMMANDS))
    answer = answer_of(answerer(tmp_path, server.base_url), plan, workdir)
    assert answer.agent is not None and answer.completion.text == "done"
    found = spans.take(plan.nodeid)
    assert [span["kind"] for span in found] == ["chat", "tool", "chat", "tool", "sandbox", "chat"]
    read, ran, command = found[1], found[3], found[4]
    assert read["attributes"]["tool"] == read["name"] == "read_file"
    assert read["attributes"]["call_id"] and read["error"] is None
    assert ran["name"] == "run_command"
    assert command["parent_id"] == ran["span_id"]  # the command nests under its tool call
    assert command["name"] == command["attributes"]["program"] == "echo"
    assert command["attributes"]["exit_code"] == 0
    assert "command" not in command["attributes"]  # the command line only with content
    assert read["parent_id"] is None and ran["parent_id"] is None  # under the item


def test_a_command_outside_a_tool_nests_under_the_item_and_keeps_its_line_with_content(
    tmp_path: Path,
) -> None:
    spans = call_spans.enable(trace_ids(RUN_ID), content=True)
    token = CURRENT_NODEID.set(NODE)
    try:
        Sandbox(tmp_path, SandboxLimits(), mode="off").run("exit 3")
    finally:
        CURRENT_NODEID.reset(token)
        call_spans.disable()
    (span,) = spans.take(NODE)
    assert (span["kind"], span["parent_id"], span["name"]) == ("sandbox", None, "exit")
    assert span["attributes"] == {"program": "exit", "exit_code": 3, "command": "exit 3"}
    assert CURRENT_PARENT_SPAN.get() is None


def test_a_tool_that_raises_ends_its_span_with_the_error(spans: CallSpans) -> None:
    from pytest_llmbench.agent.tool_spans import timed

    token = CURRENT_NODEID.set(NODE)
    try:
        with (
            pytest.raises(RuntimeError),
            timed("mcp", "mcp:files/read", {"tool": "mcp:files/read"}),
        ):
            assert CURRENT_PARENT_SPAN.get() is not None  # its commands' parent, meanwhile
            raise RuntimeError("server gone")
    finally:
        CURRENT_NODEID.reset(token)
    (span,) = spans.take(NODE)
    assert (span["kind"], span["error"]) == ("mcp", "RuntimeError: server gone")
    assert CURRENT_PARENT_SPAN.get() is None


def test_nothing_is_timed_for_the_agent_with_export_off(tmp_path: Path) -> None:
    use_span_notes(None)
    from pytest_llmbench.agent.tool_spans import timed

    with timed("tool", "read_file", {}) as span:
        assert span is None
    result: Any = Sandbox(tmp_path, SandboxLimits(), mode="off").run("true")
    assert result.exit_code == 0


def test_the_litellm_path_sends_the_traceparent_as_an_extra_header(
    tmp_path: Path, fake_llm: FakeLLMServer, spans: CallSpans
) -> None:
    pacer = CallPacer(settings(tmp_path), n_workers=1)
    request = ask(pacer, profile(fake_llm))
    request = replace(request, target=replace(request.target, client="litellm"))

    async def main() -> None:
        CURRENT_NODEID.set(NODE)
        await pacer.paced(request)

    run(main)
    (span,) = spans.take(NODE)
    (sent,) = fake_llm.chat_requests()
    assert header_parent(sent.headers) == (spans.ids.trace_id, span["span_id"])
    assert "traceparent" not in sent.body  # a header, never a parameter of the call
    pacer.close()


def test_a_simulated_users_calls_are_user_sim_spans(
    tmp_path: Path, server: FakeLLMServer, spans: CallSpans
) -> None:
    from pytest_llmbench.spec.schema import DEFAULT_STOP_MARKER

    server.add_rule(Rule(model="fake-model-2", reply=DEFAULT_STOP_MARKER))
    plan = plan_of(loaded(tmp_path, SIMULATED))
    answer_of(answerer(tmp_path, server.base_url), plan)
    found = spans.take(plan.nodeid)
    assert [span["kind"] for span in found] == ["chat", "user_sim"]
    assert found[1]["attributes"]["model"] == "fake2"


class McpLike:
    """A toolbox whose one tool an MCP server serves (``agent.mcp.McpToolbox``'s shape)."""

    def schemas(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {"name": "files_read", "parameters": {}}}]

    async def acall(self, name: str, arguments: Any) -> str:
        return "error: no such file" if arguments.get("path") == "gone" else "contents"

    def recorded_name(self, name: str) -> str:
        return "mcp:files/read"


def test_an_mcp_servers_tool_calls_are_mcp_spans_with_their_errors(
    spans: CallSpans,
) -> None:
    from test_agent_loop import Script, completion

    from pytest_llmbench.agent import run_agent

    script = Script(
        completion(calls=[("files_read", {"path": "a"}), ("files_read", {"path": "gone"})]),
        completion("done"),
    )

    async def main() -> None:
        CURRENT_NODEID.set(NODE)
        await run_agent(
            script,
            McpLike(),
            [{"role": "user", "content": "read"}],
            max_turns=3,
            limit_seconds=None,
            limit_tokens=None,
            shim=False,
            tool_names=["files_read"],
        )

    asyncio.run(main())
    found, gone = spans.take(NODE)  # the scripted model's calls are not the pacer's: no spans
    assert (found["kind"], found["name"], found["error"]) == ("mcp", "mcp:files/read", None)
    assert found["attributes"] == {"tool": "mcp:files/read", "call_id": "c0"}
    assert (gone["error"], gone["attributes"]["call_id"]) == ("no such file", "c1")
