"""Which client calls a model: the lean OpenAI-compatible one, or litellm.

litellm is the path for every provider that does not speak OpenAI's protocol and the fallback
for any model; endpoints that speak it go through :mod:`.openai_compatible`, which needs no
``import litellm`` (seconds and 160 MB per process). The decision is made from the target
alone, the same in every process, and the session header shows it (:func:`describe`).

The key an OpenAI-protocol endpoint is sent is decided here too, for both clients
(:func:`api_key`, :func:`missing_key`): the profile's, else the provider's variable, else the
provider's stand-in (vLLM, LM Studio); with none, an endpoint on this machine or a private
network (:func:`is_local`: a local vLLM, Ollama or llama.cpp server, which checks no key) is
sent the stand-in ``fake-api-key``, as litellm sends vLLM's, and any other endpoint, OpenAI's
own above all, is never called: the key is missing.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from . import prices
from .completion import CallTarget
from .errors import missing_key_error
from .reasoning_params import note


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
#: The key a local endpoint is sent when none is set: litellm's own stand-in for servers that
#: check none (OpenAI's SDK, inside litellm, refuses to send a request without a key).
KEYLESS = "fake-api-key"
#: Host names of this machine or a private network: RFC 6761's ``localhost``, mDNS's ``local``,
#: the private-use ``internal`` (``host.docker.internal``), RFC 8375's ``home.arpa``, ``lan``.
_LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".home.arpa", ".lan")


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
    provider = split_model(target.model_id)[0]
    if provider not in _OPENAI_PROTOCOL:
        return Route("litellm", f"{provider or 'an unknown'} provider")
    if provider is None or _base_url(target, provider) is None:
        return Route("litellm", f"{provider} without an endpoint (api_base)")
    return Route("lean", "OpenAI-compatible")


def endpoint(target: CallTarget) -> Endpoint:
    """The lean client's endpoint for ``target`` (which :func:`route` sent to it, and
    :func:`check_key` passed: its key is None for a remote endpoint without one)."""
    provider, model = split_model(target.model_id)
    base = _base_url(target, provider or "")
    if base is None:
        raise ValueError(f"{target.model_id} has no OpenAI-compatible endpoint")
    return Endpoint(base.rstrip("/"), model, api_key(target))


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


def speaks_openai(target: CallTarget) -> bool:
    """Whether ``target``'s provider speaks OpenAI's protocol (whichever client calls it)."""
    return split_model(target.model_id)[0] in _OPENAI_PROTOCOL


def api_key(target: CallTarget) -> str | None:
    """The key an OpenAI-protocol ``target`` is sent, by either client: the profile's, the
    provider's variable, its stand-in, or :data:`KEYLESS` for a local endpoint; else None."""
    provider = split_model(target.model_id)[0] or ""
    key = target.api_key or _env_key(provider)
    if key or provider not in _OPENAI_PROTOCOL:
        return key
    base = _base_url(target, provider)
    return KEYLESS if base is not None and is_local(base) else None


def litellm_key(target: CallTarget) -> str | None:
    """The key litellm is given for ``target``: an OpenAI-protocol endpoint gets the key the
    lean client sends (the stand-in for a local one without a key: litellm's OpenAI SDK builds
    no client without one); another provider its profile's key, or None for litellm's own."""
    return api_key(target) if speaks_openai(target) else target.api_key


def missing_key(target: CallTarget) -> list[str]:
    """Key variables an OpenAI-protocol ``target`` lacks: its provider's, when it has no key
    and its endpoint is not local (OpenAI's own API, a remote server or proxy); else none.

    A provider of another protocol, or one without an endpoint (litellm then says what is
    wrong), lacks none here.
    """
    provider = split_model(target.model_id)[0] or ""
    if provider not in _OPENAI_PROTOCOL or _base_url(target, provider) is None:
        return []
    return [] if api_key(target) else list(_OPENAI_PROTOCOL[provider].keys)


def check_key(target: CallTarget) -> None:
    """Raise the ``missing_key`` error of a target :func:`missing_key` finds lacking, before
    either client sends anything: a remote host is never called without a key."""
    missing = missing_key(target)
    if not missing:
        return
    host = _host(_base_url(target, split_model(target.model_id)[0] or "") or "")
    # OpenAI's own API, however it is spelled, is where the model is expected: not named.
    shown = None if host == _host(OPENAI_BASE) else host
    raise missing_key_error(target.name, target.model_id, missing, shown)


def is_local(base_url: str) -> bool:
    """Whether ``base_url``'s host is this machine or a private network: a loopback, private
    or link-local address, ``localhost``, a name without a dot (a LAN or Docker Compose
    service: ``http://ollama:11434``) or one under :data:`_LOCAL_SUFFIXES`."""
    host = _host(base_url)
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if "." not in host:
            # a dotless number (134744072, 0x08080808) is an IPv4 address to the resolver
            numeric = _legacy_ipv4(host)
            return numeric is None or _local_address(numeric)
        return host == "localhost" or host.endswith(_LOCAL_SUFFIXES)
    return _local_address(address)


def _local_address(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return address.is_loopback or address.is_private or address.is_link_local


def _legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The address a host written as one number (decimal, hex or octal) stands for, or None
    for a name."""
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def _host(base_url: str) -> str:
    """The host of a URL, lower case, without brackets or a trailing dot."""
    try:
        host = urllib.parse.urlsplit(base_url.strip()).hostname
    except ValueError:  # a malformed address (an unclosed IPv6 bracket)
        return ""
    return (host or "").rstrip(".")


def describe(targets: Sequence[CallTarget]) -> str:
    """What the session header says of ``targets``' clients: ``fake lean, claude litellm
    (anthropic provider)``; an OpenAI reasoning model's parameters that either client adapts
    are said too (``o3 lean (reasoning model: max_tokens sent as ...)``)."""
    shown = []
    for target in targets:
        chosen = route(target)
        said = [] if chosen.client == "lean" else [chosen.why]
        said += [adapting] if (adapting := note(target.model_id)) else []
        why = f" ({'; '.join(said)})" if said else ""
        shown.append(f"{target.name} {chosen.client}{why}")
    return ", ".join(shown)


def shown_host(url: str) -> str:
    """``host[:port]`` of ``url`` as messages and headers show it: never the user and
    password a URL may carry (``https://user:secret@proxy/v1``)."""
    parts = urllib.parse.urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    host = parts.hostname or ""
    return f"{host}:{port}" if port else host


def without_userinfo(url: str) -> str:
    """``url`` without the user and password it may carry, as files may keep it."""
    parts = urllib.parse.urlsplit(url.strip())
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=shown_host(url)))
