"""Documented features used together (issue 36): judges, conversations, function-calling tools,
simulated users, RAG metrics, agents, under xdist and from the cache.

Each session batches several combinations in one eval file, against the fake server: the model
under test is ``fake`` (``fake-model``), every judge and the simulated user ``fake2``
(``fake-model-2``). What is checked is what each helper model was sent (a tool call is text it
can read, never an empty answer or message) and that no harness limit shows as a score.
The rendering itself is checked in-process at the end.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import Bench, Rule
from judged_runs import replayed_with_no_request

from pytest_llmbench.engine.conversation_calls import NOT_RUN_RESULT
from pytest_llmbench.engine.grading import said_messages
from pytest_llmbench.scoring.conversation import (
    SHOWN_ARGUMENTS_CHARS,
    SHOWN_RESULT_CHARS,
    call_line,
    reply_text,
    result_line,
)

TOOLS = """
tools:
  - {name: get_weather, parameters: {type: object, properties: {city: {type: string}}}}
"""
#: How the judges and the simulated user read the model's call, and its "not run" result.
CALLED = '[called get_weather({"city": "Paris"})]'
NOT_RUN = f"[get_weather returned: {NOT_RUN_RESULT}]"
#: The model's reply of calls alone, as the fake server is scripted to give it.
WEATHER = [{"name": "get_weather", "arguments": {"city": "Paris"}}]

#: Every judged type and scope on replies made of tool calls, and a simulated user reading one.
TOOLS_AND_JUDGES = (
    TOOLS
    + """
cases:
  - id: talk
    turns:
      - user: What is the weather in Paris?
        assert:
          - {type: llm-rubric, value: TURN-RUBRIC calls the tool, judges: [fake2]}
      - user: Thanks. And tomorrow?
    assert:
      - {type: llm-rubric, value: CONV-RUBRIC looks it up, judges: [fake2], scope: conversation}
      - {type: closed-qa, value: CONV-CRITERION uses the tool, judges: [fake2], scope: conversation}
      - {type: jury, judges: [fake2], scope: conversation}
  - id: one-reply
    prompt: What is the weather in Paris, in one reply?
    context: ["Paris is sunny today."]
    assert:
      - {type: llm-rubric, value: PLAIN-RUBRIC calls the tool, judges: [fake2]}
      - {type: jury, judges: [fake2]}
      - type: model-graded
        prompt: "GRADER: did it look the weather up? {{output}}"
        choices: {A: 1, B: 0}
        judges: [fake2]
      - {type: faithfulness, judges: [fake2]}
      - {type: answer-relevance, judges: [fake2]}
  - id: simulated
    context: ["Paris is sunny, today and tomorrow."]
    simulated_user:
      instructions: You want to know the weather in Paris.
      model: fake2
      max_turns: 2
      first_message: What is the weather in Paris?
    assert:
      - {type: llm-rubric, value: SIM-RUBRIC looks it up, judges: [fake2], scope: conversation}
      - {type: faithfulness, judges: [fake2]}
  - id: stops
    simulated_user:
      instructions: You are Bob.
      model: fake2
      max_turns: 3
      first_message: What is the weather in Paris?
      assert: [{type: tool-call, value: get_weather, stop_on_fail: true}]
"""
)
_JURY = (
    "correctness completeness relevance format coherence following_instructions "
    "role_adherence knowledge_retention goal_completion"
).split()


def _jury(keys: list[str]) -> str:
    return json.dumps({key: {"score": 4, "reason": "seen"} for key in keys})


def _script(bench: Bench) -> None:
    """The model calls get_weather when asked about Paris, answers in words otherwise; the
    judges reply in each kind's shape; the simulated user asks about tomorrow."""
    judge = "fake-model-2"
    rules = [
        Rule(model=judge, match_any="You play the user", reply="Thanks. And tomorrow?"),
        Rule(model=judge, match_any="role_adherence", reply=_jury(_JURY)),
        Rule(model=judge, match_any="following_instructions", reply=_jury(_JURY[:6])),
        Rule(model=judge, match="CONV-CRITERION", reply='{"verdict": "Y", "reason": "it does"}'),
        Rule(model=judge, match="GRADER", reply='{"choice": "A"}'),
        Rule(
            model=judge,
            match_any="factual claims",
            reply='{"claims": [{"claim": "it called", "supported": true, "reason": "r"}]}',
        ),
        Rule(model=judge, reply='{"score": 1.0, "reason": "it called the tool"}'),
        Rule(model="fake-model", match="weather in Paris", tool_calls=WEATHER),
        Rule(model="fake-model", match="tomorrow", reply="Sunny tomorrow too."),
    ]
    for rule in rules:
        bench.server.add_rule(rule)


def _bodies(bench: Bench, model: str) -> list[dict[str, Any]]:
    return [r.body for r in bench.server.chat_requests() if r.body.get("model") == model]


def _judge_texts(bench: Bench, needle: str) -> list[str]:
    """The whole text (every message) of each judge request holding ``needle``."""
    texts = []
    for body in _bodies(bench, "fake-model-2"):
        text = "\n".join(str(message["content"]) for message in body["messages"])
        if needle in text and "You play the user" not in text:
            texts.append(text)
    return texts


def test_every_judge_and_scope_sees_the_tool_calls_and_the_simulated_user_too(
    bench: Bench,
) -> None:
    _script(bench)
    bench.eval_file("tools", TOOLS_AND_JUDGES)
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=3, failed=1)
    records = {record["case_id"]: record for record in bench.records()}
    stops = records.pop("stops")
    for record in records.values():  # every judged verdict checked and passed, none unchecked
        assert record["assertions"] and all(v["passed"] for v in record["assertions"])
        assert all(j["error"] is None for j in record["judges"])
    # stop_on_fail reads a reply's calls as the item's scoring does: turn 1 called the tool (it
    # went on), turn 2 did not (it stopped there)
    assert [(v["turn"], v["passed"]) for v in stops["assertions"]] == [(1, True), (2, False)]
    assert stops["conversation_stopped"] == "failed"

    # a judge of a reply of calls alone sees the calls in its <answer>, never an empty one
    for needle in ("TURN-RUBRIC", "PLAIN-RUBRIC", "GRADER", "addresses the"):
        (text,) = _judge_texts(bench, needle)
        assert CALLED in text and "<answer>\n\n</answer>" not in text, needle
    plain, last = _judge_texts(bench, "factual claims")  # one-reply's, the simulated user's
    assert f"<answer>\n{CALLED}\n</answer>" in plain
    assert "<answer>\nSunny tomorrow too.\n</answer>" in last  # the last reply's claims
    (plain_jury,) = [t for t in _judge_texts(bench, "following_instructions") if "<answer>" in t]
    assert f"<answer>\n{CALLED}\n</answer>" in plain_jury
    # a conversation judge sees the call and its "not run" result in the assistant's message
    for needle in ("CONV-RUBRIC", "CONV-CRITERION", "role_adherence", "SIM-RUBRIC"):
        (text,) = _judge_texts(bench, needle)
        assert f"<assistant>\n{CALLED}\n{NOT_RUN}\n</assistant>" in text, needle
        assert "Sunny tomorrow too." in text

    # the simulated user reads the call as text, and no message it is sent is empty
    (user_call,) = [
        body
        for body in _bodies(bench, "fake-model-2")
        if "You want to know the weather" in body["messages"][0]["content"]
    ]
    assert all(str(m["content"]).strip() for m in user_call["messages"])
    assert user_call["messages"][-1] == {"role": "user", "content": f"{CALLED}\n{NOT_RUN}"}
    assert records["simulated"]["conversation_stopped"] == "max_turns"


def test_a_failed_turn_of_calls_alone_shows_its_calls_in_the_transcript(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="weather in Paris", tool_calls=WEATHER))
    bench.server.add_rule(Rule(match="tomorrow", reply="Sunny."))
    talk = (
        TOOLS
        + """
cases:
  - id: talk
    turns:
      - user: What is the weather in Paris?
      - user: Thanks. And tomorrow?
        assert: [{type: icontains, value: rain}]
"""
    )
    bench.eval_file("talk", talk)
    result = bench.run("--models=fake")
    result.assert_outcomes(failed=1)
    assert f"    [1] assistant: {CALLED}\n    [2] user: Thanks." in result.stdout.str()


# -- the same conversation judge from the cache ---------------------------------------------

#: Two conversations with a tool call each: the judge passes one and fails the other.
JUDGED_TALKS = (
    TOOLS
    + """
cases:
  - id: good
    turns:
      - user: What is the weather in Paris?
      - user: Thanks, good.
    assert: [{type: llm-rubric, value: uses the tool, judges: [fake2], scope: conversation}]
  - id: bad
    turns:
      - user: What is the weather in Paris, really?
      - user: Thanks, bad.
    assert: [{type: llm-rubric, value: uses the tool, judges: [fake2], scope: conversation}]
"""
)


def _judged_talks(bench: Bench) -> None:
    good = '{"score": 1.0, "reason": "y"}'
    bench.server.add_rule(Rule(model="fake-model-2", match="good", reply=good))
    bench.server.add_rule(Rule(model="fake-model-2", reply='{"score": 0.0, "reason": "n"}'))
    bench.server.add_rule(Rule(model="fake-model", match="weather in Paris", tool_calls=WEATHER))
    bench.server.add_rule(Rule(model="fake-model", match="Thanks", reply="You are welcome."))
    bench.eval_file("talks", JUDGED_TALKS)


def _verdicts(bench: Bench) -> dict[str, Any]:
    return {
        record["case_id"]: (
            [(v["passed"], v["score"], v["reason"]) for v in record["assertions"]],
            [(j["scores"], j["error"]) for j in record["judges"]],
        )
        for record in bench.records()
    }


@pytest.mark.parametrize("again", ["--cache=replay", "--rescore"])
def test_a_conversation_judge_of_tool_calls_replays_with_no_request(
    bench: Bench, again: str
) -> None:
    _judged_talks(bench)
    replayed_with_no_request(bench, again, _verdicts)


# -- the rendering, in-process ----------------------------------------------------------------


def test_a_reply_reads_as_its_text_then_a_line_per_call() -> None:
    calls = [
        {"id": "c1", "name": "get_weather", "arguments": '{"city":  "Paris"}'},
        {"name": "get_time", "arguments": ""},
        {"name": "broken", "arguments": '{"city": '},
    ]
    assert reply_text("Let me look.", calls).splitlines() == [
        "Let me look.",
        CALLED,
        "[called get_time()]",
        '[called broken({"city": )]',  # not JSON: shown as the model wrote it
    ]
    assert reply_text("", calls[:1]) == CALLED  # calls alone: the calls, not an empty answer
    assert reply_text("Plain.", ()) == "Plain."
    assert call_line(_wired("c1", "f", '{"a": 1}')) == '[called f({"a": 1})]'


def test_long_arguments_and_results_are_cut_with_a_note() -> None:
    line = call_line({"name": "write", "arguments": {"text": "x" * 2000}})
    assert len(line) < SHOWN_ARGUMENTS_CHARS + 60 and "more characters]" in line
    result = result_line("read_file", "y" * (SHOWN_RESULT_CHARS + 250))
    assert result.endswith(" [... 250 more characters]]")


def _wired(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """A call in OpenAI's wire shape, as a conversation's history holds it."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_a_history_folds_each_result_into_the_message_that_called() -> None:
    history = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                _wired("a", "get_weather", '{"city": "Paris"}'),
                _wired("b", "get_time", "{}"),
            ],
        },
        {"role": "tool", "tool_call_id": "b", "content": "noon"},
        {"role": "tool", "tool_call_id": "a", "content": "error: no network"},
        {"role": "user", "content": [{"type": "text", "text": "And now?"}, {"type": "image_url"}]},
    ]
    assert said_messages(history) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "\n".join(
                [
                    CALLED,
                    "[called get_time({})]",
                    "[get_time returned: noon]",
                    "[get_weather returned: error: no network]",
                ]
            ),
        },
        {"role": "user", "content": "And now?"},
    ]


# -- prompt variants x repeats x tools x judges, under xdist and from the cache ---------------

VARIANTS = (
    TOOLS
    + """
prompts:
  - {name: terse, prompt: "TERSE weather in {{city}}?"}
  - {name: chatty, prompt: "CHATTY weather in {{city}}, please?"}
cases:
  - id: one
    vars: {city: Paris}
    assert:
      - {type: tool-call, value: get_weather, args: {city: Paris}}
      - {type: llm-rubric, value: V-RUBRIC calls the tool, judges: [fake2]}
  - id: talk
    vars: {city: Paris}
    turns:
      - user: "{{prompt}}"
      - user: Thanks. And tomorrow?
    assert:
      - {type: llm-rubric, value: VC-RUBRIC looks it up, judges: [fake2], scope: conversation}
"""
)


def _variant_rows(bench: Bench) -> list[Any]:
    return sorted(
        (
            record["nodeid"],
            record["outcome"],
            [(v["type"], v["passed"], v["score"], v.get("turn")) for v in record["assertions"]],
            [(j["scores"], j["error"]) for j in record["judges"]],
        )
        for record in bench.records()
    )


@pytest.mark.slow
def test_each_variant_and_repeat_is_judged_on_its_own_calls_under_xdist_and_replay(
    bench: Bench,
) -> None:
    bench.server.add_rule(Rule(model="fake-model-2", reply='{"score": 1.0, "reason": "y"}'))
    bench.server.add_rule(Rule(model="fake-model", match="weather in Paris", tool_calls=WEATHER))
    bench.server.add_rule(Rule(model="fake-model", match="tomorrow", reply="Sunny."))
    bench.eval_file("variants", VARIANTS)
    args = ("--models=fake", "--repeat=2", "--cache-dir=c")
    bench.run_subprocess(*args, "--cache=use").assert_outcomes(passed=8)
    first = _variant_rows(bench)
    # each variant and repeat asked its own judge, shown its own wording and its calls
    plain = [t for t in _judge_texts(bench, "V-RUBRIC")]
    assert len(plain) == 4 and all(f"<answer>\n{CALLED}\n</answer>" in t for t in plain)
    assert sorted(t.count("<question>\nTERSE weather") for t in plain) == [0, 0, 1, 1]
    talks = _judge_texts(bench, "VC-RUBRIC")
    assert len(talks) == 4 and all(f"{CALLED}\n{NOT_RUN}" in t for t in talks)
    assert sorted(t.count("<user>\nCHATTY weather") for t in talks) == [0, 0, 1, 1]

    bench.server.reset()  # a call now would be answered "ok": a malformed verdict, no call
    bench.run_subprocess("-n", "2", *args, "--cache=replay").assert_outcomes(passed=8)
    assert bench.server.requests == []
    assert {r["worker"] for r in bench.records()} == {"gw0", "gw1"}
    assert _variant_rows(bench) == first


def test_pairwise_shows_the_baselines_calls_as_it_shows_the_models(bench: Bench) -> None:
    pair = (
        TOOLS
        + """
cases:
  - id: paris
    prompt: What is the weather in Paris?
    assert: [{type: pairwise, judges: [fake2]}]
"""
    )
    bench.eval_file("pair", pair)
    bench.server.add_rule(Rule(model="fake-model", tool_calls=WEATHER, times=1))
    bench.run("--models=fake", "--results-dir=base").assert_outcomes(skipped=1)  # unchecked
    bench.server.add_rule(Rule(model="fake-model", reply="Let me see.", tool_calls=WEATHER))
    bench.server.add_rule(Rule(model="fake-model-2", reply='{"choice": "A"}'))
    bench.run("--models=fake", "--baseline=base").assert_outcomes(passed=1)  # a tie
    shown = [body["messages"][0]["content"] for body in _bodies(bench, "fake-model-2")]
    mine = f"Let me see.\n{CALLED}"
    for first, second in ((CALLED, mine), (mine, CALLED)):  # both orders, both with calls
        assert sum(f"[Answer A]\n{first}\n\n[Answer B]\n{second}\n" in t for t in shown) == 1


def test_select_best_shows_a_contestants_calls(bench: Bench) -> None:
    best = (
        TOOLS
        + """
cases:
  - id: paris
    prompt: What is the weather in Paris?
    assert: [{type: select-best, judges: [fake2]}]
"""
    )
    bench.eval_file("best", best)
    for label in "AB":  # the judge picks the answer that called the tool, wherever it is shown
        picked = json.dumps({"choice": label})
        shown = f"[Answer {label}]\n{CALLED}"
        bench.server.add_rule(Rule(model="fake-model-2", match=shown, reply=picked))
    bench.server.add_rule(Rule(model="fake-model", tool_calls=WEATHER))
    bench.server.add_rule(Rule(model="fake-model-2", reply="It is sunny."))
    bench.run("--models=fake,fake2").assert_outcomes(passed=1, failed=1)
    records = {record["model"]: record for record in bench.records()}
    assert (records["fake"]["outcome"], records["fake2"]["outcome"]) == ("passed", "failed")


# -- agents and RAG metrics under prompt variants and repeats, replayed -----------------------

AGENT_VARIANTS = """
kind: agent
tools: [read_file]
max_turns: 4
prompts:
  - {name: terse, prompt: "TERSE: what does {{file}} say?"}
  - {name: chatty, prompt: "CHATTY: please tell me what {{file}} says."}
cases:
  - id: reads
    vars: {file: notes.txt}
    files: {notes.txt: "remember the milk"}
    context: ["The note says: remember the milk."]
    expected: milk
    assert: [icontains, {type: faithfulness, judges: [fake2]}]
"""
RAG_VARIANTS = """
prompts:
  - {name: terse, prompt: "TERSE: capital of {{country}}?"}
  - {name: chatty, prompt: "CHATTY: which city is the capital of {{country}}?"}
cases:
  - id: france
    vars: {country: France}
    context: ["Paris is the capital of France."]
    assert:
      - {type: faithfulness, judges: [fake2]}
      - {type: answer-relevance, judges: [fake2]}
      - {type: context-precision, judges: [fake2]}
"""


def _rag_rows(bench: Bench) -> list[Any]:
    return sorted(
        (
            record["nodeid"],
            record["outcome"],
            record["response"],
            [(v["type"], v["passed"], v["score"]) for v in record["assertions"]],
        )
        for record in bench.records()
    )


def test_agents_and_rag_metrics_under_variants_and_repeats_replay_with_no_request(
    bench: Bench,
) -> None:
    judge = "fake-model-2"
    claims = '{"claims": [{"claim": "c", "supported": true, "reason": "r"}]}'
    chunks = '{"chunks": [{"chunk": 1, "relevant": true, "reason": "r"}]}'
    read = [{"name": "read_file", "arguments": {"path": "notes.txt"}}]
    for rule in (
        Rule(model=judge, match_any="factual claims", reply=claims),
        Rule(model=judge, match_any="Judge each chunk", reply=chunks),
        Rule(model=judge, reply='{"score": 1.0, "reason": "direct"}'),
        Rule(model="fake-model", match_last="remember the milk", reply="It says: milk."),
        Rule(model="fake-model", match="notes.txt", tool_calls=read),
        Rule(model="fake-model", match="capital of France", reply="Paris."),
    ):
        bench.server.add_rule(rule)
    bench.eval_file("agent", AGENT_VARIANTS)
    bench.eval_file("rag", RAG_VARIANTS)
    args = ("--models=fake", "--repeat=2", "--cache-dir=c")
    bench.run(*args, "--cache=use").assert_outcomes(passed=8)
    first = _rag_rows(bench)
    # each variant's judges were asked about its own wording, once per repeat
    for wording in ("TERSE: capital of France?", "CHATTY: which city is the capital"):
        assert len(_judge_texts(bench, f"<question>\n{wording}")) == 3 * 2  # 3 metrics x 2
    bench.server.reset()
    bench.run(*args, "--cache=replay").assert_outcomes(passed=8)
    assert bench.server.requests == []
    assert _rag_rows(bench) == first
    assert all(j["cached"] for record in bench.records() for j in record["judges"])


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            "cases:\n  - id: x\n    simulated_user: {instructions: hi}\n"
            "    choices: [a, b]\n    answer: a\n",
            4,
            "`choices` go with one prompt, not a simulated user",
        ),
    ],
)
def test_a_simulated_user_where_it_cannot_talk_is_a_collection_error(
    tmp_path: Any, text: str, line: int, message: str
) -> None:
    from pytest_llmbench.spec.load import load_spec
    from pytest_llmbench.spec.resolved import EvalFileError

    path = tmp_path / "sim.eval.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(EvalFileError, match=message) as info:
        load_spec(path)
    assert info.value.line == line


# -- an agent's judges: its calls and the real results it was shown ---------------------------

AGENT = """
kind: agent
tools: [read_file]
max_turns: 4
cases:
  - id: reads
    files: {notes.txt: "remember the milk"}
    prompt: What does notes.txt say?
    assert:
      - {type: llm-rubric, value: AGENT-RUBRIC reads the note, judges: [fake2]}
      - {type: closed-qa, value: AGENT-CRITERION read it, judges: [fake2], scope: conversation}
"""


def test_an_agents_judges_see_each_call_with_its_real_result(bench: Bench) -> None:
    judge = "fake-model-2"
    said_yes = '{"verdict": "Y", "reason": "y"}'
    bench.server.add_rule(Rule(model=judge, match="AGENT-CRITERION", reply=said_yes))
    bench.server.add_rule(Rule(model=judge, reply='{"score": 1.0, "reason": "it read it"}'))
    missing = [{"name": "read_file", "arguments": {"path": "gone.txt"}}]
    notes = [{"name": "read_file", "arguments": {"path": "notes.txt"}}]
    bench.server.add_rule(Rule(match_last="remember the milk", reply="It says: remember the milk."))
    bench.server.add_rule(Rule(match_last="error:", tool_calls=notes))
    bench.server.add_rule(Rule(match="notes.txt say", tool_calls=missing))
    bench.eval_file("agent", AGENT)
    bench.run("--models=fake").assert_outcomes(passed=1)
    for needle in ("AGENT-RUBRIC", "AGENT-CRITERION"):
        (text,) = _judge_texts(bench, needle)
        lines = text.split("It says: remember the milk.")[0].splitlines()[-4:]
        assert lines[0] == '[called read_file({"path": "gone.txt"})]', needle
        assert lines[1].startswith("[read_file returned: error: ")
        assert lines[2:] == [
            '[called read_file({"path": "notes.txt"})]',
            "[read_file returned: remember the milk]",
        ]
