"""The repository's example evals (``evals/``, what ``make eval`` runs) collect cleanly."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO_ROOT


def test_every_example_eval_collects_with_the_conversations() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "evals"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
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
