"""One log-likelihood call: how likely a model finds a continuation after a context.

As lm-eval does for multiple choice through an API (its ``gguf`` and ``local-completions``
models): the text completions endpoint is asked for ``context + continuation`` with
``echo: true, logprobs: 1, max_tokens: 1``; the log-probabilities of the echoed tokens that
start at or after the context's end, up to the end of the prompt, are summed. llama.cpp's
server, vLLM and text-generation-inference answer this; chat-only APIs do not, and a model that
cannot is an ``unsupported`` error that says why, never a score.
"""

from __future__ import annotations

import asyncio
import json
import numbers
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..item_errors import ProviderError
from . import prices
from .calls import call
from .completion import CallTarget, Completion, whole_answer
from .errors import redacted, status_of
from .transport_retry import DEFAULT_CONNECT_TIMEOUT_S, BeforeRetry, OnRetry, Retrying, Timeouts

if TYPE_CHECKING:
    from .routes import Endpoint

__all__ = ["NEEDS", "aloglikelihood", "continuation_logprob"]

#: What a model needs for log-likelihood scoring, said in every ``unsupported`` error.
NEEDS = (
    "log-likelihood scoring needs a text completions endpoint that echoes the prompt with "
    "its log-probabilities (llama.cpp's server, vLLM, text-generation-inference); chat-only "
    "APIs (OpenAI's chat models, Anthropic, Gemini) do not give them"
)
#: litellm providers that speak OpenAI's completions protocol through the ``openai`` client.
_OPENAI_COMPATIBLE = frozenset({"openai", "text-completion-openai", "custom_openai"})
_clients: dict[tuple[Any, ...], Any] = {}
#: HTTP statuses by which an endpoint refuses the request itself (not a passing fault).
_REFUSED = frozenset({400, 404, 405, 422, 501})


class NoPromptLogprobs(ValueError):
    """The answer carries no log-probabilities for the prompt's tokens."""


async def aloglikelihood(
    target: CallTarget,
    context: str,
    continuation: str,
    *,
    timeout_s: float = 120.0,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    max_retries: int = 2,
    on_retry: OnRetry | None = None,
    before_retry: BeforeRetry | None = None,
) -> Completion:
    """The log-probability of ``continuation`` after ``context``, as a completion whose text is
    ``{"logprob": float, "tokens": int}`` (so that it is paced, cached and budgeted like any
    call). Transient faults are retried; an endpoint that cannot answer raises
    :class:`ProviderError` of kind ``unsupported``."""
    prompt = context + continuation
    span = (len(context), len(prompt))
    request = {"prompt": prompt, "echo": True, "logprobs": 1, "max_tokens": 1, "temperature": 0}

    async def lean(where: CallTarget, at: Endpoint, limits: Timeouts, retries: int) -> Completion:
        from .openai_compatible import post_json

        answer, latency = await _asked(where, post_json(at, "completions", request, limits))
        return _scored(where, answer, span, latency, retries, prices.cost_usd)

    async def other(litellm: Any, where: CallTarget, limits: Timeouts, retries: int) -> Completion:
        from .litellm_client import call_kwargs, cost_of

        kwargs = call_kwargs(where, limits, **request)
        client = _openai_client(litellm, where, limits)
        if client is not None:
            kwargs["client"] = client
        started = time.perf_counter()
        response = await _asked(where, litellm.atext_completion(**kwargs))
        latency = time.perf_counter() - started

        def cost(target: CallTarget, tokens_in: int | None, tokens_out: int | None) -> Any:
            return cost_of(litellm, target, tokens_in, tokens_out)

        return _scored(where, response, span, latency, retries, cost)

    policy = Retrying(Timeouts(timeout_s, connect_timeout_s), max_retries, on_retry, before_retry)
    return await call(target, policy, lean, other)


async def _asked(target: CallTarget, request: Awaitable[Any]) -> Any:
    """``request``'s answer; an endpoint that refuses the request itself is ``unsupported``."""
    try:
        return await request
    except Exception as exc:
        status = status_of(exc)
        if status in _REFUSED:
            raise _unsupported(target, f"the endpoint refused it (HTTP {status}: {exc})") from None
        raise


def _scored(
    target: CallTarget,
    answer: Any,
    span: tuple[int, int],
    latency: float,
    retries: int,
    cost: Callable[[CallTarget, int | None, int | None], float | None],
) -> Completion:
    try:
        logprob, count = continuation_logprob(_logprobs_of(answer), *span)
    except NoPromptLogprobs as exc:
        raise _unsupported(target, str(exc)) from None
    usage = _get(answer, "usage")
    tokens = (_get(usage, "prompt_tokens"), _get(usage, "completion_tokens"))
    text = json.dumps({"logprob": logprob, "tokens": count})
    return whole_answer(target, text, tokens, latency, retries, cost(target, *tokens))


def _openai_client(litellm: Any, target: CallTarget, limits: Timeouts) -> Any:
    """One client per OpenAI-compatible endpoint and event loop, for litellm to call with.

    Without one, litellm's text completions open a new HTTP session per call and never close
    it (an "Unclosed client session" error each); other providers get None: litellm's own.
    """
    try:
        provider = litellm.get_llm_provider(target.model_id, api_base=target.api_base)[1]
    except Exception:  # an unknown provider: the call itself will say what is wrong
        return None
    if provider not in _OPENAI_COMPATIBLE:
        return None
    from .litellm_client import client_timeout
    from .routes import litellm_key

    loop = asyncio.get_running_loop()
    api_key = litellm_key(target)  # a local endpoint without a key: the stand-in, as for chat
    key = (target.api_base, api_key, limits, id(loop))
    client = _clients.get(key)
    if client is None:
        import openai

        try:
            client = openai.AsyncOpenAI(
                api_key=api_key,
                base_url=target.api_base,
                timeout=client_timeout(limits),
                max_retries=0,
            )
        except openai.OpenAIError:  # no key anywhere: litellm's call says so
            return None
        _clients[key] = client
    return client


def _get(value: Any, name: str) -> Any:
    """A field of a JSON answer (a dict) or of litellm's object of the same shape."""
    if value is None:
        return None
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def _logprobs_of(response: Any) -> Any:
    choices = _get(response, "choices") or []
    if not choices:
        raise NoPromptLogprobs("the answer has no choices")
    choice = choices[0]
    found = (
        choice.get("logprobs") if isinstance(choice, dict) else getattr(choice, "logprobs", None)
    )
    if found is None:
        raise NoPromptLogprobs("the answer carries no log-probabilities")
    return found


def _field(logprobs: Any, name: str) -> list[Any]:
    value = logprobs.get(name) if isinstance(logprobs, dict) else getattr(logprobs, name, None)
    return list(value) if isinstance(value, (list, tuple)) else []


def continuation_logprob(logprobs: Any, start: int, end: int) -> tuple[float, int]:
    """The summed log-probability of the echoed tokens that begin in ``[start, end)`` (the
    continuation's characters in the prompt), and how many there are.

    A token that straddles ``start`` belongs to the context, as in lm-eval's API models.
    Raises :class:`NoPromptLogprobs` when the prompt was not echoed with its logprobs.
    """
    offsets = _field(logprobs, "text_offset")
    values = _field(logprobs, "token_logprobs")
    if not offsets or len(offsets) != len(values):
        raise NoPromptLogprobs("the answer carries no per-token offsets and log-probabilities")
    if offsets[0] != 0:
        raise NoPromptLogprobs("the prompt was not echoed (the first token is not at offset 0)")
    picked = [value for offset, value in zip(offsets, values, strict=True) if start <= offset < end]
    if not picked:
        raise NoPromptLogprobs("no echoed token starts inside the continuation")
    if any(not isinstance(value, numbers.Real) or isinstance(value, bool) for value in picked):
        raise NoPromptLogprobs("the continuation's tokens came back without log-probabilities")
    return float(sum(picked)), len(picked)


def _unsupported(target: CallTarget, reason: str) -> ProviderError:
    message = f"{target.name} cannot score log-likelihoods: {reason}; {NEEDS}"
    return ProviderError(redacted(message, target), "unsupported")
