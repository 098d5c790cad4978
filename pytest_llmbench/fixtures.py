"""Fixtures shared by eval items and plain Python tests.

- ``llm``: a client for the current model. Eval items get their item's model; a plain test that
  asks for ``llm`` is parametrized over the run's models and repeats (ids like ``[local/smollm2-r0]``).
  ``llm.chat(system=...)`` opens a :class:`Conversation` that keeps its history.
- ``eval_case``: the resolved case of an eval item.
- ``workdir``: a fresh per-item folder under ``tmp_path``, seeded from the case's ``files:`` (or a
  ``@pytest.mark.llmbench_files({...})`` marker on a plain test).
- ``record_score``: record the test's score (0..1) or other named metrics into its results row.

The plugin registers this module in every run: the engine's runtime loads when a test first asks
for ``llm``, not before.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .engine import get_runtime
from .models import ItemError
from .results import PLAIN_STATE_KEY, ChatLog, PlainTestState, plain_state, utc_now

if TYPE_CHECKING:
    from .engine import Runtime
    from .item import EvalItem
    from .models import Completion, ModelProfile
    from .spec import EvalCase

__all__ = [
    "PLAIN_STATE_KEY",
    "Conversation",
    "LLMClient",
    "PlainTestState",
    "build_messages",
    "plain_state",
]


class LLMClient:
    """A model client bound to one model of the run: its calls are paced, cached, budgeted and
    rate-limited with the eval items' (the scheduler's one call path)."""

    def __init__(
        self,
        runtime: Runtime,
        model: ModelProfile,
        on_call: Callable[..., None],
        *,
        repeat: int = 0,
        nodeid: str = "",
        chats: list[ChatLog] | None = None,
    ) -> None:
        self._runtime = runtime
        self.model = model
        self._on_call = on_call
        self._repeat = repeat
        self._nodeid = nodeid
        self._chats = chats  # a plain test's, for its record; None where nothing records them

    @property
    def name(self) -> str:
        """The model's name in this run (profile name or litellm id)."""
        return self.model.name

    def complete(
        self,
        prompt: str | None = None,
        *,
        messages: Sequence[Mapping[str, Any]] | None = None,
        system: str | None = None,
        **params: Any,
    ) -> Completion:
        """Ask the model; returns a :class:`Completion` with text, tokens, cost and timings."""
        from .engine import BudgetExceeded

        chat = build_messages(prompt, messages, system)
        scheduler = self._runtime.scheduler()
        try:
            completion = scheduler.complete(
                self.model, chat, params, repeat=self._repeat, nodeid=self._nodeid
            )
        except BudgetExceeded as exc:
            pytest.skip(str(exc))
        except ItemError as exc:
            self._on_call(chat, None, exc)
            raise
        self._on_call(chat, completion, None)
        return completion

    async def acomplete(self, prompt: str | None = None, **kwargs: Any) -> Completion:
        """Async form of :meth:`complete`, usable from any event loop."""
        return await asyncio.to_thread(self.complete, prompt, **kwargs)

    def chat(self, system: str | None = None) -> Conversation:
        """Open a conversation with the model, ``system`` its system prompt."""
        log = ChatLog(system)
        if self._chats is not None:
            self._chats.append(log)
        return Conversation(self, log)


class Conversation:
    """A conversation with the model (``llm.chat``): each :meth:`send` asks the model with the
    whole history so far (the system prompt, the earlier messages and the model's own earlier
    replies) through :meth:`LLMClient.complete`, and keeps the reply in the history."""

    def __init__(self, client: LLMClient, log: ChatLog) -> None:
        self._client = client
        self._log = log
        self._lock = threading.Lock()  # one send at a time: each answers the one before

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The history so far: what the next :meth:`send` sends before its message (a reply
        that called tools, given with ``send(..., tools=[...])``, with its calls and a "not run"
        result per call, as a scripted conversation's)."""
        from .engine import reply_messages

        replies = self._log.replies
        if replies:
            last = replies[-1]
            return [*last.sent, *reply_messages(last.completion, last.turn)]
        system = self._log.system
        return [{"role": "system", "content": system}] if system else []

    def send(self, message: str, **params: Any) -> Completion:
        """Send ``message`` after the history; returns the model's reply as
        :meth:`LLMClient.complete` does. A call that fails leaves the history as it was."""
        from .engine import Reply

        with self._lock:
            sent = (*self.messages, {"role": "user", "content": message})
            completion = self._client.complete(messages=sent, **params)
            self._log.replies.append(Reply(len(self._log.replies), sent, completion))
        return completion

    async def asend(self, message: str, **params: Any) -> Completion:
        """Async form of :meth:`send`, usable from any event loop."""
        return await asyncio.to_thread(self.send, message, **params)


def build_messages(
    prompt: str | None, messages: Sequence[Mapping[str, Any]] | None, system: str | None
) -> list[dict[str, Any]]:
    """One chat list from a prompt or messages, with an optional system prompt first."""
    if (prompt is None) == (messages is None):
        raise TypeError("give exactly one of `prompt` or `messages`")
    chat: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    if messages is not None:
        return chat + [dict(message) for message in messages]
    return [*chat, {"role": "user", "content": prompt}]


def _eval_item(request: pytest.FixtureRequest) -> EvalItem | None:
    from .item import EvalItem

    node = request.node
    return node if isinstance(node, EvalItem) else None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize plain tests that use ``llm`` over the run's models and repeats."""
    if "llmbench_model" not in metafunc.fixturenames:
        return
    from .config import get_run_config

    run = get_run_config(metafunc.config)
    params = [(model, repeat) for model in run.models for repeat in range(run.repeat)]
    ids = [f"{model.name}-r{repeat}" for model, repeat in params]
    metafunc.parametrize("llmbench_model", params, ids=ids, indirect=True)


@pytest.fixture
def llmbench_model(request: pytest.FixtureRequest) -> tuple[ModelProfile, int]:
    """The (model, repeat) of the current item."""
    item = _eval_item(request)
    if item is not None:
        return item.model, item.repeat
    model, repeat = request.param  # set by pytest_generate_tests
    return model, int(repeat)


@pytest.fixture
def llm(request: pytest.FixtureRequest, llmbench_model: tuple[ModelProfile, int]) -> LLMClient:
    """A client for the current model."""
    model, repeat = llmbench_model
    runtime = get_runtime(request.config)
    nodeid = request.node.nodeid
    if _eval_item(request) is not None:
        return LLMClient(runtime, model, lambda *args: None, repeat=repeat, nodeid=nodeid)
    state = plain_state(request.node)
    state.model, state.repeat = model, repeat

    def on_call(chat: list[dict[str, Any]], completion: Completion | None, error: Any) -> None:
        state.started_at = state.started_at or utc_now()
        state.prompts.append(str(chat[-1].get("content", "")) if chat else "")
        if completion is not None:
            state.completions.append(completion)
        state.error = error or state.error

    return LLMClient(runtime, model, on_call, repeat=repeat, nodeid=nodeid, chats=state.chats)


@pytest.fixture
def eval_case(request: pytest.FixtureRequest) -> EvalCase:
    """The case of the current eval item."""
    item = _eval_item(request)
    if item is None:
        raise pytest.UsageError(
            "the `eval_case` fixture exists only for items of *.eval.yaml files"
        )
    return item.case


@pytest.fixture
def workdir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A fresh folder for this item, seeded from the case's ``files:`` (and ``include_dirs:``);
    for an agent item whose loop started ahead, the folder it started in."""
    from .engine import seed, take_prepared

    item = _eval_item(request)
    if item is not None:
        prepared = take_prepared(request.config, item.nodeid)
        if prepared is not None:
            return prepared
        return seed(tmp_path / "workdir", item.case.files, item.case.include_dirs)
    marker = request.node.get_closest_marker("llmbench_files")
    files = (
        dict(marker.args[0]) if marker and marker.args else dict(marker.kwargs) if marker else {}
    )
    try:
        return seed(tmp_path / "workdir", files)
    except ValueError as exc:  # a bad name in a plain test's llmbench_files marker
        raise pytest.UsageError(str(exc)) from None


@pytest.fixture
def record_score(request: pytest.FixtureRequest) -> Callable[..., None]:
    """``record_score(value, name="score")``: the test's score (0..1) or a named metric."""
    state = plain_state(request.node)

    def record(value: float, name: str = "score") -> None:
        number = float(value)
        if name == "score":
            if not 0.0 <= number <= 1.0:
                raise ValueError(f"a score is between 0 and 1, got {value!r}")
            state.score = number
        else:
            state.metrics[name] = number

    return record
