"""The calls the engine makes: each routed to its client, retried and bounded the same way.

:func:`acomplete` and :func:`aembed` send a target's calls through the lean OpenAI-compatible
client or litellm (:func:`.routes.route`); both clients' attempts run inside one retry loop
(:func:`.transport_retry.retried`), so backoff, Retry-After, timeouts, error kinds and redaction
do not depend on the path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from . import routes
from .completion import CallTarget, Completion
from .transport_retry import (
    DEFAULT_CONNECT_TIMEOUT_S,
    BeforeRetry,
    OnRetry,
    Retrying,
    Timeouts,
    retried,
)

#: One attempt at a call through the lean client: (target, its endpoint, limits, retries so far).
LeanAttempt = Callable[[CallTarget, "routes.Endpoint", Timeouts, int], Awaitable[Completion]]
#: One attempt at a call through litellm: (litellm, target, limits, retries so far).
LitellmAttempt = Callable[[Any, CallTarget, Timeouts, int], Awaitable[Completion]]


async def acomplete(
    target: CallTarget,
    messages: Sequence[dict[str, Any]],
    params: dict[str, Any],
    *,
    stream: bool = True,
    timeout_s: float = 120.0,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    max_retries: int = 2,
    on_retry: OnRetry | None = None,
    before_retry: BeforeRetry | None = None,
) -> Completion:
    """Call ``target`` once, retrying transient failures; raise :class:`ProviderError` at the end.

    ``timeout_s`` bounds each attempt as a whole, stream included; ``connect_timeout_s`` the
    opening of its connection. ``on_retry(status)`` is told of every retry (429 lets a caller
    lower its concurrency); ``before_retry()`` is awaited before each new attempt (a rate
    limiter's turn) and returns the seconds it waited.
    """
    from . import litellm_client, openai_compatible

    async def lean(where: CallTarget, at: routes.Endpoint, limits: Timeouts, n: int) -> Completion:
        return await openai_compatible.chat_once(where, at, messages, params, stream, limits, n)

    async def other(litellm: Any, where: CallTarget, limits: Timeouts, n: int) -> Completion:
        return await litellm_client.chat_once(litellm, where, messages, params, stream, limits, n)

    policy = Retrying(Timeouts(timeout_s, connect_timeout_s), max_retries, on_retry, before_retry)
    return await call(target, policy, lean, other)


async def aembed(
    target: CallTarget,
    texts: Sequence[str],
    *,
    timeout_s: float = 120.0,
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
    max_retries: int = 2,
    on_retry: OnRetry | None = None,
    before_retry: BeforeRetry | None = None,
) -> Completion:
    """Embed ``texts`` with ``target``, retrying as :func:`acomplete` does.

    The vectors come back as the completion's text, a JSON list of lists, so that embedding
    calls are paced, budgeted and cached like any other call.
    """
    from . import litellm_client, openai_compatible

    async def lean(where: CallTarget, at: routes.Endpoint, limits: Timeouts, n: int) -> Completion:
        return await openai_compatible.embed_once(where, at, texts, limits, n)

    async def other(litellm: Any, where: CallTarget, limits: Timeouts, n: int) -> Completion:
        return await litellm_client.embed_once(litellm, where, texts, limits, n)

    policy = Retrying(Timeouts(timeout_s, connect_timeout_s), max_retries, on_retry, before_retry)
    return await call(target, policy, lean, other)


async def call(
    target: CallTarget, policy: Retrying, lean: LeanAttempt, other: LitellmAttempt
) -> Completion:
    """``lean`` or ``other`` (litellm's), whichever client ``target`` is routed to, retried by
    ``policy``.

    An OpenAI-protocol target without a key on a remote endpoint is refused first, whichever
    the client and whatever the call (chat, embedding, log-likelihood): no request goes out.
    """
    routes.check_key(target)
    if routes.route(target).client == "lean":
        from .openai_compatible import ready

        ready()
        at = routes.endpoint(target)
        # The key the endpoint sends (a profile's or the environment's) is redacted from errors.
        where = dataclasses.replace(target, api_key=at.api_key)

        async def attempt(retries: int) -> Completion:
            return await lean(where, at, policy.limits, retries)

        return await retried(attempt, where, policy)
    from .litellm_client import warmed_up

    litellm = warmed_up()
    # The key litellm is given is redacted from errors as the lean client's is (litellm reads
    # another provider's own variable itself: the run's redactor hides that one).
    where = dataclasses.replace(target, api_key=routes.litellm_key(target))

    async def through_litellm(retries: int) -> Completion:
        return await other(litellm, where, policy.limits, retries)

    return await retried(through_litellm, where, policy)
