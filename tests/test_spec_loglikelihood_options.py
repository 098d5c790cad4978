"""``loglikelihood:`` files: each option's (context, continuation) pair at collection, lm-eval's
ways of writing ARC, MMLU, HellaSwag, PIQA and Winogrande prompts, and the cases it refuses."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from pytest_llmbench.spec.load import load_spec
from pytest_llmbench.spec.resolved import EvalFileError


def load(tmp_path: Path, text: str, **files: str) -> list:
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    path = tmp_path / "mc.eval.yaml"
    path.write_text(textwrap.dedent(text))
    return list(load_spec(path).cases)


def error(tmp_path: Path, text: str, **files: str) -> str:
    with pytest.raises(EvalFileError) as info:
        load(tmp_path, text, **files)
    return str(info.value)


def test_options_are_scored_by_their_text_after_the_prompt(tmp_path: Path) -> None:
    (case,) = load(
        tmp_path,
        """
        loglikelihood: true
        prompt: "Question: {{q}}\\nAnswer:"
        cases:
          - {vars: {q: Capital of France?}, choices: [Lyon, Paris], answer: Paris}
        """,
    )
    scored = case.loglikelihood
    context = "Question: Capital of France?\nAnswer:"
    assert scored.pairs == ((context, " Lyon"), (context, " Paris"))
    assert scored.lengths == (4, 5)
    assert scored.verdict == "acc"
    assert case.answer_index == 1
    # The prompt recorded is the one scored: no lettered options, no instruction.
    assert case.messages == ({"role": "user", "content": context},)
    assert [a.type for a in case.assertions] == ["choice"]


def test_a_prompt_that_lists_the_options_scores_their_letters(tmp_path: Path) -> None:
    (case,) = load(
        tmp_path,
        """
        loglikelihood: {verdict: acc_norm}
        prompt: "{{q}}\\n{{choices}}\\nAnswer:"
        cases:
          - {vars: {q: Capital of France?}, choices: [Lyon, Paris, Nice], answer: 2}
        """,
    )
    context = "Capital of France?\nA. Lyon\nB. Paris\nC. Nice\nAnswer:"
    assert case.loglikelihood.pairs == tuple((context, f" {m}") for m in "ABC")
    assert case.loglikelihood.lengths == (1, 1, 1)
    assert case.loglikelihood.verdict == "acc_norm"


def test_a_blank_is_filled_by_each_option_and_the_rest_is_scored(tmp_path: Path) -> None:
    row = {"sentence": "The cup fell off the table because _ was slippery.",
           "option1": "the cup", "option2": "the table", "answer": "1"}  # fmt: skip
    cases = load(
        tmp_path,
        """
        loglikelihood: {blank: _}
        answer_base: 1
        prompt: "{{sentence}}"
        dataset: {path: wino.jsonl, choices: [option1, option2], answer: answer}
        """,
        **{"wino.jsonl": json.dumps(row) + "\n"},
    )
    (case,) = cases
    before = "The cup fell off the table because "
    assert case.loglikelihood.pairs == (
        (before + "the cup", " was slippery."),
        (before + "the table", " was slippery."),
    )
    assert case.answer_index == 0


def test_trailing_spaces_of_the_context_move_to_the_continuation(tmp_path: Path) -> None:
    (case,) = load(
        tmp_path,
        """
        loglikelihood: {target_delimiter: ""}
        prompt: "Answer: "
        cases:
          - {choices: [sure, nope], answer: A}
        """,
    )
    assert case.loglikelihood.pairs == (("Answer:", " sure"), ("Answer:", " nope"))


def test_arc_rows_run_as_they_are(tmp_path: Path) -> None:
    row = {"id": "q1", "question": "Which is a gas?",
           "choices": {"text": ["ice", "steam"], "label": ["1", "2"]}, "answerKey": "2"}  # fmt: skip
    (case,) = load(
        tmp_path,
        """
        loglikelihood: true
        prompt: "Question: {{question}}\\nAnswer:"
        dataset: {path: arc.jsonl, id: id}
        """,
        **{"arc.jsonl": json.dumps(row) + "\n"},
    )
    assert case.loglikelihood.pairs[1] == ("Question: Which is a gas?\nAnswer:", " steam")
    assert case.answer_index == 1


@pytest.mark.parametrize(
    ("case_text", "line", "message"),
    [
        ("  - {prompt: hi, expected: x}\n", 4, "needs `choices` and `answer`"),
        (
            "  - prompt: hi\n    choices: [a, b]\n    answer: A\n    assert: [contains]\n",
            7,
            "`contains` checks a generated answer",
        ),
        (
            "  - prompt: hi\n    system: be brief\n    choices: [a, b]\n    answer: A\n",
            5,
            "`system` and multi-turn `messages` have no place",
        ),
    ],
)
def test_cases_it_cannot_score_are_errors_at_their_line(
    tmp_path: Path, case_text: str, line: int, message: str
) -> None:
    text = error(tmp_path, "loglikelihood: true\n\ncases:\n" + case_text)
    assert f"mc.eval.yaml:{line}: " in text
    assert message in text


def test_a_missing_blank_names_the_case(tmp_path: Path) -> None:
    text = error(
        tmp_path,
        """
        loglikelihood: {blank: _}
        cases:
          - {id: nob, prompt: no blank here, choices: [a, b], answer: A}
        """,
    )
    assert "case 'nob': the prompt has no blank '_'" in text


def test_agent_files_and_solvers_do_not_mix_with_it(tmp_path: Path) -> None:
    text = error(
        tmp_path,
        """
        kind: agent
        tools: [read_file]
        loglikelihood: true
        cases:
          - {prompt: hi, choices: [a, b], answer: A}
        """,
    )
    assert "mc.eval.yaml:4: `loglikelihood` scores the options with the model itself" in text


def test_unknown_settings_are_schema_errors(tmp_path: Path) -> None:
    text = error(
        tmp_path,
        "loglikelihood: {verdict: f1}\ncases:\n  - {prompt: x, choices: [a, b], answer: A}\n",
    )
    assert "mc.eval.yaml:1: loglikelihood.verdict: Input should be 'acc' or 'acc_norm'" in text
