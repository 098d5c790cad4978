"""Python solvers: user code answers a case with any number of engine calls.

Each test writes a solver module next to a pretend eval file and runs it on a real event loop
with a fake ``complete`` coroutine standing in for the scheduler.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_llmbench.engine.solver import (
    SolverCase,
    SolverClient,
    SolverRun,
    run_solver,
    solver_completion,
)
from pytest_llmbench.models.item_errors import ProviderError, SolverError
from pytest_llmbench.models.providers.completion import Completion

CASE = SolverCase(
    id="france",
    prompt="What is the capital of France?",
    messages=({"role": "user", "content": "What is the capital of France?"},),
    vars={"country": "France"},
    expected="Paris",
    choices=None,
    model="fake",
)
_module_ids = itertools.count()


def completion(text: str, **fields: Any) -> Completion:
    values: dict[str, Any] = {
        "model_id": "openai/fake-model",
        "input_tokens": 10,
        "output_tokens": 2,
        "tokens_estimated": False,
        "ttft_s": None,
        "latency_s": 0.01,
        "cost_usd": 0.001,
        "retries": 0,
        "streamed": False,
        "finish_reason": "stop",
    }
    return Completion(text=text, **{**values, **fields})


class FakeEngine:
    """The scheduler's ``complete``: scripted replies, every request and its thread kept."""

    def __init__(self, *replies: str | BaseException, **fields: Any) -> None:
        self.replies = list(replies)
        self.fields = fields
        self.requests: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []
        self.threads: set[int] = set()

    async def __call__(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        self.requests.append((messages, params))
        self.threads.add(threading.get_ident())
        await asyncio.sleep(0)  # a real call yields to the loop
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, BaseException):
            raise reply
        return completion(reply, **self.fields)


@pytest.fixture
def solvers(tmp_path: Path) -> Iterator[Any]:
    """Write a solver module (a fresh name each time) and give its ``module:`` prefix."""
    names: list[str] = []

    def write(source: str) -> str:
        name = f"llmbench_solvers_{next(_module_ids)}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        names.append(name)
        return name

    yield write
    for name in names:
        sys.modules.pop(name, None)


def solve(
    tmp_path: Path, ref: str, engine: FakeEngine, case: SolverCase = CASE
) -> tuple[SolverRun, int]:
    """Run the solver on a fresh event loop; also give the loop thread's id."""

    async def main() -> tuple[SolverRun, int]:
        return await run_solver(ref, tmp_path, case, engine), threading.get_ident()

    return asyncio.run(main())


# --- answers ---------------------------------------------------------------------------------


def test_a_sync_solver_runs_in_a_worker_thread_and_calls_the_engine_loop(
    tmp_path: Path, solvers: Any
) -> None:
    module = solvers(
        """
        import threading

        def solve(case, client):
            reply = client.complete(case.prompt, temperature=0.2)
            return f"{reply.text} from {client.name} on thread {threading.get_ident()}"
        """
    )
    engine = FakeEngine("Paris")
    run, loop_thread = solve(tmp_path, f"{module}:solve", engine)
    answer, _, solver_thread = run.answer.rpartition(" on thread ")
    assert answer == "Paris from fake"
    assert int(solver_thread) != loop_thread  # the solver ran off the loop...
    assert engine.threads == {loop_thread}  # ...and its call ran on it
    assert engine.requests == [([dict(CASE.messages[0])], {"temperature": 0.2})]
    assert [call.text for call in run.calls] == ["Paris"]
    assert run.latency_s > 0


def test_an_async_solver_sees_the_case_and_sends_system_and_messages(
    tmp_path: Path, solvers: Any
) -> None:
    module = solvers(
        """
        async def solve(case, client):
            first = await client.acomplete(messages=list(case.messages), system="Be brief.")
            second = await client.acomplete(f"Check: {first.text}", max_tokens=5)
            return {"answer": f"{case.id}/{case.vars['country']}/{case.expected}: {second.text}"}
        """
    )
    engine = FakeEngine("Paris", "Yes, Paris")
    run, _ = solve(tmp_path, f"{module}:solve", engine)
    assert run.answer == "france/France/Paris: Yes, Paris"
    assert engine.requests == [
        (
            [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "What is the capital of France?"},
            ],
            {},
        ),
        ([{"role": "user", "content": "Check: Paris"}], {"max_tokens": 5}),
    ]
    assert len(run.calls) == 2


def test_a_solver_may_return_the_completion_itself(tmp_path: Path, solvers: Any) -> None:
    module = solvers(
        """
        async def solve(case, client):
            return await client.acomplete(case.prompt)
        """
    )
    run, _ = solve(tmp_path, f"{module}:solve", FakeEngine("Paris"))
    assert run.answer == "Paris"


def test_a_callable_object_with_an_async_call_runs_on_the_loop(
    tmp_path: Path, solvers: Any
) -> None:
    module = solvers(
        """
        import threading

        class Chain:
            async def __call__(self, case, client):
                return str(threading.get_ident())

        solve = Chain()
        """
    )
    run, loop_thread = solve(tmp_path, f"{module}:solve", FakeEngine("unused"))
    assert run.answer == str(loop_thread) and run.calls == ()


# --- multi-call strategies -------------------------------------------------------------------

VOTING = """
    import asyncio
    from collections import Counter

    from pytest_llmbench.scoring.choices import extract_choice, LETTERS

    async def vote(case, client):
        replies = await asyncio.gather(
            *(client.acomplete(case.prompt, temperature=0.7) for _ in range(3))
        )
        picks = [extract_choice(reply.text, case.choices) for reply in replies]
        (best, count), = Counter(picks).most_common(1)
        return f"{LETTERS[best]} ({count} of {len(picks)} votes)"

    def vote_sync(case, client):
        picks = [client.complete(case.prompt, temperature=0.7).text for _ in range(3)]
        return Counter(picks).most_common(1)[0][0]
"""
MULTIPLE_CHOICE = SolverCase(
    id="capital",
    prompt="Capital of France?\nA. Paris\nB. London",
    messages=({"role": "user", "content": "Capital of France?\nA. Paris\nB. London"},),
    vars={},
    expected=None,
    choices=("Paris", "London"),
    model="fake",
)


def test_self_consistency_voting_makes_three_concurrent_calls(tmp_path: Path, solvers: Any) -> None:
    module = solvers(VOTING)
    engine = FakeEngine("The answer is A", "B", "A. Paris", input_tokens=7, cost_usd=0.002)
    run, _ = solve(tmp_path, f"{module}:vote", engine, MULTIPLE_CHOICE)
    assert run.answer == "A (2 of 3 votes)"
    assert len(engine.requests) == 3 and len(run.calls) == 3
    assert all(params == {"temperature": 0.7} for _, params in engine.requests)
    merged = solver_completion(run, "openai/fake-model")
    assert (merged.text, merged.input_tokens, merged.output_tokens) == ("A (2 of 3 votes)", 21, 6)
    assert merged.cost_usd == pytest.approx(0.006)


def test_a_sync_solver_votes_with_blocking_calls(tmp_path: Path, solvers: Any) -> None:
    module = solvers(VOTING)
    engine = FakeEngine("B", "A", "B")
    run, loop_thread = solve(tmp_path, f"{module}:vote_sync", engine, MULTIPLE_CHOICE)
    assert run.answer == "B" and len(run.calls) == 3
    assert engine.threads == {loop_thread}


# --- errors ----------------------------------------------------------------------------------


def solver_error(tmp_path: Path, ref: str, engine: FakeEngine | None = None) -> SolverError:
    with pytest.raises(SolverError) as info:
        solve(tmp_path, ref, engine or FakeEngine("Paris"))
    return info.value


@pytest.mark.parametrize("kind", ["def", "async def"])
def test_a_solver_that_raises_is_a_solver_error_without_traceback(
    tmp_path: Path, solvers: Any, kind: str
) -> None:
    module = solvers(
        f"""
        {kind} solve(case, client):
            raise ValueError("no index for " + case.id)
        """
    )
    error = solver_error(tmp_path, f"{module}:solve")
    assert (error.kind, error.message) == (
        "solver",
        f"solver {module}:solve: ValueError: no index for france",
    )
    assert error.__cause__ is None and error.__suppress_context__


@pytest.mark.parametrize(
    ("returned", "kind"),
    [("42", "int"), ("None", "NoneType"), ("{'text': 'Paris'}", "dict"), ("['Paris']", "list")],
)
def test_a_solver_that_returns_no_answer_is_a_solver_error(
    tmp_path: Path, solvers: Any, returned: str, kind: str
) -> None:
    module = solvers(f"def solve(case, client):\n    return {returned}\n")
    error = solver_error(tmp_path, f"{module}:solve")
    assert error.kind == "solver"
    assert error.message == (
        f"solver {module}:solve: returned {kind}; expected a str, a Completion (.text), "
        "a dict with a str 'answer', or a verdict: a bool, (bool, answer) or a dict with a "
        "bool 'passed'"
    )


def test_a_solver_that_cannot_be_loaded_is_a_solver_error(tmp_path: Path, solvers: Any) -> None:
    error = solver_error(tmp_path, "llmbench_no_such_module:solve")
    assert error.kind == "solver"
    assert error.message.startswith("solver llmbench_no_such_module:solve: cannot load: ")
    assert "ModuleNotFoundError" in error.message
    module = solvers("answer = 'Paris'\n")
    assert "is not callable" in solver_error(tmp_path, f"{module}:answer").message
    assert "AttributeError" in solver_error(tmp_path, f"{module}:missing").message


def test_an_async_solver_calling_the_blocking_client_gets_a_clear_error(
    tmp_path: Path, solvers: Any
) -> None:
    module = solvers(
        """
        async def solve(case, client):
            return client.complete(case.prompt).text
        """
    )
    error = solver_error(tmp_path, f"{module}:solve")
    assert error.kind == "solver"
    assert "RuntimeError: client.complete blocks the engine loop" in error.message
    assert "async solvers: use await client.acomplete(...)" in error.message


def test_the_client_refuses_both_a_prompt_and_messages(tmp_path: Path, solvers: Any) -> None:
    module = solvers(
        """
        async def solve(case, client):
            return (await client.acomplete("hi", messages=[])).text
        """
    )
    message = solver_error(tmp_path, f"{module}:solve").message
    assert message.endswith(
        "TypeError: give the client a prompt or messages=[...], not both or neither"
    )


@pytest.mark.parametrize("name", ["solve_async", "solve_sync"])
def test_a_provider_error_of_a_call_propagates_unchanged(
    tmp_path: Path, solvers: Any, name: str
) -> None:
    module = solvers(
        """
        async def solve_async(case, client):
            return (await client.acomplete(case.prompt)).text

        def solve_sync(case, client):
            return client.complete(case.prompt).text
        """
    )
    timeout = ProviderError("fake: timed out after 30 s", "timeout", retries=2)
    with pytest.raises(ProviderError) as info:  # the call's own error, not the solver's
        solve(tmp_path, f"{module}:{name}", FakeEngine(timeout))
    assert info.value is timeout


def test_any_error_the_engine_raises_propagates_unchanged(tmp_path: Path, solvers: Any) -> None:
    class BudgetReached(Exception):
        pass

    module = solvers(
        """
        def solve(case, client):
            return client.complete(case.prompt).text
        """
    )
    budget = BudgetReached("--max-cost 1 USD reached")
    with pytest.raises(BudgetReached) as info:
        solve(tmp_path, f"{module}:solve", FakeEngine(budget))
    assert info.value is budget


def test_a_solver_may_handle_a_failed_call_itself(tmp_path: Path, solvers: Any) -> None:
    module = solvers(
        """
        from pytest_llmbench.models.item_errors import ProviderError

        async def solve(case, client):
            try:
                return (await client.acomplete(case.prompt)).text
            except ProviderError:
                return (await client.acomplete(case.prompt, model_hint="fallback")).text
        """
    )
    engine = FakeEngine(ProviderError("down", "provider"), "Paris")
    run, _ = solve(tmp_path, f"{module}:solve", engine)
    assert run.answer == "Paris" and len(run.calls) == 1 and len(engine.requests) == 2


# --- the solver's run as one completion ------------------------------------------------------


def test_solver_completion_sums_usage_over_the_calls() -> None:
    calls = (
        completion("a", retries=1, rate_limit_wait_s=0.5, cached=True),
        completion("b", input_tokens=None, cost_usd=None, tokens_estimated=True, cached=True),
        completion("c", output_tokens=5, retries=2, cached=False),
    )
    merged = solver_completion(SolverRun("B", calls, 1.5), "openai/fake-model")
    assert (merged.text, merged.model_id, merged.latency_s) == ("B", "openai/fake-model", 1.5)
    assert (merged.input_tokens, merged.output_tokens) == (20, 9)
    assert merged.cost_usd == pytest.approx(0.002)
    assert (merged.retries, merged.rate_limit_wait_s) == (3, 0.5)
    assert merged.tokens_estimated and not merged.cached and not merged.streamed
    assert (merged.ttft_s, merged.finish_reason, merged.tool_calls) == (None, None, ())


def test_solver_completion_without_reported_usage_or_calls() -> None:
    unreported = completion("a", input_tokens=None, output_tokens=None, cost_usd=None, cached=True)
    merged = solver_completion(SolverRun("x", (unreported, unreported), 0.1), "m")
    assert (merged.input_tokens, merged.output_tokens, merged.cost_usd) == (None, None, None)
    assert merged.cached  # every call came from the cache
    merged = solver_completion(SolverRun("x", (), 0.0), "m")
    assert not merged.cached and merged.retries == 0 and merged.input_tokens is None


def test_the_client_records_only_finished_calls() -> None:
    async def main() -> tuple[tuple[Completion, ...], str]:
        client = SolverClient("fake", FakeEngine("Paris"), asyncio.get_running_loop())
        reply = await client.acomplete("hi")
        return client.calls, reply.text

    calls, text = asyncio.run(main())
    assert text == "Paris" and [call.text for call in calls] == ["Paris"]


@pytest.mark.parametrize(
    ("returned", "verdict", "answer"),
    [
        ("True", True, "Paris"),  # a bare bool: the answer is the last call's
        ("False", False, "Paris"),
        ("(True, 'Paris, France')", True, "Paris, France"),
        ("{'passed': False, 'answer': 'Lyon'}", False, "Lyon"),
        ("{'passed': True}", True, "Paris"),
        ("'Paris'", None, "Paris"),  # a plain answer carries no verdict
    ],
)
def test_a_solver_that_judges_itself_gives_the_verdict(
    tmp_path: Path, solvers: Any, returned: str, verdict: bool | None, answer: str
) -> None:
    """NEAR AI's SolverStrategy convention: solve() returns whether it got it right."""
    module = solvers(
        f"""
        async def solve(case, client):
            await client.acomplete(case.prompt)
            return {returned}
        """
    )
    run, _ = solve(tmp_path, f"{module}:solve", FakeEngine("Paris"))
    assert (run.verdict, run.answer) == (verdict, answer)


def test_a_bare_bool_without_calls_has_an_empty_answer(tmp_path: Path, solvers: Any) -> None:
    module = solvers("def solve(case, client):\n    return False\n")
    run, _ = solve(tmp_path, f"{module}:solve", FakeEngine("unused"))
    assert (run.verdict, run.answer, run.calls) == (False, "", ())
