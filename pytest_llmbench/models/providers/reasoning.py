"""What a reasoning model says besides its answer, read the same way by both clients.

A server that separates a model's thinking from its answer puts it in the assistant message
(and in streamed deltas) as ``reasoning_content`` (DeepSeek's API, vLLM's reasoning parsers,
llama.cpp's server, litellm's unified field) or ``reasoning`` (newer vLLM, Ollama, OpenRouter).
Usage counts the thinking's tokens among the completion tokens and says how many in
``completion_tokens_details.reasoning_tokens``; a prompt read from the provider's cache is
``prompt_tokens_details.cached_tokens`` (OpenAI, and litellm for every provider; Anthropic's
``cache_read_input_tokens`` where litellm passes Anthropic's usage through).

A model whose server does not separate them writes its thinking inline, first, between tags
(``<think>...</think>``). litellm moves such a leading block out of a whole answer's content into
``reasoning_content`` (not out of a stream's); :func:`split_leading_thinking` does the same for
every answer of both clients, so that a call gives the same completion whichever client made it,
streamed or not. Other tags, a lone closing tag and thinking left unfinished are the item's to
read (they depend on the model and its settings: :mod:`.thinking`), not the client's.

Both the lean client's JSON (dicts) and litellm's response objects (attributes) are read here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "REASONING_FIELDS",
    "cache_write_tokens",
    "reasoning_of",
    "split_leading_thinking",
    "usage_details",
]

#: A leading thinking block, as litellm reads one (its ``parse_content_for_reasoning``).
_LEADING_THINKING = re.compile(
    r"<(?:think|thinking|budget:thinking)>(.*?)</(?:think|thinking|budget:thinking)>(.*)", re.DOTALL
)

#: The message (and delta) fields that carry a model's thinking, in the order they are read.
REASONING_FIELDS = ("reasoning_content", "reasoning")


def _get(value: Any, key: str) -> Any:
    """``value[key]`` of a dict, or ``value.key`` of an object; None when absent."""
    if isinstance(value, Mapping):
        return value.get(key)
    return getattr(value, key, None)


def reasoning_of(message: Any) -> str:
    """The thinking text of an assistant message or a streamed delta ("" when it has none)."""
    for key in REASONING_FIELDS:
        text = _get(message, key)
        if isinstance(text, str) and text:
            return text
    return ""


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_details(usage: Any) -> tuple[int | None, int | None]:
    """(reasoning tokens, cached input tokens) of a call's usage; None where not reported.

    Zero reasoning tokens read as None, not reported: litellm assembles a streamed answer's usage
    with ``reasoning_tokens: 0`` whatever the provider said, and both clients must agree (a
    model that did not think has no reasoning tokens either way)."""
    if usage is None:
        return None, None
    reasoning = _count(_get(_get(usage, "completion_tokens_details"), "reasoning_tokens")) or None
    cached = _count(_get(_get(usage, "prompt_tokens_details"), "cached_tokens"))
    if cached is None:
        cached = _count(_get(usage, "cache_read_input_tokens"))
    return reasoning, cached


def cache_write_tokens(usage: Any) -> int | None:
    """Input tokens a call wrote to the provider's prompt cache (Anthropic's cache writes:
    ``prompt_tokens_details.cache_write_tokens`` as OpenAI and litellm name them,
    ``cache_creation_tokens``, or Anthropic's own ``cache_creation_input_tokens``); None when
    not reported. No write reads as none (litellm fills a zero where the provider said
    nothing)."""
    if usage is None:
        return None
    details = _get(usage, "prompt_tokens_details")
    for found in (
        _get(details, "cache_write_tokens"),
        _get(details, "cache_creation_tokens"),
        _get(usage, "cache_creation_input_tokens"),
    ):
        count = _count(found)
        if count:
            return count
    return None


def split_leading_thinking(text: str, reasoning: str) -> tuple[str, str]:
    """(answer, thinking) of a reply: a thinking block that opens the text moves out of it when
    the server gave no thinking apart (``reasoning``); else both as they are."""
    if reasoning or not text:
        return text, reasoning
    found = _LEADING_THINKING.match(text)
    return (found[2], found[1]) if found else (text, reasoning)
