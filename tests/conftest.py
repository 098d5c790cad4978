"""Shared fixtures: a fake OpenAI-compatible provider and a pytester project wired to it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
pytest.register_assert_rewrite("fakeserver")

from fakeserver import FakeLLMServer, Rule  # noqa: E402  (after the rewrite registration)

__all__ = [
    "ARITH",
    "FAKE_KEY",
    "FAKE_KEY_ENV",
    "FRANCE",
    "REPO_ROOT",
    "TWO_CAPITALS",
    "Bench",
    "FakeLLMServer",
    "Rule",
    "assert_imported_lazily",
]

# The fake provider's `fake_llm` fixture.
pytest_plugins = ["fakeserver"]

#: One case, and two cases, that a reply of "Paris" / "Tokyo" passes.
FRANCE = """
cases:
  - id: france
    prompt: What is the capital of France?
    expected: Paris
    assert: [contains]
"""
TWO_CAPITALS = (
    FRANCE
    + """  - id: japan
    prompt: What is the capital of Japan?
    expected: Tokyo
    assert: [contains]
"""
)

#: Two arithmetic cases that replies of "4" / "12" pass.
ARITH = """
cases:
  - id: add
    prompt: Compute two plus two
    expected: "4"
    assert: [contains]
  - id: mul
    prompt: Compute three times four
    expected: "12"
    assert: [contains]
"""

#: The checkout whose pytest_llmbench the tests import.
REPO_ROOT = Path(__file__).resolve().parents[1]


def assert_imported_lazily(module: str, call: str, heavy: str) -> None:
    """Importing ``module`` (as ``m``) leaves ``heavy`` unloaded; running ``call`` loads it.

    Checked in a fresh interpreter on this checkout: the test process has loaded everything.
    """
    code = f"import sys, {module} as m\nprint({heavy!r} in sys.modules)\n{call}\n"
    code += f"print({heavy!r} in sys.modules)\n"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
    )
    # The second line proves the check can see the module once it is really imported.
    assert result.stdout.split() == ["False", "True"]


#: The fake provider's key; tests assert it never reaches any output.
FAKE_KEY = "sk-fake-SECRET-0123456789abcdef"
FAKE_KEY_ENV = "FAKE_LLM_API_KEY"


@pytest.fixture(scope="session")
def litellm_loaded() -> Any:
    """Import litellm, pandas and the session end's modules once.

    pytester's in-process runs restore ``sys.modules`` afterwards; modules first imported inside
    a run would be re-imported by the next one, which is slow (litellm) or fails (numpy). The
    session end's modules are imported on a background thread while a run's calls wait
    (report/session_end.py); inside an in-process run, which rewrites the plugin's modules,
    that thread and the main thread building ASTs at once can trip a CPython 3.11 race (an
    INTERNALERROR, 'AST constructor recursion depth mismatch'), which a real run never meets.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import asyncio

    import pandas  # noqa: F401

    import pytest_llmbench.report.charts
    import pytest_llmbench.results.summary  # noqa: F401
    from pytest_llmbench.models.providers.calls import acomplete
    from pytest_llmbench.models.providers.completion import CallTarget
    from pytest_llmbench.models.providers.litellm_client import import_litellm

    litellm = import_litellm()
    # litellm imports more on its first call; make it here, once, for the same reason.
    with FakeLLMServer() as server:
        target = CallTarget(
            "warm-up", "openai/fake-model", server.base_url, "sk-warm-up-key", client="litellm"
        )
        asyncio.run(acomplete(target, [{"role": "user", "content": "hi"}], {}, max_retries=0))
    return litellm


@dataclass
class Bench:
    """A pytester project whose `fake` and `fake2` profiles talk to the fake server."""

    pytester: pytest.Pytester
    server: FakeLLMServer

    def eval_file(self, name: str, text: str) -> Path:
        """Write ``<name>.eval.yaml``."""
        return self.pytester.makefile(".eval.yaml", **{name: text})

    def pricey_profile(self) -> None:
        """A `pricey` profile on the fake server: 1 USD per token in and out."""
        self.pytester.makefile(
            ".yaml",
            **{
                "profiles/pricey": f"""
models:
  pricey:
    model: openai/fake-model
    api_base: {self.server.base_url}
    api_key_env: {FAKE_KEY_ENV}
    cost_per_1k: {{input: 1000.0, output: 1000.0}}
"""
            },
        )

    def unpriced_profile(self) -> None:
        """A `free` profile on the fake server whose model litellm has no price for."""
        self.pytester.makefile(
            ".yaml",
            **{
                "profiles/free": f"""
models:
  free:
    model: openai/no-such-priced-model
    api_base: {self.server.base_url}
    api_key_env: {FAKE_KEY_ENV}
"""
            },
        )

    def run(self, *args: str) -> pytest.RunResult:
        """Run pytest in-process with results in ./out."""
        return self.pytester.runpytest("-p", "no:cacheprovider", "--results-dir=out", *args)

    def run_subprocess(self, *args: str) -> pytest.RunResult:
        """Run pytest in a subprocess (for xdist and import-isolation checks)."""
        return self.pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "--results-dir=out", *args
        )

    def records(self) -> list[dict[str, Any]]:
        """The rows of out/results.jsonl."""
        path = self.pytester.path / "out" / "results.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def out(self, name: str) -> Path:
        """A path inside the results folder."""
        return self.pytester.path / "out" / name


@pytest.fixture
def bench(
    pytester: pytest.Pytester,
    fake_llm: FakeLLMServer,
    litellm_loaded: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> Bench:
    """A project with profiles `fake` and `fake2` pointing at a fake OpenAI-compatible server."""
    monkeypatch.setenv(FAKE_KEY_ENV, FAKE_KEY)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    pytester.makefile(
        ".yaml",
        **{
            "profiles/fake": f"""
models:
  fake:
    model: openai/fake-model
    api_base: {fake_llm.base_url}
    api_key_env: {FAKE_KEY_ENV}
    params: {{temperature: 0}}
    cost_per_1k: {{input: 0.001, output: 0.002}}
  fake2:
    model: openai/fake-model-2
    api_base: {fake_llm.base_url}
    api_key_env: {FAKE_KEY_ENV}
    cost_per_1k: {{input: 0.01, output: 0.02}}
sets:
  fakes: [fake, fake2]
"""
        },
    )
    return Bench(pytester, fake_llm)
