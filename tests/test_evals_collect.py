"""The repository's example evals (``evals/``, what ``make eval`` runs) collect cleanly."""

from __future__ import annotations

import runpy
import subprocess
import sys

import yaml
from conftest import REPO_ROOT

EVALS = REPO_ROOT / "evals"


def _collect(*args: str) -> subprocess.CompletedProcess[str]:
    """``pytest --collect-only -q`` with ``args``, from the repository's root."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_every_example_eval_collects_with_the_conversations() -> None:
    done = _collect("evals")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert " error" not in output.lower() and "Traceback" not in output, output
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    conversations = [i for i in ids if i.startswith("evals/conversation.eval.yaml::")]
    # Each case once, on the embedded model (no --models).
    assert [i.split("::")[1] for i in conversations] == [
        "remember-name[local/smollm2-r0]",
        "remember-word[local/smollm2-r0]",
        "refund-flow[local/smollm2-r0]",
        "capitals[local/smollm2-r0]",
        "simulated-traveller[local/smollm2-r0]",
    ]
    # Your own graders (evals/graders/): openai/evals' fact style and promptfoo's rubricPrompt.
    graders = [i.split("::")[0] for i in ids if i.startswith("evals/graders/")]
    assert graders == [
        *4 * ["evals/graders/fact.eval.yaml"],
        *4 * ["evals/graders/rubric.eval.yaml"],
        *6 * ["evals/graders/select-best.eval.yaml"],
    ]
    # Select-best: each case under both prompts, the contest's two contestants.
    best = [i.split("::")[1] for i in ids if i.startswith("evals/graders/select-best.eval.yaml::")]
    assert best[:2] == [
        "boiling-point[local/smollm2-terse-r0]",
        "largest-planet[local/smollm2-terse-r0]",
    ]
    assert sorted(best) == sorted(
        f"{case}[local/smollm2-{prompt}-r0]"
        for case in ("boiling-point", "largest-planet", "spider-legs")
        for prompt in ("terse", "explain")
    )
    # The RAG rows (evals/data/rag.jsonl, each with its context), each once.
    rag = [i.split("::")[1] for i in ids if i.startswith("evals/rag.eval.yaml::")]
    assert len(rag) == 8 and all(i.endswith("[local/smollm2-r0]") for i in rag)
    assert rag[0] == "lighthouse-height[local/smollm2-r0]"
    # The BFCL rows (evals/data/bfcl/): 8 simple, 6 multiple, 6 parallel, each once.
    bfcl = [
        i.split("::")[1] for i in ids if i.startswith("evals/function-calling-bfcl.eval.yaml::")
    ]
    assert [i.split("[")[0] for i in bfcl] == [
        *(f"simple_python_{n}" for n in range(8)),
        *(f"multiple_{n}" for n in range(6)),
        *(f"parallel_{n}" for n in range(6)),
    ]
    assert all(i.endswith("[local/smollm2-r0]") for i in bfcl)
    # The MCP agent eval (the PyPI time server): its two cases, on the embedded model.
    mcp = [i.split("::")[1] for i in ids if i.startswith("evals/agents/mcp-time.eval.yaml::")]
    assert mcp == ["utc-now[local/smollm2-r0]", "tokyo-convert[local/smollm2-r0]"]
    # The retail domain (evals/retail/): its ten tasks, in the file's order, on the embedded model.
    retail_file = EVALS / "retail" / "retail_support.eval.yaml"
    tasks = [case["id"] for case in yaml.safe_load(retail_file.read_text())["cases"]]
    retail = [i.split("::")[1] for i in ids if i.startswith("evals/retail/")]
    assert len(tasks) == 10
    assert retail == [f"{task}[local/smollm2-r0]" for task in tasks]


# The tour (`make eval`, `pytest evals/ -m tour`): its cases, picked in evals/conftest.py.
TOUR: dict[str, tuple[str, ...]] = runpy.run_path(str(EVALS / "conftest.py"))["TOUR"]
#: Each feature the tour shows, and a word of the eval files (a key, an assertion type or a
#: `kind`) that only a case showing it has.
TOUR_FEATURES = {
    "deterministic assertions": "json-schema",
    "a dataset": "dataset",
    "a python check": "python",
    "scripted conversation turns": "turns",
    "a simulated user": "simulated_user",
    "prompt variants": "prompts",
    "multiple choice": "choices",
    "log-likelihood scoring": "loglikelihood",
    "a judge (a grader of your own)": "model-graded",
    "select-best": "select-best",
    "RAG metrics": "faithfulness",
    "function calling": "tool-calls",
    "an agent": "agent",
    "an agent with MCP tools": "mcp_servers",
}
#: About 8 s an item on the embedded model on 2 cores: the tour's bound of about two minutes.
TOUR_MAX_ITEMS = 30


def _words(node: object) -> set[str]:
    """The keys, assertion types, kinds and bare list entries (assertion names) under ``node``."""
    if isinstance(node, dict):
        found = {str(key) for key in node}
        found |= {node[key] for key in ("type", "kind") if isinstance(node.get(key), str)}
        return found.union(*(_words(value) for value in node.values()))
    if isinstance(node, list):
        return {entry for entry in node if isinstance(entry, str)}.union(*map(_words, node))
    return set()


def _toured_words(file: str, ids: tuple[str, ...]) -> set[str]:
    """What the toured cases of ``file`` use: the file's settings and those cases' own."""
    # libyaml's parser, as the plugin's: PyYAML's own rejects a `?` ending a flow mapping's value.
    spec = yaml.load((EVALS / file).read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
    cases = spec.pop("cases", [])
    return _words(spec).union(*(_words(case) for case in cases if case.get("id") in ids))


def test_the_tour_shows_every_feature() -> None:
    used = {file: _toured_words(file, ids) for file, ids in TOUR.items()}
    missing = [f for f, word in TOUR_FEATURES.items() if not any(word in w for w in used.values())]
    assert missing == []


def test_the_tour_selects_its_cases_and_stays_small() -> None:
    done = _collect("-m", "tour", "evals")
    assert done.returncode == 0, done.stdout + done.stderr
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    cases = {(i.split("::")[0], i.split("::")[1].partition("[")[0]) for i in ids}
    assert cases == {(f"evals/{file}", case) for file, toured in TOUR.items() for case in toured}
    assert len(ids) <= TOUR_MAX_ITEMS
