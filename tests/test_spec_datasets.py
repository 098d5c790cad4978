"""Tests for pytest_llmbench.spec.datasets: CSV/JSONL dataset files as eval cases."""

from __future__ import annotations

import csv
import json
import random
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pydantic
import pytest
import yaml
from conftest import Bench, Rule

from pytest_llmbench.spec.datasets import DatasetError, DatasetRow, DatasetSource, load_dataset

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "360-eval"
needs_shared = pytest.mark.skipif(
    not SHARED.is_dir(), reason=f"360-eval datasets not found at {SHARED}"
)

BOM_MAPPING: dict[str, Any] = {"prompt": "Prompt", "expected": "Golden_Answer"}
CHEGG_MAPPING: dict[str, Any] = {
    "prompt": "cleaned_question_body",
    "expected": "cleaned_answer_body",
}
# (file, mapping, rows per NOTICE.md)
REAL_CSVS: list[tuple[str, dict[str, Any], int]] = [
    ("sample-benchmark-prompts-data-extraction.csv", {}, 20),
    ("sample-benchmark-prompts-data-formatting.csv", {}, 22),
    ("sample-benchmark-prompts-function-calling.csv", {}, 21),
    ("sample-benchmark-prompts-summarization.csv", {}, 20),
    ("sample-benchmark-prompts-text-to-sql.csv", {}, 21),
    ("sample-benchmark-prompts-thinking-use-case.csv", BOM_MAPPING, 10),
    ("sample-benchmark-prompts-customer-call-transcripts.csv", {}, 10),
    ("chegg-question-answer-relevance-check.csv", CHEGG_MAPPING, 5),
]


def load(
    tmp_path: Path, name: str, text: str | bytes, used: frozenset[str] = frozenset(), **mapping: Any
) -> list[DatasetRow]:
    """Write ``text`` to ``tmp_path/name`` and load it with ``mapping``; ``used``: the names
    the eval file's templates would use."""
    target = tmp_path / name
    if isinstance(text, bytes):
        target.write_bytes(text)
    else:
        target.write_text(text, encoding="utf-8", newline="")
    return load_dataset(DatasetSource(path=name, **mapping), tmp_path, used=used)


def load_error(tmp_path: Path, name: str, text: str | bytes, **mapping: Any) -> DatasetError:
    """Like :func:`load`, but expect a DatasetError and return it."""
    with pytest.raises(DatasetError) as info:
        load(tmp_path, name, text, **mapping)
    return info.value


def jsonl(*objects: Any) -> str:
    return "".join(json.dumps(obj) + "\n" for obj in objects)


# --- the real 360-eval files -------------------------------------------------------------


@needs_shared
@pytest.mark.parametrize(("name", "mapping", "count"), REAL_CSVS, ids=[c[0] for c in REAL_CSVS])
def test_real_360_eval_csv_loads(name: str, mapping: dict[str, Any], count: int) -> None:
    rows = load_dataset(DatasetSource(path=name, **mapping), SHARED)
    with open(SHARED / name, encoding="utf-8-sig", newline="") as handle:
        reference = list(csv.DictReader(handle))
    prompt_col = mapping.get("prompt", "text_prompt")
    expected_col = mapping.get("expected", "golden_answer")
    assert len(rows) == count
    assert [r.prompt for r in rows] == [ref[prompt_col] for ref in reference]
    assert [r.expected for r in rows] == [ref[expected_col] or None for ref in reference]
    assert [r.id for r in rows] == [f"row-{n}" for n in range(1, count + 1)]
    assert rows[0].line == 2
    assert all(isinstance(v, str) for r in rows for v in r.vars.values())


@needs_shared
@pytest.mark.parametrize(
    ("name", "mapping"),
    [(n, m) for n, m, _ in REAL_CSVS if "customer-call" not in n and "chegg" not in n],
)
def test_real_csv_line_numbers_point_at_row_start(name: str, mapping: dict[str, Any]) -> None:
    # In these files the prompt is the first column, so each row's line starts with its prompt.
    lines = (SHARED / name).read_text(encoding="utf-8-sig").split("\n")
    for row in load_dataset(DatasetSource(path=name, **mapping), SHARED):
        first_line = row.prompt.split("\n")[0]
        raw = lines[row.line - 1].removeprefix('"').replace('""', '"')
        assert raw.startswith(first_line), (row.id, row.line)


@needs_shared
def test_real_multiline_prompt_preserved() -> None:
    rows = load_dataset(DatasetSource(path="sample-benchmark-prompts-function-calling.csv"), SHARED)
    assert rows[0].prompt.startswith("## Task: Generate the proper function ca")
    assert rows[0].prompt.count("\n") == 39
    assert rows[1].line == 42  # row 1 spans lines 2..41


@needs_shared
def test_real_bom_file_has_clean_column_names() -> None:
    rows = load_dataset(
        DatasetSource(path="sample-benchmark-prompts-thinking-use-case.csv", **BOM_MAPPING), SHARED
    )
    assert set(rows[0].vars) == {"Prompt", "Golden_Answer"}
    calls = load_dataset(
        DatasetSource(path="sample-benchmark-prompts-customer-call-transcripts.csv"), SHARED
    )
    assert next(iter(calls[0].vars)) == "Case ID"
    assert "ROLE:\n" in calls[0].prompt


@needs_shared
def test_real_bom_file_without_mapping_names_columns_and_key() -> None:
    source = DatasetSource(path="sample-benchmark-prompts-thinking-use-case.csv")
    with pytest.raises(DatasetError) as info:
        load_dataset(source, SHARED)
    message = str(info.value)
    assert "no prompt column" in message
    assert "'Prompt', 'Golden_Answer'" in message
    assert "set dataset.prompt" in message
    assert info.value.line == 1


# --- JSONL -------------------------------------------------------------------------------


def test_360_eval_shaped_jsonl_loads_without_mapping(tmp_path: Path) -> None:
    task = {"task_type": "Summarization", "task_criteria": "Be brief"}
    line = {
        "text_prompt": "Summarize\nthis",
        "golden_answer": "Short.",
        "expected_output_tokens": 120,
        "task": task,
    }
    text = jsonl(line) + "\n  \n" + jsonl({**line, "text_prompt": "Second"})
    rows = load(tmp_path, "cases.jsonl", text)
    assert [(r.id, r.line) for r in rows] == [("row-1", 1), ("row-2", 4)]
    first = rows[0]
    assert (first.prompt, first.expected) == ("Summarize\nthis", "Short.")
    assert first.task == task
    assert first.expected_output_tokens == 120
    assert first.vars["task"] == task and first.vars["expected_output_tokens"] == 120
    assert (first.tags, first.threshold) == ((), None)


def test_jsonl_id_vars_tags_threshold(tmp_path: Path) -> None:
    line = {
        "id": "q1",
        "prompt": "Hi {name}",
        "expected": {"a": 1},
        "name": "top",
        "vars": {"name": "Ann", "extra": [1]},
        "tags": ["smoke", " fast "],
        "threshold": 0.5,
    }
    (row,) = load(tmp_path, "c.ndjson", jsonl(line), used=frozenset({"name"}))
    assert row.id == "q1"
    assert row.expected == '{"a": 1}'
    assert row.vars["name"] == "Ann" and row.vars["extra"] == [1]
    assert "vars" not in row.vars and row.vars["id"] == "q1"
    assert row.tags == ("smoke", "fast")
    assert row.threshold == 0.5
    assert row.task is None and row.expected_output_tokens is None


def test_explicit_format_overrides_extension(tmp_path: Path) -> None:
    rows = load(tmp_path, "cases.txt", jsonl({"input": "x", "output": "y"}), format="jsonl")
    assert (rows[0].prompt, rows[0].expected) == ("x", "y")


def test_jsonl_bom_tolerated(tmp_path: Path) -> None:
    rows = load(tmp_path, "c.jsonl", b"\xef\xbb\xbf" + jsonl({"question": "q"}).encode())
    assert rows[0].prompt == "q" and "question" in rows[0].vars


def test_jsonl_default_columns_resolved_per_line(tmp_path: Path) -> None:
    rows = load(tmp_path, "c.jsonl", jsonl({"prompt": "a", "answer": "1"}, {"input": "b"}))
    assert [(r.prompt, r.expected) for r in rows] == [("a", "1"), ("b", None)]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"prompt": ' + "[" * 100_000 + "]" * 100_000 + "}", "invalid JSON: nested too deep"),
        ('{"prompt": "q", "answer": ' + "9" * 5000 + "}", "invalid JSON: Exceeds the limit"),
    ],
    ids=["nested-100000", "int-5000-digits"],
)
def test_jsonl_past_pythons_limits_is_a_located_error(
    tmp_path: Path, line: str, message: str
) -> None:
    """Both were tracebacks at collection (RecursionError, ValueError)."""
    error = load_error(tmp_path, "c.jsonl", jsonl({"prompt": "fine"}) + line + "\n")
    assert error.line == 2 and message in str(error)


@pytest.mark.parametrize("name", ["x" * 5000 + ".csv", "a\x00b.csv"], ids=["too-long", "nul"])
def test_a_dataset_path_the_os_refuses_is_a_dataset_error(tmp_path: Path, name: str) -> None:
    """A name too long to open was an OSError traceback at collection."""
    with pytest.raises(DatasetError, match="is not a usable path"):
        load_dataset(DatasetSource(path=name), tmp_path)


def test_a_json_list_cell_past_the_limits_is_a_row_error(tmp_path: Path) -> None:
    cell = "[" * 50_000
    error = load_error(tmp_path, "c.csv", f"prompt,choices,answer\nq,{cell},A\n")
    assert "starts with '[' but is not a JSON list" in str(error)


# --- CSV ---------------------------------------------------------------------------------


def test_csv_mapping_vars_tags_and_padding(tmp_path: Path) -> None:
    text = 'qid,question,answer,labels,threshold,note\nA1,Q?,yes,"x, y",0.8\n\n,,,\nA2,Q2,,,,n\n'
    rows = load(
        tmp_path, "qa.csv", text, prompt="question", expected="answer", id="qid", tags="labels"
    )
    assert [r.id for r in rows] == ["A1", "A2"]
    assert rows[0].tags == ("x", "y") and rows[0].threshold == 0.8
    assert rows[0].vars == {
        "qid": "A1",
        "question": "Q?",
        "answer": "yes",
        "labels": "x, y",
        "threshold": "0.8",
        "note": "",
    }
    assert rows[1].expected is None and rows[1].line == 5


def test_csv_line_numbers_with_multiline_fields(tmp_path: Path) -> None:
    text = 'prompt,expected\n"one\ntwo\nthree",a\nsingle,b\n"x\n\ny","multi\nline"\nlast,c\n'
    rows = load(tmp_path, "m.csv", text)
    assert [r.line for r in rows] == [2, 5, 6, 10]
    assert rows[0].prompt == "one\ntwo\nthree" and rows[2].expected == "multi\nline"


def test_csv_crlf_line_numbers_and_newlines_kept(tmp_path: Path) -> None:
    rows = load(tmp_path, "m.csv", 'prompt\r\n"a\r\nb"\r\nc\r\n')
    assert [(r.prompt, r.line) for r in rows] == [("a\r\nb", 2), ("c", 4)]


def test_csv_row_numbers_are_stable_ids(tmp_path: Path) -> None:
    rows = load(tmp_path, "s.csv", "prompt,id\na,\nb,\nc,given\n")
    assert [r.id for r in rows] == ["row-1", "row-2", "given"]


# --- limit and shorthand -----------------------------------------------------------------


def test_limit_takes_first_rows_and_reads_no_further(tmp_path: Path) -> None:
    text = "prompt\na\nb\nc\n,,,,,\n"  # the bad last row lies past the limit
    rows = load(tmp_path, "l.csv", text, limit=2)
    assert [r.prompt for r in rows] == ["a", "b"]
    assert (
        len(load(tmp_path, "l2.jsonl", jsonl(*({"prompt": str(i)} for i in range(5))), limit=3))
        == 3
    )


def test_shorthand_string_is_path(tmp_path: Path) -> None:
    spec = yaml.safe_load("dataset: data/x.jsonl")
    source = DatasetSource.model_validate(spec["dataset"])
    assert source == DatasetSource(path="data/x.jsonl")
    assert source.encoding == "utf-8-sig" and source.format is None
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.jsonl").write_text(jsonl({"prompt": "p"}))
    assert load_dataset(source, tmp_path)[0].prompt == "p"


def test_path_is_relative_to_base_dir(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "evals").mkdir()
    (tmp_path / "shared" / "x.csv").write_text("Prompt,Golden_Answer\np,g\n")
    source = DatasetSource(path="../shared/x.csv", prompt="Prompt", expected="Golden_Answer")
    assert load_dataset(source, tmp_path / "evals", roots=[tmp_path])[0].expected == "g"


@pytest.mark.parametrize(
    "data",
    [
        {"path": "x.csv", "unknown": 1},
        {"path": "x.csv", "limit": 0},
        {"path": ""},
        {"path": "x.csv", "encoding": "no-such-codec"},
        {"path": "x.csv", "format": "tsv"},
    ],
)
def test_source_rejects_bad_fields(data: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        DatasetSource.model_validate(data)


def test_source_is_frozen_and_documented() -> None:
    source = DatasetSource(path="x.csv")
    with pytest.raises(pydantic.ValidationError):
        source.path = "y.csv"
    assert all(f.description for f in DatasetSource.model_fields.values())


# --- ids ---------------------------------------------------------------------------------


def test_ids_sanitized_for_node_ids(tmp_path: Path) -> None:
    raw = ["a[1]", "x::y", "has space", "p/q", "tab\there", " padded ", "ok-1.2", 7]
    rows = load(tmp_path, "i.jsonl", jsonl(*({"id": i, "prompt": "p"} for i in raw)))
    assert [r.id for r in rows] == [
        "a-1-",
        "x-y",
        "has-space",
        "p-q",
        "tab-here",
        "padded",
        "ok-1.2",
        "7",
    ]


def test_ids_colliding_after_sanitizing_rejected(tmp_path: Path) -> None:
    error = load_error(
        tmp_path, "i.jsonl", jsonl({"id": "a b", "prompt": "p"}, {"id": "a/b", "prompt": "q"})
    )
    assert "duplicate case id 'a-b' at lines 1 and 2" in str(error)
    assert error.line == 2


# --- errors ------------------------------------------------------------------------------


def test_error_missing_file_names_resolved_path(tmp_path: Path) -> None:
    with pytest.raises(DatasetError) as info:
        load_dataset(
            DatasetSource(path="../data/../nope.csv"), tmp_path / "evals", roots=[tmp_path]
        )
    resolved = (tmp_path / "nope.csv").resolve()
    assert str(info.value).startswith(f"{resolved}: dataset file not found")
    assert info.value.path == resolved and info.value.line is None


def test_error_unknown_extension(tmp_path: Path) -> None:
    error = load_error(tmp_path, "x.tsv", "prompt\na\n")
    assert "unknown dataset extension '.tsv'" in str(error) and "set format" in str(error)
    assert error.line is None and error.path == tmp_path / "x.tsv"


def test_error_mapped_column_missing_csv(tmp_path: Path) -> None:
    error = load_error(tmp_path, "x.csv", "q,a\nhi,yo\n", prompt="q", expected="answer")
    assert "column 'answer' (dataset.expected) not found; available: 'q', 'a'" in str(error)
    assert error.line == 1


def test_error_mapped_column_missing_jsonl(tmp_path: Path) -> None:
    error = load_error(
        tmp_path, "x.jsonl", jsonl({"q": "a", "qid": 1}, {"q": "b"}), prompt="q", id="qid"
    )
    assert "column 'qid' (dataset.id) not found; available: 'q'" in str(error)
    assert error.line == 2


def test_error_no_prompt_column(tmp_path: Path) -> None:
    error = load_error(tmp_path, "x.csv", "body,answer\nhi,yo\n")
    message = str(error)
    assert "no prompt column (looked for text_prompt, prompt, question, input)" in message
    assert "available: 'body', 'answer'" in message and "set dataset.prompt" in message
    assert error.line == 1


def test_error_empty_prompt_after_multiline_row(tmp_path: Path) -> None:
    error = load_error(tmp_path, "x.csv", 'prompt,expected\n"a\nb",1\n"  ",2\n')
    assert "empty prompt in column 'prompt'" in str(error)
    assert str(error).startswith(f"{tmp_path / 'x.csv'}:4: ")
    assert error.line == 4


def test_error_invalid_json_line(tmp_path: Path) -> None:
    error = load_error(tmp_path, "x.jsonl", jsonl({"prompt": "a"}) + "\n{\"prompt\": 'b'}\n")
    assert "invalid JSON: Expecting value (column 12)" in str(error)
    assert error.line == 3


def test_error_jsonl_line_not_object(tmp_path: Path) -> None:
    error = load_error(tmp_path, "x.jsonl", jsonl({"prompt": "a"}, ["prompt", "b"]))
    assert "line is a JSON list, not an object" in str(error)
    assert error.line == 2


def test_error_duplicate_ids_give_both_lines(tmp_path: Path) -> None:
    error = load_error(tmp_path, "x.csv", 'id,prompt\nk,"a\nb"\nz,c\nk,d\n')
    assert "duplicate case id 'k' at lines 2 and 5" in str(error)
    assert error.line == 5


def test_error_generated_id_collides_with_given_id(tmp_path: Path) -> None:
    error = load_error(tmp_path, "x.csv", "id,prompt\nrow-2,a\n,b\n")
    assert "duplicate case id 'row-2' at lines 2 and 3" in str(error)


def test_error_csv_row_with_extra_fields(tmp_path: Path) -> None:
    error = load_error(tmp_path, "x.csv", 'prompt,expected\n"a\nb",1\nc,2,3\n')
    assert "row has 3 fields but the header has 2" in str(error)
    assert error.line == 4


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        ("", "CSV file has no header row", 1),
        ("prompt,expected\n", "dataset has no data rows", None),
        ("prompt,prompt\na,b\n", "duplicate column names: prompt", 1),
        ('prompt\na\n"b\nc\n', "malformed CSV row", 3),
        ("prompt,threshold\na,1.5\n", "threshold must be a number from 0 to 1", 2),
        ("prompt,expected_output_tokens\na,many\n", "expected_output_tokens must be a positive", 2),
    ],
)
def test_error_csv_shapes_and_values(
    tmp_path: Path, text: str, message: str, line: int | None
) -> None:
    error = load_error(tmp_path, "x.csv", text)
    assert message in str(error)
    assert error.line == line


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"prompt": 3}, "prompt 'prompt' must be a string, got int"),
        ({"prompt": "a", "vars": [1]}, "'vars' must be an object, got list"),
        ({"prompt": "a", "tags": [1]}, "tags must be a comma-separated string or a list"),
        ({"prompt": "a", "task": "sum"}, "'task' must be an object of strings"),
        ({"prompt": "a", "threshold": True}, "threshold must be a number from 0 to 1"),
        ({"prompt": "a", "expected_output_tokens": 0}, "expected_output_tokens must be a positive"),
        ({"prompt": "a", "id": [1]}, "case id must be a string or an integer, got list"),
    ],
)
def test_error_jsonl_values(tmp_path: Path, obj: dict[str, Any], message: str) -> None:
    error = load_error(tmp_path, "x.jsonl", jsonl({"prompt": "ok"}, obj))
    assert message in str(error)
    assert error.line == 2


def test_error_undecodable_bytes_give_line(tmp_path: Path) -> None:
    error = load_error(tmp_path, "x.csv", b"prompt\nok\ncaf\xe9\n")
    assert "cannot decode as utf-8-sig" in str(error) and "dataset.encoding" in str(error)
    assert error.line == 3
    rows = load(tmp_path, "y.csv", b"prompt\ncaf\xe9\n", encoding="latin-1")
    assert rows[0].prompt == "café"


# --- split, shuffle and prompts from a template ------------------------------------------


def test_split_on_a_csv_file_is_an_error(tmp_path: Path) -> None:
    error = load_error(tmp_path, "x.csv", "prompt\na\n", split="test")
    assert "dataset.split needs a folder with splits, not a single file" in str(error)


def test_shuffle_keeps_ids_and_lines_tied_to_rows(tmp_path: Path) -> None:
    text = "prompt\n" + "".join(f"p{n}\n" for n in range(1, 11))
    rows = load(tmp_path, "s.csv", text, shuffle=True, seed=3, limit=4)
    order = list(range(1, 11))
    random.Random(3).shuffle(order)
    assert [r.id for r in rows] == [f"row-{n}" for n in order[:4]]
    assert all(r.prompt == f"p{r.number}" and r.line == r.number + 1 for r in rows)
    default_seed = load(tmp_path, "s.csv", text, shuffle=True)
    random.Random(0).shuffle(order := list(range(1, 11)))
    assert [r.number for r in default_seed] == order


def test_without_needs_prompt_a_row_may_lack_a_prompt(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("country,capital\nFrance,Paris\n", encoding="utf-8")
    (row,) = load_dataset(DatasetSource(path="t.csv"), tmp_path, needs_prompt=False)
    assert row.prompt is None and row.vars == {"country": "France", "capital": "Paris"}
    with pytest.raises(DatasetError, match="no prompt column"):
        load_dataset(DatasetSource(path="t.csv"), tmp_path)


def test_without_needs_prompt_empty_prompts_are_none(tmp_path: Path) -> None:
    (tmp_path / "e.jsonl").write_text(jsonl({"prompt": ""}, {"prompt": "q"}), encoding="utf-8")
    rows = load_dataset(DatasetSource(path="e.jsonl"), tmp_path, needs_prompt=False)
    assert [r.prompt for r in rows] == [None, "q"]
    with pytest.raises(DatasetError, match="empty prompt in column 'prompt'"):
        load_dataset(DatasetSource(path="e.jsonl"), tmp_path)
    with pytest.raises(DatasetError, match=re.escape("column 'ask' (dataset.prompt) not found")):
        load_dataset(DatasetSource(path="e.jsonl", prompt="ask"), tmp_path, needs_prompt=False)


# --- columns, choices, answers and images in CSV/JSONL ------------------------------------


def test_columns_copy_values_into_vars(tmp_path: Path) -> None:
    rows = load(
        tmp_path,
        "c.jsonl",
        jsonl({"q": "Hi", "n": 3, "xs": [1, 2]}),
        used=frozenset({"xs"}),
        prompt="q",
        columns={"question": "q", "count": "n"},
    )
    assert rows[0].vars == {"q": "Hi", "n": 3, "xs": [1, 2], "question": "Hi", "count": 3}
    error = load_error(tmp_path, "d.csv", "q\nHi\n", prompt="q", columns={"v": "zz"})
    assert "column 'zz' (dataset.columns.v) not found; available: 'q'" in str(error)
    assert error.line == 1


def test_jsonl_default_choices_column_takes_the_answer(tmp_path: Path) -> None:
    lines = [
        {"question": "2+2?", "choices": ["3", 4, "5"], "answer": "B", "expected": "four"},
        {"question": "Sky?", "answer": "blue"},  # no choices: answer is the expected text
    ]
    first, second = load(tmp_path, "mc.jsonl", jsonl(*lines))
    assert (first.choices, first.answer, first.expected) == (("3", "4", "5"), "B", "four")
    assert first.choice_labels is None
    assert (second.choices, second.answer, second.expected) == (None, None, "blue")


def test_jsonl_arc_struct_choices_and_numeric_answer(tmp_path: Path) -> None:
    line = {"question": "q", "choices": {"text": ["a", "b"], "label": ["1", "2"]}, "label": 1}
    (row,) = load(tmp_path, "arc.jsonl", jsonl(line), answer="label")
    assert (row.choices, row.choice_labels, row.answer) == (("a", "b"), ("1", "2"), 1)


def test_csv_choice_columns_and_json_list_cells(tmp_path: Path) -> None:
    text = "goal,sol1,sol2,label\nOpen a jar,Twist,Smash,0\n"
    (piqa,) = load(
        tmp_path, "piqa.csv", text, prompt="goal", choices=["sol1", "sol2"], answer="label"
    )
    assert (piqa.choices, piqa.answer, piqa.expected) == (("Twist", "Smash"), "0", None)
    text = 'ctx,endings,answer\nHe,"[""runs"", ""sits""]",1\n'
    (hella,) = load(tmp_path, "h.csv", text, prompt="ctx", choices="endings")
    assert (hella.choices, hella.answer) == (("runs", "sits"), "1")


@pytest.mark.parametrize(
    ("line", "mapping", "message"),
    [
        (
            {"prompt": "p", "choices": "a, b", "answer": 0},
            {},
            "choices in 'choices' must be a non-empty list",
        ),
        (
            {"prompt": "p", "choices": [], "answer": 0},
            {},
            "choices in 'choices' must be a non-empty list",
        ),
        (
            {"prompt": "p", "choices": ["a", None], "answer": 0},
            {},
            "a choice in 'choices' must be a non-empty",
        ),
        (
            {"prompt": "p", "choices": "[1,", "answer": 0},
            {},
            "starts with '[' but is not a JSON list",
        ),
        (
            {"prompt": "p", "choices": {"text": ["a"], "label": ["A", "B"]}, "answer": "A"},
            {},
            "'choices' has 2 labels for 1 choices",
        ),
        ({"prompt": "p", "label": 1}, {"answer": "label"}, "dataset.answer needs choices"),
        (
            {"prompt": "p", "o1": "a", "o2": "", "answer": 0},
            {"choices": ["o1", "o2"]},
            "a choice in 'o2'",
        ),
        (
            {"prompt": "p", "choices": ["a", "b"], "gold": 1},
            {},
            "no answer column for the choices (looked for answer, answerKey, label)",
        ),
        ({"prompt": "p", "image": 3}, {}, "an image must be a path, a URL or image bytes"),
    ],
)
def test_error_choice_and_image_values(
    tmp_path: Path, line: dict[str, Any], mapping: dict[str, Any], message: str
) -> None:
    error = load_error(tmp_path, "x.jsonl", jsonl(line), **mapping)
    assert message in str(error) and error.line == 1


def test_choices_need_two_columns_in_a_list() -> None:
    with pytest.raises(pydantic.ValidationError, match="at least two"):
        DatasetSource(path="x.csv", choices=["only"])


def test_csv_image_paths_relative_to_the_dataset_folder(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    text = (
        'prompt,image\nq1,pics/a.png\nq2,https://x.test/b.png\nq3,"[""a.png"", ""b.gif""]"\nq4,\n'
    )
    rows = load(tmp_path, "data/v.csv", text)
    data = tmp_path / "data"
    assert rows[0].images == (str(data / "pics" / "a.png"),)
    assert rows[1].images == ("https://x.test/b.png",)
    assert rows[2].images == (str(data / "a.png"), str(data / "b.gif"))
    assert rows[3].images == ()
    assert rows[0].vars["image"] == [str(data / "pics" / "a.png")]
    (other,) = load(tmp_path, "o.csv", "prompt,pic\nq,p.png\n", images="pic")
    assert other.images == (str(tmp_path / "p.png"),)


# --- factories ---------------------------------------------------------------------------

ADDITION = '''
import random


def addition(n, seed=0):
    """NEAR AI's 3-digit addition: random pairs, the sum expected."""
    rng = random.Random(seed)
    for _ in range(n):
        a, b = rng.randint(100, 999), rng.randint(100, 999)
        yield {"prompt": f"What is {a} + {b}?", "expected": a + b, "vars": {"a": a, "b": b}}


def as_list():
    return [{"question": "q", "choices": ["x", "y"], "answer": 1, "id": "only"}]


def boom(**kwargs):
    raise ValueError("no data today")


def breaks_midway():
    yield {"prompt": "fine"}
    raise KeyError("gone")


def bad_item():
    yield {"prompt": "fine"}
    yield {"prompt": "fine too"}
    yield 42


def not_iterable():
    return 7


def nothing():
    return []


def bad_row():
    return [{"prompt": "ok"}, {"prompt": "ok", "tags": 5}]


def pictures():
    return [{"prompt": "p", "images": ["pic.png", {"bytes": b"\\x89PNG\\r\\n\\x1a\\nxx"}]}]


def exits():
    yield {"prompt": "fine"}
    raise SystemExit(3)


class Stop(BaseException):
    pass


def raises_base():
    raise Stop("not an Exception")


def holds_itself():
    row = {"prompt": "p", "vars": {"n": 1}}
    row["vars"]["again"] = row
    return [row]


def deep():
    value = []
    for _ in range(10_000):
        value = [value]
    return [{"prompt": "p", "tree": value}]


def skips():
    import pytest

    pytest.skip("no data here", allow_module_level=True)
'''


@pytest.fixture
def factory_module(tmp_path: Path) -> str:
    """A module of factories in ``tmp_path`` under a fresh name (imports are cached)."""
    name = f"factories_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(ADDITION, encoding="utf-8")
    return name


def from_factory(tmp_path: Path, ref: str, **source: Any) -> list[DatasetRow]:
    return load_dataset(DatasetSource(factory=ref, **source), tmp_path)


def factory_error(tmp_path: Path, ref: str, **source: Any) -> DatasetError:
    with pytest.raises(DatasetError) as info:
        from_factory(tmp_path, ref, **source)
    assert info.value.path is None and info.value.line is None
    return info.value


def test_factory_near_ai_addition(tmp_path: Path, factory_module: str) -> None:
    rows = from_factory(tmp_path, f"{factory_module}:addition", args={"n": 5, "seed": 11})
    rng = random.Random(11)
    pairs = [(rng.randint(100, 999), rng.randint(100, 999)) for _ in range(5)]
    assert [(r.prompt, r.expected) for r in rows] == [
        (f"What is {a} + {b}?", str(a + b)) for a, b in pairs
    ]
    assert [r.id for r in rows] == [f"row-{n}" for n in range(1, 6)]
    assert rows[0].vars["a"] == pairs[0][0] and rows[0].where == "row 1"
    shuffled = from_factory(
        tmp_path, f"{factory_module}:addition", args={"n": 5, "seed": 11}, shuffle=True, limit=2
    )
    assert {(r.id, r.prompt) for r in shuffled} <= {(r.id, r.prompt) for r in rows}


def test_factory_limit_stops_an_endless_generator(tmp_path: Path, factory_module: str) -> None:
    rows = from_factory(tmp_path, f"{factory_module}:addition", args={"n": 10**9}, limit=3)
    assert len(rows) == 3


def test_factory_returning_a_list_with_choices(tmp_path: Path, factory_module: str) -> None:
    (row,) = from_factory(tmp_path, f"{factory_module}:as_list")
    assert (row.id, row.prompt, row.choices, row.answer) == ("only", "q", ("x", "y"), 1)


def test_factory_images_relative_to_the_eval_folder(tmp_path: Path, factory_module: str) -> None:
    (row,) = from_factory(tmp_path, f"{factory_module}:pictures")
    assert row.images[0] == str(tmp_path / "pic.png")
    assert row.images[1].startswith("data:image/png;base64,iVBORw0KGgp4eA")


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("boom", "factory {m}:boom raised ValueError: no data today"),
        ("breaks_midway", "factory {m}:breaks_midway raised KeyError: 'gone'"),
        ("bad_item", "factory row 3: expected a mapping, got int"),
        ("not_iterable", "factory {m}:not_iterable returned int, not an iterable of mappings"),
        ("nothing", "factory {m}:nothing gave no rows"),
        ("bad_row", "factory row 2: tags must be a comma-separated string or a list of strings"),
        ("missing", "factory {m}:missing: cannot load: AttributeError"),
        ("exits", "factory {m}:exits raised SystemExit: 3"),
        ("raises_base", "factory {m}:raises_base raised Stop: not an Exception"),
        ("holds_itself", "factory row 1: vars.again.vars: the value contains itself"),
        ("deep", "factory row 1: tree.0.0.0.0.0.0.0...: nested more than 64 levels deep"),
    ],
)
def test_factory_errors(tmp_path: Path, factory_module: str, function: str, message: str) -> None:
    error = factory_error(tmp_path, f"{factory_module}:{function}")
    assert str(error).startswith(message.format(m=factory_module))
    assert "Traceback" not in str(error)


def test_a_factory_module_that_exits_on_import_is_a_dataset_error(tmp_path: Path) -> None:
    name = f"exits_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text("import sys\nsys.exit('bye')\n", encoding="utf-8")
    assert (
        str(factory_error(tmp_path, f"{name}:rows"))
        == f"factory {name}:rows raised SystemExit: bye"
    )


def test_a_factory_may_still_ask_pytest_to_skip(tmp_path: Path, factory_module: str) -> None:
    with pytest.raises(pytest.skip.Exception, match="no data here"):
        from_factory(tmp_path, f"{factory_module}:skips")


def test_factory_duplicate_ids_name_factory_rows(tmp_path: Path, factory_module: str) -> None:
    (tmp_path / f"{factory_module}_dup.py").write_text(
        "def rows():\n    return [{'id': 'x', 'prompt': 'a'}, {'id': 'x', 'prompt': 'b'}]\n"
    )
    error = factory_error(tmp_path, f"{factory_module}_dup:rows")
    assert "duplicate case id 'x' at factory rows 1 and 2" in str(error)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "give exactly one of path and factory"),
        ({"path": "x.csv", "factory": "m:f"}, "give exactly one of path and factory"),
        ({"path": "x.csv", "args": {"n": 1}}, "args is for a factory"),
        ({"factory": "m:f", "split": "test"}, "split and format are for a path"),
        ({"factory": "no colon"}, "String should match pattern"),
    ],
)
def test_source_origin_rules(data: dict[str, Any], message: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=re.escape(message)):
        DatasetSource.model_validate(data)


def test_module_import_loads_no_pyarrow() -> None:
    code = (
        "import sys, pytest_llmbench.spec.datasets; "
        "sys.exit('pyarrow' in sys.modules or 'datasets' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# --- a JSONL row follows the rules of an inline case ------------------------------------------


def test_a_jsonl_rows_assert_and_judge_metrics_are_kept(tmp_path: Path) -> None:
    rows = load(
        tmp_path,
        "c.jsonl",
        jsonl(
            {"id": "a", "prompt": "p", "expected": "x", "assert": ["contains", {"type": "regex", "value": "^x"}],
             "judge_metrics": ["tone"]},
            {"id": "b", "text_prompt": "p", "golden_answer": "y", "user_defined_metrics": "brand voice, empathy"},
        ),
    )  # fmt: skip
    assert rows[0].assertions == ("contains", {"type": "regex", "value": "^x"})
    assert rows[0].judge_metrics == ("tone",)
    assert rows[1].judge_metrics == ("brand voice", "empathy")  # 360-eval's comma string


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"prompt": "p", "asert": ["contains"]}, "unknown key 'asert' (did you mean 'assert'?)"),
        ({"prompt": "p", "assert": [{"type": "no-such-check"}]}, "assert[0]: "),
        ({"prompt": "p", "judge_metrics": 3}, "judge_metrics must be a list"),
    ],
)
def test_a_jsonl_rows_unknown_or_bad_keys_are_errors_at_their_line(
    tmp_path: Path, row: dict[str, Any], message: str
) -> None:
    error = load_error(tmp_path, "c.jsonl", jsonl({"prompt": "fine"}, row))
    assert error.line == 2 and message in str(error), str(error)


def test_a_jsonl_rows_other_keys_are_data_as_a_csvs_columns_are(tmp_path: Path) -> None:
    """Exported datasets carry metadata (country, source, ids) beside the case's keys: each is a
    variable of the row's case, as a CSV column is; none had to be mapped or used."""
    line = jsonl({"prompt": "p", "country": "France", "source": {"url": "u"}, "size": "L"})
    (row,) = load(tmp_path, "c.jsonl", line, columns={"s": "size"})
    assert (row.vars["country"], row.vars["source"], row.vars["s"]) == ("France", {"url": "u"}, "L")
    (row,) = load(tmp_path, "d.csv", "prompt,country\np,France\n")
    assert row.vars["country"] == "France"


#: Metadata fields of real datasets, none a typo of a case key.
HONEST_KEYS = (
    "country", "source", "id_", "idx", "qid", "uid", "uuid", "ids", "question_id", "task_id",
    "example_id", "image_id", "answers", "labels", "inputs", "outputs", "choice", "context",
    "category", "subject", "difficulty", "split", "title", "text", "url", "meta", "metadata",
    "language", "topic", "level", "type", "name", "target", "references", "passage", "options",
    "notes", "author", "date", "created_at", "score", "rationale", "explanation", "hint",
    "domain", "dataset", "license", "tag", "var", "mask", "bars", "expected_answer",
    "golden_answers", "prompt_id", "assets", "insert", "answered", "promote", "system",
)  # fmt: skip
#: Typos of case keys, with the key each is taken for.
TYPOS = {
    "asert": "assert", "assrt": "assert", "assret": "assert", "asserts": "assert",
    "Assert": "assert", "expcted": "expected", "expceted": "expected", "expeted": "expected",
    "promt": "prompt", "prmopt": "prompt", "thresold": "threshold", "treshold": "threshold",
    "judge_metric": "judge_metrics", "judge_metircs": "judge_metrics", "imgaes": "images",
    "choises": "choices", "answr": "answer", "questoin": "question", "expected_ouptut_tokens":
    "expected_output_tokens", "golden_anwser": "golden_answer", "lable": "label",
}  # fmt: skip


@pytest.mark.parametrize("key", HONEST_KEYS)
def test_an_honest_field_is_never_taken_for_a_typo(tmp_path: Path, key: str) -> None:
    (row,) = load(tmp_path, "c.jsonl", jsonl({"prompt": "p", key: "v"}))
    assert row.vars[key] == "v"


@pytest.mark.parametrize(("typo", "meant"), sorted(TYPOS.items()))
def test_a_typo_of_a_case_key_is_an_error_that_names_the_key(
    tmp_path: Path, typo: str, meant: str
) -> None:
    error = load_error(tmp_path, "c.jsonl", jsonl({"prompt": "fine"}, {"prompt": "p", typo: 1}))
    assert error.line == 2
    assert f"c.jsonl:2: unknown key {typo!r} (did you mean {meant!r}?)" in str(error)


def test_a_typo_like_key_is_data_when_mapped_or_used_by_a_template(tmp_path: Path) -> None:
    line = jsonl({"prompt": "p", "promt": "a", "asert": "b"})
    (row,) = load(tmp_path, "c.jsonl", line, used=frozenset({"promt"}), columns={"x": "asert"})
    assert (row.vars["promt"], row.vars["x"]) == ("a", "b")
    # A CSV's or a table's columns are named by the data's author: never taken for typos.
    (row,) = load(tmp_path, "d.csv", "prompt,asert\np,x\n")
    assert row.vars["asert"] == "x"


def test_a_jsonl_row_nested_too_deep_is_an_error_at_its_line(tmp_path: Path) -> None:
    deep = '{"prompt": "p", "vars": {"t": ' + "[" * 100 + "]" * 100 + "}}"
    error = load_error(tmp_path, "c.jsonl", jsonl({"prompt": "fine"}) + deep + "\n")
    assert error.line == 2
    assert "c.jsonl:2: vars.t.0.0.0.0.0.0...: nested more than 64 levels deep" in str(error)


def test_a_jsonl_rows_extra_field_runs_and_a_typo_is_a_collection_error(bench: Bench) -> None:
    """Issue 25: a row's metadata field is a variable of its case, in the prompt sent; a typo
    of `assert` is the file's collection error naming the dataset's line."""
    bench.server.add_rule(Rule(match="France", reply="Paris."))
    rows = '{"id": "fr", "country": "France", "source": "atlas", "expected": "Paris"}\n'
    bench.pytester.path.joinpath("capitals.jsonl").write_text(rows)
    bench.pytester.path.joinpath("typo.jsonl").write_text(
        '{"id": "fr", "prompt": "Capital of France?", "asert": ["contains"]}\n'
    )
    bench.eval_file(
        "capitals",
        'dataset: capitals.jsonl\nprompt: "Capital of {{country}}? (from {{source}})"\n'
        "assert: [contains]\n",
    )
    bench.eval_file("typo", "dataset: typo.jsonl\n")
    result = bench.run("--models=fake", "capitals.eval.yaml")
    result.assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["prompt"] == "Capital of France? (from atlas)" and record["passed"]
    calls = len(bench.server.chat_requests())
    typo = bench.run("--models=fake", "typo.eval.yaml")
    assert typo.ret == pytest.ExitCode.INTERRUPTED
    typo.stdout.fnmatch_lines(
        ["typo.eval.yaml:1: dataset: *typo.jsonl:1: unknown key 'asert' (did you mean 'assert'?)*"]
    )
    assert "Traceback" not in typo.stdout.str()
    assert len(bench.server.chat_requests()) == calls  # refused before any call
