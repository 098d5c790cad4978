"""Our ``tool-calls`` verdicts beside bfcl-eval's own AST checker, on BFCL's own rows.

    python3 -m venv /tmp/bfcl-venv
    /tmp/bfcl-venv/bin/pip install --no-deps 'bfcl-eval==2026.3.23'
    /tmp/bfcl-venv/bin/pip install $(sed -n 's/^    bfcl-side: //p' benchmarks/bfcl_crosscheck.py)
    .venv/bin/python benchmarks/bfcl_crosscheck.py --bfcl-python /tmp/bfcl-venv/bin/python \\
        --write benchmarks/bfcl-crosscheck.md

    bfcl-side: anthropic boto3 cohere==5.18.0 datamodel-code-generator filelock google-genai mistralai==1.7.0 numpy openai overrides pandas python-dotenv qwen-agent soundfile tenacity tree_sitter==0.21.3 tree-sitter-java==0.21.0 tree-sitter-javascript==0.21.4 writer-sdk

The rows are every row of BFCL's four Python AST categories as the ``bfcl-eval`` package ships
them (``simple_python``, ``multiple``, ``parallel``, ``parallel_multiple``: 1,000 rows), each
with its possible answer. The outputs (``bfcl_outputs.py``) are each row's ground truth (every
argument at its first allowed value) and perturbations of it: a wrong value, an argument left
out or added, another function, numbers and booleans of another type, ``""`` and ``null`` sent,
strings off by case and punctuation or by a letter, lists reversed, objects with a key dropped
or added, calls reordered, left out or repeated.

BFCL judges each output through its own pipeline for a function-calling model
(``eval_runner._evaluate_single_ast_entry`` with the handler of a model that keeps dots in
function names: the arguments decoded with ``json.loads``, then ``ast_checker``), in its own
interpreter (``--bfcl-side``). Ours judges them as a user runs it: ``pytest`` on a generated
eval file (the rows as a dataset with ``tools: {dialect: bfcl}`` and ``tool_calls: {dialect:
bfcl}``, ``assert: [tool-calls]``), the model under test a fake OpenAI-compatible server on
127.0.0.1 that answers each row with its output's calls, natively; the verdicts read from
``results.jsonl``.

``--write`` writes the Markdown table and ``benchmarks/data/bfcl-reference.jsonl.gz``: each row
(its functions without descriptions, its possible answer) with each output and BFCL's verdict,
which ``tests/test_scoring_bfcl.py`` checks our verdicts against without bfcl-eval installed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from contextlib import AbstractContextManager
from datetime import datetime, timezone
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bfcl_outputs import KINDS, outputs
from localserver import JsonHandler, serving

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "benchmarks" / "data" / "bfcl-reference.jsonl.gz"
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")
#: A model whose BFCL handler decodes function calls with json.loads and keeps dots in names.
BFCL_MODEL = "qwen3-235b-a22b-instruct-2507-FC"
KEY_ENV = "CROSSCHECK_API_KEY"
#: BFCL's error type when its first-fit pairing of parallel calls finds no match.
FIRST_FIT = "parallel_function_checker_no_order:cannot_find_match"
COMMAND = (
    ".venv/bin/python benchmarks/bfcl_crosscheck.py --bfcl-python /tmp/bfcl-venv/bin/python"
    " --write benchmarks/bfcl-crosscheck.md"
)


# --- BFCL: a subprocess in its own interpreter ------------------------------------------------


def bfcl_side_rows() -> None:
    """Runs inside bfcl-eval's interpreter: the four categories' rows with their possible
    answers, as JSON on stdout."""
    from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

    rows = []
    for category in CATEGORIES:
        answers = {a["id"]: a["ground_truth"] for a in load_ground_truth_entry(category)}
        for entry in load_dataset_entry(
            category, include_prereq=False, include_language_specific_hint=False
        ):
            rows.append(
                {
                    "id": entry["id"],
                    "category": category,
                    "question": entry["question"],
                    "function": entry["function"],
                    "ground_truth": answers[entry["id"]],
                }
            )
    print(json.dumps(rows))


def bfcl_side_judge() -> None:
    """Runs inside bfcl-eval's interpreter: each output on stdin (``{key, row, calls}``) judged
    by BFCL's pipeline for a function-calling model; ``{key: {valid, error_type, error}}``."""
    import importlib.metadata

    from bfcl_eval.constants.enums import Language, ReturnFormat
    from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING
    from bfcl_eval.eval_checker.eval_runner import _evaluate_single_ast_entry

    config = MODEL_CONFIG_MAPPING[BFCL_MODEL]
    handler = config.model_handler(config.model_name, 0.001, BFCL_MODEL, config.is_fc_model)
    verdicts = {}
    for item in json.load(sys.stdin):
        row = item["row"]
        result = [{call["name"]: call["arguments"]} for call in item["calls"]]
        judged = _evaluate_single_ast_entry(
            handler,
            row["id"],
            result,
            row["ground_truth"],
            row,
            BFCL_MODEL,
            row["category"],
            language=Language.PYTHON,
            return_format=ReturnFormat.PYTHON,
        )
        verdicts[item["key"]] = {
            "valid": judged["valid"],
            "error_type": judged.get("error_type"),
            "error": json.dumps(judged.get("error"))[:400],
        }
    version = importlib.metadata.version("bfcl-eval")
    print(json.dumps({"version": version, "verdicts": verdicts}))


def run_bfcl(python: str, mode: str, stdin: str | None = None) -> Any:
    command = [python, str(Path(__file__).resolve()), "--bfcl-side", mode]
    env = {**os.environ, "OPENAI_API_KEY": "sk-crosscheck"}  # its handlers want a key to exist
    done = subprocess.run(command, env=env, input=stdin, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"the BFCL side failed:\n{done.stdout[-2000:]}\n{done.stderr[-5000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- the outputs ------------------------------------------------------------------------------


def all_outputs(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every row's outputs: ``{key: "ID~KIND", row, kind, calls}``."""
    return [
        {"key": f"{row['id']}~{kind}", "row": row, "kind": kind, "calls": calls}
        for row in rows
        for kind, calls in outputs(row)
    ]


# --- ours: pytest on a generated eval file, the model a fake server ---------------------------


class _CallsHandler(JsonHandler):
    """Answers a chat request whose user message is an output's key with that output's calls."""

    server: _CallsServer

    def do_POST(self) -> None:
        body = self.read_json()
        key = body["messages"][-1]["content"]
        calls = self.server.calls.get(key)
        if calls is None:
            self.server.failures.append(f"no output for {key!r}")
            self.send_error(500)
            return
        wire = [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for i, c in enumerate(calls)
        ]
        # a reply that calls nothing says so in words: an empty reply would be a provider error
        message = {
            "role": "assistant",
            "content": None if wire else "No call.",
            **({"tool_calls": wire} if wire else {}),
        }
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if wire else "stop"}
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        self.send_json({"id": "x", "object": "chat.completion", "created": 0,
                        "model": body["model"], "choices": [choice], "usage": usage})  # fmt: skip


class _CallsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, calls: dict[str, list[dict[str, str]]]) -> None:
        super().__init__(("127.0.0.1", 0), _CallsHandler)
        self.calls = calls
        self.failures: list[str] = []


def fake_model(items: list[dict[str, Any]]) -> AbstractContextManager[_CallsServer]:
    return serving(_CallsServer({item["key"]: item["calls"] for item in items}))


EVAL_FILE = """\
dataset:
  path: rows.jsonl
  id: id
  prompt: question
  tools: {column: function, dialect: bfcl}
  tool_calls: {column: ground_truth, dialect: bfcl}
tool_shim: never
assert:
  - tool-calls
"""


def run_ours(items: list[dict[str, Any]], workers: int) -> dict[str, dict[str, Any]]:
    """Each output's verdict ``{passed, reason}`` from a real pytest run."""
    with fake_model(items) as server, tempfile.TemporaryDirectory(prefix="bfcl-") as tmp:
        project = Path(tmp)
        base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        profile = {"model": "openai/caller", "api_base": base_url, "api_key_env": KEY_ENV}
        (project / "profiles").mkdir()
        (project / "profiles" / "crosscheck.yaml").write_text(
            json.dumps({"models": {"caller": profile}})
        )
        lines = [
            json.dumps(
                {
                    "id": item["key"],
                    "question": item["key"],
                    "function": item["row"]["function"],
                    "ground_truth": item["row"]["ground_truth"],
                }
            )
            for item in items
        ]
        (project / "rows.jsonl").write_text("\n".join(lines) + "\n")
        (project / "crosscheck.eval.yaml").write_text(EVAL_FILE)
        env = {**os.environ, KEY_ENV: "sk-crosscheck", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-n",
            str(workers),
            "--results-dir=out",
            "--models=caller",
            "--cache=off",
            "--stream=off",
            "crosscheck.eval.yaml",
        ]
        done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
        if server.failures:
            sys.exit("the fake model could not answer: " + "; ".join(server.failures[:5]))
        results = project / "out" / "results.jsonl"
        if not results.exists():
            sys.exit(f"our run wrote no results:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        records = [json.loads(line) for line in results.read_text().splitlines() if line]
    errors = [f"{r['case_id']}: {r.get('error')}" for r in records if r["outcome"] == "error"]
    if errors or len(records) != len(items):
        sys.exit(f"our run did not judge every output ({len(records)} records): {errors[:3]}")
    return {
        str(r["case_id"]): {
            "passed": r["assertions"][0]["passed"],
            "reason": r["assertions"][0]["reason"],
        }
        for r in records
    }


# --- comparison --------------------------------------------------------------------------------


def explain(item: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any]) -> str | None:
    """Why a disagreement is kept on purpose, or None when it is not explained."""
    if ours["passed"] and theirs["error_type"] == FIRST_FIT:
        return (
            "first-fit pairing: BFCL pairs each expected call with the first output call "
            "that fits it and never revisits the choice; a call that fits two expected calls "
            "can be taken by the wrong one. Ours pairs optimally (a maximum matching), so it "
            "passes every output that some pairing makes right."
        )
    return None


def compare(
    items: list[dict[str, Any]], ours: dict[str, Any], theirs: dict[str, Any]
) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]], list[str], int]:
    """Agreement per (category, kind), the totals, the disagreement lines, and how many of
    them no known difference explains."""
    agreed: Counter[tuple[str, str]] = Counter()
    total: Counter[tuple[str, str]] = Counter()
    lines, unexplained = [], 0
    for item in items:
        cell = (item["row"]["category"], item["kind"])
        total[cell] += 1
        mine, reference = ours[item["key"]], theirs[item["key"]]
        if mine["passed"] == reference["valid"]:
            agreed[cell] += 1
            continue
        why = explain(item, mine, reference)
        unexplained += why is None
        calls = "; ".join(f"{c['name']}({c['arguments']})" for c in item["calls"])
        lines.append(
            f"- `{item['key']}`: ours {'passes' if mine['passed'] else 'fails'} "
            f"({mine['reason']}), BFCL {'passes' if reference['valid'] else 'fails'} "
            f"(`{reference['error_type']}`: {reference['error']}). Calls: `{calls}`. "
            f"**Why:** {why or 'UNEXPLAINED'}"
        )
    return agreed, total, lines, unexplained


def table(agreed: Counter[tuple[str, str]], total: Counter[tuple[str, str]]) -> list[str]:
    head = [
        "| output | " + " | ".join(f"`{c}`" for c in CATEGORIES) + " | all |",
        "|---" * (len(CATEGORIES) + 2) + "|",
    ]
    body = []
    for kind in (*KINDS, None):
        cells = [(c, kind) for c in CATEGORIES] if kind else list(total)
        row = [_ratio(agreed, total, [cell]) for cell in cells] if kind else []
        if kind is None:
            row = [_ratio(agreed, total, [x for x in total if x[0] == c]) for c in CATEGORIES]
        everything = _ratio(agreed, total, cells if kind else list(total))
        body.append(
            f"| {f'`{kind}`' if kind else '**all**'} | " + " | ".join(row) + f" | {everything} |"
        )
    return head + body


def _ratio(agreed: Counter[Any], total: Counter[Any], cells: list[Any]) -> str:
    n = sum(total[cell] for cell in cells)
    return f"{sum(agreed[cell] for cell in cells)}/{n}" if n else "-"


def render(facts: dict[str, str], table_lines: list[str], lines: list[str]) -> str:
    head = [
        "# Our function-call verdicts beside BFCL's",
        "",
        GENERATED,
        "",
        "| fact | value |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in facts.items()],
    ]
    rest = [
        "",
        "## Agreement (outputs where both verdicts are the same / outputs)",
        "",
        *table_lines,
        "",
        NOTES.strip(),
        "",
        "## Every disagreement",
        "",
        *(lines or ["None."]),
        "",
    ]
    return "\n".join(head + rest)


GENERATED = (
    "Written by `benchmarks/bfcl_crosscheck.py` (see its docstring and `benchmarks/README.md`): "
    "every row of BFCL's four Python AST categories, each row's ground truth and perturbations "
    "of it (`benchmarks/bfcl_outputs.py`), judged by `bfcl-eval`'s own checker and by our "
    "`tool-calls` assertion in a real `pytest` run."
)

NOTES = """
## Where we differ from BFCL on purpose

- **Parallel calls are paired optimally.** BFCL's `parallel_function_checker_no_order` takes
  each expected call in turn and pairs it with the first output call that fits, never revisiting
  the choice, so a call that fits two expected calls can be taken by the wrong one and a right
  output fails. Ours finds a maximum matching, so it passes every output some pairing makes
  right; it never passes an output that no pairing makes right. Every disagreement below is of
  this kind.
- **Function names are compared as sent.** BFCL renames `a.b` to `a_b` for models whose API
  does not allow dots (OpenAI's, Mistral's, Google's). Here the model under test kept the dots
  (BFCL's handler for such a model was used), as the tool shim and OpenAI-compatible servers
  keep them.

Everything else follows BFCL's `simple_function_checker`, in its order, with its error types:
required arguments, undeclared or unexpected arguments, the schema's types (an integer for a
`float`, a value of the allowed values' own type as a "variable", an array's items one level
deep), strings compared after BFCL's normalisation, lists element by element, objects key by key
(each key's own allowed values), lists of objects object by object, and `""` as "may be left
out". See `docs/function-calling.md` for the rules as users read them.
"""


def write_reference(path: Path, items: list[dict[str, Any]], theirs: dict[str, Any]) -> None:
    """The rows (functions without descriptions) with each output and BFCL's verdict."""
    by_row: dict[str, dict[str, Any]] = {}
    for item in items:
        row = item["row"]
        entry = by_row.setdefault(
            row["id"],
            {
                "id": row["id"],
                "category": row["category"],
                "function": _without_descriptions(row["function"]),
                "ground_truth": row["ground_truth"],
                "outputs": [],
            },
        )
        verdict = theirs[item["key"]]
        entry["outputs"].append(
            {
                "kind": item["kind"],
                "calls": item["calls"],
                "valid": verdict["valid"],
                "error_type": verdict["error_type"],
            }
        )
    text = "".join(json.dumps(entry, sort_keys=True) + "\n" for entry in by_row.values())
    with gzip.GzipFile(path, "wb", mtime=0) as out:  # mtime 0: the same bytes for the same rows
        out.write(text.encode())


def _without_descriptions(value: Any) -> Any:
    if isinstance(value, list):
        return [_without_descriptions(item) for item in value]
    if not isinstance(value, dict):
        return value
    return {k: _without_descriptions(v) for k, v in value.items() if k != "description"}


def facts(version: str, n_rows: int, n_outputs: int) -> dict[str, str]:
    from report import git_revision

    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": f"`{COMMAND}`",
        "pytest-llmbench revision": git_revision(),
        "BFCL side": f"bfcl-eval {version}, handler of `{BFCL_MODEL}`",
        "rows": f"{n_rows} ({', '.join(CATEGORIES)})",
        "outputs judged": str(n_outputs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="Our tool-calls verdicts beside BFCL's")
    parser.add_argument("--bfcl-python", help="An interpreter with bfcl-eval installed")
    parser.add_argument("--write", type=Path, help="Write the Markdown here (and the reference)")
    parser.add_argument("--limit", type=int, help="Only the first N rows of each category")
    parser.add_argument("-n", "--workers", type=int, default=2, help="pytest-xdist workers")
    parser.add_argument("--bfcl-side", choices=("rows", "judge"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bfcl_side:
        bfcl_side_rows() if args.bfcl_side == "rows" else bfcl_side_judge()
        return
    if not args.bfcl_python:
        parser.error("--bfcl-python is required")
    rows = run_bfcl(args.bfcl_python, "rows")
    if args.limit:
        rows = [
            r for c in CATEGORIES for r in [x for x in rows if x["category"] == c][: args.limit]
        ]
    items = all_outputs(rows)
    judged = run_bfcl(
        args.bfcl_python,
        "judge",
        json.dumps([{"key": i["key"], "row": i["row"], "calls": i["calls"]} for i in items]),
    )
    ours = run_ours(items, args.workers)
    agreed, total, lines, unexplained = compare(items, ours, judged["verdicts"])
    table_lines = table(agreed, total)
    print("\n".join(table_lines))
    print(f"{len(lines)} disagreement(s), {unexplained} unexplained")
    if args.write:
        args.write.write_text(
            render(facts(judged["version"], len(rows), len(items)), table_lines, lines)
        )
        write_reference(REFERENCE, items, judged["verdicts"])
        print(f"wrote {args.write} and {REFERENCE.relative_to(ROOT)}")
    sys.exit(1 if unexplained else 0)


if __name__ == "__main__":
    main()
