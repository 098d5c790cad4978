"""A case's ``turns:``: checked, rendered and tied to its assertions at load (spec/turns.py).

The end-to-end behaviour (calls, scoring, records) is in test_conversation.py.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from pytest_llmbench.spec.load import load_spec
from pytest_llmbench.spec.resolved import EvalFileError, LoadedEval

REFUND = """\
system: You are the support agent of ACME.
cases:
  - id: refund-flow
    vars: {order: 1234}
    turns:
      - assistant: Hello, how can I help?
      - user: My order {{order}} never arrived.
        assert: [{type: icontains, value: sorry}]
      - user: Yes, refund it please.
        weight: 2
        assert: [{type: regex, value: "refund"}]
    assert: [{type: not-contains, value: "as an AI"}]
"""


def load(tmp_path: Path, text: str) -> LoadedEval:
    path = tmp_path / "talk.eval.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return load_spec(path)


def error_of(tmp_path: Path, text: str) -> EvalFileError:
    with pytest.raises(EvalFileError) as info:
        load(tmp_path, text)
    return info.value


def test_turns_render_with_vars_and_open_with_the_first_answered_turn(tmp_path: Path) -> None:
    (case,) = load(tmp_path, REFUND).cases
    assert [(turn.role, turn.content, turn.answered) for turn in case.turns] == [
        ("assistant", "Hello, how can I help?", False),
        ("user", "My order 1234 never arrived.", True),
        ("user", "Yes, refund it please.", True),
    ]
    # The first call's chat: the system prompt and the turns up to the first answered one.
    assert [m["role"] for m in case.messages] == ["system", "assistant", "user"]
    assert case.prompt == "My order 1234 never arrived."


def test_assertions_attach_to_their_turn_and_case_level_ones_to_the_last(tmp_path: Path) -> None:
    (case,) = load(tmp_path, REFUND).cases
    assert [a.type for a in case.assertions] == ["icontains", "regex", "not-contains"]
    assert [turn.checks for turn in case.turns] == [(), (0,), (1, 2)]
    assert [turn.weight for turn in case.turns] == [1.0, 1.0, 2.0]
    assert [case.turn_of(index) for index in range(3)] == [1, 2, 2]


def test_a_file_level_template_is_the_prompt_variable_of_turns(tmp_path: Path) -> None:
    text = """\
    prompt: "Tell me about {{topic}}."
    cases:
      - vars: {topic: owls}
        turns:
          - user: "{{prompt}}"
          - user: Shorter, please.
    """
    (case,) = load(tmp_path, text).cases
    assert case.turns[0].content == "Tell me about owls."


def test_prompt_variants_give_each_their_system_and_prompt(tmp_path: Path) -> None:
    text = """\
    prompts:
      - {name: terse, prompt: "Q: {{q}}", system: Be terse.}
      - {name: warm, prompt: "Dear bot, {{q}}", system: Be warm.}
    cases:
      - id: chat
        vars: {q: why?}
        turns: [{user: "{{prompt}}"}, {user: And then?}]
    """
    cases = load(tmp_path, text).cases
    assert [(c.prompt_variant, c.messages[0]["content"], c.prompt) for c in cases] == [
        ("terse", "Be terse.", "Q: why?"),
        ("warm", "Be warm.", "Dear bot, why?"),
    ]
    assert cases[0].case_hash != cases[1].case_hash


def test_a_jsonl_row_may_carry_turns_sent_verbatim(tmp_path: Path) -> None:
    rows = [
        {
            "id": "a",
            "turns": [{"user": "Hi {{not a var}}"}, {"user": "Bye", "assert": ["is-json"]}],
        },
        {"id": "b", "prompt": "plain"},
    ]
    (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    text = """\
    system: "You help {{id}}."
    dataset: {path: rows.jsonl}
    """
    first, second = load(tmp_path, text).cases
    assert first.turns[0].content == "Hi {{not a var}}"
    assert first.messages[0] == {"role": "system", "content": "You help a."}
    assert [a.type for a in first.assertions] == ["is-json"]
    assert first.turns[1].checks == (0,)
    assert second.turns == ()


def test_an_edited_turn_changes_the_case_hash(tmp_path: Path) -> None:
    base = load(tmp_path, REFUND).cases[0].case_hash
    edits = [
        REFUND.replace("refund it please", "refund it now"),
        REFUND.replace("weight: 2", "weight: 3"),
        REFUND.replace('value: "refund"', 'value: "refunded"'),
        REFUND.replace("Hello, how can I help?", "Hi."),
    ]
    hashes = {load(tmp_path, text).cases[0].case_hash for text in edits}
    assert base not in hashes and len(hashes) == len(edits)
    assert load(tmp_path, REFUND).cases[0].case_hash == base


def test_cases_without_turns_keep_their_hash(tmp_path: Path) -> None:
    """The turns enter the digest only when given: older cases' hashes stand."""
    from pytest_llmbench.fingerprint import case_hash

    (case,) = load(tmp_path, "cases: [{prompt: hi, expected: hello}]").cases
    assert case.turns == ()
    payload_without = case_hash(case, {"solver": None, "agent": None}, tmp_path)
    assert case.case_hash == payload_without


BAD = [
    (
        "turns beside prompt",
        "cases:\n  - prompt: hi\n    turns: [{user: hi}]\n",
        2,
        "give either `turns` or `prompt`",
    ),
    (
        "turns beside messages",
        "cases:\n  - messages: [{role: user, content: hi}]\n    turns: [{user: hi}]\n",
        2,
        "give either `turns` or `messages`",
    ),
    ("empty turns", "cases:\n  - id: x\n    turns: []\n", 3, "`turns` is empty"),
    (
        "neither user nor assistant",
        "cases:\n  - turns:\n      - user: hi\n      - weight: 2\n",
        4,
        "turns[1]: give either `user` or `assistant`, not neither",
    ),
    (
        "both user and assistant",
        "cases:\n  - turns:\n      - {user: hi, assistant: hello}\n",
        3,
        "turns[0]: give either `user` or `assistant`, not both",
    ),
    (
        "an assertion on an assistant turn",
        "cases:\n  - turns:\n      - user: hi\n      - assistant: hello\n"
        "        assert: [is-json]\n      - user: bye\n",
        5,
        "an `assistant` turn is given verbatim",
    ),
    (
        "an assertion on a turn answered verbatim",
        "cases:\n  - turns:\n      - user: hi\n        assert: [is-json]\n"
        "      - assistant: hello\n      - user: bye\n",
        4,
        "the reply to this turn is given verbatim by turns[1]",
    ),
    (
        "a conversation ending with an assistant turn",
        "cases:\n  - turns:\n      - user: hi\n      - assistant: hello\n",
        4,
        "the last turn must be a `user` turn",
    ),
    (
        "an unknown turn key",
        "cases:\n  - turns:\n      - usr: hi\n",
        3,
        "unknown key 'usr' (did you mean 'user'?)",
    ),
    (
        "an unknown template variable in a turn",
        "cases:\n  - turns:\n      - user: hi\n      - user: '{{name}}'\n",
        4,
        "unknown template variable 'name'",
    ),
    (
        "a bad assertion in a turn",
        "cases:\n  - turns:\n      - user: hi\n        assert:\n          - {type: regexx, value: a}\n",
        5,
        "unknown assertion type 'regexx'",
    ),
    (
        "turns in a solver file",
        "solver: app:solve\ncases:\n  - turns: [{user: hi}]\n",
        3,
        "`turns` is a conversation with the model itself, not with `solver`",
    ),
    (
        "turns with choices",
        "cases:\n  - turns: [{user: hi}]\n    choices: [a, b]\n    answer: a\n",
        3,
        "`choices` score one answer",
    ),
    (
        "a conversation scope on factuality",
        "cases:\n  - turns:\n      - user: hi\n        assert:\n"
        "          - {type: factuality, value: hello, scope: conversation}\n",
        5,
        "factuality compares one reply with its expected answer",
    ),
    (
        "an unknown scope",
        "cases:\n  - turns:\n      - user: hi\n        assert:\n"
        "          - {type: jury, scope: all}\n",
        5,
        "scope must be turn, conversation or trajectory, got 'all'",
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "fragment"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_bad_turns_are_errors_naming_the_line(
    tmp_path: Path, text: str, line: int, fragment: str
) -> None:
    error = error_of(tmp_path, text)
    assert str(error).startswith(f"{tmp_path / 'talk.eval.yaml'}:{line}: "), str(error)
    assert fragment in str(error), str(error)


def test_a_bad_turn_of_a_jsonl_row_names_the_row(tmp_path: Path) -> None:
    row = {"id": "r", "turns": [{"user": "hi"}, {"asistant": "x"}]}
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n")
    error = error_of(tmp_path, "dataset: {path: rows.jsonl}\n")
    assert "dataset row 'r' (line 1): turns[1]: unknown key 'asistant'" in str(error)
    assert "(did you mean 'assistant'?)" in str(error)
    row = {"id": "r", "prompt": "p", "turns": [{"user": "hi"}]}
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n")
    assert "give either 'turns' or a prompt" in str(
        error_of(tmp_path, "dataset: {path: rows.jsonl}\n")
    )


def test_scope_turn_is_what_a_judged_assertion_of_a_turn_does(tmp_path: Path) -> None:
    text = """\
    cases:
      - turns:
          - user: hi
            assert: [{type: llm-rubric, value: polite, scope: turn}]
    """
    (case,) = load(tmp_path, text).cases
    plain = load(tmp_path, text.replace(", scope: turn", "")).cases[0]
    assert case.assertions == plain.assertions


ODD_TURNS = [
    "turns: hello",
    "turns: {user: hi}",
    "turns: [hello]",
    "turns: [[{user: hi}]]",
    "turns: [null]",
    "turns: [{user: null}]",
    "turns: [{user: [a, b]}]",
    "turns: [{user: hi, weight: -1}]",
    "turns: [{user: hi, weight: .nan}]",
    "turns: [{user: hi, assert: is-json}]",
    "turns: [{user: hi, assert: [{type: regex, value: '('}]}]",
    "turns: [{user: '{{a.b.c}}'}]",
    "turns: [{assistant: hi}]",
]


@pytest.mark.parametrize("turns", ODD_TURNS)
def test_odd_turns_are_clean_errors(tmp_path: Path, turns: str) -> None:
    error = error_of(tmp_path, f"cases:\n  - id: odd\n    {turns}\n")
    assert str(error).startswith(f"{tmp_path / 'talk.eval.yaml'}:"), str(error)
    assert error.line is not None and 2 <= error.line <= 3, str(error)


def test_odd_turns_of_jsonl_rows_are_clean_errors(tmp_path: Path) -> None:
    for turns in ("hi", ["hi"], [None], [{"user": 1}], [{"user": "a", "assert": "??"}], []):
        (tmp_path / "rows.jsonl").write_text(json.dumps({"id": "r", "turns": turns}) + "\n")
        error = error_of(tmp_path, "dataset: {path: rows.jsonl}\n")
        assert "rows.jsonl" in str(error) or "dataset row 'r'" in str(error), str(error)
