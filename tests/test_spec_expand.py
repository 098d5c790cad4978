"""In-process tests of :func:`pytest_llmbench.spec.expand.expand_cases`: each case kind, prompt
variants and the errors' lines, from a YAML file in ``tmp_path``, with no pytest session."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from pytest_llmbench.spec import expand
from pytest_llmbench.spec.expand import CASE_EXPANSIONS, CaseExpansion, case_expansion, expand_cases
from pytest_llmbench.spec.expand import prompt_variants as read_variants
from pytest_llmbench.spec.resolved import EvalCase, EvalFileError
from pytest_llmbench.spec.schema import EvalSpec
from pytest_llmbench.spec.yamlsource import load_located_file


def expand_file(tmp_path: Path, text: str, name: str = "suite") -> list[EvalCase]:
    """The cases of an eval file holding ``text``: validated and expanded, as the loader does."""
    path = tmp_path / f"{name}.eval.yaml"
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    document = load_located_file(path)
    spec = EvalSpec.model_validate(document.data)
    return expand_cases(spec, path, document, read_variants(spec, path, document))


def expand_error(tmp_path: Path, text: str) -> str:
    """The ``name:line: message`` of the error expanding ``text`` raises, the folder cut."""
    with pytest.raises(EvalFileError) as caught:
        expand_file(tmp_path, text)
    return str(caught.value).removeprefix(f"{tmp_path}/")


def test_a_plain_case_is_rendered_and_gets_the_file_settings(tmp_path: Path) -> None:
    (case,) = expand_file(
        tmp_path,
        """
        system: Be brief.
        threshold: 0.5
        tags: [geo]
        model_params: {temperature: 0}
        cases:
          - id: france
            prompt: "Capital of {{country}}?"
            vars: {country: France}
            expected: Paris
            tags: [europe]
        """,
    )
    assert case.id == "france" and case.line == 6
    assert case.messages == (
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Capital of France?"},
    )
    assert [a.type for a in case.assertions] == ["icontains"]  # expected alone is checked
    assert case.threshold == 0.5 and case.tags == ("geo", "europe")
    assert case.model_params == {"temperature": 0} and case.prompt_variant is None
    assert case.turns == () and case.simulated_user is None and case.loglikelihood is None


def test_scripted_turns_check_each_reply_and_the_case_checks_the_last(tmp_path: Path) -> None:
    (case,) = expand_file(
        tmp_path,
        """
        cases:
          - id: chat
            turns:
              - user: "Hi, I am {{name}}."
                assert: [{type: contains, value: hello}]
              - user: What is my name?
            vars: {name: Ada}
            assert: [{type: contains, value: Ada}]
        """,
    )
    assert case.conversational and [turn.content for turn in case.turns] == [
        "Hi, I am Ada.",
        "What is my name?",
    ]
    assert case.messages == ({"role": "user", "content": "Hi, I am Ada."},)
    assert [turn.checks for turn in case.turns] == [(0,), (1,)]
    assert [a.value for a in case.assertions] == ["hello", "Ada"]
    assert case.turn_of(1) == 1


def test_a_simulated_user_checks_every_reply_with_its_own_assertions(tmp_path: Path) -> None:
    (case,) = expand_file(
        tmp_path,
        """
        system: You are a travel agent.
        cases:
          - id: booking
            simulated_user:
              instructions: "Book a trip to {{city}}."
              max_turns: 3
              assert:
                - {type: not-contains, value: sorry, stop_on_fail: true}
            vars: {city: Rome}
            assert: [{type: contains, value: booked}]
        """,
    )
    user = case.simulated_user
    assert user is not None and user.instructions == "Book a trip to Rome." and user.max_turns == 3
    assert user.checks == (0,) and user.stop_on_fail == (0,)
    assert case.messages == ({"role": "system", "content": "You are a travel agent."},)
    assert [a.type for a in case.assertions] == ["not-contains", "contains"]


def test_dataset_rows_render_the_file_template_with_their_columns(tmp_path: Path) -> None:
    rows = [{"id": "fr", "country": "France", "expected": "Paris"}, {"country": "Peru"}]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    cases = expand_file(
        tmp_path,
        """
        dataset: rows.jsonl
        prompt: "Capital of {{country}}?"
        assert: [{type: contains, value: a}]
        """,
    )
    assert [case.messages[-1]["content"] for case in cases] == [
        "Capital of France?",
        "Capital of Peru?",
    ]
    assert cases[0].id == "fr" and cases[0].expected == "Paris"
    assert cases[0].sources == (tmp_path / "rows.jsonl",)
    assert all(case.line == 1 for case in cases)  # a row's problems point at `dataset:`


def test_a_dataset_row_with_its_own_turns_is_a_conversation(tmp_path: Path) -> None:
    row = {"id": "t", "turns": [{"user": "one"}, {"assistant": "two"}, {"user": "three"}]}
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n")
    (case,) = expand_file(tmp_path, "dataset: rows.jsonl\n")
    assert case_kind_of(case) == "turns"
    assert [turn.role for turn in case.turns] == ["user", "assistant", "user"]


def case_kind_of(case: EvalCase) -> str:
    """The case kind an expanded case is of, as the table names it."""
    return "simulated_user" if case.simulated_user else "turns" if case.turns else "plain"


def test_choices_resolve_the_answer_and_are_scored_by_the_option(tmp_path: Path) -> None:
    (case,) = expand_file(
        tmp_path,
        """
        answer_base: 1
        cases:
          - prompt: "Largest planet?\\n{{choices}}"
            choices: [Mars, Jupiter, Venus]
            answer: 2
        """,
    )
    assert case.choices == ("Mars", "Jupiter", "Venus") and case.answer_index == 1
    assert case.expected == "Jupiter" and [a.type for a in case.assertions] == ["choice"]
    assert case.messages[-1]["content"] == "Largest planet?\nA. Mars\nB. Jupiter\nC. Venus"


def test_loglikelihood_pairs_each_option_with_the_prompt(tmp_path: Path) -> None:
    (case,) = expand_file(
        tmp_path,
        """
        loglikelihood: {verdict: acc_norm}
        cases:
          - prompt: "The sky is"
            choices: [blue, green]
            answer: blue
        """,
    )
    scored = case.loglikelihood
    assert scored is not None and scored.verdict == "acc_norm"
    assert scored.pairs == (("The sky is", " blue"), ("The sky is", " green"))
    assert scored.lengths == (4, 5)


def test_each_case_runs_under_each_prompt_variant(tmp_path: Path) -> None:
    cases = expand_file(
        tmp_path,
        """
        prompts:
          - {name: terse, prompt: "{{q}}"}
          - "Please answer: {{q}}"
        cases:
          - {id: a, vars: {q: one}}
          - {id: b, vars: {q: two}}
        """,
    )
    assert [(case.id, case.prompt_variant, case.prompt) for case in cases] == [
        ("a", "terse", "one"),
        ("b", "terse", "two"),
        ("a", "p2", "Please answer: one"),
        ("b", "p2", "Please answer: two"),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "cases:\n  - id: x\n    prompt: hi\n    messages: [{role: user, content: hi}]\n",
            "suite.eval.yaml:4: case 'x': give either `prompt` or `messages`, not both",
        ),
        (
            "solver: app:solve\ncases:\n  - id: x\n    turns: [{user: hi}]\n",
            "suite.eval.yaml:4: case 'x': `turns` is a conversation with the model itself, "
            "not with `solver`",
        ),
        (
            "cases:\n  - {id: x, prompt: hi}\n  - {id: x, prompt: ho}\n",
            "suite.eval.yaml:3: duplicate case id 'x' (first at line 2)",
        ),
        (
            "cases:\n  - id: x\n    prompt: 'Hi {{name}}'\n",
            "suite.eval.yaml:3: case 'x': unknown template variable 'name' (known: none)",
        ),
        (
            "cases:\n  - id: x\n    prompt: Q?\n    choices: [a, b]\n    answer: c\n",
            "suite.eval.yaml:5: case 'x': answer: ",
        ),
        (
            "kind: agent\ntools: [read_file]\nloglikelihood: true\n"
            "cases:\n  - {id: x, prompt: Q, choices: [a, b], answer: a}\n",
            "suite.eval.yaml:3: `loglikelihood` scores the options with the model itself: "
            "not with `kind: agent`",
        ),
        (
            "cases:\n  - id: x\n    prompt: hi\n    assert: [{type: file-exists, value: a.txt}]\n",
            "suite.eval.yaml:4: case 'x': `file-exists` checks an agent's work: it needs "
            "`kind: agent`",
        ),
        ("description: nothing\n", "suite.eval.yaml:1: no cases: give a `cases:` list or a"),
        (
            "cases:\n  - id: x\n    simulated_user:\n      instructions: Ask.\n"
            "      assert: [{type: llm-rubric, value: polite}]\n",
            "suite.eval.yaml:5: case 'x': `llm-rubric` is judged: a simulated user's assertions",
        ),
    ],
    ids=[
        "prompt-and-messages",
        "turns-in-agent-file",
        "duplicate-id",
        "unknown-variable",
        "answer-not-a-choice",
        "loglikelihood-in-agent-file",
        "agent-check-in-plain-file",
        "no-cases",
        "judged-check-of-a-simulated-user",
    ],
)
def test_errors_name_the_line_of_the_key_at_fault(tmp_path: Path, text: str, expected: str) -> None:
    assert expand_error(tmp_path, text).startswith(expected)


def test_a_dataset_row_missing_a_template_variable_is_an_error_at_dataset(
    tmp_path: Path,
) -> None:
    (tmp_path / "rows.jsonl").write_text('{"id": "r1", "city": "Rome"}\n')
    message = expand_error(tmp_path, "prompt: '{{country}}?'\ndataset: rows.jsonl\n")
    assert message.startswith("suite.eval.yaml:2: dataset")
    assert "country" in message


def test_the_kind_of_a_case_is_looked_up_in_one_table() -> None:
    assert [kind.name for kind in CASE_EXPANSIONS] == ["simulated_user", "turns", "plain"]
    assert CASE_EXPANSIONS[-1].key is None  # the kind of a case that gives no other kind's key
    assert [kind.name for kind in CASE_EXPANSIONS if kind.row is not None] == ["turns", "plain"]


def test_expansion_dispatches_through_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    plain = case_expansion_named("plain")

    def traced(*args: object) -> EvalCase:
        seen.append(str(args[3]))  # the case id
        return plain.inline(*args)  # type: ignore[arg-type]

    toy = CaseExpansion("plain", None, traced, plain.row)
    monkeypatch.setattr(expand, "CASE_EXPANSIONS", (*CASE_EXPANSIONS[:-1], toy))
    (case,) = expand_file(tmp_path, "cases:\n  - {id: q, prompt: hi}\n")
    assert seen == ["q"] and case.prompt == "hi"


def case_expansion_named(name: str) -> CaseExpansion:
    return next(kind for kind in CASE_EXPANSIONS if kind.name == name)


def test_case_kind_picks_the_first_kind_whose_key_is_given(tmp_path: Path) -> None:
    from pytest_llmbench.spec.schema import CaseSpec

    assert case_expansion(CaseSpec(prompt="hi")).name == "plain"
    assert case_expansion(CaseSpec.model_validate({"turns": [{"user": "hi"}]})).name == "turns"
    both = CaseSpec.model_validate(
        {"turns": [{"user": "hi"}], "simulated_user": {"instructions": "x"}}
    )
    assert case_expansion(both).name == "simulated_user"  # which then refuses the turns
