"""Our RAG metrics beside Ragas', on the same 20 rows and the same scripted judge.

    python3 -m venv /tmp/ragas-venv
    /tmp/ragas-venv/bin/pip install 'ragas==0.4.3' 'langchain-community<0.4'
    .venv/bin/python benchmarks/ragas_crosscheck.py --ragas-python /tmp/ragas-venv/bin/python \\
        --write benchmarks/ragas-crosscheck.md

The rows (``benchmarks/data/ragas-crosscheck.jsonl``) carry a question, the retrieved chunks, an
answer, a reference and the verdicts a judge is to give: the answer's claims, each supported or
not; the reference's claims, each found in the context or not; each chunk relevant or not; a
relevance score for our ``answer-relevance``, and for Ragas' answer relevancy and our
``answer-relevance`` with ``embedding_model`` the question the answer answers and whether it is
noncommittal (each side's judge writes it 3 times).

A fake judge (an OpenAI-compatible server on 127.0.0.1, started here, standard library only)
answers both tools from those verdicts, each in its own shape: our judge prompts get our JSON
(``{"claims": ...}``, ``{"chunks": ...}``, ``{"score": ...}``, ``{"questions": ...}``), Ragas' prompts (its v0.4
``ragas.metrics.collections`` metrics, through ``llm_factory`` on an ``AsyncOpenAI`` client with
``base_url``) get the pydantic shapes Ragas parses (``statements``, NLI verdicts,
``classifications``, a 0/1 verdict per chunk, a generated question). Its ``/v1/embeddings`` gives
a bag-of-words vector of each text, to both sides' answer relevancy.

Ours runs as a user runs it: ``pytest`` on a generated eval file (the rows as a dataset, the
model under test answering with the row's answer, the four assertions judged by the fake judge),
the scores read from ``results.jsonl``. Ragas runs from the interpreter given (it is not a
dependency of the project: see ``benchmarks/ragas-crosscheck.md`` for why), in a subprocess of
this script (``--ragas-side``) that prints its scores as JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from contextlib import AbstractContextManager
from datetime import datetime, timezone
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from localserver import JsonHandler, serving

ROOT = Path(__file__).resolve().parents[1]
ROWS = ROOT / "benchmarks" / "data" / "ragas-crosscheck.jsonl"
#: Our assertion (its type, or a label for the second answer-relevance) and Ragas' metric of the
#: same name, in table order: the order of the eval file's assertions.
METRICS = (
    ("faithfulness", "faithfulness"),
    ("context-recall", "context_recall"),
    ("context-precision", "context_precision"),
    ("answer-relevance", "answer_relevancy"),
    ("answer-relevance (embedding)", "answer_relevancy"),
)
#: Two scores agree when they differ by less than this.
AGREE = 0.01
KEY_ENV = "CROSSCHECK_API_KEY"
#: How our judge prompts end, per kind (pytest_llmbench/judging/prompts.py's _RAG_FINAL).
OUR_FINALS = {
    "List and judge the answer's claims now.": "faithfulness",
    "List and judge the reference's claims now.": "context-recall",
    "Judge each chunk now.": "context-precision",
    "Judge the answer now.": "answer-relevance",
    "Write the questions now.": "answer-relevance (embedding)",
}
#: How many questions each judge writes, on both sides (Ragas' strictness, our questions).
STRICTNESS = 3
RAGAS_INPUT = re.compile(r"input: (\{.*\})\s*Output: $", re.S)
RAGAS_PRECISION = "Given question, answer and context verify if the context was useful"
EMBED_DIM = 256


def load_rows(path: Path = ROWS) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    claims = [c["claim"] for row in rows for c in row["answer_claims"]]
    assert len(set(claims)) == len(claims), "answer claims must be unique across rows"
    return rows


# --- the fake judge --------------------------------------------------------------------------


class Judge:
    """The scripted verdicts of the rows, answered in our shapes and in Ragas'."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self.by_answer = {row["answer"]: row for row in rows}
        self.claims = {c["claim"]: c["supported"] for row in rows for c in row["answer_claims"]}
        self.calls: dict[str, int] = {}

    def row_of(self, text: str) -> dict[str, Any]:
        hits = [row for row in self.rows if row["question"] in text]
        assert len(hits) == 1, f"no single row's question in: {text[:200]!r}"
        return hits[0]

    def reply(self, body: dict[str, Any]) -> str:
        last = str(body["messages"][-1].get("content") or "")
        if body["model"] == "answerer":
            return str(self.row_of(last)["answer"])
        match = RAGAS_INPUT.search(last)
        if match:
            return json.dumps(self.ragas(json.loads(match.group(1)), last))
        return json.dumps(self.ours(last))

    def count(self, kind: str) -> None:
        self.calls[kind] = self.calls.get(kind, 0) + 1

    def ours(self, text: str) -> dict[str, Any]:
        kind = next(k for final, k in OUR_FINALS.items() if final in text)
        self.count(f"ours {kind}")
        if kind == "answer-relevance (embedding)":  # shown the answer alone, as Ragas' prompt
            row = self.by_answer[text.split("<answer>\n", 1)[1].split("\n</answer>", 1)[0]]
            questions = [row["answer_question"]] * STRICTNESS
            return {"questions": questions, "noncommittal": row["noncommittal"], "reason": "-"}
        row = self.row_of(text)
        if kind == "faithfulness":
            return {"claims": [_claim(c) for c in row["answer_claims"]]}
        if kind == "context-recall":
            return {"claims": [_claim(c) for c in row["reference_claims"]]}
        if kind == "context-precision":
            chunks = enumerate(row["chunks_relevant"], start=1)
            return {"chunks": [{"chunk": k, "relevant": ok, "reason": "-"} for k, ok in chunks]}
        return {"score": row["relevance"], "reason": "scripted"}

    def ragas(self, data: dict[str, Any], text: str) -> dict[str, Any]:
        keys = set(data)
        if keys == {"question", "answer"}:  # faithfulness, step 1: the answer's statements
            self.count("ragas statements")
            row = self.by_answer[data["answer"]]
            return {"statements": [c["claim"] for c in row["answer_claims"]]}
        if keys == {"context", "statements"}:  # faithfulness, step 2: NLI verdicts
            self.count("ragas nli")
            return {"statements": [_nli(s, self.claims[s]) for s in data["statements"]]}
        if keys == {"response"}:  # answer relevancy: the question the answer answers
            self.count("ragas question")
            row = self.by_answer[data["response"]]
            return {"question": row["answer_question"], "noncommittal": int(row["noncommittal"])}
        row = self.row_of(data["question"])
        if RAGAS_PRECISION in text:  # context precision: one chunk against the reference
            self.count("ragas chunk")
            relevant = row["chunks_relevant"][row["contexts"].index(data["context"])]
            return {"reason": "scripted", "verdict": int(relevant)}
        self.count("ragas recall")  # context recall: the reference's statements
        return {"classifications": [_attributed(c) for c in row["reference_claims"]]}


def _claim(claim: dict[str, Any]) -> dict[str, Any]:
    return {"claim": claim["claim"], "supported": claim["supported"], "reason": "scripted"}


def _nli(statement: str, supported: bool) -> dict[str, Any]:
    return {"statement": statement, "reason": "scripted", "verdict": int(supported)}


def _attributed(claim: dict[str, Any]) -> dict[str, Any]:
    return {
        "statement": claim["claim"],
        "reason": "scripted",
        "attributed": int(claim["supported"]),
    }


def embed(text: str) -> list[float]:
    """A bag-of-words vector: each lower-cased word counted in a bucket chosen by its digest."""
    vector = [0.0] * EMBED_DIM
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % EMBED_DIM] += 1.0
    return vector


class _Handler(JsonHandler):
    server: _Server

    def do_POST(self) -> None:
        body = self.read_json()
        if self.path.endswith("/embeddings"):
            items = body["input"] if isinstance(body["input"], list) else [body["input"]]
            self.server.judge.count(f"embeddings of {len(items)} text(s)")
            data = [
                {"object": "embedding", "index": i, "embedding": embed(t)}
                for i, t in enumerate(items)
            ]
            self.send_json(
                {"object": "list", "data": data, "model": body["model"], "usage": _usage()}
            )
            return
        try:
            content = self.server.judge.reply(body)
        except Exception as exc:  # a request the script cannot answer: fail the run, loudly
            self.server.failures.append(f"{type(exc).__name__}: {exc}")
            self.send_error(500, str(exc)[:200])
            return
        if body.get("stream"):
            self._stream(body["model"], content)
            return
        message = {"role": "assistant", "content": content}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        self.send_json({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [choice], "usage": _usage()})  # fmt: skip

    def _stream(self, model: str, content: str) -> None:
        """The reply as OpenAI streams it: one content delta, the finish reason, [DONE]."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        head = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": model}
        deltas = [
            {"index": 0, "delta": {"role": "assistant", "content": content}, "finish_reason": None},
            {"index": 0, "delta": {}, "finish_reason": "stop"},
        ]
        for choice in deltas:
            self.wfile.write(f"data: {json.dumps({**head, 'choices': [choice]})}\n\n".encode())
        last = {**head, "choices": [], "usage": _usage()}
        self.wfile.write(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode())
        self.close_connection = True


def _usage() -> dict[str, int]:
    return {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, judge: Judge) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.judge = judge
        self.failures: list[str] = []


def fake_judge(rows: list[dict[str, Any]]) -> AbstractContextManager[_Server]:
    return serving(_Server(Judge(rows)))


# --- ours: pytest on a generated eval file ---------------------------------------------------

# The documents go in the system prompt, so that the question the embedding model compares
# (the last user message) is the row's question alone, as Ragas' user_input is.
EVAL_FILE = f"""\
dataset: rows.jsonl
system: |
  Answer from these documents:
  {{{{context}}}}
prompt: "{{{{question}}}}"
assert:
  - {{type: faithfulness, judges: [judge]}}
  - {{type: context-recall, judges: [judge]}}
  - {{type: context-precision, judges: [judge]}}
  - {{type: answer-relevance, judges: [judge]}}
  - {{type: answer-relevance, judges: [judge], embedding_model: embedder, questions: {STRICTNESS}}}
"""


def run_ours(rows: list[dict[str, Any]], base_url: str) -> dict[str, dict[str, float | None]]:
    """Each row's score per metric (None when unchecked), from a real pytest run."""
    with tempfile.TemporaryDirectory(prefix="ragas-crosscheck-") as tmp:
        project = Path(tmp)
        _write_project(project, rows, base_url)
        env = {**os.environ, KEY_ENV: "sk-crosscheck", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "0",
                   "--results-dir=out", "--models=answerer", "crosscheck.eval.yaml"]  # fmt: skip
        done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
        results = project / "out" / "results.jsonl"
        if not results.exists():
            sys.exit(f"our run wrote no results:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        records = [json.loads(line) for line in results.read_text().splitlines() if line]
    errors = [f"{r['case_id']}: {r['error']}" for r in records if r["outcome"] == "error"]
    if errors or len(records) != len(rows):
        sys.exit(f"our run did not judge every row ({len(records)} records): {errors[:3]}")
    return {str(record["case_id"]): _our_scores(record) for record in records}


def _write_project(project: Path, rows: list[dict[str, Any]], base_url: str) -> None:
    (project / "profiles").mkdir()
    profile = {"api_base": base_url, "api_key_env": KEY_ENV}
    models = {"answerer": {"model": "openai/answerer", **profile},
              "judge": {"model": "openai/judge", **profile},
              "embedder": {"model": "openai/bag-of-words", **profile}}  # fmt: skip
    (project / "profiles" / "crosscheck.yaml").write_text(json.dumps({"models": models}))
    lines = [
        json.dumps(
            {
                "id": r["id"],
                "question": r["question"],
                "context": r["contexts"],
                "expected": r["reference"],
            }
        )
        for r in rows
    ]
    (project / "rows.jsonl").write_text("\n".join(lines) + "\n")
    (project / "crosscheck.eval.yaml").write_text(EVAL_FILE)


def _our_scores(record: dict[str, Any]) -> dict[str, float | None]:
    """Each verdict's score by its METRICS name (the eval file's order); None when unchecked."""
    verdicts = record["assertions"]
    assert len(verdicts) == len(METRICS), f"{len(verdicts)} verdicts for {len(METRICS)} metrics"
    return {
        name: None if v.get("unchecked") else v["score"]
        for (name, _), v in zip(METRICS, verdicts, strict=True)
    }


# --- Ragas: a subprocess in its own interpreter ----------------------------------------------


def run_ragas(python: str, base_url: str) -> dict[str, Any]:
    command = [python, str(Path(__file__).resolve()), "--ragas-side", "--base-url", base_url]
    env = {**os.environ, "RAGAS_DO_NOT_TRACK": "true", "OPENAI_API_KEY": "sk-crosscheck"}
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"the Ragas side failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def ragas_side(base_url: str) -> None:
    """Runs inside Ragas' interpreter: every row through its four metrics, JSON on stdout."""
    import asyncio
    import importlib.metadata

    from openai import AsyncOpenAI
    from ragas.embeddings.base import embedding_factory
    from ragas.llms import llm_factory
    from ragas.metrics.collections import (
        AnswerRelevancy,
        ContextPrecision,
        ContextRecall,
        Faithfulness,
    )

    client = AsyncOpenAI(base_url=base_url, api_key="sk-crosscheck")
    llm = llm_factory("ragas-judge", client=client)
    embeddings = embedding_factory("openai", model="bag-of-words", client=client)
    metrics = {
        "faithfulness": Faithfulness(llm=llm),
        "context_recall": ContextRecall(llm=llm),
        "context_precision": ContextPrecision(llm=llm),
        "answer_relevancy": AnswerRelevancy(llm=llm, embeddings=embeddings, strictness=STRICTNESS),
    }

    async def score(row: dict[str, Any]) -> dict[str, float]:
        q, a, ctx, ref = row["question"], row["answer"], row["contexts"], row["reference"]
        return {
            "faithfulness": (await metrics["faithfulness"].ascore(q, a, ctx)).value,
            "context_recall": (await metrics["context_recall"].ascore(q, ctx, ref)).value,
            "context_precision": (await metrics["context_precision"].ascore(q, ref, ctx)).value,
            "answer_relevancy": (await metrics["answer_relevancy"].ascore(q, a)).value,
        }

    async def all_rows() -> dict[str, dict[str, float]]:
        return {row["id"]: await score(row) for row in load_rows()}

    scores = asyncio.run(all_rows())
    names = ("ragas", "instructor", "openai", "langchain-community", "numpy")
    versions = {name: importlib.metadata.version(name) for name in names}
    out = {"versions": {"python": sys.version.split()[0], **versions}, "scores": scores}
    print(json.dumps(out, allow_nan=True))


# --- the table -------------------------------------------------------------------------------


def _cell(value: float | None) -> str:
    if value is None:
        return "unchecked"
    if math.isnan(value):
        return "NaN"
    return f"{value:.3f}"


def compare(ours: float | None, theirs: float) -> bool:
    """Agreement: both scores within AGREE, or ours unchecked where Ragas gives NaN."""
    if ours is None or math.isnan(theirs):
        return ours is None and math.isnan(theirs)
    return abs(ours - theirs) < AGREE


def why(metric: str, row: dict[str, Any], ours: float | None, theirs: float) -> str:
    """Why a pair of scores differs, or what an agreement on nothing means."""
    if ours is None and math.isnan(theirs):
        return "nothing to judge: ours unchecked (with its reason), Ragas NaN"
    if ours is None or math.isnan(theirs):
        return "one side undetermined, the other scored"
    if metric == "answer-relevance (embedding)":
        return "same questions and vectors, different score: a bug to look at"
    if metric != "answer-relevance":
        return "same verdicts, different formula"
    if row["noncommittal"]:
        return "noncommittal answer: Ragas zeroes its score; ours is the judge's number"
    return (
        "ours: the judge's score; Ragas: cosine of the question to questions made from the answer"
    )


def table(
    rows: list[dict[str, Any]],
    ours: dict[str, dict[str, float | None]],
    theirs: dict[str, Any],
) -> tuple[list[str], dict[str, int]]:
    """The Markdown lines of the per-row table, and the rows agreeing per metric."""
    lines = ["| row | metric | ours | Ragas | agree | note |", "|---|---|---|---|---|---|"]
    agreed = {name: 0 for name, _ in METRICS}
    for row in rows:
        for name, ragas_name in METRICS:
            mine = ours[row["id"]][name]
            other = float(theirs[row["id"]][ragas_name])
            same = compare(mine, other)
            agreed[name] += same
            note = why(name, row, mine, other) if not same or mine is None else ""
            cells = [row["id"], name, _cell(mine), _cell(other), "yes" if same else "no", note]
            lines.append("| " + " | ".join(cells) + " |")
    return lines, agreed


def summary(agreed: dict[str, int], total: int) -> list[str]:
    lines = ["| our assertion | Ragas' metric | rows agreeing (abs diff < 0.01) |", "|---|---|---|"]
    for name, ragas_name in METRICS:
        lines.append(f"| `{name}` | `{ragas_name}` | {agreed[name]} of {total} |")
    return lines


def render(facts: dict[str, str], agreed: dict[str, int], rows: list[str], total: int) -> str:
    """The whole of ragas-crosscheck.md: how it was run, the summary, the notes, the rows."""
    head = ["# Our RAG metrics beside Ragas'", "", GENERATED, "", "| fact | value |", "|---|---|"]
    head += [f"| {key} | {value} |" for key, value in facts.items()]
    parts = [*head, "", "## Summary", "", *summary(agreed, total), "", NOTES.strip(), ""]
    return "\n".join([*parts, "## Per row", "", *rows, ""])


GENERATED = (
    "Written by `benchmarks/ragas_crosscheck.py` (see its docstring and `benchmarks/README.md`):"
    " 20 rows of `benchmarks/data/ragas-crosscheck.jsonl` scored by our four RAG assertions"
    " (`pytest` on a generated eval file) and by Ragas' metrics of the same names, both judged"
    " by one fake judge on 127.0.0.1 answering from the rows' scripted verdicts."
)

NOTES = """
## What agrees, and why

- **faithfulness, context-recall, context-precision: every row agrees**, including the rank
  weighting of context precision (0.583, 0.833 and 0.333 for the relevant chunks at ranks 2
  and 3, 1 and 3, and 3 alone, of 3) and the two answers with no claims (a refusal, a question
  back): there ours is *unchecked* with the reason and Ragas' faithfulness is NaN. Both count
  the same thing: supported claims / claims (faithfulness, context recall) and the average
  precision `sum_k(precision@k * v_k) / relevant chunks` (ours without Ragas' `+ 1e-10` in the
  denominator, which moves no score by 0.01; with no relevant chunk both give 0).
- The agreement is of the formulas, given the same verdicts: the scripted judge hands both
  tools the same claims and the same verdict per claim and chunk. A real judge is asked
  differently by each, and that is where real scores can part. Faithfulness: Ragas splits the
  answer into statements in one call (question and answer) and checks them against the chunks
  joined by newlines in a second; ours lists and judges the claims in one call that sees the
  numbered chunks. Context recall: both have one call break the reference into statements
  (claims) and classify each as attributable to the context. Context precision: Ragas asks one
  call per chunk whether it was useful for arriving at the *reference*; ours one call for all
  chunks, relevant to the *question* (Ragas' "without reference" variant reads the answer
  instead). Judge calls for the 20 rows: ours 100 (one per row and assertion), Ragas 174 chat
  calls; embedding calls: ours 20 (the question and the 3 questions in one), Ragas 40 (the
  question, then the 3 questions).
- **answer-relevance vs answer_relevancy: different quantities.** Ours is the judge's 0..1 score
  of how directly the answer addresses the question. Ragas has the judge write a question the
  answer would answer (3 times, `strictness=3`) and flag a noncommittal answer, then scores the
  mean cosine similarity of those questions' embeddings to the question's, and 0 when every
  generated question is flagged noncommittal. They meet where the answer answers exactly the
  question (the generated question is the question: 1.0 both sides) and on a noncommittal answer
  scored 0 by our judge; elsewhere Ragas' number is a property of the embedding model (here a bag
  of words) more than of the answer, and a 1.0 from our judge for an answer padded with one
  unasked fact reads 0.33 to 0.83 in Ragas. island-population agrees by coincidence (0.600
  against 0.603).
- **answer-relevance with `embedding_model` vs answer_relevancy: every row agrees.** Our judge
  writes the row's question 3 times (`questions: 3`) from the answer alone, as Ragas' does, with
  the same noncommittal flag, and our embedding model is the same bag-of-words endpoint: the mean
  cosine is the same to 0.001, and both noncommittal answers (festival-month, opera-premiere)
  score 0 on both sides. Where they would part with a real judge: Ragas asks 3 separate
  generations, each with its own noncommittal flag, and zeroes the score only when all 3 say
  noncommittal; ours asks each judge once for its 3 questions with one flag. Ragas 0.4.3's
  `collections` metric (used here) drops empty questions and scores 0 when none is left; its
  legacy `ResponseRelevancy` gives NaN; ours is unchecked with the reason. The eval file puts
  the documents in the system prompt so that the question compared is the row's question alone
  (our question is the last user message; Ragas' is `user_input`).
- **Bad input.** Ragas raises `ValueError` on an empty context or reference; ours is an
  unchecked verdict for an empty retrieval (`[]`, from a case, a dataset row or a solver alike),
  and a collection error at `path:line` for a case without context or `expected`. Not in the
  table: Ragas cannot score those rows.

## Why Ragas is not in the lock

ragas 0.4.3 (the current release) resolves cleanly but would change two existing pins of
`requirements.lock`: `instructor` (a hard dependency of ragas) caps `jiter<0.15`, which would
downgrade the `jiter` that `openai` uses from 0.19.0 to 0.14.0, and `langchain-core` requires
`certifi>=2026.10.19` (2026.10.18 pinned). It would also add 37 packages to every install of the
lock (langchain, langchain-community, langgraph, langsmith, sqlalchemy, scipy, scikit-network,
networkx, instructor, ...) for a benchmark that CI never runs. So it runs from a scratch venv, as
lm-eval does for `LM_EVAL.md`. And its import needs `langchain-community<0.4`: with the newest
(0.4.2) `import ragas` fails (`ragas/llms/base.py` imports
`langchain_community.chat_models.vertexai`, which 0.4 removed).
"""


def ragas_facts(theirs: dict[str, Any], calls: dict[str, int]) -> dict[str, str]:
    from report import git_revision

    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": f"`{COMMAND}`",
        "pytest-llmbench revision": git_revision(),
        "Ragas side": ", ".join(f"{k} {v}" for k, v in theirs["versions"].items()),
        "judge calls": ", ".join(f"{k}: {v}" for k, v in calls.items()),
    }


COMMAND = (
    ".venv/bin/python benchmarks/ragas_crosscheck.py --ragas-python /tmp/ragas-venv/bin/python"
    " --write benchmarks/ragas-crosscheck.md"
)


def main() -> None:
    parser = argparse.ArgumentParser(description="Our RAG metrics beside Ragas' on 20 rows")
    parser.add_argument("--ragas-python", help="An interpreter with ragas installed")
    parser.add_argument("--write", type=Path, help="Write the Markdown here")
    parser.add_argument("--ragas-side", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ragas_side:
        ragas_side(args.base_url)
        return
    if not args.ragas_python:
        parser.error("--ragas-python is required")
    rows = load_rows()
    with fake_judge(rows) as server:
        base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        ours = run_ours(rows, base_url)
        theirs = run_ragas(args.ragas_python, base_url)
        if server.failures:
            sys.exit("the fake judge could not answer: " + "; ".join(server.failures[:5]))
        calls = dict(sorted(server.judge.calls.items()))
    lines, agreed = table(rows, ours, theirs["scores"])
    print("\n".join(summary(agreed, len(rows))))
    if args.write:
        args.write.write_text(render(ragas_facts(theirs, calls), agreed, lines, len(rows)))
        print(f"wrote {args.write}")


if __name__ == "__main__":
    main()
