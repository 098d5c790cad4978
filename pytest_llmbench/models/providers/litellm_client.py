"""The litellm client, and the only place that imports litellm: one attempt at a chat
completion or an embedding, for providers that do not speak OpenAI's protocol (and any model
whose profile says ``client: litellm``).

litellm is imported on first use, never at plugin load, and only in a process that has a model
routed to it (:mod:`.routes`): it costs seconds, and without ``LITELLM_LOCAL_MODEL_COST_MAP`` it
tries to download its price map at import. Retries, timeouts and error messages are the shared
ones (:mod:`.transport_retry`, :mod:`.errors`).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import logging
import os
import time
from collections.abc import Sequence
from typing import Any

from . import prices, routes, tokens
from .completion import CallTarget, Completion, TokenDetails, served_model, whole_answer
from .openai_compatible import vector
from .reasoning import reasoning_of, split_leading_thinking, usage_details
from .reasoning_params import adapted
from .tokens import reported
from .tool_deltas import StreamedToolCalls
from .trace_header import with_traceparent
from .transport_retry import IncompleteStreamError, Timeouts, cut_stream_message


def missing_api_keys(model_id: str) -> list[str]:
    """API-key variables that ``model_id``, of a provider that does not speak OpenAI's
    protocol, needs and the environment lacks, as litellm says.

    Only ``*_API_KEY`` variables count: cloud credentials (AWS, Vertex) and local endpoints can
    come from files, metadata services or profiles that litellm cannot see from here. A model
    that speaks OpenAI's protocol is judged by :func:`.routes.check_key` instead (none is
    missing for an endpoint on this machine or a private network), which litellm cannot know.
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


def use_local_tables() -> None:
    """litellm's price map and table of Anthropic beta headers as shipped with it, unless the
    user chose otherwise: without these it fetches both from GitHub on first use (set on the
    engine's thread, before any litellm code runs on another)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")


def import_litellm() -> Any:
    """Import litellm with its local tables unless the user chose otherwise."""
    global _litellm
    if _litellm is not None:
        return _litellm
    use_local_tables()
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
#: (model id, the profile's prices) already in litellm's price map.
_registered_prices: set[tuple[str, prices.Rates]] = set()


def _register_prices(litellm: Any, target: CallTarget) -> None:
    """Put the profile's prices in litellm's price map, once per model.

    litellm prices every response itself; for a model missing from its map it tries a dozen
    name variants first (about 1 ms of CPU per call). With the profile's prices registered the
    lookup is direct, and litellm's own figure agrees with ours.
    """
    if target.cost_per_1k_input is None or target.cost_per_1k_output is None:
        return
    rates = prices.rates(target)
    if rates is None or (target.model_id, rates) in _registered_prices:
        return
    entry: dict[str, Any] = {
        "input_cost_per_token": rates.input / rates.per_tokens,
        "output_cost_per_token": rates.output / rates.per_tokens,
        "cache_read_input_token_cost": rates.cached_input / rates.per_tokens,
        "cache_creation_input_token_cost": rates.cache_write / rates.per_tokens,
        "output_cost_per_reasoning_token": rates.reasoning / rates.per_tokens,
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
    _registered_prices.add((target.model_id, rates))


async def embed_once(
    litellm: Any, target: CallTarget, texts: Sequence[str], limits: Timeouts, retries: int
) -> Completion:
    """One attempt at embedding ``texts``: the vectors as the completion's text (JSON)."""
    kwargs = call_kwargs(target, limits, input=list(texts))
    started = time.perf_counter()
    response = await litellm.aembedding(**kwargs)
    latency = time.perf_counter() - started
    vectors = [vector(item) for item in response.data]
    if len(vectors) != len(texts):
        raise ValueError(f"{len(vectors)} embeddings for {len(texts)} texts")
    usage = getattr(response, "usage", None)
    tokens = getattr(usage, "prompt_tokens", None) if usage else None
    used = (tokens, 0 if tokens is not None else None)
    cost = cost_of(litellm, target, *used)
    return whole_answer(target, json.dumps(vectors), used, latency, retries, cost)


async def chat_once(
    litellm: Any,
    target: CallTarget,
    messages: Sequence[dict[str, Any]],
    params: dict[str, Any],
    stream: bool,
    limits: Timeouts,
    retries: int,
) -> Completion:
    """One attempt at a chat completion (no retries: :func:`.transport_retry.retried` owns
    those)."""
    _register_prices(litellm, target)
    kwargs = _request_kwargs(target, messages, params, stream, limits)
    started = time.perf_counter()
    response = await litellm.acompletion(**kwargs)
    ttft: float | None = None
    if stream:
        watched = _watch_models(response)
        text, ttft, finish, usage, tool_calls, thinking = await _consume_stream(response, started)
        reply = Reply(text, finish, usage, tool_calls, thinking, watched.served)
    else:
        reply = whole_reply(response)
    latency = time.perf_counter() - started
    measured = {"ttft_s": ttft, "latency_s": latency, "retries": retries, "streamed": stream}
    return completion_of(litellm, target, messages, reply, **measured)


@dataclasses.dataclass(frozen=True)
class Reply:
    """What an answer read by litellm gives: its text, finish reason, usage, tool calls, the
    thinking it gave apart and the model version it names (``response.model``)."""

    text: str
    finish: str | None
    usage: Any
    tool_calls: tuple[dict[str, Any], ...]
    thinking: str
    served: str | None = None


def whole_reply(response: Any) -> Reply:
    """A whole (not streamed) answer's :class:`Reply`."""
    text, _, finish, usage, thinking = _read_response(response)
    served = served_model(getattr(response, "model", None))
    return Reply(text, finish, usage, _tool_calls(response), thinking, served)


def completion_of(
    litellm: Any,
    target: CallTarget,
    messages: Sequence[dict[str, Any]],
    reply: Reply,
    **measured: Any,
) -> Completion:
    """The :class:`Completion` of ``reply`` to ``messages``: a leading thinking block split
    off, tokens counted (or estimated), priced; ``measured`` gives the call's own fields
    (``ttft_s``, ``latency_s``, ``retries``, ``streamed``, and for a batch's answer
    ``batched``, ``batch_id``, ``batch_wait_s``: priced then at the batch price)."""
    text, thinking = split_leading_thinking(reply.text, reply.thinking)
    said = text + thinking
    counts = _token_counts(litellm, target, messages, said, reply.usage)
    input_tokens, output_tokens, estimated = counts
    parts = tokens.details(target.model_id, reply.usage, thinking, output_tokens)
    if measured.get("batched"):
        cost = prices.cost_usd(target, input_tokens, output_tokens, parts, batched=True)
    else:
        cost = cost_of(litellm, target, input_tokens, output_tokens, parts)
    return Completion(
        text=text,
        model_id=target.model_id,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        tokens_estimated=estimated,
        cost_usd=cost,
        finish_reason=reply.finish,
        tool_calls=reply.tool_calls,
        reasoning=thinking,
        response_model=reply.served,
        **measured,
        **dataclasses.asdict(parts),  # the token details, under the same names
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
    # The call's parameters over the profile's (one dict: the same name may be in both), as an
    # OpenAI reasoning model takes them (litellm would refuse a judge's temperature 0).
    sent, _ = adapted(target.model_id, {**target.params, **params})
    fields = {**sent, "messages": list(messages), "stream": stream}
    kwargs = call_kwargs(target, limits, **fields)
    if stream:
        kwargs["stream_options"] = {"include_usage": True}
    if kwargs.get("tools"):
        # With tools, litellm 1.106 imports its MCP gateway (the `mcp` package, not installed);
        # its own flag skips that: we never use the gateway, and the flag is not sent.
        kwargs["_skip_mcp_handler"] = True
    return kwargs


def client_timeout(limits: Timeouts) -> Any:
    """httpx's timeouts for litellm's client: the connect bound, and the whole attempt's for
    the rest (which :func:`.transport_retry.retried` enforces over the whole call, stream
    included)."""
    import httpx  # litellm's own dependency, imported with it

    return httpx.Timeout(limits.call_s, connect=limits.connect_bound_s)


def call_kwargs(target: CallTarget, limits: Timeouts, **fields: Any) -> dict[str, Any]:
    """What every litellm call of ``target`` is given: its extra settings, ``fields``, the
    model, the timeouts and no SDK retries (ours are counted), its endpoint and key."""
    kwargs: dict[str, Any] = {
        **target.extra,
        **fields,
        "model": target.model_id,
        "timeout": client_timeout(limits),
        "max_retries": 0,
    }
    if target.api_base:
        kwargs["api_base"] = target.api_base
    headers = with_traceparent(kwargs.get("extra_headers"))
    if headers:  # the call span's traceparent, when the run exports a trace
        kwargs["extra_headers"] = headers
    key = routes.litellm_key(target)
    if key:
        kwargs["api_key"] = key
    return kwargs


async def _consume_stream(
    response: Any, started: float
) -> tuple[str, float | None, str | None, Any, tuple[dict[str, Any], ...], str]:
    """The stream read to the end: (text, TTFT, finish reason, usage, the tool calls put
    together from their fragments, the thinking streamed apart); the first chunk with text,
    thinking or a tool call's fragment is the first token."""
    parts: list[str] = []
    thought: list[str] = []
    calls = StreamedToolCalls()
    ttft: float | None = None
    finish: str | None = None
    usage: Any = None
    async for chunk in response:
        usage = getattr(chunk, "usage", None) or usage
        for choice in getattr(chunk, "choices", None) or []:
            content = getattr(choice.delta, "content", None)
            if content:
                parts.append(content)
            thinking = reasoning_of(choice.delta)
            if thinking:
                thought.append(thinking)
            fragments = getattr(choice.delta, "tool_calls", None) or ()
            if (calls.add(fragments) or content or thinking) and ttft is None:
                ttft = time.perf_counter() - started
            finish = choice.finish_reason or finish
    # litellm closes a cut stream with a made-up "stop"; the provider's own reason tells. A
    # body that ends before it is a cut connection, whatever text came first.
    provider_finish = getattr(response, "received_finish_reason", finish)
    if provider_finish is None:
        received = len("".join(parts)) + len("".join(thought)) + calls.received
        raise IncompleteStreamError(cut_stream_message(received))
    if not _provider_sent_usage(response):
        usage = None  # litellm's own guess; _token_counts counts locally and says so
    elif thought and not _provider_counted_reasoning(response):
        # litellm counts a stream's thinking itself when the provider did not, unmarked: its
        # count is dropped, for :func:`.tokens.details` to count it as for the lean client
        details = getattr(usage, "completion_tokens_details", None)
        if details is not None:
            details.reasoning_tokens = None
    return "".join(parts), ttft, finish, usage, calls.calls(), "".join(thought)


class _ModelWatch:
    """The provider's stream, passed through as is, noting the model version its chunks name
    (the last one named): litellm writes the requested model into every chunk it gives."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._chunks: Any = None
        self.served: str | None = None

    def __aiter__(self) -> _ModelWatch:
        return self

    async def __anext__(self) -> Any:
        if self._chunks is None:
            self._chunks = self._stream.__aiter__()
        chunk = await self._chunks.__anext__()
        getter = getattr(chunk, "get", None)
        value = getter("model") if isinstance(chunk, dict) and callable(getter) else None
        self.served = served_model(value or getattr(chunk, "model", None)) or self.served
        return chunk

    def __getattr__(self, name: str) -> Any:  # aclose, close, response: the stream's own
        return getattr(self._stream, name)


def _watch_models(response: Any) -> _ModelWatch:
    """A watch on the provider's chunks under litellm's stream ``response`` (one that notes
    nothing when litellm opens the stream later, or gives no async stream)."""
    stream = getattr(response, "completion_stream", None)
    if stream is None or not hasattr(stream, "__aiter__"):
        return _ModelWatch(())
    watch = _ModelWatch(stream)
    response.completion_stream = watch
    return watch


def _provider_counted_reasoning(response: Any) -> bool:
    """Whether the provider itself reported a stream's reasoning tokens."""
    chunks = getattr(response, "chunks", None)
    if not isinstance(chunks, list):
        return True  # cannot tell: trust what litellm reports
    return any(usage_details(_chunk_usage(chunk))[0] is not None for chunk in chunks)


def _provider_sent_usage(response: Any) -> bool:
    """Whether the provider itself reported usage on the stream (llama-cpp's server does not)."""
    chunks = getattr(response, "chunks", None)
    if not isinstance(chunks, list):
        return True  # cannot tell: trust what litellm reports
    return any(_chunk_usage(chunk) is not None for chunk in chunks)


def _chunk_usage(chunk: Any) -> Any:
    getter = getattr(chunk, "get", None)
    return getter("usage") if callable(getter) else getattr(chunk, "usage", None)


def _read_response(response: Any) -> tuple[str, float | None, str | None, Any, str]:
    choice = response.choices[0]
    return (
        choice.message.content or "",
        None,
        choice.finish_reason,
        getattr(response, "usage", None),
        reasoning_of(choice.message),
    )


def _token_counts(
    litellm: Any, target: CallTarget, messages: Sequence[dict[str, Any]], text: str, usage: Any
) -> tuple[int | None, int | None, bool]:
    prompt_tokens = getattr(usage, "prompt_tokens", None) if usage else None
    completion_tokens = getattr(usage, "completion_tokens", None) if usage else None
    if reported(prompt_tokens, completion_tokens):
        return int(prompt_tokens or 0), int(completion_tokens or 0), False
    # Some servers (llama-cpp-python among them) send no usage on streams: count locally.
    try:
        counted_in = litellm.token_counter(model=target.model_id, messages=list(messages))
        counted_out = litellm.token_counter(model=target.model_id, text=text) if text else 0
    except Exception:
        return None, None, True
    return int(counted_in), int(counted_out), True


def cost_of(
    litellm: Any,
    target: CallTarget,
    input_tokens: int | None,
    output_tokens: int | None,
    details: TokenDetails | None = None,
) -> float | None:
    """USD of a call: priced as the lean client prices it (:func:`.prices.cost_usd`), so that
    both clients record the same cost; for a model that only litellm's own lookup finds in
    its price map (a provider's deployment name), litellm's price of the same parts."""
    if input_tokens is None or output_tokens is None:
        return None
    cost = prices.cost_usd(target, input_tokens, output_tokens, details)
    if cost is not None:
        return cost
    details = details or TokenDetails()
    usage = litellm.Usage(
        prompt_tokens=input_tokens,
        completion_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
        reasoning_tokens=details.reasoning_tokens,
        cache_read_input_tokens=details.cached_input_tokens,
        cache_creation_input_tokens=details.cache_write_tokens,
    )
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=target.model_id, usage_object=usage
        )
    except Exception:  # a model missing from the price map has no known cost
        return None
    return float(prompt_cost) + float(completion_cost)
