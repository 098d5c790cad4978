"""Python solvers: application code, not only a raw model, answers the cases.

An eval file names ``solver: module:function``. For each item the function receives the case
(:class:`SolverCase`) and a client of the item's model (:class:`SolverClient`), and returns the
answer: a string, an object with ``.text`` (a :class:`Completion`), or a dict with
``"answer"`` (and, for a RAG app, ``"context"``: what it retrieved, in any shape a case's
``context`` takes, LangChain ``Document`` objects included; the judges of RAG metrics read it
instead of the case's ``context``). A solver that judges itself, as NEAR AI's
``SolverStrategy.solve`` does, returns a bool (or ``(bool, answer)``, or a dict with
``"passed"`` and an optional ``"answer"``): that bool is the item's verdict, and its answer is
the one it gave, else its last model call's. It may call the model any number of times
(self-consistency votes, chains, retrieval then answer); each call goes through the engine, so it is paced, cached and budgeted
like any other. A sync function runs in a worker thread, an async one on the engine's loop.

A solver that raises or returns something else is an error of the item (a
:class:`~..models.SolverError`); an error of one of its model calls stays that
call's error, kind unchanged.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..models import Completion, ItemError, SolverError, batch_fields, total_usage

__all__ = [
    "CompleteFn",
    "SolverCase",
    "SolverClient",
    "SolverRun",
    "run_solver",
    "solver_completion",
]

#: One model call through the engine: the messages and extra call parameters.
CompleteFn = Callable[[list[dict[str, Any]], dict[str, Any]], Awaitable[Completion]]


@dataclass(frozen=True)
class SolverCase:
    """What the solver receives as ``case``."""

    id: str  #: the case id inside its suite
    prompt: str | None  #: the rendered prompt (the last user message); None for a chat
    messages: tuple[dict[str, Any], ...]  #: the rendered chat, system message included
    vars: Mapping[str, Any]  #: the case's variables
    expected: str | None  #: the case's expected answer, if any
    choices: tuple[str, ...] | None  #: a multiple choice case's choices
    model: str  #: the model's name in this run
    context: tuple[str, ...] | None = None  #: the case's ``context`` chunks, if any
    #: the W3C ``traceparent`` of the item's span when the run exports a trace (``--otel``),
    #: for the app's own spans to nest under the item; None when it exports none
    traceparent: str | None = None


class SolverClient:
    """The solver's ``client``: calls the item's model through the engine.

    Every call is kept, in the order the calls finished, for the item's usage and cost.
    """

    def __init__(self, name: str, complete: CompleteFn, loop: asyncio.AbstractEventLoop) -> None:
        self.name = name  #: the model's name in this run
        self._complete = complete
        self._loop = loop
        self._calls: list[Completion] = []
        self._errors: list[BaseException] = []  # raised by the engine, not by the solver

    @property
    def calls(self) -> tuple[Completion, ...]:
        """The completed calls so far."""
        return tuple(self._calls)

    async def acomplete(
        self,
        prompt: str | None = None,
        *,
        messages: list[dict[str, Any]] | None = None,
        system: str | None = None,
        **params: Any,
    ) -> Completion:
        """Ask the model: a ``prompt`` (a user message) or whole ``messages``, with an optional
        ``system`` message first; ``params`` (temperature, max_tokens, ...) override the
        item's."""
        chat = _chat(prompt, messages, system)
        try:
            completion = await self._complete(chat, dict(params))
        except BaseException as exc:
            self._errors.append(exc)
            raise
        self._calls.append(completion)
        return completion

    def complete(
        self,
        prompt: str | None = None,
        *,
        messages: list[dict[str, Any]] | None = None,
        system: str | None = None,
        **params: Any,
    ) -> Completion:
        """:meth:`acomplete` for a sync solver: runs the call on the engine's loop and waits.

        Called on the engine's loop itself (from an async solver) it would block that loop for
        ever, so it raises instead.
        """
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise RuntimeError(
                "client.complete blocks the engine loop; async solvers: use "
                "await client.acomplete(...)"
            )
        call = self.acomplete(prompt, messages=messages, system=system, **params)
        return asyncio.run_coroutine_threadsafe(call, self._loop).result()

    def raised(self, exc: BaseException) -> bool:
        """Whether ``exc`` came out of one of this client's model calls."""
        return any(exc is error for error in self._errors)


@dataclass(frozen=True)
class SolverRun:
    """A solver's answer and the model calls it made."""

    answer: str  #: the answer to score
    calls: tuple[Completion, ...]  #: every model call, in the order they finished
    latency_s: float  #: the solver's wall time
    #: the solver's own verdict on its answer, when it returned one (NEAR's bool)
    verdict: bool | None = None
    #: the context the solver retrieved (a dict's ``"context"``); None when it gave none
    context: tuple[str, ...] | None = None


async def run_solver(ref: str, base_dir: Path, case: SolverCase, complete: CompleteFn) -> SolverRun:
    """Run the solver ``ref`` (``module:function``, imported from ``base_dir``) on ``case``.

    ``complete`` makes one model call for the solver (the scheduler paces, caches and budgets
    it). Raises :class:`~..models.SolverError` when the solver cannot be loaded,
    raises, or returns no answer; an error of a model call propagates unchanged.
    """
    from ..userimport import UserImportError, load_callable

    try:
        function = load_callable(ref, base_dir)
    except UserImportError as exc:
        raise SolverError(f"solver {exc}") from None
    client = SolverClient(case.model, complete, asyncio.get_running_loop())
    started = time.perf_counter()
    try:
        result = await _call(function, case, client)
    except Exception as exc:
        if isinstance(exc, ItemError) or client.raised(exc):
            raise
        raise SolverError(f"solver {ref}: {type(exc).__name__}: {exc}") from None
    latency = time.perf_counter() - started
    verdict, result = _verdict_of(result)
    if verdict is not None and result is None:  # a bare bool: the answer it got last
        result = client.calls[-1].text if client.calls else ""
    answer = _answer_of(ref, result)
    return SolverRun(answer, client.calls, latency, verdict, _context_of(ref, result))


def _context_of(ref: str, result: Any) -> tuple[str, ...] | None:
    """The ``"context"`` of a solver's dict (its retrieved chunks), read as a case's is:
    ``[]`` is an empty retrieval, ``()``; None or ``""`` is no context, as if left out."""
    from ..spec import ContextError, context_chunks

    if not isinstance(result, Mapping):
        return None
    try:
        return context_chunks(result.get("context"))
    except ContextError as exc:
        raise SolverError(f"solver {ref}: returned an unreadable context: {exc}") from None


def _verdict_of(result: Any) -> tuple[bool | None, Any]:
    """A self-judging solver's verdict and what is left of its result to read the answer
    from: ``True`` -> (True, None); ``(False, "x")`` -> (False, "x");
    ``{"passed": True, "answer": "x"}`` -> (True, "x"). Anything else has no verdict."""
    if isinstance(result, bool):
        return result, None
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], bool):
        answer = result[1]
        return result[0], answer if isinstance(answer, str) or answer is None else str(answer)
    if isinstance(result, Mapping) and isinstance(result.get("passed"), bool):
        answer = result.get("answer")
        return result["passed"], None if answer is None else {"answer": str(answer)}
    return None, result


#: Threads for sync solvers. A sync solver blocks its thread while it waits for its model
#: calls, and litellm starts each call on the loop's default executor: sync solvers on that
#: executor would fill it and wait forever for calls that cannot start. They get their own.
SOLVER_THREADS = 64
_executor: concurrent.futures.ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def _solver_executor() -> concurrent.futures.ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=SOLVER_THREADS, thread_name_prefix="llmbench-solver"
            )
        return _executor


async def _call(function: Callable[..., Any], case: SolverCase, client: SolverClient) -> Any:
    """Await an async solver on this loop; run a sync one on a solver thread."""
    if _is_async(function):
        return await function(case, client)
    run = functools.partial(contextvars.copy_context().run, function, case, client)
    result = await asyncio.get_running_loop().run_in_executor(_solver_executor(), run)
    return await result if inspect.isawaitable(result) else result


def _is_async(function: Callable[..., Any]) -> bool:
    """An ``async def`` function, or an object whose ``__call__`` is one."""
    call = getattr(type(function), "__call__", None)  # noqa: B004 (the class's, not callable())
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(call)


def _answer_of(ref: str, result: Any) -> str:
    """The answer text of what a solver returned."""
    if isinstance(result, str):
        return result
    if isinstance(result, Mapping) and isinstance(result.get("answer"), str):
        return str(result["answer"])
    if not isinstance(result, Mapping) and isinstance(getattr(result, "text", None), str):
        return str(result.text)
    kind = type(result).__name__
    raise SolverError(
        f"solver {ref}: returned {kind}; expected a str, a Completion (.text), a dict with "
        "a str 'answer', or a verdict: a bool, (bool, answer) or a dict with a bool 'passed'"
    )


def _chat(
    prompt: str | None, messages: list[dict[str, Any]] | None, system: str | None
) -> list[dict[str, Any]]:
    """The messages of one call: exactly one of ``prompt`` and ``messages``, after ``system``."""
    if (prompt is None) == (messages is None):
        raise TypeError("give the client a prompt or messages=[...], not both or neither")
    chat = [{"role": "user", "content": prompt}] if messages is None else list(messages)
    return chat if system is None else [{"role": "system", "content": system}, *chat]


def solver_completion(run: SolverRun, model_id: str) -> Completion:
    """A solver's run as one completion: its answer, usage and cost summed over its calls."""
    usage = total_usage(call.usage for call in run.calls)
    return Completion(
        text=run.answer,
        model_id=model_id,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        tokens_estimated=any(call.tokens_estimated for call in run.calls),
        ttft_s=None,
        latency_s=run.latency_s,
        cost_usd=usage.cost_usd,
        retries=sum(call.retries for call in run.calls),
        streamed=False,
        finish_reason=None,
        cached=bool(run.calls) and all(call.cached for call in run.calls),
        **batch_fields(run.calls),
        rate_limit_wait_s=sum(call.rate_limit_wait_s for call in run.calls),
        response_model=run.calls[-1].response_model if run.calls else None,
    )
