"""Trajectory judges: ``scope: trajectory`` on llm-rubric, jury and model-graded assertions.

The fake server scripts the model under test (``fake``) and the judge (``fake2``); the tests read
what the judge was sent (the rendered trajectory: tool calls with their arguments, results,
errors marked, user turns, the final answer), the records, the cache's effect and xdist's.
The rendering's size bound and the built-in rubrics' prompts are checked on the functions.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import Bench, Rule

from pytest_llmbench.engine.conversation_calls import NOT_RUN_RESULT
from pytest_llmbench.judging.prompts import JURY_DIMENSIONS, judge_messages
from pytest_llmbench.judging.trajectory_judge import (
    BUILTIN_RUBRICS,
    NOTHING_TO_RECOVER,
    TRAJECTORY_CHARS,
    TRAJECTORY_LEGEND,
    TRAJECTORY_RESULT_CHARS,
    TrajectoryStep,
    render_trajectory,
)

JUDGE = "fake-model-2"
PASS = '{"score": 1.0, "reason": "reached"}'

AGENT = """
kind: agent
tools: [read_file, write_file]
max_steps: 6
cases:
  - id: notes
    files: {notes.txt: "remember the milk"}
    prompt: Copy what notes.txt says into todo.txt, then say done.
    assert:
      - {type: llm-rubric, scope: trajectory, value: RUBRIC, judges: [fake2]}
"""


def agent_file(rubric: str = "goal-completed", extra: str = "") -> str:
    return AGENT.replace("RUBRIC", rubric) + extra


def script_agent(bench: Bench, verdict: str = PASS) -> None:
    """Step 1 reads a file that is not there (an error), step 2 reads notes.txt, step 3 writes
    todo.txt, step 4 answers."""
    bench.server.add_rule(Rule(model=JUDGE, reply=verdict))
    bench.server.add_rule(Rule(match_last="wrote", reply="Done: todo.txt holds the note."))
    write = {"name": "write_file", "arguments": {"path": "todo.txt", "content": "milk"}}
    bench.server.add_rule(Rule(match_last="remember the milk", tool_calls=[write]))
    read = {"name": "read_file", "arguments": {"path": "notes.txt"}}
    bench.server.add_rule(Rule(match_last="error", tool_calls=[read]))
    missing = {"name": "read_file", "arguments": {"path": "note.txt"}}
    bench.server.add_rule(Rule(match="Copy what", tool_calls=[missing]))


def judge_requests(bench: Bench) -> list[dict[str, Any]]:
    return [r.body for r in bench.server.chat_requests() if r.body["model"] == JUDGE]


def judge_texts(bench: Bench) -> list[str]:
    """The user message of every judge request."""
    return [body["messages"][-1]["content"] for body in judge_requests(bench)]


def trajectory_of(text: str) -> list[str]:
    """The lines of the <trajectory> block of a judge's message."""
    inside = text.split("<trajectory>\n", 1)[1].split("\n</trajectory>", 1)[0]
    return inside.splitlines()


# --- agent runs --------------------------------------------------------------------------------


def test_an_agent_judge_sees_each_call_its_arguments_results_and_errors(bench: Bench) -> None:
    script_agent(bench)
    bench.eval_file("agent", agent_file())
    bench.run("--models=fake").assert_outcomes(passed=1)
    ((system, user),) = [body["messages"] for body in judge_requests(bench)]
    lines = trajectory_of(user["content"])
    assert lines[0] == "[user] Copy what notes.txt says into todo.txt, then say done."
    assert lines[1] == '[step 1, agent] [called read_file({"path": "note.txt"})]'
    assert lines[2].startswith("[step 1, tool read_file, ERROR] error: ")
    assert lines[3:7] == [
        '[step 2, agent] [called read_file({"path": "notes.txt"})]',
        "[step 2, tool read_file] remember the milk",
        '[step 3, agent] [called write_file({"path": "todo.txt", "content": "milk"})]',
        lines[6],
    ]
    assert lines[6].startswith("[step 3, tool write_file] wrote")
    assert lines[7:] == ["[final answer] Done: todo.txt holds the note."]
    assert f"<rubric>\n{BUILTIN_RUBRICS['goal-completed']}\n</rubric>" in user["content"]
    assert "<answer>" not in user["content"] and "<question>" not in user["content"]
    assert TRAJECTORY_LEGEND in system["content"]
    (record,) = bench.records()
    (verdict,) = record["assertions"]
    assert (verdict["type"], verdict["passed"], verdict["score"]) == ("llm-rubric", True, 1.0)


def test_a_failing_trajectory_verdict_fails_the_item(bench: Bench) -> None:
    script_agent(bench, '{"score": 0.0, "reason": "read the wrong file first"}')
    bench.eval_file("agent", agent_file("efficient"))
    result = bench.run("--models=fake")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*read the wrong file first*"])
    (text,) = judge_texts(bench)
    assert f"<rubric>\n{BUILTIN_RUBRICS['efficient']}\n</rubric>" in text


def test_a_shimmed_agents_calls_come_from_its_tool_calls_not_its_json(bench: Bench) -> None:
    bench.server.add_rule(Rule(model=JUDGE, reply=PASS))
    bench.server.add_rule(Rule(match_last="returned", reply='{"answer": "done"}'))
    call = '{"tool": "write_file", "arguments": {"path": "todo.txt", "content": "milk"}}'
    bench.server.add_rule(Rule(reply=call))
    shimmed = agent_file().replace("max_steps: 6", "max_steps: 6\ntool_shim: always")
    bench.eval_file("agent", shimmed)
    bench.run("--models=fake").assert_outcomes(passed=1)
    (text,) = judge_texts(bench)
    lines = trajectory_of(text)
    assert lines[1:] == [
        '[step 1, agent] [called write_file({"path": "todo.txt", "content": "milk"})]',
        lines[2],
        "[final answer] done",
    ]
    assert lines[2].startswith("[step 1, tool write_file] wrote")
    assert '{"tool"' not in text and '{"answer"' not in text


def test_recovered_without_a_failed_call_passes_without_asking_the_judges(bench: Bench) -> None:
    bench.server.add_rule(Rule(model=JUDGE, reply='{"score": 0.0, "reason": "never asked"}'))
    bench.server.add_rule(Rule(match_last="remember the milk", reply="It says milk."))
    read = {"name": "read_file", "arguments": {"path": "notes.txt"}}
    bench.server.add_rule(Rule(match="Copy what", tool_calls=[read]))
    bench.eval_file("agent", agent_file("recovered"))
    bench.run("--models=fake").assert_outcomes(passed=1)
    assert judge_requests(bench) == []
    (record,) = bench.records()
    (verdict,) = record["assertions"]
    assert (verdict["passed"], verdict["score"], verdict["reason"]) == (
        True,
        1.0,
        NOTHING_TO_RECOVER,
    )
    assert record["judges"] == []


def test_recovered_after_a_failed_call_asks_the_judges(bench: Bench) -> None:
    script_agent(bench, '{"score": 0.0, "reason": "ignored the error"}')
    bench.eval_file("agent", agent_file("recovered"))
    bench.run("--models=fake").assert_outcomes(failed=1)
    (text,) = judge_texts(bench)
    assert f"<rubric>\n{BUILTIN_RUBRICS['recovered']}\n</rubric>" in text
    assert "ERROR] error: " in text


def test_a_jury_and_a_grader_read_the_trajectory(bench: Bench) -> None:
    bench.server.add_rule(Rule(model=JUDGE, match_any="Pick one", reply='{"choice": "Y"}'))
    scores = {key: {"score": 5, "reason": "fine"} for key in JURY_DIMENSIONS}
    bench.server.add_rule(Rule(model=JUDGE, match_any="correctness", reply=json.dumps(scores)))
    script_agent(bench)
    grader = (
        "      - {type: model-graded, scope: trajectory, judges: [fake2], choices: {Y: 1, N: 0},"
        " prompt: 'Pick one. Did it read notes.txt? {{trajectory}}'}\n"
        "      - {type: jury, scope: trajectory, judges: [fake2]}\n"
    )
    bench.eval_file("agent", agent_file(extra=grader))
    bench.run("--models=fake").assert_outcomes(passed=1)
    texts = judge_texts(bench)
    assert len(texts) == 3
    read = '[step 2, agent] [called read_file({"path": "notes.txt"})]'
    assert all(read in text for text in texts)
    (picked,) = [text for text in texts if text.startswith("Pick one.")]
    assert "[step 2, tool read_file] remember the milk" in picked
    assert "<trajectory>" not in picked  # the user's own prompt, rendered as written


# --- conversations and function-calling replies ---------------------------------------------

TALK = """
tools:
  - {name: get_weather, parameters: {type: object, properties: {city: {type: string}}}}
cases:
  - id: weather-talk
    turns:
      - user: What is the weather in Paris?
      - user: Thanks. Anything else?
    assert: [{type: llm-rubric, scope: trajectory, value: calls the weather tool, judges: [fake2]}]
"""


def test_a_conversations_judge_sees_the_turns_and_each_replys_calls(bench: Bench) -> None:
    bench.server.add_rule(Rule(model=JUDGE, reply=PASS))
    calls = [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    bench.server.add_rule(Rule(match="weather in Paris", tool_calls=calls))
    bench.server.add_rule(Rule(match="Thanks", reply="You are welcome."))
    bench.eval_file("talk", TALK)
    bench.run("--models=fake").assert_outcomes(passed=1)
    (text,) = judge_texts(bench)
    assert trajectory_of(text) == [
        "[user] What is the weather in Paris?",
        '[step 1, agent] [called get_weather({"city": "Paris"})]',
        f"[step 1, tool get_weather] {NOT_RUN_RESULT}",
        "[user] Thanks. Anything else?",
        "[final answer] You are welcome.",
    ]
    assert "<rubric>\ncalls the weather tool\n</rubric>" in text  # the user's own rubric


def test_a_function_calling_replys_judge_sees_the_prompt_and_the_calls(bench: Bench) -> None:
    bench.server.add_rule(Rule(model=JUDGE, reply=PASS))
    calls = [
        {"name": "get_weather", "arguments": {"city": "Paris"}},
        {"name": "get_weather", "arguments": {"city": "Paris"}},
    ]
    bench.server.add_rule(Rule(match="weather in Paris", tool_calls=calls))
    plain = TALK.replace(
        "    turns:\n      - user: What is the weather in Paris?\n"
        "      - user: Thanks. Anything else?\n",
        "    prompt: What is the weather in Paris?\n",
    ).replace("value: calls the weather tool", "value: efficient")
    bench.eval_file("fc", plain)
    bench.run("--models=fake").assert_outcomes(passed=1)
    (text,) = judge_texts(bench)
    called = '[step 1, agent] [called get_weather({"city": "Paris"})]'
    assert trajectory_of(text) == ["[user] What is the weather in Paris?", called, called]


SIMULATED = """
system: You are the support agent of ACME.
cases:
  - id: refund
    simulated_user:
      model: fake2
      instructions: You are Ada. Your order 1234 never arrived; get a refund.
      first_message: My order 1234 never arrived.
      max_turns: 3
    assert: [{type: llm-rubric, scope: trajectory, value: goal-completed, judges: [fake2]}]
"""


def test_a_simulated_users_turns_are_in_the_trajectory(bench: Bench) -> None:
    bench.server.add_rule(Rule(model=JUDGE, match_any="trajectory", reply=PASS))
    bench.server.add_rule(Rule(model="fake-model", match="Refund now", reply="Refund issued."))
    bench.server.add_rule(Rule(model="fake-model", reply="Sorry! Which order?"))
    bench.server.add_rule(Rule(model=JUDGE, match="Which order", reply="1234. Refund now."))
    bench.server.add_rule(Rule(model=JUDGE, reply="Thanks. <<DONE>>"))
    bench.eval_file("talk", SIMULATED)
    bench.run("--models=fake").assert_outcomes(passed=1)
    texts = [text for text in judge_texts(bench) if "<trajectory>" in text]
    (text,) = texts
    assert trajectory_of(text) == [
        "[user] My order 1234 never arrived.",
        "[step 1, agent] Sorry! Which order?",
        "[user] 1234. Refund now.",
        "[final answer] Refund issued.",
    ]


# --- collection ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("{type: factuality, value: x, scope: trajectory}", "not to factuality"),
        ("{type: closed-qa, value: x, scope: trajectory}", "not to closed-qa"),
        ("{type: icontains, value: x, scope: trajectory}", "not to icontains"),
        (
            "{type: model-graded, scope: trajectory, choices: {Y: 1}, prompt: 'Judge {{output}}'}",
            "the prompt does not use it",
        ),
        (
            "{type: model-graded, choices: {Y: 1}, prompt: 'Judge {{trajectory}}'}",
            "needs `scope: trajectory`",
        ),
        (
            "{type: llm-rubric, value: x, scope: trajectory, show_reasoning: true}",
            "not with scope: trajectory",
        ),
    ],
)
def test_a_trajectory_scope_where_it_does_not_apply_is_a_collection_error(
    bench: Bench, spec: str, message: str
) -> None:
    bench.eval_file("bad", f"cases:\n  - id: a\n    prompt: Hi\n    assert:\n      - {spec}\n")
    result = bench.run("--models=fake")
    assert result.ret != 0
    output = result.stdout.str()
    assert "bad.eval.yaml:5: " in output and message in output, output
    if "not to" in message:
        assert "llm-rubric, jury, model-graded" in output
    assert "Traceback" not in output
    assert bench.server.chat_requests() == []


def test_scope_trajectory_changes_only_its_own_assertions_hash(tmp_path: Any) -> None:
    from pytest_llmbench.spec.load import load_spec

    def case_hash(assertion: str) -> str:
        path = tmp_path / "plain.eval.yaml"
        text = f"cases:\n  - id: a\n    prompt: Hi\n    assert: [{assertion}]\n"
        path.write_text(text, encoding="utf-8")
        (case,) = load_spec(path).cases
        return str(case.case_hash)

    plain = case_hash("{type: llm-rubric, value: polite}")
    assert case_hash("{type: llm-rubric, value: polite, scope: turn}") == plain
    assert case_hash("{type: llm-rubric, value: polite, scope: trajectory}") != plain
    grader = "{type: model-graded, choices: {Y: 1}, prompt: 'X {{output}}'}"
    scoped = "{type: model-graded, scope: trajectory, choices: {Y: 1}, prompt: 'X {{trajectory}}'}"
    assert case_hash(grader) != case_hash(scoped)
    from pytest_llmbench.fingerprint import _plain
    from pytest_llmbench.scoring import parse_assertion

    unscoped = parse_assertion({"type": "llm-rubric", "value": "polite"})
    assert "scope" not in _plain(unscoped)["graded"]


# --- the rendering and the built-ins' prompts ---------------------------------------------------


def test_a_long_trajectory_keeps_its_start_and_end_and_says_how_much_was_cut() -> None:
    steps = [TrajectoryStep("user", "Do the long task.")]
    for step in range(1, 201):
        steps.append(TrajectoryStep("agent", f'[called search({{"page": {step}}})]', step))
        steps.append(TrajectoryStep("tool", "x" * 5000, step, tool="search", error=step == 7))
    steps.append(TrajectoryStep("answer", "All pages read."))
    trajectory = render_trajectory(steps)
    lines = trajectory.text.splitlines()
    assert len(trajectory.text) <= TRAJECTORY_CHARS
    assert lines[0] == "[user] Do the long task." and lines[-1] == "[final answer] All pages read."
    (note,) = [line for line in lines if "entries cut" in line]
    assert note == (
        f"[... {trajectory.cut} entries cut: the trajectory is longer than "
        f"{TRAJECTORY_CHARS} characters ...]"
    )
    assert len(lines) - 1 + trajectory.cut == len(steps)
    result = lines[2]
    assert result.startswith("[step 1, tool search] " + "x" * TRAJECTORY_RESULT_CHARS + " [...")
    assert "[step 7, tool search, ERROR]" in trajectory.text
    assert (trajectory.steps, trajectory.tool_calls, trajectory.tool_errors) == (200, 200, 1)


def test_a_short_trajectory_is_shown_whole() -> None:
    steps = [TrajectoryStep("user", "Hi"), TrajectoryStep("answer", "Hello")]
    trajectory = render_trajectory(steps)
    assert (trajectory.text, trajectory.cut) == ("[user] Hi\n[final answer] Hello", 0)


@pytest.mark.parametrize("name", sorted(BUILTIN_RUBRICS))
def test_a_builtin_rubric_is_asked_by_its_text(name: str) -> None:
    from pytest_llmbench.judging.panel import judge_request
    from pytest_llmbench.scoring import JudgeSpec, parse_assertion

    raw = {"type": "llm-rubric", "value": name, "scope": "trajectory"}
    assertion = parse_assertion(raw)
    assert isinstance(assertion.graded, JudgeSpec)
    request = judge_request(
        assertion,
        assertion.graded,
        messages=[{"role": "system", "content": "Be brief."}],
        answer="done",
        expected=None,
        task=None,
        trajectory="[user] go\n[final answer] done",
    )
    system, user = judge_messages(request)
    assert request.rubric == BUILTIN_RUBRICS[name]
    assert TRAJECTORY_LEGEND in system["content"]
    assert user["content"] == (
        "<system_prompt>\nBe brief.\n</system_prompt>\n"
        f"<rubric>\n{BUILTIN_RUBRICS[name]}\n</rubric>\n"
        "<trajectory>\n[user] go\n[final answer] done\n</trajectory>\n"
        "Judge the trajectory now. Reply with only the JSON object."
    )
    # the same words without the scope are the user's own rubric, judged on one answer
    turn = parse_assertion({"type": "llm-rubric", "value": name})
    assert isinstance(turn.graded, JudgeSpec)
    own = judge_request(turn, turn.graded, messages=[], answer="done", expected=None, task=None)
    assert own.rubric == name and own.trajectory == ""


# --- replay and xdist ---------------------------------------------------------------------------


def test_replay_from_the_cache_makes_no_request_and_gives_the_same_verdicts(bench: Bench) -> None:
    script_agent(bench)
    bench.eval_file("agent", agent_file())
    bench.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(passed=1)
    (first,) = bench.records()
    assert len(judge_requests(bench)) == 1
    bench.server.reset()  # no rule: a call now would be answered "ok", a malformed verdict
    bench.run("--models=fake", "--cache=replay", "--cache-dir=c").assert_outcomes(passed=1)
    assert bench.server.chat_requests() == []
    (record,) = bench.records()
    assert record["judges"][0]["cached"] is True
    assert record["assertions"] == first["assertions"]
    assert record["dimensions"] == first["dimensions"]


def test_two_workers_give_the_verdicts_of_one(bench: Bench) -> None:
    script_agent(bench)
    text = agent_file() + (
        "  - id: again\n"
        "    files: {notes.txt: remember the milk}\n"
        "    prompt: Copy what notes.txt says into todo.txt, then say done.\n"
        "    assert: [{type: llm-rubric, scope: trajectory, value: efficient, judges: [fake2]}]\n"
    )
    bench.eval_file("agent", text)

    def verdicts() -> dict[str, Any]:
        records = bench.records()
        return {r["case_id"]: (r["assertions"], r["dimensions"]) for r in records}

    bench.run_subprocess("--models=fake").assert_outcomes(passed=2)
    serial, trajectories = verdicts(), sorted(judge_texts(bench))
    bench.server.requests.clear()
    bench.run_subprocess("--models=fake", "-n", "2").assert_outcomes(passed=2)
    assert verdicts() == serial
    assert sorted(judge_texts(bench)) == trajectories


# --- an agent run that talks with a user between its steps ------------------------------------


def _run(transcript: list[dict[str, Any]], calls: list[Any], shimmed: bool, answer: str) -> Any:
    from pytest_llmbench.agent import AgentRun
    from pytest_llmbench.models import Usage

    return AgentRun(
        answer=answer,
        turns=3,
        tool_calls=tuple(calls),
        transcript=tuple(transcript),
        stopped="answer",
        shimmed=shimmed,
        usage=Usage(),
        retries=0,
        cached=False,
    )


@pytest.mark.parametrize("shimmed", [False, True])
def test_user_turns_between_an_agents_steps_are_in_its_trajectory(shimmed: bool) -> None:
    from pytest_llmbench.agent import ToolCall
    from pytest_llmbench.agent.shim import shim_tool_result
    from pytest_llmbench.engine.trajectories import agent_steps

    failed = ToolCall(1, "get_order", {"order_id": "W9"}, "error: ValueError: no W9", True)
    found = ToolCall(3, "get_order", {"order_id": "W1"}, '{"status": "pending"}', False)
    if shimmed:
        asked = [json.dumps({"tool": c.name, "arguments": c.arguments}) for c in (failed, found)]
        said = [shim_tool_result(c.name, c.result) for c in (failed, found)]
        steps: list[dict[str, Any]] = [
            {"role": "assistant", "content": asked[0]},
            said[0],
            {"role": "assistant", "content": '{"answer": "Which order?"}'},
            {"role": "user", "content": "W1, sorry."},
            {"role": "assistant", "content": asked[1]},
            said[1],
            {"role": "assistant", "content": '{"answer": "W1 is pending."}'},
        ]
    else:
        wired = [
            {"id": f"c{n}", "type": "function", "function": {"name": c.name, "arguments": "{}"}}
            for n, c in enumerate((failed, found))
        ]
        steps = [
            {"role": "assistant", "content": None, "tool_calls": [wired[0]]},
            {"role": "tool", "tool_call_id": "c0", "content": failed.result},
            {"role": "assistant", "content": "Which order?"},
            {"role": "user", "content": "W1, sorry."},
            {"role": "assistant", "content": "Looking.", "tool_calls": [wired[1]]},
            {"role": "tool", "tool_call_id": "c1", "content": found.result},
            {"role": "assistant", "content": "W1 is pending."},
        ]
    transcript = [
        {"role": "system", "content": "You serve the store."},
        {"role": "user", "content": "Where is my order?"},
        *steps,
    ]
    run = _run(transcript, [failed, found], shimmed, "W1 is pending.")
    rendered = render_trajectory(agent_steps(run))
    looking = [] if shimmed else ["[step 3, agent] Looking."]
    assert rendered.text.splitlines() == [
        "[user] Where is my order?",
        '[step 1, agent] [called get_order({"order_id": "W9"})]',
        "[step 1, tool get_order, ERROR] error: ValueError: no W9",
        "[step 2, agent] Which order?",
        "[user] W1, sorry.",
        *looking,
        '[step 3, agent] [called get_order({"order_id": "W1"})]',
        '[step 3, tool get_order] {"status": "pending"}',
        "[final answer] W1 is pending.",
    ]
    assert (rendered.steps, rendered.tool_calls, rendered.tool_errors) == (3, 2, 1)
