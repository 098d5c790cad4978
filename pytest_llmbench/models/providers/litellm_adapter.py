"""The only place that imports litellm: one async, streamed chat completion with retries.

litellm is imported on first use, never at plugin load: it costs seconds, and without
``LITELLM_LOCAL_MODEL_COST_MAP`` it tries to download its price map at import.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import email.utils
import gc
import json
import logging
import os
import random
import socket
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .completion import CallTarget, Completion, ProviderError

#: HTTP statuses worth another try; anything else (400, 401, 404, ...) fails at once.
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
_BACKOFF_BASE_S = 0.5
_BACKOFF_MAX_S = 20.0
#: Default seconds to open a connection (``--connect-timeout``): an unreachable host fails fast.
DEFAULT_CONNECT_TIMEOUT_S = 10.0
#: Exception names (httpx, aiohttp) of a connection that could not be opened.
_CONNECT_ERRORS = frozenset({"ConnectError", "ClientConnectorError", "ClientConnectorDNSError"})
#: Exception names (httpx, aiohttp) of a connection that could not be opened in time.
_CONNECT_TIMEOUTS = frozenset({"ConnectTimeout", "ConnectionTimeoutError"})


class IncompleteStreamError(ConnectionError):
    """A stream whose body ended before the provider's finish reason: the connection was cut.

    What came before is not an answer: the call is retried, and never scored.
    """


class CallTimeout(TimeoutError):
    """The whole call (connection, answer and stream) took longer than ``--request-timeout``."""


@dataclass(frozen=True)
class Timeouts:
    """How long a call may take: all of it (``call_s``), and opening its connection."""

    call_s: float = 60.0  # --request-timeout's default
    connect_s: float = DEFAULT_CONNECT_TIMEOUT_S

    def for_client(self) -> Any:
        """The HTTP client's timeouts: the connect bound, and the whole-call bound for the rest
        (which :func:`_within` enforces over the whole call, stream included)."""
        import httpx  # litellm's own dependency, imported with it

        return httpx.Timeout(self.call_s, connect=min(self.connect_s, self.call_s))


def missing_api_keys(model_id: str) -> list[str]:
    """API-key variables that litellm says ``model_id`` needs and the environment lacks.

    Only ``*_API_KEY`` variables count: cloud credentials (AWS, Vertex) and local endpoints can
    come from files, metadata services or profiles that litellm cannot see from here.
    """
    litellm = import_litellm()
    try:
        found = litellm.validate_environment(model=model_id)
    except Exception:  # an unknown provider: let the call itself say what is wrong
        return []
    missing = [str(name) for name in found.get("missing_keys") or []]
    if found.get("keys_in_environment") or not missing:
        return []
    return missing if all(name.endswith("_API_KEY") for name in missing) else []


def count_prompt_tokens(model_id: str, messages: Sequence[dict[str, Any]]) -> int:
    """Tokens of ``messages`` for ``model_id`` by litellm's tokenizer (an estimate for most models)."""
    return int(import_litellm().token_counter(model=model_id, messages=list(messages)))


def price(target: CallTarget, input_tokens: int, output_tokens: int) -> float | None:
    """Cost in USD of a call of that size: profile prices, else litellm's map, else None."""
    return cost_of(import_litellm(), target, input_tokens, output_tokens)


def import_litellm() -> Any:
    """Import litellm with the local price map unless the user chose otherwise."""
    global _litellm
    if _litellm is not None:
        return _litellm
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # The import builds about a million long-lived objects; collections during it find next to
    # no garbage and cost a fifth of its CPU (2.75 s -> 2.2 s here, the same peak memory).
    collecting = gc.isenabled()
    gc.disable()
    try:
        import litellm
    finally:
        if collecting:
            gc.enable()

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    # litellm's modules live as long as the process: keep the collector from walking them on
    # every full collection.
    gc.freeze()
    _litellm = litellm
    return litellm


def warmed_up() -> Any:
    """litellm, with what its first call would otherwise do inside our clocks done once first.

    A first call imports the OpenAI client's resources and anyio's event-loop backend, loads
    the tokenizer the cost calculator counts with and builds the streaming wrappers' pydantic
    models: about 0.4 s of one process's time, which a first batch of concurrent calls read as
    latency and TTFT (0.77 s against a 0.25 s server, 0.31 s for later batches). Done here,
    synchronously, before any call's clock starts: blocking the loop then delays no timing.
    """
    global _warmed
    litellm = import_litellm()
    if _warmed:
        return litellm
    _warmed = True
    import importlib

    try:
        for module in _FIRST_USE_IMPORTS:
            importlib.import_module(module)
        litellm.token_counter(model="gpt-3.5-turbo", text="warm-up")
        warm_up = {"role": "user", "content": "warm-up"}
        chunks = litellm.completion(
            model="openai/llmbench-warm-up", messages=[warm_up], mock_response="ok", stream=True
        )
        for _ in chunks:
            pass
    except Exception:  # a warm-up is a speed-up, never a reason to fail a call
        pass
    return litellm


#: Modules a first call through litellm imports lazily (the OpenAI-compatible path, asyncio).
_FIRST_USE_IMPORTS = ("openai.resources", "anyio._backends._asyncio", "litellm._service_logger")
_litellm: Any = None
_warmed = False
#: (model id, input price, output price) already in litellm's price map.
_registered_prices: set[tuple[str, float, float]] = set()


def _register_prices(litellm: Any, target: CallTarget) -> None:
    """Put the profile's prices in litellm's price map, once per model.

    litellm prices every response itself; for a model missing from its map it tries a dozen
    name variants first (about 1 ms of CPU per call). With the profile's prices registered the
    lookup is direct, and litellm's own figure agrees with ours.
    """
    if target.cost_per_1k_input is None or target.cost_per_1k_output is None:
        return
    key = (target.model_id, target.cost_per_1k_input, target.cost_per_1k_output)
    if key in _registered_prices:
        return
    entry = {
        "input_cost_per_token": target.cost_per_1k_input / 1000,
        "output_cost_per_token": target.cost_per_1k_output / 1000,
        "mode": "chat",
    }
    logger = logging.getLogger("LiteLLM")
    level = logger.level
    logger.setLevel(logging.ERROR)  # "not in built-in cost map": expected for custom models
    try:
        entry["litellm_provider"] = litellm.get_llm_provider(target.model_id)[1]
        litellm.register_model({target.model_id: entry})
    except Exception:  # pricing is a speed-up here, never a reason to fail a call
        pass
    finally:
        logger.setLevel(level)
    _registered_prices.add(key)


async def acomplete(
    target: CallTarget,
    messages: Sequence[dict[str, Any]],
    params: dict[str, Any],
    *,
    stream: bool = True,
    timeout_s: float = 120.0,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    max_retries: int = 2,
    on_retry: Callable[[int | None], None] | None = None,
    before_retry: Callable[[], Awaitable[float]] | None = None,
) -> Completion:
    """Call ``target`` once, retrying transient failures; raise :class:`ProviderError` at the end.

    ``timeout_s`` bounds each attempt as a whole, stream included; ``connect_timeout_s`` the
    opening of its connection. ``on_retry(status)`` is told of every retry (429 lets a caller
    lower its concurrency); ``before_retry()`` is awaited before each new attempt (a rate
    limiter's turn) and returns the seconds it waited.
    """

    async def once(litellm: Any, limits: Timeouts, retries: int) -> Completion:
        return await _call_once(litellm, target, messages, params, stream, limits, retries)

    limits = Timeouts(timeout_s, connect_timeout_s)
    return await acall(once, target, limits, max_retries, on_retry, before_retry)


async def aembed(
    target: CallTarget,
    texts: Sequence[str],
    *,
    timeout_s: float = 120.0,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    max_retries: int = 2,
    on_retry: Callable[[int | None], None] | None = None,
    before_retry: Callable[[], Awaitable[float]] | None = None,
) -> Completion:
    """Embed ``texts`` with ``target``, retrying as :func:`acomplete` does.

    The vectors come back as the completion's text, a JSON list of lists, so that embedding
    calls are paced, budgeted and cached like any other call.
    """

    async def once(litellm: Any, limits: Timeouts, retries: int) -> Completion:
        return await _embed_once(litellm, target, texts, limits, retries)

    limits = Timeouts(timeout_s, connect_timeout_s)
    return await acall(once, target, limits, max_retries, on_retry, before_retry)


async def acall(
    once: Callable[[Any, Timeouts, int], Awaitable[Completion]],
    target: CallTarget,
    limits: Timeouts,
    max_retries: int,
    on_retry: Callable[[int | None], None] | None = None,
    before_retry: Callable[[], Awaitable[float]] | None = None,
) -> Completion:
    """``once(litellm, limits, retries)`` within the call bound, retried as :func:`acomplete`
    says; a :class:`ProviderError` it raises is final (not retried, passed on as it is)."""
    litellm = warmed_up()

    async def attempt(retries: int) -> Completion:
        return await _within(once(litellm, limits, retries), limits)

    return await _retrying(attempt, target, limits, max_retries, on_retry, before_retry)


async def _within(call: Awaitable[Completion], limits: Timeouts) -> Completion:
    """``call``, cancelled when it runs past the whole-call bound (a slow stream included)."""
    try:
        return await asyncio.wait_for(call, limits.call_s)
    except asyncio.TimeoutError:
        raise CallTimeout(f"no complete answer within {limits.call_s:g} s") from None


async def _retrying(
    attempt: Callable[[int], Awaitable[Completion]],
    target: CallTarget,
    limits: Timeouts,
    max_retries: int,
    on_retry: Callable[[int | None], None] | None,
    before_retry: Callable[[], Awaitable[float]] | None,
) -> Completion:
    retries = 0
    rate_limited_s = 0.0
    while True:
        try:
            completion = await attempt(retries)
            return dataclasses.replace(completion, rate_limit_wait_s=rate_limited_s)
        except ProviderError as final:  # the call's own final word
            final.retries, final.rate_limit_wait_s = retries, rate_limited_s
            raise
        except Exception as exc:  # litellm raises many types; we classify them below
            if retries >= max_retries or not _is_retryable(exc):
                error = _provider_error(exc, target, retries, limits)
                error.rate_limit_wait_s = rate_limited_s
                raise error from None
            retries += 1
            if on_retry is not None:
                on_retry(_status(exc))
            delay = _backoff_s(exc, retries)
            rate_limited_s += delay if _status(exc) == 429 else 0.0
            await asyncio.sleep(delay)
            if before_retry is not None:
                rate_limited_s += await before_retry()


async def _embed_once(
    litellm: Any, target: CallTarget, texts: Sequence[str], limits: Timeouts, retries: int
) -> Completion:
    kwargs = call_kwargs(target, limits, input=list(texts))
    started = time.perf_counter()
    response = await litellm.aembedding(**kwargs)
    latency = time.perf_counter() - started
    vectors = [_vector(item) for item in response.data]
    if len(vectors) != len(texts):
        raise ValueError(f"{len(vectors)} embeddings for {len(texts)} texts")
    usage = getattr(response, "usage", None)
    tokens = getattr(usage, "prompt_tokens", None) if usage else None
    used = (tokens, 0 if tokens is not None else None)
    return whole_answer(litellm, target, json.dumps(vectors), used, latency, retries)


def _vector(item: Any) -> list[float]:
    values = item.get("embedding") if isinstance(item, dict) else getattr(item, "embedding", None)
    if not isinstance(values, list):
        raise ValueError("an embedding without a vector")
    return [float(value) for value in values]


async def _call_once(
    litellm: Any,
    target: CallTarget,
    messages: Sequence[dict[str, Any]],
    params: dict[str, Any],
    stream: bool,
    limits: Timeouts,
    retries: int,
) -> Completion:
    _register_prices(litellm, target)
    kwargs = _request_kwargs(target, messages, params, stream, limits)
    started = time.perf_counter()
    response = await litellm.acompletion(**kwargs)
    tool_calls: tuple[dict[str, Any], ...] = ()
    if stream:
        text, ttft, finish, usage = await _consume_stream(response, started)
    else:
        text, ttft, finish, usage = _read_response(response)
        tool_calls = _tool_calls(response)
    latency = time.perf_counter() - started
    input_tokens, output_tokens, estimated = _token_counts(litellm, target, messages, text, usage)
    return Completion(
        text=text,
        model_id=target.model_id,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        tokens_estimated=estimated,
        ttft_s=ttft,
        latency_s=latency,
        cost_usd=cost_of(litellm, target, input_tokens, output_tokens),
        retries=retries,
        streamed=stream,
        finish_reason=finish,
        tool_calls=tool_calls,
    )


def _tool_calls(response: Any) -> tuple[dict[str, Any], ...]:
    """The tool calls of a non-streamed answer, as plain dicts (arguments kept as sent)."""
    message = response.choices[0].message
    calls = getattr(message, "tool_calls", None) or []
    found = []
    for call in calls:
        function = getattr(call, "function", None)
        if function is None:
            continue
        arguments = getattr(function, "arguments", None)
        found.append(
            {
                "id": str(getattr(call, "id", "") or ""),
                "name": str(getattr(function, "name", "") or ""),
                "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
            }
        )
    return tuple(found)


def _request_kwargs(
    target: CallTarget,
    messages: Sequence[dict[str, Any]],
    params: dict[str, Any],
    stream: bool,
    limits: Timeouts,
) -> dict[str, Any]:
    # The call's parameters over the profile's (one dict: the same name may be in both).
    fields = {**target.params, **params, "messages": list(messages), "stream": stream}
    kwargs = call_kwargs(target, limits, **fields)
    if stream:
        kwargs["stream_options"] = {"include_usage": True}
    if kwargs.get("tools"):
        # With tools, litellm 1.106 imports its MCP gateway (the `mcp` package, not installed);
        # its own flag skips that: we never use the gateway, and the flag is not sent.
        kwargs["_skip_mcp_handler"] = True
    return kwargs


def call_kwargs(target: CallTarget, limits: Timeouts, **fields: Any) -> dict[str, Any]:
    """What every litellm call of ``target`` is given: its extra settings, ``fields``, the
    model, the timeouts and no SDK retries (ours are counted), its endpoint and key."""
    kwargs: dict[str, Any] = {
        **target.extra,
        **fields,
        "model": target.model_id,
        "timeout": limits.for_client(),
        "max_retries": 0,
    }
    if target.api_base:
        kwargs["api_base"] = target.api_base
    if target.api_key:
        kwargs["api_key"] = target.api_key
    return kwargs


def whole_answer(
    litellm: Any,
    target: CallTarget,
    text: str,
    tokens: tuple[int | None, int | None],
    latency_s: float,
    retries: int,
) -> Completion:
    """A completion read whole (not streamed): an embedding's or a log-likelihood's, its cost
    from the profile's prices or litellm's map."""
    input_tokens, output_tokens = tokens
    return Completion(
        text=text,
        model_id=target.model_id,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        tokens_estimated=False,
        ttft_s=None,
        latency_s=latency_s,
        cost_usd=cost_of(litellm, target, input_tokens, output_tokens),
        retries=retries,
        streamed=False,
        finish_reason="stop",
    )


async def _consume_stream(
    response: Any, started: float
) -> tuple[str, float | None, str | None, Any]:
    parts: list[str] = []
    ttft: float | None = None
    finish: str | None = None
    usage: Any = None
    async for chunk in response:
        usage = getattr(chunk, "usage", None) or usage
        for choice in getattr(chunk, "choices", None) or []:
            content = getattr(choice.delta, "content", None)
            if content:
                if ttft is None:
                    ttft = time.perf_counter() - started
                parts.append(content)
            finish = choice.finish_reason or finish
    # litellm closes a cut stream with a made-up "stop"; the provider's own reason tells. A
    # body that ends before it is a cut connection, whatever text came first.
    provider_finish = getattr(response, "received_finish_reason", finish)
    if provider_finish is None:
        raise IncompleteStreamError(_cut_stream_message(len("".join(parts))))
    if not _provider_sent_usage(response):
        usage = None  # litellm's own guess; _token_counts counts locally and says so
    return "".join(parts), ttft, finish, usage


def _cut_stream_message(received: int) -> str:
    if not received:
        return "the stream ended before any answer or finish reason"
    return f"the stream was cut after {received} characters, before its finish reason"


def _provider_sent_usage(response: Any) -> bool:
    """Whether the provider itself reported usage on the stream (llama-cpp's server does not)."""
    chunks = getattr(response, "chunks", None)
    if not isinstance(chunks, list):
        return True  # cannot tell: trust what litellm reports
    return any(_chunk_usage(chunk) is not None for chunk in chunks)


def _chunk_usage(chunk: Any) -> Any:
    getter = getattr(chunk, "get", None)
    return getter("usage") if callable(getter) else getattr(chunk, "usage", None)


def _read_response(response: Any) -> tuple[str, float | None, str | None, Any]:
    choice = response.choices[0]
    return (
        choice.message.content or "",
        None,
        choice.finish_reason,
        getattr(response, "usage", None),
    )


def _token_counts(
    litellm: Any, target: CallTarget, messages: Sequence[dict[str, Any]], text: str, usage: Any
) -> tuple[int | None, int | None, bool]:
    prompt_tokens = getattr(usage, "prompt_tokens", None) if usage else None
    completion_tokens = getattr(usage, "completion_tokens", None) if usage else None
    if prompt_tokens is not None and completion_tokens is not None:
        return int(prompt_tokens), int(completion_tokens), False
    # Some servers (llama-cpp-python among them) send no usage on streams: count locally.
    try:
        counted_in = litellm.token_counter(model=target.model_id, messages=list(messages))
        counted_out = litellm.token_counter(model=target.model_id, text=text) if text else 0
    except Exception:
        return None, None, True
    return int(counted_in), int(counted_out), True


def cost_of(
    litellm: Any, target: CallTarget, input_tokens: int | None, output_tokens: int | None
) -> float | None:
    if input_tokens is None or output_tokens is None:
        return None
    if target.cost_per_1k_input is not None and target.cost_per_1k_output is not None:
        return (
            input_tokens * target.cost_per_1k_input + output_tokens * target.cost_per_1k_output
        ) / 1000
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=target.model_id, prompt_tokens=input_tokens, completion_tokens=output_tokens
        )
    except Exception:  # a model missing from the price map has no known cost
        return None
    return float(prompt_cost) + float(completion_cost)


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _is_retryable(exc: BaseException) -> bool:
    status = _status(exc)
    if status is None:
        # Connection resets, timeouts and broken streams carry no status: try again.
        return not isinstance(exc, (ValueError, TypeError, KeyError, AttributeError))
    return status in _RETRYABLE_STATUS


def _backoff_s(exc: BaseException, attempt: int) -> float:
    retry_after = _retry_after_s(exc)
    if retry_after is not None:
        return min(retry_after, _BACKOFF_MAX_S)
    delay: float = min(_BACKOFF_BASE_S * 2.0 ** (attempt - 1), _BACKOFF_MAX_S)
    return delay * (0.5 + random.random() / 2)


def _retry_after_s(exc: BaseException) -> float | None:
    # litellm re-raises with a synthetic ``response`` whose headers are empty; the provider's
    # real headers are on ``litellm_response_headers``.
    for headers in (
        getattr(exc, "litellm_response_headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
    ):
        if headers is None:
            continue
        seconds = _header_seconds(headers.get("retry-after-ms"), 1000.0)
        if seconds is None:
            seconds = _header_seconds(headers.get("retry-after"), 1.0)
        if seconds is not None:
            return seconds
    return None


def _header_seconds(value: Any, per_second: float) -> float | None:
    """A Retry-After value (seconds, milliseconds or an HTTP date) in seconds."""
    if value is None:
        return None
    try:
        return max(0.0, float(value) / per_second)
    except (TypeError, ValueError):
        pass
    try:
        when = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return max(0.0, (when - dt.datetime.now(dt.timezone.utc)).total_seconds())


def _provider_error(
    exc: BaseException, target: CallTarget, retries: int, limits: Timeouts
) -> ProviderError:
    """The error an item gets: its kind, and one line that says what happened."""
    status = _status(exc)
    causes = _causes(exc)
    kind = _error_kind(status, causes)
    tries = f" after {retries + 1} attempts" if retries else ""
    described = _described(kind, causes, target, limits)
    if described is not None:
        label, message = described
    else:
        message = str(exc).strip() or type(exc).__name__
        # litellm gives connection failures a made-up 500: only a real response has a status.
        shown = status if status and "Connection" not in type(exc).__name__ else None
        label = f"{type(exc).__name__}" + (f" (HTTP {shown})" if shown else "")
    if target.api_key:
        message = message.replace(target.api_key, "[REDACTED]")
    return ProviderError(f"{target.name}: {label}{tries}: {message}", kind=kind, retries=retries)


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, outermost first
    (litellm's ``MidStreamFallbackError`` keeps its cause as ``original_exception``)."""
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in found):
        found.append(current)
        original = getattr(current, "original_exception", None)
        wrapped = original if isinstance(original, BaseException) else None
        current = current.__cause__ or wrapped or current.__context__
    return found


def _error_kind(status: int | None, causes: Sequence[BaseException]) -> str:
    """``timeout``, ``connection`` (could not connect), ``malformed`` (not JSON) or ``provider``."""
    names = {type(cause).__name__ for cause in causes}
    if _timed_out(causes) or status == 408:
        return "timeout"
    if names & _CONNECT_ERRORS or any(
        isinstance(cause, (ConnectionRefusedError, socket.gaierror)) for cause in causes
    ):
        return "connection"
    if any(isinstance(cause, json.JSONDecodeError) for cause in causes):
        return "malformed"
    return "provider"


def _timed_out(causes: Sequence[BaseException]) -> bool:
    """Whether a client-side bound expired (not a server's HTTP 408, which litellm also calls
    ``Timeout``)."""
    return any(
        isinstance(cause, TimeoutError)
        or ("timeout" in type(cause).__name__.lower() and type(cause).__name__ != "Timeout")
        for cause in causes
    )


def _described(
    kind: str, causes: Sequence[BaseException], target: CallTarget, limits: Timeouts
) -> tuple[str, str] | None:
    """(label, message) in our words for what litellm words as HTTP 500s; None: its own."""
    names = {type(cause).__name__ for cause in causes}
    if kind == "timeout" and names & _CONNECT_TIMEOUTS:
        where = _host_port(target, causes)
        return "ConnectTimeout", f"cannot connect to {where} within {limits.connect_s:g} s"
    if kind == "timeout" and _timed_out(causes):
        return "Timeout", f"no complete answer within {limits.call_s:g} s"
    if kind == "connection":
        return "ConnectionError", f"cannot connect to {_host_port(target, causes)}: " + (
            _connect_reason(causes)
        )
    if kind == "malformed":
        error = next(cause for cause in causes if isinstance(cause, json.JSONDecodeError))
        return "MalformedResponse", f"the answer is not valid JSON ({error})"
    return None


def _host_port(target: CallTarget, causes: Sequence[BaseException]) -> str:
    """``host:port`` the call went to: the profile's api_base, else what the client says."""
    if target.api_base:
        parts = urllib.parse.urlsplit(target.api_base)
        default = 443 if parts.scheme == "https" else 80
        try:
            port = parts.port or default
        except ValueError:
            port = default
        return f"{parts.hostname}:{port}"
    for cause in causes:
        text = str(cause)
        if "Cannot connect to host " in text:
            return text.split("Cannot connect to host ", 1)[1].split(" ", 1)[0]
    return f"{target.model_id}'s endpoint"


def _connect_reason(causes: Sequence[BaseException]) -> str:
    for cause in causes:
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, socket.gaierror):
            return f"host name not resolved ({cause.strerror or cause})"
    return str(causes[-1]).strip() or type(causes[-1]).__name__
