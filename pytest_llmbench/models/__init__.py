"""Models: who can be called, and how (the first stage; it imports no other).

:mod:`.profiles` holds the profile values (a litellm model string with its endpoint, parameters,
prices, limits and tags) and the registry that ``--models`` selects from; :mod:`.profile_files`
reads YAML profile files, 360-eval's JSONL files (:mod:`.eval360`) and the shipped
``builtin.yaml``. :mod:`.providers` talks to models: the values of a call
(:mod:`.providers.completion`: target, completion, usage), the item errors by the part that
failed (:mod:`.item_errors`: provider, sandbox, tool, judge, simulated user, solver), the calls the
engine makes (:mod:`.providers.calls`), routed (:mod:`.providers.routes`) to the lean
OpenAI-compatible client (:mod:`.providers.openai_compatible`) or to litellm (the only
``import litellm``: :mod:`.providers.litellm_client`), with one retry and error implementation
(:mod:`.providers.transport_retry`, :mod:`.providers.errors`), prices and token counts read as data
(:mod:`.providers.prices`, :mod:`.providers.tokens`), a reply's thinking told apart from its
answer (:mod:`.providers.reasoning`, :mod:`.providers.thinking`), the embedded default model served
on 127.0.0.1 (:mod:`.providers.embedded`), and which batch API answers a model's calls under
``--batch`` (:mod:`.providers.batch_routes`: OpenAI's through :mod:`.providers.batch_openai`).

This is the stage's face: the names below are what other stages and the pytest shell import from
it (tests/test_layout.py checks that they import nothing else of it). Each is imported from its
module when first asked for, so that importing the stage loads nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import face_attribute

if TYPE_CHECKING:
    from .item_errors import (
        BatchError,
        EnvError,
        ItemError,
        JudgeError,
        ProviderError,
        SandboxError,
        SolverError,
        ToolError,
        UserSimError,
    )
    from .profile_files import load_profiles
    from .profiles import (
        PROFILE_SUFFIXES,
        ModelProfile,
        ProfileError,
        ProfileRegistry,
        api_key_missing,
    )
    from .providers.batch_backend import BatchBackend, BatchLine, BatchState
    from .providers.batch_routes import batch_route, describe_batch
    from .providers.calls import acomplete, aembed
    from .providers.completion import (
        CallTarget,
        Completion,
        Usage,
        add_known,
        batch_fields,
        total_usage,
    )
    from .providers.effort import EFFORT_LEVELS, EffortError, effort_params, parse_effort
    from .providers.embedded import EmbeddedServer
    from .providers.errors import missing_key_error
    from .providers.litellm_client import missing_api_keys, warmed_up
    from .providers.loglikelihood import aloglikelihood
    from .providers.prices import batch_price_estimated, cost_usd, rates, supports_vision
    from .providers.routes import (
        LEAN_PROVIDERS,
        check_key,
        describe,
        route,
        speaks_openai,
        without_userinfo,
    )
    from .providers.thinking import (
        ThinkingRule,
        merged_rule,
        read_reply,
        split,
        unfinished_thinking,
    )
    from .providers.tokens import prompt_tokens, use_bundled_tokenizers
    from .providers.trace_header import OUTGOING_TRACEPARENT

#: Each name of the face, by the module of the stage that defines it.
_FACE: dict[str, str] = {
    "load_profiles": "profile_files",
    "ModelProfile": "profiles",
    "PROFILE_SUFFIXES": "profiles",
    "ProfileError": "profiles",
    "ProfileRegistry": "profiles",
    "api_key_missing": "profiles",
    "batch_route": "providers.batch_routes",
    "describe_batch": "providers.batch_routes",
    "acomplete": "providers.calls",
    "aembed": "providers.calls",
    "CallTarget": "providers.completion",
    "Completion": "providers.completion",
    "Usage": "providers.completion",
    "add_known": "providers.completion",
    "batch_fields": "providers.completion",
    "total_usage": "providers.completion",
    "BatchError": "item_errors",
    "BatchBackend": "providers.batch_backend",
    "BatchLine": "providers.batch_backend",
    "BatchState": "providers.batch_backend",
    "ItemError": "item_errors",
    "JudgeError": "item_errors",
    "ProviderError": "item_errors",
    "SandboxError": "item_errors",
    "SolverError": "item_errors",
    "ToolError": "item_errors",
    "UserSimError": "item_errors",
    "EnvError": "item_errors",
    "EFFORT_LEVELS": "providers.effort",
    "EffortError": "providers.effort",
    "effort_params": "providers.effort",
    "parse_effort": "providers.effort",
    "EmbeddedServer": "providers.embedded",
    "missing_key_error": "providers.errors",
    "missing_api_keys": "providers.litellm_client",
    "warmed_up": "providers.litellm_client",
    "aloglikelihood": "providers.loglikelihood",
    "batch_price_estimated": "providers.prices",
    "cost_usd": "providers.prices",
    "rates": "providers.prices",
    "supports_vision": "providers.prices",
    "unfinished_thinking": "providers.thinking",
    "ThinkingRule": "providers.thinking",
    "merged_rule": "providers.thinking",
    "read_reply": "providers.thinking",
    "split": "providers.thinking",
    "LEAN_PROVIDERS": "providers.routes",
    "check_key": "providers.routes",
    "speaks_openai": "providers.routes",
    "describe": "providers.routes",
    "without_userinfo": "providers.routes",
    "route": "providers.routes",
    "prompt_tokens": "providers.tokens",
    "use_bundled_tokenizers": "providers.tokens",
    "OUTGOING_TRACEPARENT": "providers.trace_header",
}

__all__ = [
    "EFFORT_LEVELS",
    "LEAN_PROVIDERS",
    "OUTGOING_TRACEPARENT",
    "PROFILE_SUFFIXES",
    "BatchBackend",
    "BatchError",
    "BatchLine",
    "BatchState",
    "CallTarget",
    "Completion",
    "EffortError",
    "EmbeddedServer",
    "EnvError",
    "ItemError",
    "JudgeError",
    "ModelProfile",
    "ProfileError",
    "ProfileRegistry",
    "ProviderError",
    "SandboxError",
    "SolverError",
    "ThinkingRule",
    "ToolError",
    "Usage",
    "UserSimError",
    "acomplete",
    "add_known",
    "aembed",
    "aloglikelihood",
    "api_key_missing",
    "batch_fields",
    "batch_price_estimated",
    "batch_route",
    "check_key",
    "cost_usd",
    "describe",
    "describe_batch",
    "effort_params",
    "load_profiles",
    "merged_rule",
    "missing_api_keys",
    "missing_key_error",
    "parse_effort",
    "prompt_tokens",
    "rates",
    "read_reply",
    "route",
    "speaks_openai",
    "split",
    "supports_vision",
    "total_usage",
    "unfinished_thinking",
    "use_bundled_tokenizers",
    "warmed_up",
    "without_userinfo",
]


def __getattr__(name: str) -> Any:
    """A name of the face, imported from its module on first use."""
    return face_attribute(globals(), _FACE, name)
