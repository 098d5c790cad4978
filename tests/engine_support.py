"""In-process plans and an Answerer for the engine's tests (no pytest session): an eval file
loaded from text, one item's :class:`CallPlan`, and an :class:`Answerer` whose pacer calls the
local fake server (tests/fakeserver.py)."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

from pytest_llmbench.engine.answer import Answerer
from pytest_llmbench.engine.pacing import CallPacer, PacerSettings
from pytest_llmbench.engine.plan import CallPlan
from pytest_llmbench.engine.request import Answer
from pytest_llmbench.models.profiles import ModelProfile
from pytest_llmbench.models.providers.completion import CallTarget
from pytest_llmbench.spec.load import load_spec
from pytest_llmbench.spec.resolved import LoadedEval

#: The model under test, and the helper model (a simulated user) of these tests.
FAKE = ModelProfile(name="fake", model="openai/fake-model")
FAKE2 = ModelProfile(name="fake2", model="openai/fake-model-2")

#: One eval file of each case kind (the solver's module is :data:`SHOUT`, as ``shout.py``).
PLAIN = """
cases:
  - id: france
    prompt: What is the capital of France?
    expected: Paris
"""
TURNS = """
cases:
  - id: talk
    turns: [{user: Hi there}, {user: And now?}]
    expected: fine
"""
SIMULATED = """
cases:
  - id: refund
    simulated_user:
      model: fake2
      instructions: You want a refund.
      first_message: My order never arrived.
      max_turns: 3
    expected: refund
"""
AGENT = """
kind: agent
tools: [read_file]
cases:
  - id: look
    prompt: Read a.txt and say what it holds
    expected: done
"""
SOLVER = """
solver: shout:solve
cases:
  - id: shout
    prompt: Say hello
    expected: HELLO
"""
SHOUT = """
def solve(case, client):
    reply = client.complete(case.prompt)
    return {"answer": reply.text.upper(), "context": ["retrieved chunk"]}
"""
LOGLIKELIHOOD = """
loglikelihood: true
prompt: "Question: {{question}}\\nAnswer:"
cases:
  - id: france
    vars: {question: What is the capital of France?}
    choices: [Lyon, Paris]
    answer: B
"""


def loaded(tmp_path: Path, text: str, name: str = "kinds") -> LoadedEval:
    """The eval file ``text``, written as ``<name>.eval.yaml`` in ``tmp_path`` and loaded."""
    path = tmp_path / f"{name}.eval.yaml"
    path.write_text(text)
    return load_spec(path, (tmp_path,))


def plan_of(spec: LoadedEval, index: int = 0, **changes: Any) -> CallPlan:
    """The plan of case ``index`` of ``spec`` on :data:`FAKE`, repeat 0 (``changes`` on top)."""
    case = spec.cases[index]
    values: dict[str, Any] = {
        "nodeid": f"{spec.path.name}::{case.id}[fake-r0]",
        "suite": spec.suite,
        "path": spec.path,
        "case": case,
        "model": FAKE,
        "repeat": 0,
        "agent": spec.agent,
        "solver": spec.solver,
        "user_sim": FAKE2 if case.simulated_user is not None else None,
        "functions": case.functions or spec.functions,
    }
    return CallPlan(**{**values, **changes})


def answerer(tmp_path: Path, base_url: str) -> Answerer:
    """An answerer whose every model (judges and helpers too) is the fake server's, its
    response cache off."""
    settings = PacerSettings(
        concurrency=4, rpm=None, tpm=None, max_cost=None, cache_mode="off", rescore=False,
        request_timeout_s=30, max_retries=0, cache_dir=tmp_path / "cache",
        slot_dir=tmp_path / "slots",
    )  # fmt: skip

    def resolve(profile: ModelProfile, *, scoring: bool = False) -> CallTarget:
        return CallTarget(profile.name, profile.model, base_url, "sk-fake")

    return Answerer(CallPacer(settings, n_workers=1), resolve, 1)


def answer_of(engine: Answerer, plan: CallPlan, workdir: Path | None = None) -> Answer:
    """``plan``'s answer, its coroutine (if any) run to the end on a fresh loop."""
    found = engine.answer(plan, workdir, stream=False)
    if inspect.iscoroutine(found):
        return asyncio.run(found)
    assert isinstance(found, Answer)
    return found
