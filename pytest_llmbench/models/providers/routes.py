"""Which client calls a model: the lean OpenAI-compatible one, or litellm.

litellm is the path for every provider that does not speak OpenAI's protocol and the fallback
for any model; endpoints that speak it go through :mod:`.openai_compatible`, which needs no
``import litellm`` (seconds and 160 MB per process). The decision is made from the target
alone, the same in every process, and the session header shows it (:func:`describe`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from . import prices
from .completion import CallTarget


@dataclass(frozen=True)
class _Protocol:
    """Where litellm finds a provider's key and endpoint: variables in order, and defaults."""

    keys: tuple[str, ...]
    bases: tuple[str, ...]
    default_key: str | None = None


#: litellm providers whose endpoint speaks OpenAI's protocol (vLLM's and LM Studio's servers
#: take any key: litellm sends ``fake-api-key`` when none is set).
_OPENAI_PROTOCOL: Mapping[str, _Protocol] = {
    "openai": _Protocol(("OPENAI_API_KEY",), ("OPENAI_BASE_URL", "OPENAI_API_BASE")),
    "custom_openai": _Protocol(("OPENAI_API_KEY",), ()),
    "hosted_vllm": _Protocol(("HOSTED_VLLM_API_KEY",), ("HOSTED_VLLM_API_BASE",), "fake-api-key"),
    "lm_studio": _Protocol(("LM_STUDIO_API_KEY",), ("LM_STUDIO_API_BASE",), "fake-api-key"),
}
#: The providers whose models the lean client calls (given an endpoint).
LEAN_PROVIDERS = tuple(_OPENAI_PROTOCOL)
OPENAI_BASE = "https://api.openai.com/v1"
#: Reasoning models, whose parameters litellm adapts (``max_completion_tokens``, no
#: ``temperature``): they stay with litellm.
_REASONING = re.compile(r"(^|/)o\d|gpt-[5-9]")


@dataclass(frozen=True)
class Route:
    """How a model is called: ``client`` is ``lean`` or ``litellm``; ``why`` says why."""

    client: str
    why: str


@dataclass(frozen=True)
class Endpoint:
    """Where the lean client sends a model's calls and with which key."""

    base_url: str
    #: the model name the server knows (the litellm id without its provider prefix)
    model: str
    api_key: str | None = field(default=None, repr=False)

    @property
    def headers(self) -> dict[str, str]:
        """The request headers that carry the key (none without one)."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}


def route(target: CallTarget) -> Route:
    """The client that calls ``target``, and why."""
    if target.client == "litellm":
        return Route("litellm", "client: litellm")
    if target.extra:
        return Route("litellm", "its profile passes litellm settings")
    provider, model = split_model(target.model_id)
    if provider not in _OPENAI_PROTOCOL:
        return Route("litellm", f"{provider or 'an unknown'} provider")
    if _REASONING.search(model):
        return Route("litellm", "a reasoning model: litellm adapts its parameters")
    if provider is None or _base_url(target, provider) is None:
        return Route("litellm", f"{provider} without an endpoint (api_base)")
    return Route("lean", "OpenAI-compatible")


def endpoint(target: CallTarget) -> Endpoint:
    """The lean client's endpoint for ``target`` (which :func:`route` sent to it)."""
    provider, model = split_model(target.model_id)
    base = _base_url(target, provider or "")
    if base is None:
        raise ValueError(f"{target.model_id} has no OpenAI-compatible endpoint")
    return Endpoint(base.rstrip("/"), model, target.api_key or _env_key(provider or ""))


def split_model(model_id: str) -> tuple[str | None, str]:
    """(provider, model name) of a litellm id: ``openai/gpt-4o`` and ``gpt-4o`` are both
    OpenAI's ``gpt-4o`` (a bare name's provider comes from litellm's price map)."""
    head, sep, rest = model_id.partition("/")
    if sep and (head in _OPENAI_PROTOCOL or prices.is_provider(head)):
        return head, rest
    return prices.provider_of(model_id), model_id


def _base_url(target: CallTarget, provider: str) -> str | None:
    if target.api_base:
        return target.api_base
    if provider not in _OPENAI_PROTOCOL:
        return None
    for name in _OPENAI_PROTOCOL[provider].bases:
        if os.environ.get(name):
            return os.environ[name]
    return OPENAI_BASE if provider == "openai" else None


def _env_key(provider: str) -> str | None:
    protocol = _OPENAI_PROTOCOL.get(provider)
    if protocol is None:
        return None
    found = (os.environ[name] for name in protocol.keys if os.environ.get(name))
    return next(found, protocol.default_key)


def missing_key(target: CallTarget) -> list[str]:
    """Key variables a lean target to OpenAI's own API lacks (local endpoints need none)."""
    provider, _ = split_model(target.model_id)
    if provider is None or target.api_key:
        return []
    base = _base_url(target, provider)
    if base is None or base.rstrip("/") != OPENAI_BASE:
        return []
    return [] if _env_key(provider) else list(_OPENAI_PROTOCOL[provider].keys)


def describe(targets: Sequence[CallTarget]) -> str:
    """What the session header says of ``targets``' clients: ``fake lean, claude litellm
    (anthropic provider)``."""
    shown = []
    for target in targets:
        chosen = route(target)
        why = "" if chosen.client == "lean" else f" ({chosen.why})"
        shown.append(f"{target.name} {chosen.client}{why}")
    return ", ".join(shown)
