"""Which batch API answers a model's calls under ``--batch``, or why they stay live.

:func:`batch_route` gives a :class:`~.batch_backend.BatchBackend` (one per endpoint and key,
shared by every model there) or the reason its calls stay live, which the session header shows
(:func:`describe_batch`):

- OpenAI-protocol targets on the lean client: OpenAI's Batch API (:mod:`.batch_openai`), unless
  their profile sends ``extra_headers`` (a batch line carries no headers of its own) or their
  endpoint is local (vLLM, llama.cpp, LM Studio, the embedded model: no ``/batches``), which a
  profile's ``batch: true`` overrides for a local server that has the API;
- ``anthropic`` models: Anthropic's Message Batches (:mod:`.batch_anthropic`);
- every other provider, and any model whose profile says ``batch: false``: live.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import routes
from .completion import CallTarget

if TYPE_CHECKING:
    from .batch_backend import BatchBackend

#: The kinds of call a batch may hold (one kind per batch).
KINDS = ("chat", "embed")
#: Why another provider's calls stay live (its batch API is not reached through litellm here).
_OTHER: dict[str, str] = {
    "gemini": "gemini has no batch API through litellm",
    "azure": "azure batches need a Global-Batch deployment: not supported yet",
    "vertex_ai": "vertex_ai batches need a GCS bucket: not supported yet",
    "bedrock": "bedrock batches need an S3 bucket and an IAM role: not supported yet",
}
#: One backend per endpoint and key: (provider, base URL, key) -> backend.
_backends: dict[tuple[str, str | None, str | None], BatchBackend] = {}


def batch_route(
    target: CallTarget, kind: str = "chat", params: Mapping[str, Any] | None = None
) -> BatchBackend | str:
    """The batch API that answers ``target``'s calls of ``kind`` (``chat``, ``embed``), or
    the reason they stay live: ``<name>: live (<cause>)``. ``params``: one call's own
    parameters, when they may hold what no batch line carries (``extra_headers``)."""
    name = target.name
    if params and params.get("extra_headers") and routes.speaks_openai(target):
        return f"{name}: live (its call sends extra_headers, which a batch line cannot carry)"
    if target.batch is False:
        return f"{name}: live (its profile says batch: false)"
    if kind not in KINDS:
        return f"{name}: live (its {kind} calls have no batch endpoint)"
    if target.embedded:
        return f"{name}: live (the embedded model's server has no batch API)"
    provider = routes.split_model(target.model_id)[0]
    if provider == "anthropic":
        return _anthropic(target, kind, params)
    chosen = routes.route(target)
    if chosen.client != "lean":
        if routes.speaks_openai(target):
            return f"{name}: live (its calls go through litellm ({chosen.why}), not batched)"
        cause = _OTHER.get(provider or "", f"{provider or 'its provider'} has no batch API here")
        return f"{name}: live ({cause})"
    if target.params.get("extra_headers"):
        return f"{name}: live (its profile sends extra_headers, which a batch line cannot carry)"
    missing = routes.missing_key(target)
    if missing:
        return f"{name}: live ({' or '.join(missing)} is not set)"
    at = routes.endpoint(target)
    if routes.is_local(at.base_url) and target.batch is not True:
        host = routes.shown_host(at.base_url)
        return (
            f"{name}: live ({provider} at {host} is a local endpoint, which has no /batches "
            "API; a profile's batch: true sends its calls there)"
        )
    key = ("openai", at.base_url, at.api_key)
    backend = _backends.get(key)
    if backend is None:
        from .batch_openai import OpenAIBatches

        backend = _backends[key] = OpenAIBatches(at)
    return backend


def _anthropic(
    target: CallTarget, kind: str, params: Mapping[str, Any] | None
) -> BatchBackend | str:
    """Anthropic's Message Batches, or why a call stays live: a batch request carries one set
    of headers (``anthropic-beta`` values alone are merged onto it), and litellm settings in
    a profile are for litellm's live call."""
    name = target.name
    if kind != "chat":
        return f"{name}: live (anthropic batches answer chat calls only, not {kind})"
    if target.extra:
        return f"{name}: live (its profile passes litellm settings, which a batch cannot carry)"
    for where, given in (("profile", target.params), ("call", params or {})):
        if _other_headers(given.get("extra_headers")):
            return (
                f"{name}: live (its {where} sends extra_headers other than anthropic-beta, "
                "which a batch line cannot carry)"
            )
    from .batch_anthropic import AnthropicBatches

    key = ("anthropic", target.api_base, target.api_key)
    backend = _backends.get(key)
    if backend is None:
        backend = _backends[key] = AnthropicBatches(target)
    return backend


def _other_headers(headers: Any) -> bool:
    """Whether ``headers`` (a call's ``extra_headers``) hold any but ``anthropic-beta``."""
    if not isinstance(headers, Mapping):
        return bool(headers)
    return any(str(name).lower() != "anthropic-beta" for name in headers)


def describe_batch(
    targets: Sequence[CallTarget],
    route: Callable[[CallTarget], BatchBackend | str] = batch_route,
) -> list[str]:
    """The session header's lines under ``--batch``: one per model, batched through which
    API (and where), or live and why (as ``route`` routes a model's chat calls)."""
    lines = []
    for target in targets:
        chosen = route(target)
        if isinstance(chosen, str):
            lines.append(chosen)
            continue
        where = getattr(chosen, "endpoint", None)
        base = getattr(where, "base_url", None) or getattr(chosen, "base", None)
        base = base if isinstance(base, str) else target.api_base
        at = f" at {routes.shown_host(base)}" if base else ""
        lines.append(f"{target.name}: batched ({chosen.name} batch API{at})")
    return lines


def forget_backends() -> None:
    """Drop the backends made so far (a test's endpoints come and go)."""
    _backends.clear()
