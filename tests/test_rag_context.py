"""The shapes a retrieved context arrives in (pytest_llmbench/spec/context.py): an empty
retrieval gives the same verdicts from a case, a dataset row (JSONL, CSV) and a solver; lists
of documents (LangChain, LlamaIndex, Haystack) read as their text; anything else is an error
naming the accepted shapes at its line; no context at all, where a metric needs one, is a
collection error at its line.
"""

from __future__ import annotations

import csv
import fnmatch
import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import Bench, Rule

from pytest_llmbench.spec.context import ContextError, context_chunks, context_record
from pytest_llmbench.spec.load import load_spec
from pytest_llmbench.spec.resolved import EvalFileError

# --- an empty retrieval: one verdict however it arrives ---------------------------------------

CHECKS = (
    "[{type: faithfulness, judges: [fake2]}, {type: context-recall, judges: [fake2]},"
    " {type: context-precision, judges: [fake2]},"
    " {type: model-graded, judges: [fake2], prompt: 'Docs: {{context}} Answer: {{output}}',"
    " choices: {'yes': 1, 'no': 0}},"
    " {type: icontains, value: Paris}]"
)
#: Two questions: the model answers one right (icontains passes) and one wrong.
ROWS = (
    {"id": "paris", "q": "Capital of France?", "expected": "Paris is the capital."},
    {"id": "lyon", "q": "Capital of the Rhone?", "expected": "Paris is the capital."},
)
EMPTY = "unchecked: the context is empty: nothing to judge against"
#: Every source's verdicts: the four context checks unchecked, icontains deciding the item.
VERDICTS = {
    "paris": (
        "passed",
        [
            ("faithfulness", EMPTY),
            ("context-recall", EMPTY),
            ("context-precision", EMPTY),
            ("model-graded", EMPTY),
            ("icontains", "passed"),
        ],
    ),
    "lyon": (
        "failed",
        [
            ("faithfulness", EMPTY),
            ("context-recall", EMPTY),
            ("context-precision", EMPTY),
            ("model-graded", EMPTY),
            ("icontains", "failed"),
        ],
    ),
}
SOLVER = """
def retrieve_nothing(case, client):
    return {"answer": client.complete(case.prompt).text, "context": []}


def say_nothing_of_it(case, client):
    return {"answer": client.complete(case.prompt).text, "context": None}
"""


def _case_file(bench: Bench) -> None:
    cases = "".join(
        f"  - {{id: {row['id']}, vars: {{q: {row['q']}}}, context: [],"
        f" expected: {row['expected']}}}\n"
        for row in ROWS
    )
    bench.eval_file(
        "rag", f'prompt: "Docs:[{{{{context}}}}] Q: {{{{q}}}}"\nassert: {CHECKS}\ncases:\n{cases}'
    )


def _jsonl_file(bench: Bench) -> None:
    rows = [{**row, "context": []} for row in ROWS]
    bench.pytester.makefile(".jsonl", rows="\n".join(json.dumps(row) for row in rows))
    bench.eval_file("rag", _dataset_file("rows.jsonl"))


def _csv_file(bench: Bench) -> None:
    with (bench.pytester.path / "rows.csv").open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=["id", "q", "context", "expected"])
        writer.writeheader()
        writer.writerows({**row, "context": "[]"} for row in ROWS)
    bench.eval_file("rag", _dataset_file("rows.csv"))


def _dataset_file(path: str) -> str:
    return (
        f'prompt: "Docs:[{{{{context}}}}] Q: {{{{q}}}}"\ndataset: {{path: {path}}}\n'
        f"assert: {CHECKS}\n"
    )


def _solver_file(bench: Bench) -> None:
    bench.pytester.makepyfile(rag_app=SOLVER)
    cases = "".join(
        f"  - {{id: {row['id']}, vars: {{q: {row['q']}}}, expected: {row['expected']}}}\n"
        for row in ROWS
    )
    bench.eval_file(
        "rag",
        f'solver: rag_app:retrieve_nothing\nprompt: "Q: {{{{q}}}}"\nassert: {CHECKS}\n'
        f"cases:\n{cases}",
    )


SOURCES = {"case": _case_file, "jsonl": _jsonl_file, "csv": _csv_file, "solver": _solver_file}


def _verdict(assertion: dict[str, Any]) -> tuple[str, str]:
    if assertion.get("unchecked"):
        assert assertion["passed"] is False  # unchecked is never a pass
        return assertion["type"], assertion["reason"]
    return assertion["type"], "passed" if assertion["passed"] else "failed"


@pytest.mark.parametrize(
    ("source", "client"), [*((source, "auto") for source in SOURCES), ("jsonl", "litellm")]
)
def test_an_empty_retrieval_gives_the_same_verdicts_however_it_arrives(
    bench: Bench, source: str, client: str
) -> None:
    """From a case, a JSONL row, a CSV row or a solver, and through either client."""
    SOURCES[source](bench)
    bench.server.add_rule(Rule(model="fake-model", match="France", reply="Paris."))
    bench.server.add_rule(Rule(model="fake-model", match="Rhone", reply="Lyon."))
    bench.run("--models=fake", f"--client={client}").assert_outcomes(passed=1, failed=1)
    records = {record["case_id"]: record for record in bench.records()}
    got = {
        case: (record["outcome"], [_verdict(a) for a in record["assertions"]])
        for case, record in records.items()
    }
    assert got == VERDICTS
    # The record shows a retrieval that found nothing (not "no context": that is None).
    expected_source = "solver" if source == "solver" else "case"
    assert {r["context"]["source"] for r in records.values()} == {expected_source}
    assert all(r["context"]["chunks"] == [] for r in records.values())
    if source != "solver":  # {{context}} renders an empty retrieval as nothing
        assert records["paris"]["prompt"] == "Docs:[] Q: Capital of France?"
    judged = [r for r in bench.server.chat_requests() if r.body["model"] == "fake-model-2"]
    assert judged == []  # nothing to judge against: no judge is asked


def test_a_solvers_context_of_none_is_no_context_as_a_cases(bench: Bench) -> None:
    """``None`` is not an empty retrieval: the judges read the case's own context."""
    bench.pytester.makepyfile(rag_app=SOLVER)
    bench.server.add_rule(Rule(model="fake-model", reply="Paris."))
    verdict = {"claims": [{"claim": "Paris.", "supported": True, "reason": "stated"}]}
    bench.server.add_rule(Rule(model="fake-model-2", reply=json.dumps(verdict)))
    bench.eval_file(
        "rag",
        "solver: rag_app:say_nothing_of_it\ncases:\n  - {id: paris, prompt: Capital?,"
        " context: [Paris is the capital.], assert: [{type: faithfulness, judges: [fake2]}]}\n",
    )
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["context"] == {"source": "case", "chunks": ["Paris is the capital."]}


# --- the shapes of a context -------------------------------------------------------------------


@dataclass
class Document:
    """A LangChain ``Document`` as a solver holds one."""

    page_content: str
    metadata: dict[str, Any]


class Node:
    """A LlamaIndex node whose ``text`` raises: it holds no text (an image node)."""

    @property
    def text(self) -> str:
        raise ValueError("not a text node")


@pytest.mark.parametrize(
    ("value", "chunks"),
    [
        (None, None),
        ("", None),
        ("  \n ", None),  # a blank text: no context, as an empty one
        ([], ()),
        ("[]", ()),
        (" [ ] ", ()),
        ("One chunk.", ("One chunk.",)),
        ('["a", "b"]', ("a", "b")),
        ("[1, 2]", ("[1, 2]",)),  # a JSON list of neither strings nor documents: plain text
        ("[not json", ("[not json",)),
        (["a", ""], ("a", "")),
        ([{"page_content": "lc", "metadata": {"source": "x"}}], ("lc",)),
        ([{"text": "li", "id_": "n1", "score": 0.8}, "plain"], ("li", "plain")),
        ([{"content": "hs", "meta": {}}], ("hs",)),
        ('[{"page_content": "from a CSV cell"}]', ("from a CSV cell",)),
        ([Document("a solver's", {})], ("a solver's",)),
    ],
)
def test_the_shapes_a_context_is_read_from(value: Any, chunks: tuple[str, ...] | None) -> None:
    assert context_chunks(value) == chunks


def test_an_empty_retrieval_and_no_context_are_two_records() -> None:
    assert context_record((), "case") == {"source": "case", "chunks": []}
    assert context_record(None, "case") is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"doc": 1}, "context must be a string, or a list (*; got a mapping"),
        (5, "context must be a string*; got int 5"),
        ([1], "context[0] is int 1; context must be a string, or a list*"),
        (["a", ["b"]], "context[1] is a list; context must be*"),
        (["a", None], "context[1] is null; context must be*"),
        ([{"title": "t", "url": "u"}], "context[0] is a document with no text field (fields: "
         "'title', 'url'); a document needs exactly one of 'page_content', 'text' or 'content'"),
        ([{"text": "a", "content": "b"}], "context[0] is a document with several text fields*"),
        ([{"text": 3}], "context[0].text must be a string, got int 3"),
        ([Node()], "context[0] is a document with no text field (a Node object)*"),
    ],
)  # fmt: skip
def test_a_context_of_another_shape_names_the_accepted_ones(value: Any, message: str) -> None:
    with pytest.raises(ContextError) as caught:
        context_chunks(value)
    assert _matches(str(caught.value), message)


def _matches(text: str, pattern: str) -> bool:
    """``text`` matches ``pattern``, whose only wildcard is ``*`` (brackets are literal)."""
    return fnmatch.fnmatchcase(text, pattern.replace("[", "[[]"))


def _load(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "rag.eval.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return load_spec(path)


def test_a_case_reads_a_list_of_documents(tmp_path: Path) -> None:
    loaded = _load(
        tmp_path,
        """\
        prompt: "{{context}} Q: capital?"
        cases:
          - id: docs
            context:
              - {page_content: Paris is the capital., metadata: {source: wiki}}
              - {text: It is on the Seine.}
            assert: [{type: faithfulness, judges: [fake2]}]
        """,
    )
    (case,) = loaded.cases
    assert case.context == ("Paris is the capital.", "It is on the Seine.")
    assert (
        case.messages[-1]["content"] == "Paris is the capital.\n\nIt is on the Seine. Q: capital?"
    )


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ("[{title: T}]", "rag.eval.yaml:5: cases.0.context: context[0] is a document with no "
         "text field (fields: 'title')*"),
        ("{doc: 1}", "rag.eval.yaml:5: cases.0.context: context must be a string, or a list "
         "(the chunks in retrieval order; [] for a retrieval that found nothing) of strings or "
         "of documents with one text field: 'page_content' (LangChain), 'text' (LlamaIndex) or "
         "'content' (Haystack); got a mapping"),
        ("[3]", "rag.eval.yaml:5: cases.0.context: context[0] is int 3*"),
    ],
)  # fmt: skip
def test_a_cases_context_of_another_shape_is_an_error_at_its_line(
    tmp_path: Path, context: str, message: str
) -> None:
    with pytest.raises(EvalFileError) as caught:
        _load(
            tmp_path,
            f"""\
            prompt: "{{{{context}}}} Q: capital?"
            cases:
              - id: bad
                expected: Paris
                context: {context}
            """,
        )
    assert _matches(str(caught.value), f"*{message}")


def test_a_dataset_rows_context_of_another_shape_is_an_error_at_its_line(
    tmp_path: Path,
) -> None:
    rows = [{"q": "a", "context": []}, {"q": "b", "context": [{"url": "u"}]}]
    (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps(row) for row in rows))
    with pytest.raises(EvalFileError) as caught:
        _load(tmp_path, 'prompt: "{{context}} {{q}}"\ndataset: {path: rows.jsonl}\n')
    assert _matches(str(caught.value), "*rows.jsonl:2*context[0] is a document with no text*")


# --- no context where a metric needs one: a collection error at its line ----------------------


def test_a_case_without_context_is_an_error_at_the_metric_naming_the_empty_form(
    tmp_path: Path,
) -> None:
    with pytest.raises(EvalFileError) as caught:
        _load(
            tmp_path,
            """\
            cases:
              - id: none
                prompt: Capital?
                assert:
                  - {type: context-precision, judges: [fake2]}
            """,
        )
    assert _matches(
        str(caught.value),
        "*rag.eval.yaml:5: case 'none': `context-precision` judges the answer against its "
        "retrieved context: the case needs `context`*; a retrieval that found nothing is "
        "`context: []`",
    )


@pytest.mark.parametrize("kind", ["jsonl-missing", "jsonl-null", "csv-empty-cell"])
def test_a_dataset_row_without_context_is_an_error_at_its_line(tmp_path: Path, kind: str) -> None:
    """A row that gives no context (no key, null, an empty CSV cell), under a metric that
    needs one; the row before it has an empty retrieval, which is fine."""
    if kind == "csv-empty-cell":
        (tmp_path / "rows.csv").write_text('q,context\na,[]\nb,""\n')
        path = "rows.csv"
    else:
        second = {"q": "b"} if kind == "jsonl-missing" else {"q": "b", "context": None}
        rows = [{"q": "a", "context": []}, second]
        (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps(row) for row in rows))
        path = "rows.jsonl"
    with pytest.raises(EvalFileError) as caught:
        _load(
            tmp_path,
            f"""\
            prompt: "Q: {{{{q}}}}"
            dataset: {{path: {path}}}
            assert: [{{type: faithfulness, judges: [fake2]}}]
            """,
        )
    line = 3 if kind == "csv-empty-cell" else 2
    assert _matches(
        str(caught.value),
        f"*rag.eval.yaml:2: dataset row 'row-2' (line {line}): `faithfulness` judges the answer "
        "against its retrieved context: the case needs `context`*; a retrieval that found "
        "nothing is `context: []`",
    )


def test_the_report_says_an_empty_retrieval_in_words() -> None:
    from pytest_llmbench.report.html_tables import context_block

    empty = context_block({"context": {"source": "solver", "chunks": []}})
    assert empty == ('<h4>context (solver)</h4><p class="context">empty retrieval (no chunks)</p>')
    assert context_block({"context": None}) == ""
