"""A reply's thinking told apart from its answer by the ``thinking:`` rule
(models/providers/thinking.py): the splitting rules, the rule's settings in a profile and an eval
file, and where replies are read (an item's reply after the cache, judges, agents)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import FAKE_KEY_ENV, Bench, Rule
from test_models_reasoning import TWO_TURNS

from pytest_llmbench.models import ThinkingRule, merged_rule, read_reply, split
from pytest_llmbench.models.providers.completion import Completion
from pytest_llmbench.models.providers.thinking import DEFAULT_TAGS
from pytest_llmbench.models.providers.tokens import counted_reasoning

DEFAULT = ThinkingRule()


# -- the rules of split -------------------------------------------------------------------------


def test_a_leading_block_is_thinking_and_the_answer_follows() -> None:
    assert split("<think>Paris, surely.</think>\n\nParis.", "", DEFAULT) == (
        "Paris.", "Paris, surely.", None,
    )  # fmt: skip
    assert split("  \n<thinking>hmm</thinking>Paris.", "", DEFAULT) == ("Paris.", "hmm", None)
    assert split("<budget:thinking>b</budget:thinking>A", "", DEFAULT) == ("A", "b", None)


def test_a_reply_without_thinking_is_left_as_it_is() -> None:
    assert split("  Paris.  ", "", DEFAULT) == ("  Paris.  ", "", None)
    assert split("", "", DEFAULT) == ("", "", None)


def test_a_tag_later_in_the_answer_is_the_answers() -> None:
    """A tag in a code block, or in a sentence about tags, is not thinking: only blocks that
    open the reply are."""
    code = "Use this:\n```html\n<think>x</think>\n```"
    assert split(code, "", DEFAULT) == (code, "", None)
    said = "The <think> tag is HTML-like."
    assert split(said, "", DEFAULT) == (said, "", None)
    # After a leading block, a block in the answer stays in the answer.
    reply = "<think>a</think>Write `<think>b</think>` to think."
    assert split(reply, "", DEFAULT) == ("Write `<think>b</think>` to think.", "a", None)


def test_nesting_is_not_counted_the_first_closing_tag_ends_the_block() -> None:
    reply = "<think>a <think>b</think> c</think>Paris."
    assert split(reply, "", DEFAULT) == ("c</think>Paris.", "a <think>b", None)


def test_empty_blocks_are_removed_and_several_leading_blocks_are_joined() -> None:
    assert split("<think>\n\n</think>\n\nParis.", "", DEFAULT) == ("Paris.", "", None)
    assert split("<think>a</think> <thinking>b</thinking>\nParis.", "", DEFAULT) == (
        "Paris.", "a\n\nb", None,
    )  # fmt: skip


def test_thinking_given_apart_and_inline_thinking_are_joined() -> None:
    assert split("<think>inline</think>Paris.", "apart", DEFAULT) == (
        "Paris.", "apart\n\ninline", None,
    )  # fmt: skip
    # Given apart only: the answer loses the whitespace a removed block left.
    assert split("\n\nParis.", "apart", DEFAULT) == ("Paris.", "apart", None)


def test_an_unclosed_opening_tag_is_no_answer() -> None:
    answer, thinking, unfinished = split("<think>Paris or Lyon, let me", "", DEFAULT)
    assert (answer, thinking) == ("", "Paris or Lyon, let me")
    assert unfinished == "its thinking was never closed (<think> without </think>)"
    # An answer that is only thinking, closed: an empty answer, not an unfinished one.
    assert split("<think>all thought</think>", "", DEFAULT) == ("", "all thought", None)


def test_a_lone_closing_tag_ends_thinking_opened_in_the_prompt() -> None:
    """Qwen3.5 and DeepSeek-R1-0528 templates put <think> in the prompt: the reply has only
    the closing tag."""
    assert split("Paris, surely.\n</think>\n\nParis.", "", DEFAULT) == (
        "Paris.", "Paris, surely.", None,
    )  # fmt: skip
    off = ThinkingRule(implicit_open=False)
    assert split("Paris, surely.</think>Paris.", "", off) == (
        "Paris, surely.</think>Paris.", "", None,
    )  # fmt: skip
    # A closing tag after its opening tag in the answer is no lone tag.
    said = "Close <think> with </think>."
    assert split(said, "", DEFAULT) == (said, "", None)
    # The thinking disabled: the template's empty block leaves a lone, empty closing tag.
    assert split("\n\n</think>\n\nParis.", "", DEFAULT) == ("Paris.", "", None)


def test_tags_given_are_exactly_those() -> None:
    rule = ThinkingRule(tags=(("<reason>", "</reason>"),))
    assert split("<reason>r</reason>Paris.", "", rule) == ("Paris.", "r", None)
    assert split("<think>t</think>Paris.", "", rule) == ("<think>t</think>Paris.", "", None)
    answer, _, unfinished = split("<reason>never done", "", rule)
    assert answer == "" and unfinished is not None and "<reason>" in unfinished


def test_strip_false_shows_the_thinking_to_the_answer_checks_in_canonical_tags() -> None:
    rule = ThinkingRule(strip=False)
    assert split("<thinking>hmm</thinking>Paris.", "apart", rule) == (
        "<think>apart\n\nhmm</think>Paris.", "apart\n\nhmm", None,
    )  # fmt: skip
    assert split("Paris.", "", rule) == ("Paris.", "", None)


# -- read_reply: what an item reads --------------------------------------------------------------


def _completion(text: str, reasoning: str = "", finish_reason: str = "stop") -> Completion:
    return Completion(
        text=text, model_id="m", input_tokens=3, output_tokens=9, tokens_estimated=False,
        ttft_s=None, latency_s=0.1, cost_usd=None, retries=0, streamed=False,
        finish_reason=finish_reason, reasoning=reasoning,
    )  # fmt: skip


def test_read_reply_says_why_a_reply_is_no_answer() -> None:
    cut = read_reply(_completion("<reason>Paris or", finish_reason="length"), ThinkingRule(
        tags=(("<reason>", "</reason>"),)
    ))  # fmt: skip
    assert (cut.text, cut.reasoning) == ("", "Paris or")
    assert cut.unfinished == (
        "the reply ended inside its thinking when it reached max_tokens: no answer (raise "
        "max_tokens)"
    )
    # The same reply under the default tags is an answer (a custom tag is only text there).
    assert read_reply(_completion("<reason>Paris or", finish_reason="length"), DEFAULT).unfinished is None  # fmt: skip
    ran_out = read_reply(_completion("", "long thought", "length"), DEFAULT).unfinished
    assert ran_out is not None and ran_out.startswith("ran out of tokens while reasoning")
    # An unclosed block is unfinished even under strip: false.
    shown = read_reply(_completion("<think>hmm"), ThinkingRule(strip=False))
    assert shown.unfinished is not None and shown.text == "<think>hmm</think>"
    assert read_reply(_completion("<think>a</think>Paris.", "", "length"), DEFAULT).unfinished is None  # fmt: skip


def test_thinking_the_server_gave_apart_is_kept_as_it_came() -> None:
    """Nothing in the text to split: the server's thinking is recorded exactly (its spaces too);
    whitespace alone is no thinking."""
    read = read_reply(_completion("Paris.", "  First France, then its capital. "), DEFAULT)
    assert (read.text, read.reasoning) == ("Paris.", "  First France, then its capital. ")
    assert read_reply(_completion("Paris.", " \n"), DEFAULT).reasoning == ""


def test_thinking_the_rule_finds_is_counted_when_the_provider_counted_none() -> None:
    """Thinking in another tag reaches the item only once the rule reads it: its tokens are
    counted then (marked estimated), at most the reply's output tokens; a provider's own count
    is kept."""
    rule = ThinkingRule(tags=(("<reason>", "</reason>"),))
    thought = "France's capital is Paris"
    read = read_reply(_completion(f"<reason>{thought}</reason>Paris"), rule)
    assert (read.text, read.reasoning) == ("Paris", thought)
    assert read.reasoning_tokens_estimated
    assert read.reasoning_tokens is not None and 0 < read.reasoning_tokens <= 9
    long = read_reply(_completion(f"<reason>{thought * 20}</reason>Paris"), rule)
    assert long.reasoning_tokens == 9  # no more than the reply's output tokens
    reported = dataclasses.replace(
        _completion(f"<reason>{thought}</reason>Paris"), reasoning_tokens=5
    )
    assert read_reply(reported, rule).reasoning_tokens == 5
    assert not read_reply(reported, rule).reasoning_tokens_estimated
    # Nothing more found: the client's reading stands.
    plain = read_reply(_completion("Paris"), rule)
    assert (plain.reasoning_tokens, plain.reasoning_tokens_estimated) == (None, False)


def test_the_files_keys_override_the_profiles() -> None:
    profile = ThinkingRule(implicit_open=False, tags=(("<r>", "</r>"),))
    file = ThinkingRule.model_validate({"strip": False})
    merged = merged_rule(profile, file)
    assert (merged.strip, merged.implicit_open, merged.tags) == (False, False, (("<r>", "</r>"),))
    assert merged_rule(None, None) == DEFAULT
    assert merged_rule(None, file).tags == DEFAULT_TAGS


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"tags": "<think>"}, "expected a list of [open, close] pairs"),
        ({"tags": [["<think>"]]}, "pair 1: expected [open, close]"),
        ({"tags": [["<a>", "</a>"], ["<b>", ""]]}, "pair 2: expected [open, close]"),
        ({"tags": [["<a>", 3]]}, "pair 1"),
        ({"strip": "yes"}, "strip"),
        ({"implicit": True}, "implicit"),
    ],
)
def test_a_malformed_rule_is_refused(value: dict[str, Any], message: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=re.escape(message)):
        ThinkingRule.model_validate(value)


# -- the rule in a profile and in an eval file -----------------------------------------------------


def test_a_profiles_thinking_is_read_and_a_bad_one_names_file_and_line(tmp_path: Path) -> None:
    from pytest_llmbench.models import ProfileError, load_profiles

    good = tmp_path / "good"
    good.mkdir()
    (good / "p.yaml").write_text(
        "models:\n  qwen:\n    model: openai/qwen\n"
        "    thinking: {tags: [['<r>', '</r>']], implicit_open: false}\n"
    )
    profile = load_profiles([good]).models["qwen"]
    assert profile.thinking == ThinkingRule(tags=(("<r>", "</r>"),), implicit_open=False)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "p.yaml").write_text(
        "models:\n  qwen:\n    model: openai/qwen\n    thinking:\n      strip: true\n"
        "      tags: [['<r>']]\n"
    )
    with pytest.raises(ProfileError) as caught:
        load_profiles([bad])
    assert caught.value.line == 6
    assert "thinking.tags" in str(caught.value) and "pair 1" in str(caught.value)


def test_a_bad_thinking_key_in_an_eval_file_is_a_collection_error(bench: Bench) -> None:
    bench.eval_file(
        "bad",
        "thinking:\n  tags: [[<think>, '']]\ncases:\n  - {id: a, prompt: Hi}\n",
    )
    result = bench.run("--models=fake")
    result.stdout.fnmatch_lines(["*bad.eval.yaml:2*thinking.tags*pair 1*"])
    assert result.ret != 0


# -- an item's reply, read after the cache -------------------------------------------------------

REASONED = "<reason>Paris, surely; the capital of France is Paris.</reason>\nParis."
CAPITAL = """
cases:
  - {id: france, prompt: Capital of France?, assert: [{type: equals, value: Paris.}]}
"""
OWN_TAGS = "thinking: {tags: [[<reason>, </reason>]]}\n"


def test_rescore_reads_the_cached_reply_by_the_files_new_rule_with_no_request(
    bench: Bench,
) -> None:
    """The cache keeps the reply as the model wrote it (a custom tag is no thinking to the
    client): a rescore after the file's ``thinking:`` changed reads it anew, calling nothing."""
    bench.server.add_rule(Rule(reply=REASONED))
    bench.eval_file("capital", CAPITAL)
    bench.run("--models=fake", "--cache=use", "--cache-dir=cache").assert_outcomes(failed=1)
    (record,) = bench.records()
    assert (record["response"], record["reasoning"]) == (REASONED, None)
    asked = len(bench.server.chat_requests())
    bench.eval_file("capital", OWN_TAGS + CAPITAL)
    bench.run("--models=fake", "--rescore", "--cache-dir=cache").assert_outcomes(passed=1)
    assert len(bench.server.chat_requests()) == asked  # no call made
    (again,) = bench.records()
    assert again["response"] == "Paris."
    assert again["reasoning"] == "Paris, surely; the capital of France is Paris."
    assert again["cached"] and again["case_hash"] != record["case_hash"]


def _reasoner_profile(bench: Bench, thinking: str) -> None:
    """A `reasoner` profile on the fake server with ``thinking``."""
    bench.pytester.makefile(
        ".yaml",
        **{
            "profiles/reasoner": f"""
models:
  reasoner:
    model: openai/fake-model
    api_base: {bench.server.base_url}
    api_key_env: {FAKE_KEY_ENV}
    thinking: {thinking}
"""
        },
    )


def test_a_profiles_rule_reads_its_replies_and_the_files_keys_override_it(bench: Bench) -> None:
    _reasoner_profile(bench, "{tags: [[<reason>, </reason>]], implicit_open: false}")
    bench.server.add_rule(Rule(match="France", reply=REASONED))
    bench.server.add_rule(Rule(match="Spain", reply="Madrid, surely.</reason>Madrid."))
    spain = "  - {id: spain, prompt: Capital of Spain?, assert: [{type: equals, value: Madrid.}]}\n"
    bench.eval_file("capital", CAPITAL + spain)
    bench.run("--models=reasoner").assert_outcomes(passed=1, failed=1)
    seen = {r["case_id"]: (r["response"], r["reasoning"]) for r in bench.records()}
    assert seen["france"] == ("Paris.", "Paris, surely; the capital of France is Paris.")
    assert seen["spain"] == ("Madrid, surely.</reason>Madrid.", None)  # implicit_open: false
    # The file's implicit_open over the profile's; the profile's tags stay.
    bench.eval_file("capital", "thinking: {implicit_open: true}\n" + CAPITAL + spain)
    bench.run("--models=reasoner").assert_outcomes(passed=2)
    seen = {r["case_id"]: (r["response"], r["reasoning"]) for r in bench.records()}
    assert seen["spain"] == ("Madrid.", "Madrid, surely.")


def test_strip_false_shows_the_checks_the_thinking_and_keeps_it_in_the_record(
    bench: Bench,
) -> None:
    bench.server.add_rule(Rule(reply="Paris.", reasoning="France: Paris."))
    bench.eval_file(
        "capital",
        "thinking: {strip: false}\ncases:\n  - id: france\n    prompt: Capital of France?\n"
        "    assert: [{type: equals, value: '<think>France: Paris.</think>Paris.'}]\n",
    )
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert (record["response"], record["reasoning"]) == (
        "<think>France: Paris.</think>Paris.", "France: Paris.",
    )  # fmt: skip


def test_a_custom_tag_never_closed_is_unchecked(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply="<reason>Paris or Lyon, let me think"))
    bench.eval_file("capital", OWN_TAGS + CAPITAL)
    result = bench.run("--models=fake", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*nothing checked: the reply ended inside its thinking*"])
    (record,) = bench.records()
    assert (record["error_kind"], record["response"]) == ("unchecked", "")
    assert record["reasoning"] == "Paris or Lyon, let me think"


# -- judges ----------------------------------------------------------------------------------------

CANDIDATE_THOUGHT = "The user wants the capital; SECRET-THOUGHT says Paris."
#: A reasoning judge whose template opened <think> in the prompt: only the closing tag is in
#: its reply (no client moves it apart), then the verdict.
JUDGE_REPLY = 'It names Paris, the capital: a good answer.\n</think>\n{"score": 0.9, "reason": "names Paris"}'  # fmt: skip
JUDGED = """
cases:
  - id: france
    prompt: Capital of France?
    assert:
      - {type: llm-rubric, value: Names Paris, judges: [thinker]}
      - {type: llm-rubric, value: Says Paris plainly, judges: [thinker], show_reasoning: true}
"""


def _thinking_judge(bench: Bench) -> None:
    bench.pytester.makefile(
        ".yaml",
        **{
            "profiles/judges": f"""
models:
  thinker:
    model: openai/judge-think
    api_base: {bench.server.base_url}
    api_key_env: {FAKE_KEY_ENV}
"""
        },
    )
    bench.server.add_rule(Rule(model="judge-think", reply=JUDGE_REPLY))
    bench.server.add_rule(Rule(model="fake-model", reply="Paris.", reasoning=CANDIDATE_THOUGHT))


def _judge_asked(bench: Bench, rubric: str) -> str:
    """The text of the judge request whose rubric is ``rubric``."""
    bodies = [
        "\n".join(str(m["content"]) for m in r.body["messages"])
        for r in bench.server.chat_requests()
        if r.body.get("model") == "judge-think"
    ]
    (body,) = [body for body in bodies if f"<rubric>\n{rubric}\n</rubric>" in body]
    return body


@pytest.mark.parametrize("client", ["auto", "litellm"])
def test_a_reasoning_judges_thinking_is_no_judge_error_and_it_reads_the_answer_alone(
    bench: Bench, client: str
) -> None:
    _thinking_judge(bench)
    bench.eval_file("judged", JUDGED)
    bench.run("--models=fake", f"--client={client}").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert [(j["error"], j["scores"]) for j in record["judges"]] == [
        (None, {"rubric": 0.9}), (None, {"rubric": 0.9}),
    ]  # fmt: skip
    plain = _judge_asked(bench, "Names Paris")
    assert "SECRET-THOUGHT" not in plain and "<reasoning>" not in plain
    shown = _judge_asked(bench, "Says Paris plainly")
    assert f"<reasoning>\n{CANDIDATE_THOUGHT}\n</reasoning>\n<answer>\nParis.\n</answer>" in shown
    assert "The <reasoning> block is the assistant's thinking before its answer" in shown


@pytest.mark.parametrize(
    ("assertion", "message"),
    [
        (
            "{type: llm-rubric, value: x, show_reasoning: maybe}",
            "show_reasoning must be true or false",
        ),
        (
            "{type: faithfulness, show_reasoning: true}",
            "show_reasoning applies to llm-rubric, jury, factuality, closed-qa*not to faithfulness",
        ),
        ("{type: contains, value: x, show_reasoning: true}", "*show_reasoning*"),
    ],
)
def test_a_bad_show_reasoning_is_a_collection_error(
    bench: Bench, assertion: str, message: str
) -> None:
    bench.eval_file("bad", f"cases:\n  - id: a\n    prompt: Hi\n    assert: [{assertion}]\n")
    result = bench.run("--models=fake")
    result.stdout.fnmatch_lines([f"*bad.eval.yaml:*{message}*"])
    assert result.ret != 0


def test_show_reasoning_leaves_other_case_hashes_as_they_were() -> None:
    from pytest_llmbench.scoring import parse_assertion

    assertion = parse_assertion({"type": "llm-rubric", "value": "Names Paris"})
    shown = parse_assertion({"type": "llm-rubric", "value": "Names Paris", "show_reasoning": True})
    from pytest_llmbench.fingerprint import _plain

    assert "show_reasoning" not in _plain(assertion)["graded"]
    assert _plain(shown)["graded"]["show_reasoning"] is True


# -- agents ----------------------------------------------------------------------------------------

AGENT = """
kind: agent
tools: [read_file]
max_steps: 4
cases:
  - id: notes
    files: {notes.txt: "remember the milk"}
    prompt: Read notes.txt and say what to buy.
    assert: [{type: equals, value: Buy milk.}]
"""


def test_an_agents_steps_are_read_apart_from_their_thinking(bench: Bench) -> None:
    """Each step's thinking is apart from its calls and its answer; the record keeps the steps'
    thinking joined and their reasoning and cached tokens summed; no finish reason."""
    bench.server.add_rule(
        Rule(
            match_last="milk", reply="<think>The notes say milk.</think>Buy milk.", cached_tokens=3
        )
    )
    bench.server.add_rule(
        Rule(
            match="Read notes.txt",
            tool_calls=[{"name": "read_file", "arguments": {"path": "notes.txt"}}],
            reasoning="I should read the notes first.",
            cached_tokens=2,
        )
    )
    bench.eval_file("agent", AGENT)
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["response"] == "Buy milk."
    assert record["reasoning"] == "I should read the notes first.\n\nThe notes say milk."
    # The first step's count as reported, the second's counted from its thinking.
    counted = counted_reasoning("openai/fake-model", "The notes say milk.", None)
    assert counted is not None
    assert record["reasoning_tokens"] == len("I should read the notes first.".split()) + counted
    assert record["reasoning_tokens_estimated"] is True
    assert (record["cached_input_tokens"], record["finish_reason"]) == (5, None)
    # The history sent back holds the answers alone.
    last = bench.server.chat_requests()[-1].body["messages"]
    assert not any("<think>" in str(m.get("content")) for m in last)


# -- under xdist -------------------------------------------------------------------------------------


def test_thinking_read_by_the_rule_is_recorded_the_same_under_xdist(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="Spain", reply="Madrid, surely.</reason>Madrid."))
    _thinking_judge(bench)
    bench.eval_file("judged", OWN_TAGS + JUDGED)
    spain = "  - {id: spain, prompt: Capital of Spain?, assert: [{type: equals, value: Madrid.}]}\n"
    bench.eval_file("capital", OWN_TAGS + CAPITAL + spain)
    fields = ("suite", "case_id", "outcome", "response", "reasoning", "reasoning_tokens")
    seen = []
    for args in ((), ("-n", "2")):
        bench.run_subprocess("--models=fake", *args).assert_outcomes(passed=3)
        records = bench.records()
        seen.append(
            sorted(
                (*(r[k] for k in fields), tuple((j["error"], j["scores"]) for j in r["judges"]))
                for r in records
            )
        )
    assert seen[0] == seen[1]
    assert {r["worker"] for r in records} == {"gw0", "gw1"}
    judged = next(row for row in seen[0] if row[0] == "judged")
    assert judged[-1] == ((None, {"rubric": 0.9}), (None, {"rubric": 0.9}))
    spain = next(row for row in seen[0] if row[1] == "spain")
    assert spain[3:5] == ("Madrid.", "Madrid, surely.")


# -- the tool shim reads the answer alone ----------------------------------------------------------

SHIMMED = """
tool_shim: always
tools:
  - {name: get_weather, parameters: {type: object, properties: {city: {type: string}}}}
cases:
  - id: rome
    prompt: What is the weather in Rome?
    assert: [no-tool-call, {type: equals, value: Rainy.}]
"""
#: A call written in the thinking (that the shim would read as a call), then the answer.
CALL_IN_THOUGHT = (
    'I could send {"calls": [{"tool": "get_weather", "arguments": {"city": "Rome"}}]}, but I '
    'know it.\n</think>\n{"answer": "Rainy."}'
)


def test_a_call_written_in_the_thinking_is_no_tool_call(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply=CALL_IN_THOUGHT))
    bench.eval_file("shim", SHIMMED)
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert (record["shimmed"], record["tool_call_count"], record["response"]) == (True, 0, "Rainy.")
    assert record["reasoning"].startswith("I could send")


# -- a conversation's turn whose thinking never finished ---------------------------------------------


def test_a_turn_whose_thinking_never_finished_is_unchecked_the_others_checked(
    bench: Bench,
) -> None:
    bench.server.add_rule(Rule(match="Spain", reply="Madrid."))
    bench.server.add_rule(Rule(match="France", reply="<think>Paris or Lyon, let me"))
    bench.eval_file("talk", TWO_TURNS)
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    first, second = record["assertions"]
    assert (first["turn"], first.get("unchecked"), second["turn"], second["passed"]) == (
        1, True, 2, True,
    )  # fmt: skip
    assert first["reason"] == "unchecked: the reply ended inside its thinking: no answer (raise max_tokens)"  # fmt: skip


def test_a_reasoning_simulated_users_thinking_is_not_what_it_says(bench: Bench) -> None:
    """The simulated user's replies are read by its profile's rule: its thinking (and a stop
    marker in it) never reaches the model under test."""
    bench.server.add_rule(Rule(model="fake-model", match="refund", reply="Refund issued."))
    bench.server.add_rule(Rule(model="fake-model", reply="What is your order number?"))
    bench.server.add_rule(
        Rule(
            model="fake-model-2",
            match_last="Refund issued",
            reply="Done then.</think>Great, thanks. <<DONE>>",
        )
    )
    bench.server.add_rule(
        Rule(
            model="fake-model-2",
            reply="I could say <<DONE>> now.\n</think>\nOrder 1234, refund please.",
        )
    )
    bench.eval_file(
        "talk",
        "cases:\n  - id: refund\n    simulated_user:\n      model: fake2\n"
        "      instructions: You are Ada; get a refund for order 1234.\n"
        "      first_message: My order never arrived.\n      max_turns: 4\n",
    )
    bench.run("--models=fake")
    (record,) = bench.records()
    assert record["conversation_stopped"] == "goal"
    said = [e["content"] for e in record["conversation"] if e["role"] == "user"]
    assert said == ["My order never arrived.", "Order 1234, refund please."]


MULTIPLE_CHOICE = """
cases:
  - id: capital
    prompt: Which city is the capital of France?
    choices: [Lyon, Nice, Paris]
    answer: C
"""


def test_a_multiple_choice_answer_is_read_from_the_answer_not_the_thinking(bench: Bench) -> None:
    """The thinking first says A; the choice is the answer's, C (read with the thinking, the
    reply names two answers and none is extracted)."""
    bench.server.add_rule(
        Rule(match="capital of France", reply="<think>The answer is A.</think>The answer is C.")
    )
    bench.eval_file("mc", MULTIPLE_CHOICE)
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["choice"] == {"chosen": "C", "answer": "C", "correct": True}
    assert record["reasoning"] == "The answer is A."


def test_the_report_and_the_viewer_show_the_thinking_apart_from_the_answer(
    tmp_path: Path,
) -> None:
    from pytest_llmbench.report.html_columns import render_extra
    from pytest_llmbench.results_folder import ResultsFolder
    from pytest_llmbench.view.pages import item_page
    from pytest_llmbench.view.runs import load_run

    record = {
        "schema": 2, "suite": "s", "case_id": "c", "model": "m@high", "outcome": "passed",
        "prompt": "Capital of France?", "response": "Paris.", "reasoning": "France <-> Paris",
        "reasoning_tokens": 7, "effort": "high", "finish_reason": "stop",
    }  # fmt: skip
    block = render_extra(record)
    assert "<h4>Thinking</h4><pre>France &lt;-&gt; Paris</pre>" in block
    assert block.index("Thinking") < block.index("<h4>Response</h4>")
    assert "Thinking" not in render_extra({**record, "reasoning": None})
    folder = ResultsFolder(tmp_path / "run")
    folder.write_records([record])
    folder.write_run_info({"exitstatus": 0, "args": []})
    page = item_page(load_run([tmp_path], "0/run"), record)
    assert "<summary>Thinking</summary><pre>France &lt;-&gt; Paris</pre>" in page
    assert "<th>reasoning_tokens</th><td>7</td>" in page and "<th>effort</th><td>high</td>" in page
