"""Trace export combined with the other features a run has: scripted conversations and simulated
users, a panel of judges and a RAG metric, an agent with a real MCP server and a sandboxed
command, repeats under xdist, cache replay, and people's labels. Each test runs a suite against
the fake server with the real OTLP/HTTP exporter into the local receiver (tests/otlp_receiver.py)
and checks the span tree the collector got against the run's records."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest
from conftest import FAKE_KEY_ENV, Bench, Rule
from otlp_receiver import OtlpReceiver, ReceivedSpan, otlp_receiver  # noqa: F401 - the fixture

from pytest_llmbench.engine.call_spans import item_span_id
from pytest_llmbench.judging.prompts import JURY_DIMENSIONS
from pytest_llmbench.results.reviews import Review, answer_digest, append_review, review_key
from pytest_llmbench.results_folder import REVIEWS_FILE

pytestmark = pytest.mark.slow


@pytest.fixture
def traced(bench: Bench, otlp_receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch) -> Bench:  # noqa: F811
    """A project whose runs send their spans to the receiver."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_receiver.base_url)
    return bench


def _tree(receiver: OtlpReceiver) -> tuple[ReceivedSpan, dict[str, ReceivedSpan]]:
    """The run's span and the item spans by node id, checked to be one tree of one trace."""
    spans = list(receiver.spans)
    assert len({span.trace_id for span in spans}) == 1
    (run,) = receiver.by_name("llmbench run")
    items = {s.attributes["test.case.name"]: s for s in receiver.by_name("eval ")}
    assert {s.parent_id for s in items.values()} == {run.span_id}
    known = {s.span_id for s in spans}
    assert all(s.parent_id in known for s in spans if s is not run)
    return run, items


def _children(receiver: OtlpReceiver, parent: ReceivedSpan) -> list[ReceivedSpan]:
    """The spans directly under ``parent``, in start order."""
    found = [s for s in receiver.spans if s.parent_id == parent.span_id]
    return sorted(found, key=lambda s: s.start_ns)


def _roles(spans: list[ReceivedSpan]) -> list[str]:
    return [str(s.attributes.get("llmbench.role", s.name.split()[0])) for s in spans]


def _events(item: ReceivedSpan) -> list[tuple[str, str]]:
    return [
        (e.attributes["gen_ai.evaluation.name"], e.attributes["gen_ai.evaluation.score.label"])
        for e in item.events
        if e.name == "gen_ai.evaluation.result"
    ]


def _labels(record: dict[str, Any]) -> list[tuple[str, str]]:
    """What the events should say: each assertion of the record with pass, fail or unchecked."""
    return [
        (a["type"], "unchecked" if a.get("unchecked") else "pass" if a["passed"] else "fail")
        for a in record["assertions"]
    ]


# -- conversations, a simulated user, a panel of judges and a RAG metric ---------------------------
JUDGES = """
models:
  j1:
    model: openai/judge-1
    api_base: {base}
    api_key_env: {env}
  j2:
    model: openai/judge-2
    api_base: {base}
    api_key_env: {env}
"""
TALK = """
cases:
  - id: talk
    turns:
      - user: Hello TURN-ONE
        assert: [{type: contains, value: ok}]
      - user: Bye TURN-TWO
        assert: [{type: contains, value: ok}]
      - user: Again TURN-THREE
        assert: [{type: contains, value: nope}]
"""
SIMULATED = """
cases:
  - id: curious
    simulated_user:
      model: fake2
      instructions: Ask questions.
      max_turns: 3
      assert: [{type: icontains, value: answer}]
"""
PANEL = """
cases:
  - id: panel
    prompt: Name a PANEL colour.
    assert:
      - {type: jury, judges: [j1, j2]}
      - {type: contains, value: blue}
"""
RAG = """
prompt: "Answer from these documents:\\n{{context}}\\nQ: {{q}}"
cases:
  - id: paris
    vars: {q: What is the capital of France?}
    context: ["Paris is the capital of France.", "The Eiffel Tower stands in Paris."]
    assert:
      - {type: faithfulness, judges: [fake2]}
"""


def _jury_reply(score: int) -> str:
    return json.dumps({key: {"score": score, "reason": "fine"} for key in JURY_DIMENSIONS})


CLAIMS = json.dumps(
    {"claims": [{"claim": "Paris is the capital of France.", "supported": True, "reason": "x"}]}
)


def test_turns_simulated_users_a_panel_and_a_rag_judge_each_have_their_spans(
    traced: Bench,
    otlp_receiver: OtlpReceiver,  # noqa: F811
) -> None:
    """A scripted conversation of three replies: three chat spans under its item and an event
    per turn's check (the third fails). A simulated user's three turns: the model's three
    replies and the simulated user's own calls (role user_sim, model fake2), each a span under
    the item. A panel of two judges: one judge span per judge, one event for the rubric. A RAG
    faithfulness judge: its judge calls are spans under its item, its verdict an event. The
    spans of each item match what the fake server was asked for that item."""
    bench = traced
    base = bench.server.base_url
    bench.pytester.makefile(
        ".yaml", **{"profiles/judges": JUDGES.format(base=base, env=FAKE_KEY_ENV)}
    )
    for name, text in (("talk", TALK), ("sim", SIMULATED), ("panel", PANEL), ("rag", RAG)):
        bench.eval_file(name, text)
    for rule in (
        Rule(model="judge-1", reply=_jury_reply(4)),
        Rule(model="judge-2", reply=_jury_reply(3)),
        Rule(model="fake-model-2", match_any="documents", reply=CLAIMS),
        Rule(model="fake-model-2", reply="One more question."),
        Rule(model="fake-model", match_any="documents", reply="Paris is the capital of France."),
        Rule(model="fake-model", match_any="PANEL", reply="Sky blue."),
        Rule(model="fake-model", match_any="One more question", reply="Here is your answer."),
        Rule(model="fake-model", reply="ok"),
    ):
        bench.server.add_rule(rule)
    bench.run("--models=fake", "--otel").assert_outcomes(passed=3, failed=1)
    records = {r["case_id"]: r for r in bench.records()}
    run, items = _tree(otlp_receiver)
    assert run.attributes["llmbench.items"] == 4
    assert (
        run.attributes["llmbench.outcome.passed"],
        run.attributes["llmbench.outcome.failed"],
    ) == (3, 1)
    by_case = {s.attributes["llmbench.case_id"]: s for s in items.values()}
    assert set(by_case) == set(records)
    for case, record in records.items():
        item = by_case[case]
        assert (
            item.span_id
            == record["trace"]["span_id"]
            == item_span_id(item.trace_id, record["nodeid"])
        )
        assert item.attributes["llmbench.outcome"] == record["outcome"], case
        assert _events(item) == _labels(record), case
        # every call the record kept is a span the collector got, under the same parent
        kept = {c["span_id"]: c for c in record["trace"]["calls"]}
        spans = {s.span_id: s for s in otlp_receiver.spans if s.span_id in kept}
        assert set(spans) == set(kept), case
        assert all(s.start_ns >= item.start_ns and s.end_ns <= item.end_ns for s in spans.values())

    talk = _children(otlp_receiver, by_case["talk"])
    assert _roles(talk) == ["chat"] * 3
    assert [s.name for s in talk] == ["chat openai/fake-model"] * 3
    assert [label for _, label in _events(by_case["talk"])] == ["pass", "pass", "fail"]
    assert by_case["talk"].attributes["test.case.result.status"] == "fail"

    curious = _children(otlp_receiver, by_case["curious"])
    roles = Counter(_roles(curious))
    sent = [(r.body["model"], json.dumps(r.body)) for r in bench.server.chat_requests()]
    asked = Counter(
        model
        for model, body in sent
        if ("Ask questions" if model == "fake-model-2" else "One more question") in body
    )
    assert roles == {"chat": asked["fake-model"], "user_sim": asked["fake-model-2"]}
    assert roles["chat"] == 3 and roles["user_sim"] >= 2  # the opening may be its own
    assert {s.name for s in curious if s.attributes["llmbench.role"] == "user_sim"} == {
        "chat openai/fake-model-2"
    }
    sims = [s for s in curious if s.attributes["llmbench.role"] == "user_sim"]
    assert all(s.attributes["llmbench.model"] == "fake2" for s in sims)
    assert [s.attributes["gen_ai.usage.output_tokens"] > 0 for s in curious] == [True] * len(
        curious
    )
    assert _events(by_case["curious"]) == [("icontains", "pass")] * 3

    panel = _children(otlp_receiver, by_case["panel"])
    assert _roles(panel) == ["chat", "judge", "judge"]
    assert sorted(s.name for s in panel[1:]) == ["chat openai/judge-1", "chat openai/judge-2"]
    assert sorted(s.attributes["llmbench.model"] for s in panel[1:]) == ["j1", "j2"]
    events = [e for e in by_case["panel"].events if e.name == "gen_ai.evaluation.result"]
    assert [e.attributes["llmbench.assertion.index"] for e in events] == [0, 1]
    assert events[0].attributes["gen_ai.evaluation.name"] == "jury"
    score = records["panel"]["assertions"][0]["score"]
    assert events[0].attributes["gen_ai.evaluation.score.value"] == pytest.approx(score)

    rag = _children(otlp_receiver, by_case["paris"])
    rag_judge_requests = [
        r
        for r in bench.server.chat_requests()
        if r.body["model"] == "fake-model-2" and "Eiffel" in json.dumps(r.body)
    ]
    assert _roles(rag) == ["chat"] + ["judge"] * len(rag_judge_requests)
    assert len(rag_judge_requests) >= 1
    assert _events(by_case["paris"]) == [("faithfulness", "pass")]


# -- an agent with a real MCP server and a sandboxed command -------------------------------------
AGENT = """
kind: agent
mcp_servers:
  time: {command: python3, args: [-m, mcp_server_time, --local-timezone, UTC]}
tools: [run_command, "mcp:time/get_*"]
max_turns: 5
cases:
  - id: now
    prompt: What time is it in UTC?
    assert:
      - {type: tool-sequence, value: ["mcp:time/get_current_time", run_command], mode: strict}
      - {type: icontains, value: "it is"}
"""


def test_an_agents_mcp_call_and_sandboxed_command_nest_under_their_item_and_tool(
    traced: Bench,
    otlp_receiver: OtlpReceiver,  # noqa: F811
) -> None:
    """The model asks the real mcp-server-time for the time, then runs a command, then answers:
    under the item come chat, the MCP tool (type extension), chat, the command's tool (type
    function) with its sandbox span inside it, and the last chat, in that order; the sandbox
    span's exit code is the timeline's."""
    bench = traced
    command = {"name": "run_command", "arguments": {"command": "echo counted"}}
    for rule in (
        Rule(match_last="counted", reply="It is done."),
        Rule(match_last="+00:00", tool_calls=[command]),
        Rule(tool_calls=[{"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}]),
    ):
        bench.server.add_rule(rule)
    bench.eval_file("time", AGENT)
    bench.run_subprocess("--models=fake", "--otel").assert_outcomes(passed=1)
    (record,) = bench.records()
    _, items = _tree(otlp_receiver)
    (item,) = items.values()
    calls = _children(otlp_receiver, item)
    assert [s.name for s in calls] == [
        "chat openai/fake-model",
        "execute_tool mcp:time/get_current_time",
        "chat openai/fake-model",
        "execute_tool run_command",
        "chat openai/fake-model",
    ]
    mcp, tool = calls[1], calls[3]
    assert mcp.attributes["gen_ai.tool.type"] == "extension"
    assert tool.attributes["gen_ai.tool.type"] == "function"
    assert mcp.attributes["gen_ai.tool.call.id"] != tool.attributes["gen_ai.tool.call.id"]
    # one step after another: a tool starts after the reply that asked for it has ended
    assert all(a.end_ns <= b.start_ns for a, b in itertools.pairwise(calls))
    (sandbox,) = otlp_receiver.by_name("sandbox ")
    assert (sandbox.name, sandbox.parent_id) == ("sandbox echo", tool.span_id)
    assert tool.start_ns <= sandbox.start_ns <= sandbox.end_ns <= tool.end_ns
    assert sandbox.attributes["process.exit.code"] == 0
    assert "process.command_line" not in sandbox.attributes  # no --otel-content
    assert not _children(otlp_receiver, mcp)  # the MCP server runs no command of ours
    assert _events(item) == _labels(record) == [("tool-sequence", "pass"), ("icontains", "pass")]
    kinds = [call["kind"] for call in record["trace"]["calls"]]
    assert kinds == ["chat", "mcp", "chat", "tool", "sandbox", "chat"]


# -- repeats under two workers, then a replay from the cache with people's labels ------------------
CAPITALS = """
cases:
  - {id: france, prompt: "Capital of France?", expected: Paris, assert: [contains]}
  - {id: japan, prompt: "Capital of Japan?", expected: Tokyo, assert: [contains]}
"""


def _label(folder: Path, record: dict[str, Any], label: str, assertion: int | None = None) -> None:
    review = Review(
        key=review_key(record, assertion),
        answer=answer_digest(record),
        label=label,
        comment="checked by hand",
        reviewer="ana",
        at="2026-11-29T10:00:00+00:00",
    )
    append_review(folder / REVIEWS_FILE, review)


def test_repeats_under_two_workers_then_a_labelled_replay_trace_the_effective_outcomes(
    traced: Bench,
    otlp_receiver: OtlpReceiver,  # noqa: F811
) -> None:
    """--repeat 3 -n 2: six item spans with six distinct ids (each derived from its node id),
    one per repeat, in one trace, from both workers; every chat span a real call. Then japan's
    repeat 1 (Kyoto, failed) is labelled pass and france's repeat 0 assertion labelled fail,
    and the run is replayed from the cache under -n 2 again: no request reaches the server,
    the trace is a new one, every chat span says cache_hit, and each item span's outcome, status
    and events are the effective ones (the people's), as the records and the run span's counts."""
    bench = traced
    bench.eval_file("capitals", CAPITALS)
    bench.server.add_rule(Rule(match="France", reply="Paris"))
    bench.server.add_rule(Rule(match="Japan", reply="Kyoto"))
    args = ("-n", "2", "--models=fake", "--repeat=3", "--cache-dir=c", "--otel")
    bench.run_subprocess(*args, "--cache=use").assert_outcomes(passed=3, failed=3)
    records = {(r["case_id"], r["repeat"]): r for r in bench.records()}
    _, items = _tree(otlp_receiver)
    assert set(items) == {r["nodeid"] for r in records.values()} and len(items) == 6
    first_trace = next(iter(items.values())).trace_id
    assert len({s.span_id for s in items.values()}) == 6
    for nodeid, span in items.items():
        assert span.span_id == item_span_id(first_trace, nodeid)
    repeats = {
        (s.attributes["llmbench.case_id"], s.attributes["llmbench.repeat"]) for s in items.values()
    }
    assert repeats == set(records)
    assert {s.attributes["llmbench.worker"] for s in items.values()} == {"gw0", "gw1"}
    chats = otlp_receiver.by_name("chat ")
    assert len(chats) == 6 == len(bench.server.chat_requests())
    assert {s.parent_id for s in chats} == {s.span_id for s in items.values()}
    assert not any(s.attributes.get("llmbench.cache_hit") for s in chats)

    _label(bench.out(""), records[("japan", 1)], "pass")
    _label(bench.out(""), records[("france", 0)], "fail", assertion=0)
    bench.server.reset()
    with otlp_receiver._lock:
        otlp_receiver.spans.clear()
    bench.run_subprocess(*args, "--cache=replay").assert_outcomes(passed=3, failed=3)
    assert bench.server.requests == []
    run, items = _tree(otlp_receiver)
    assert run.trace_id != first_trace and len(items) == 6
    chats = otlp_receiver.by_name("chat ")
    assert len(chats) == 6
    assert all(s.attributes["llmbench.cache_hit"] is True for s in chats)
    again = {r["nodeid"]: r for r in bench.records()}
    by_key = {(r["case_id"], r["repeat"]): r for r in again.values()}
    assert (by_key[("japan", 1)]["outcome"], by_key[("japan", 1)]["verdict_source"]) == (
        "passed",
        "human",
    )
    assert (by_key[("france", 0)]["outcome"], by_key[("france", 0)]["verdict_source"]) == (
        "failed",
        "human",
    )
    for nodeid, span in items.items():
        record = again[nodeid]
        expected = {"passed": "pass", "failed": "fail"}[record["outcome"]]
        assert span.attributes["llmbench.outcome"] == record["outcome"], nodeid
        assert span.attributes["test.case.result.status"] == expected, nodeid
        assert _events(span) == _labels(record), nodeid
        assert span.attributes["llmbench.cached"] is True
    assert (
        run.attributes["llmbench.outcome.passed"],
        run.attributes["llmbench.outcome.failed"],
    ) == (3, 3)
    (france0,) = [s for n, s in items.items() if again[n] is by_key[("france", 0)]]
    assert _events(france0) == [("contains", "fail")]  # the person's verdict on the assertion
