"""The lean client: OpenAI's HTTP protocol spoken directly over aiohttp, without litellm.

For endpoints that speak it (OpenAI, the embedded llama.cpp server, vLLM, Ollama's and LM
Studio's ``/v1``, any profile with ``api_base``): chat completions (streamed with TTFT and the
provider's usage, or whole; tool calls either way), text completions (log-likelihood scoring) and
embeddings. One pooled connection set per event loop. Retries, timeouts, error kinds and key
redaction are the shared ones (:mod:`.transport_retry`, :mod:`.errors`), and a call gives the same
:class:`Completion` as litellm's path for the same answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from . import prices, tokens
from .completion import CallTarget, Completion, served_model, whole_answer
from .errors import HTTPStatusError, body_message
from .reasoning import reasoning_of, split_leading_thinking
from .reasoning_params import adapted
from .tool_deltas import StreamedToolCalls
from .trace_header import with_traceparent
from .transport_retry import IncompleteStreamError, Timeouts, cut_stream_message

if TYPE_CHECKING:
    import aiohttp

    from .routes import Endpoint

#: One HTTP session (its pool of connections) per event loop.
_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = (
    weakref.WeakKeyDictionary()
)
#: The task that closes each loop's session when the loop ends.
_keepers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[None]] = (
    weakref.WeakKeyDictionary()
)


async def chat_once(
    target: CallTarget,
    endpoint: Endpoint,
    messages: Sequence[dict[str, Any]],
    params: dict[str, Any],
    stream: bool,
    limits: Timeouts,
    retries: int,
) -> Completion:
    """One attempt at a chat completion (no retries: :func:`.transport_retry.retried` owns
    those)."""
    body, headers = chat_body(target, endpoint.model, messages, params)
    if stream:
        body.update(stream=True, stream_options={"include_usage": True})
    started = time.perf_counter()
    async with _post(endpoint, "chat/completions", body, limits, headers) as response:
        if stream:
            reply = await _read_stream(response, started)
        else:
            reply = read_whole(await _json(response))
    latency = time.perf_counter() - started
    return reply_completion(target, messages, reply, latency, retries, streamed=stream)


def chat_body(
    target: CallTarget, model: str, messages: Sequence[dict[str, Any]], params: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """(body, headers) of a chat completion of ``model`` (the name the server knows) as the
    live call and a batch line send it: the profile's parameters under the call's, adapted to
    the model, ``extra_body`` merged, ``extra_headers`` apart; not streamed."""
    sent, _ = adapted(target.model_id, {**target.params, **params})
    body, headers = request_fields(sent)
    body.update(model=model, messages=[_sent(message) for message in messages])
    return body, headers


def reply_completion(
    target: CallTarget,
    messages: Sequence[dict[str, Any]],
    reply: Reply,
    latency_s: float,
    retries: int,
    *,
    streamed: bool,
    batch: tuple[str, float | None] | None = None,
) -> Completion:
    """The completion of a reply read whole or streamed: thinking told apart, tokens counted
    (the provider's usage, else estimated), priced. ``batch``: (batch id, seconds waited) of a
    reply read from a batch's output, priced at the batch price."""
    text, ttft, finish, usage, calls, thinking, served = reply
    text, thinking = split_leading_thinking(text, thinking)
    used = tokens.used(target.model_id, messages, text + thinking, usage)
    parts = tokens.details(target.model_id, usage, thinking, used.output_tokens)
    batched = batch is not None
    cost = prices.cost_usd(target, used.input_tokens, used.output_tokens, parts, batched=batched)
    return Completion(
        text=text,
        model_id=target.model_id,
        input_tokens=used.input_tokens,
        output_tokens=used.output_tokens,
        tokens_estimated=used.estimated,
        ttft_s=ttft,
        latency_s=latency_s,
        cost_usd=cost,
        retries=retries,
        streamed=streamed,
        finish_reason=finish,
        tool_calls=calls,
        reasoning=thinking,
        batched=batched,
        batch_id=batch[0] if batch else None,
        batch_wait_s=batch[1] if batch else None,
        response_model=served,
        **dataclasses.asdict(parts),  # the token details, under the same names
    )


#: What one answer read gives: (text, TTFT (streamed only), finish reason, the provider's
#: usage, the tool calls, the thinking given apart from the text, the model version the
#: answer names).
Reply = tuple[
    str,
    "float | None",
    "str | None",
    "dict[str, Any] | None",
    tuple[dict[str, Any], ...],
    str,
    "str | None",
]


#: litellm's own call settings, which it consumes rather than sends (profiles and eval files
#: write them among the parameters).
LITELLM_SETTINGS = frozenset(
    {"drop_params", "num_retries", "timeout", "metadata", "mock_response", "caching", "fallbacks"}
)


def request_fields(params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(body, headers) of a request from a call's parameters, as litellm sends them:
    ``extra_body`` merged into the body, ``extra_headers`` sent as headers, litellm's own
    settings left out."""
    skipped = {*LITELLM_SETTINGS, "extra_body", "extra_headers"}
    body = {key: value for key, value in params.items() if key not in skipped}
    extra_body = params.get("extra_body")
    if isinstance(extra_body, dict):
        body.update(extra_body)
    extra = params.get("extra_headers")
    headers = {str(k): str(v) for k, v in extra.items()} if isinstance(extra, dict) else {}
    return body, headers


def _sent(message: dict[str, Any]) -> dict[str, Any]:
    """A message as sent: without fields that are null (as litellm sends it: an assistant
    message of tool calls has no ``content``)."""
    if all(value is not None for value in message.values()):
        return message
    return {key: value for key, value in message.items() if value is not None}


async def post_json(
    endpoint: Endpoint, path: str, body: dict[str, Any], limits: Timeouts
) -> tuple[Any, float]:
    """POST ``body`` to ``path`` and read the JSON answer whole: (answer, seconds taken)."""
    started = time.perf_counter()
    async with _post(endpoint, path, {"model": endpoint.model, **body}, limits) as response:
        answer = await _json(response)
    return answer, time.perf_counter() - started


def _post(
    endpoint: Endpoint,
    path: str,
    body: dict[str, Any],
    limits: Timeouts,
    extra_headers: dict[str, str] | None = None,
) -> Any:
    import aiohttp

    # The call span's traceparent, when the run exports a trace (never the profile's to set).
    sent = with_traceparent(extra_headers) or {}
    headers = {"Content-Type": "application/json", **sent, **endpoint.headers}
    timeout = aiohttp.ClientTimeout(total=None, connect=limits.connect_bound_s)
    url = f"{endpoint.base_url}/{path}"
    proxy = proxy_for(endpoint.base_url)
    request = _session().post(
        url, data=json.dumps(body), headers=headers, timeout=timeout, proxy=proxy
    )
    return _checked(request)


def send(
    endpoint: Endpoint,
    method: str,
    path: str,
    limits: Timeouts,
    *,
    body: dict[str, Any] | None = None,
    form: aiohttp.FormData | None = None,
) -> Any:
    """A request of any method to ``path`` (a JSON ``body``, a multipart ``form``, or none)
    on this loop's session, with the key's headers and the endpoint's proxy: a context manager
    that raises :class:`HTTPStatusError` for an error status, as :func:`_post`'s does."""
    import aiohttp

    headers = dict(endpoint.headers)
    data: Any = form
    if body is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(body)
    timeout = aiohttp.ClientTimeout(total=None, connect=limits.connect_bound_s)
    url = f"{endpoint.base_url}/{path}"
    request = _session().request(
        method, url, data=data, headers=headers, timeout=timeout, proxy=proxy_for(endpoint.base_url)
    )
    return _checked(request)


@functools.lru_cache(maxsize=64)
def proxy_for(base_url: str) -> str | None:
    """The proxy ``HTTP(S)_PROXY`` and ``NO_PROXY`` give for ``base_url``, as litellm's httpx
    client honours them: looked up once per endpoint (aiohttp's ``trust_env`` reads the
    environment and ``.netrc`` on every request)."""
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(base_url)
    if parts.hostname is None or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


class _checked:
    """``session.post(...)`` (or any request) as a context manager that raises :class:`HTTPStatusError` for an
    error status, with the provider's message, before the caller reads the body."""

    def __init__(self, request: Any) -> None:
        self._request = request
        self._response: Any = None

    async def __aenter__(self) -> Any:
        self._response = response = await self._request.__aenter__()
        if response.status >= 400:
            body = await response.read()
            headers = {name.lower(): value for name, value in response.headers.items()}
            response.release()
            raise HTTPStatusError(response.status, body_message(body, response.status), headers)
        return response

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._request.__aexit__(*exc_info)


def _session() -> aiohttp.ClientSession:
    """This event loop's session: created on first use, closed by :func:`close_sessions`."""
    loop = asyncio.get_running_loop()
    session = _sessions.get(loop)
    if session is None or session.closed:
        import aiohttp

        # Our lanes bound the calls in flight; the pool must not bound them again.
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        session = _sessions[loop] = aiohttp.ClientSession(connector=connector)
        _keepers[loop] = loop.create_task(_closed_with_the_loop(session))
    return session


async def _closed_with_the_loop(session: aiohttp.ClientSession) -> None:
    """Wait until cancelled, then close ``session``: a loop's end (``asyncio.run``, the engine)
    cancels its pending tasks, so its connections are closed with it, whoever ran it."""
    try:
        await asyncio.Event().wait()
    finally:
        await session.close()


def ready() -> None:
    """Import the HTTP client and open this loop's session: first-use work that must not run
    inside a call's clock (latency, TTFT)."""
    _session()


async def close_sessions() -> None:
    """Close this event loop's session (at the end of a process's calls)."""
    loop = asyncio.get_running_loop()
    session, keeper = _sessions.pop(loop, None), _keepers.pop(loop, None)
    if keeper is not None:
        keeper.cancel()
    if session is not None and not session.closed:
        await session.close()


async def _json(response: Any) -> Any:
    """The answer's body as JSON; a body that is not raises ``json.JSONDecodeError``."""
    return json.loads(await response.read())


class AnswerError(Exception):
    """A whole answer (HTTP 200) that holds no answer: the provider's error, or no choices.

    Retried, as litellm retries it (its made-up 500)."""


def read_whole(answer: Any) -> Reply:
    """A whole answer's reply; :class:`AnswerError` when it holds none (an error, no
    choices)."""
    if isinstance(answer, dict) and answer.get("error"):
        error = answer["error"]
        raise AnswerError(str(error.get("message") if isinstance(error, dict) else error))
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise AnswerError(f"the answer has no choices: {json.dumps(answer)[:200]}")
    choice = choices[0]
    message = choice.get("message") or {}
    usage = answer.get("usage")
    return (
        message.get("content") or "",
        None,
        choice.get("finish_reason"),
        usage if isinstance(usage, dict) else None,
        _tool_calls(message.get("tool_calls") or []),
        reasoning_of(message),
        served_model(answer.get("model")),
    )


def _tool_calls(calls: Sequence[Any]) -> tuple[dict[str, Any], ...]:
    """Tool calls as plain dicts (arguments kept as sent: a JSON string)."""
    found = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        arguments = function.get("arguments")
        found.append(
            {
                "id": str(call.get("id") or ""),
                "name": str(function.get("name") or ""),
                "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
            }
        )
    return tuple(found)


async def _read_stream(response: Any, started: float) -> Reply:
    """Server-sent chunks read to the end: (text, TTFT, finish reason, the provider's usage,
    the tool calls put together from their fragments, the thinking streamed apart, the model
    version the chunks name: the last one named).

    The first chunk carrying text, thinking or a tool call's fragment is the first token. A body that
    ends before a finish reason is a cut stream, never an answer (one that breaks raises the
    HTTP client's error: the server closed the connection).
    """
    parts: list[str] = []
    thought: list[str] = []
    calls = StreamedToolCalls()
    ttft: float | None = None
    finish: str | None = None
    usage: dict[str, Any] | None = None
    served: str | None = None
    async for line in _lines(response):
        if not line.startswith(b"data:"):
            continue  # blank separators, comments, event names
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        chunk = json.loads(data)
        if not isinstance(chunk, dict):
            text = data.decode("utf-8", "replace")
            raise json.JSONDecodeError("an event that is not a JSON object", text, 0)
        if chunk.get("error"):
            raise _stream_error(chunk["error"])
        usage = chunk.get("usage") or usage
        served = served_model(chunk.get("model")) or served
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if content:
                parts.append(content)
            thinking = reasoning_of(delta)
            if thinking:
                thought.append(thinking)
            fragment = calls.add(delta.get("tool_calls") or ())
            if (fragment or content or thinking) and ttft is None:
                ttft = time.perf_counter() - started
            finish = choice.get("finish_reason") or finish
    if finish is None:
        received = len("".join(parts)) + len("".join(thought)) + calls.received
        raise IncompleteStreamError(cut_stream_message(received))
    return "".join(parts), ttft, finish, usage, calls.calls(), "".join(thought), served


async def _lines(response: Any) -> Any:
    """The body's lines as they arrive, however long (aiohttp's own line reader stops at
    64 KiB: a long tool call's arguments can be more)."""
    pending = b""
    async for data in response.content.iter_any():
        pending += data
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line
    if pending:
        yield pending


def _stream_error(error: Any) -> HTTPStatusError:
    """An error the server sent as an event mid-stream (its ``code`` when it is a status)."""
    message = error.get("message") if isinstance(error, dict) else error
    code = error.get("code") if isinstance(error, dict) else None
    status = code if isinstance(code, int) and 400 <= code < 600 else 500
    return HTTPStatusError(status, str(message or error), {})


async def embed_once(
    target: CallTarget, endpoint: Endpoint, texts: Sequence[str], limits: Timeouts, retries: int
) -> Completion:
    """One attempt at embedding ``texts``: the vectors as the completion's text (JSON)."""
    answer, latency = await post_json(endpoint, "embeddings", {"input": list(texts)}, limits)
    return embedding_completion(target, texts, answer, latency, retries)


def embedding_completion(
    target: CallTarget,
    texts: Sequence[str],
    answer: Any,
    latency_s: float,
    retries: int,
    *,
    batch: tuple[str, float | None] | None = None,
) -> Completion:
    """The completion of an embeddings answer (the live call's, or a batch line's body): one
    vector per text, as JSON, priced by the provider's token count. ``batch``: as
    :func:`reply_completion`'s."""
    data = answer.get("data") if isinstance(answer, dict) else None
    vectors = [vector(item) for item in data or ()]
    if len(vectors) != len(texts):
        raise ValueError(f"{len(vectors)} embeddings for {len(texts)} texts")
    usage = answer.get("usage")
    counted = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    used = (counted, 0 if counted is not None else None)
    cost = prices.cost_usd(target, *used, batched=batch is not None)
    completion = whole_answer(target, json.dumps(vectors), used, latency_s, retries, cost)
    if batch is None:
        return completion
    return dataclasses.replace(completion, batched=True, batch_id=batch[0], batch_wait_s=batch[1])


def vector(item: Any) -> list[float]:
    """One embedding of an embeddings answer (a dict, or litellm's object of that shape)."""
    values = item.get("embedding") if isinstance(item, dict) else getattr(item, "embedding", None)
    if not isinstance(values, list):
        raise ValueError("an embedding without a vector")
    return [float(value) for value in values]
