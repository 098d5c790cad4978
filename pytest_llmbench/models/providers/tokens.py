"""Tokens of a call: the provider's own counts, else a local estimate as litellm makes it.

Most servers report usage (on streams when asked with ``stream_options.include_usage``);
llama.cpp's server does not on streams. Then the lean client counts locally the way litellm's
``token_counter`` does for an OpenAI-protocol model (tiktoken's ``cl100k_base``, or an OpenAI
model's own encoding; 3 tokens per message, 1 per name, 3 to prime the reply; text in 1,024-
character pieces), from litellm's bundled tokenizer files, so that both clients give the same
counts, flagged as estimated. An image counts 85 tokens, as litellm counts one of ``auto`` or
``low`` detail; documents and audio are not counted.

The parts of a call's tokens priced apart (:func:`details`: reasoning, cached and cache-written
tokens) are read here for both clients too; a reply that thought without a reported count of
its reasoning tokens has them counted from its thinking's text, marked estimated.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import prices
from .completion import TokenDetails
from .reasoning import cache_write_tokens, usage_details

#: litellm counts text in pieces of this many characters (``TIKTOKEN_ENCODE_CHUNK_SIZE_CHARS``).
_PIECE_CHARS = 1024
_PER_MESSAGE = 3
_PER_NAME = 1
_REPLY_PRIMING = 3
#: What litellm counts for an image sent with ``auto`` or ``low`` detail.
_IMAGE_TOKENS = 85


@dataclass(frozen=True)
class Used:
    """A call's tokens, and whether they were counted here rather than by the provider."""

    input_tokens: int | None
    output_tokens: int | None
    estimated: bool


def used(
    model_id: str,
    messages: Sequence[Mapping[str, Any]],
    text: str,
    usage: Mapping[str, Any] | None,
) -> Used:
    """The provider's counts from ``usage`` when it gave both, else the local estimate."""
    prompt = usage.get("prompt_tokens") if usage else None
    completion = usage.get("completion_tokens") if usage else None
    if isinstance(prompt, int) and isinstance(completion, int) and reported(prompt, completion):
        return Used(prompt, completion, False)
    count = _counter(model_id)
    if count is None:
        return Used(None, None, True)
    return Used(count_messages(count, messages), count(text) if text else 0, True)


def details(model_id: str, usage: Any, reasoning: str, output_tokens: int | None) -> TokenDetails:
    """The parts of a call's tokens priced and shown apart, read from ``usage`` (a dict or
    litellm's object) the same way for both clients.

    When the provider reported no reasoning tokens for a reply that thought (``reasoning``, its
    thinking's text, is not empty), they are counted here from that text, at most the call's
    ``output_tokens``, and marked estimated."""
    thought, cached = usage_details(usage)
    written = cache_write_tokens(usage)
    estimated = False
    if thought is None and reasoning:
        thought = counted_reasoning(model_id, reasoning, output_tokens)
        estimated = thought is not None
    return TokenDetails(thought, cached, written, estimated)


def counted_reasoning(model_id: str, reasoning: str, output_tokens: int | None) -> int | None:
    """The tokens of a reply's thinking, counted from its text (at most the call's
    ``output_tokens``); None when no tokenizer counts for the model."""
    count = _counter(model_id)
    if count is None:
        return None
    thought = count(reasoning)
    return thought if output_tokens is None else min(thought, output_tokens)


def reported(prompt_tokens: Any, completion_tokens: Any) -> bool:
    """Whether a provider's usage is real: both counts given, and a prompt of some tokens
    (litellm fills a whole answer's missing usage with zeros)."""
    counts = (prompt_tokens, completion_tokens)
    given = all(isinstance(n, int) and not isinstance(n, bool) for n in counts)
    return given and prompt_tokens > 0


def count_messages(count: Callable[[str], int], messages: Sequence[Mapping[str, Any]]) -> int:
    """Prompt tokens of ``messages`` as litellm counts them."""
    total = _REPLY_PRIMING
    for message in messages:
        total += _PER_MESSAGE
        for key, value in message.items():
            if key == "tool_calls" and isinstance(value, list):
                total += sum(count(str(_arguments(call))) for call in value)
            elif isinstance(value, str):
                total += count(value) + (_PER_NAME if key == "name" else 0)
            elif key == "content" and isinstance(value, list):
                total += sum(_part_tokens(count, part) for part in value)
    return total


def _part_tokens(count: Callable[[str], int], part: Any) -> int:
    """A content part's tokens: its text, or litellm's flat 85 for an image (its ``auto`` and
    ``low`` detail; ``high`` detail is counted so too, where litellm measures the image)."""
    if isinstance(part, str):
        return count(part)
    if not isinstance(part, Mapping):
        return 0
    if part.get("type") == "text":
        return count(str(part.get("text", "")))
    return _IMAGE_TOKENS if part.get("type") == "image_url" else 0


def prompt_tokens(model_id: str, messages: Sequence[Mapping[str, Any]]) -> int | None:
    """Estimated prompt tokens of ``messages`` (None when no tokenizer can be loaded)."""
    count = _counter(model_id)
    return None if count is None else count_messages(count, messages)


def _arguments(call: Any) -> Any:
    function = call.get("function") if isinstance(call, Mapping) else None
    return function.get("arguments", "") if isinstance(function, Mapping) else ""


def encoding_name(model_id: str) -> str:
    """The tiktoken encoding litellm picks: for an OpenAI chat model named bare (``gpt-4o``,
    ``o3``), its own (``o200k_base`` for the gpt-4o family); else ``cl100k_base``."""
    # litellm counts any other model as gpt-3.5-turbo; a prefixed id is never a bare OpenAI
    # name, and needs no read of the price map (tens of ms, on the engine's thread).
    if "/" in model_id or prices.provider_of(model_id) != "openai":
        return "cl100k_base"
    if "gpt-4o" in model_id:
        return "o200k_base"
    try:
        import tiktoken

        return str(tiktoken.encoding_name_for_model(model_id))
    except (ImportError, KeyError):
        return "cl100k_base"


def _counter(model_id: str) -> Callable[[str], int] | None:
    encoding = _encoding(encoding_name(model_id))
    if encoding is None:
        return None

    def count(text: str) -> int:
        pieces = range(0, len(text), _PIECE_CHARS)
        return sum(
            len(encoding.encode(text[at : at + _PIECE_CHARS], disallowed_special=()))
            for at in pieces
        )

    return count


@functools.lru_cache(maxsize=4)
def _encoding(name: str) -> Any:
    """A tiktoken encoding from litellm's bundled files (offline), or None."""
    try:
        import tiktoken
    except ImportError:
        return None
    if threading.current_thread() is threading.main_thread():
        use_bundled_tokenizers()
    try:
        return tiktoken.get_encoding(name)
    except Exception:  # no bundled file and no network: no estimate
        return None


def use_bundled_tokenizers() -> None:
    """Point tiktoken at litellm's bundled encodings, as litellm does at import
    (``CUSTOM_TIKTOKEN_CACHE_DIR`` wins; a ``TIKTOKEN_CACHE_DIR`` already set is kept).

    Called on the main thread (the runtime's start): the environment is not safe to change
    while another thread reads it."""
    bundled = _bundled_dir()
    if bundled is not None and "TIKTOKEN_CACHE_DIR" not in os.environ:
        os.environ["TIKTOKEN_CACHE_DIR"] = os.environ.get("CUSTOM_TIKTOKEN_CACHE_DIR") or bundled


def _bundled_dir() -> str | None:
    spec = importlib.util.find_spec("litellm")
    for folder in spec.submodule_search_locations or [] if spec else []:
        path = Path(folder) / "litellm_core_utils" / "tokenizers"
        if path.is_dir():
            return str(path)
    return None
