"""The request parameters of OpenAI's reasoning models, adapted as litellm adapts them.

OpenAI's o-series (``o1``, ``o3``, ``o4-mini``...) and gpt-5/gpt-6 models (not ``gpt-5-chat``)
take ``max_completion_tokens`` rather than ``max_tokens`` and refuse sampling parameters while
they reason: any ``temperature`` but 1, ``top_p``, ``logprobs``, ``top_logprobs``, the
penalties, and on gpt-5 ``stop`` and ``logit_bias``. gpt-5.1 and later accept temperature,
``top_p`` and log-probabilities when their reasoning effort is ``none`` (asked for, or their
default by litellm's price map). :func:`adapted` applies these rules, those of litellm 1.106's
``OpenAIOSeriesConfig`` and ``OpenAIGPT5Config`` with ``drop_params``, for both clients, so a
call is the same whichever client sends it; the price map is read as data (:mod:`.prices`), not
through litellm. ``reasoning_effort`` is sent as given (but to a gpt-5 search model, which takes
none): a level a model refuses is the provider's error, never silently another level.

Only the ``openai`` provider's models are adapted, as litellm adapts them: another server that
speaks OpenAI's protocol takes the parameters it is given.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from . import prices

#: What o-series models refuse (litellm drops them).
_O_SERIES_REFUSED = ("top_p", "logprobs", "top_logprobs", "presence_penalty", "frequency_penalty")
#: What gpt-5 models refuse, whatever their effort.
_GPT5_REFUSED = (
    "presence_penalty",
    "frequency_penalty",
    "stop",
    "logit_bias",
    "modalities",
    "prediction",
    "audio",
    "web_search_options",
)
#: What gpt-5 models take only while their effort is ``none`` (temperature aside).
_GPT5_SAMPLING = ("logprobs", "top_logprobs", "top_p")
#: The only parameters a gpt-5 search model takes among OpenAI's chat parameters.
_SEARCH_KEPT = frozenset(
    {
        "max_tokens",
        "max_completion_tokens",
        "stream",
        "stream_options",
        "web_search_options",
        "service_tier",
        "safety_identifier",
        "response_format",
        "user",
        "store",
        "verbosity",
        "max_retries",
        "extra_headers",
    }
)
#: OpenAI's chat parameters (litellm's list, with the reasoning ones): a search model drops
#: those it does not take; anything else (``extra_body``, a server's own field) is sent.
_CHAT_PARAMS = frozenset(
    {
        *_O_SERIES_REFUSED,
        *_GPT5_REFUSED,
        "temperature",
        "n",
        "seed",
        "tools",
        "tool_choice",
        "function_call",
        "functions",
        "parallel_tool_calls",
        "prompt_cache_key",
        "prompt_cache_retention",
        "reasoning_effort",
    }
    | _SEARCH_KEPT
)
_O_SERIES = re.compile(r"o\d")
_GPT_SERIES = ("gpt-5", "gpt-6")


def adapted(model_id: str, params: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """(the parameters sent, the names dropped) of a call of ``model_id`` with ``params``.

    For an OpenAI reasoning model ``max_tokens`` becomes ``max_completion_tokens`` (one given
    as such wins) and what the model refuses is dropped; any other model's parameters come
    back as given. A parameter set to None is no parameter: left out, not counted dropped.
    """
    family = family_of(model_id)
    if family is None:
        return dict(params), ()
    sent = {key: value for key, value in params.items() if value is not None}
    refused = _refused(family, _name(model_id), sent)
    dropped = tuple(key for key in sent if key in refused)
    for key in dropped:
        del sent[key]
    if "max_tokens" in sent:
        cap = sent.pop("max_tokens")
        sent.setdefault("max_completion_tokens", cap)
    effort = sent.get("reasoning_effort")
    if isinstance(effort, Mapping) and "effort" in effort:
        sent["reasoning_effort"] = effort["effort"]  # Chat Completions takes the level alone
    return sent, dropped


def family_of(model_id: str) -> str | None:
    """``o`` for an OpenAI o-series model, ``gpt`` for a gpt-5 or gpt-6 one (``gpt-5-chat``
    is not: it does not reason), None for any other model or provider.

    litellm counts an ``o<digit>`` name only when its price map lists it; any such name of
    OpenAI's counts here, so a model newer than the map is adapted too. A fine-tuned model
    (``ft:o4-mini-...:org::id``) is its base model's.
    """
    head, prefixed, rest = model_id.partition("/")
    # Another provider's model, or a bare name the price map gives to another (as routes.py
    # splits ids: ``openai/o3`` and ``o3`` are OpenAI's, ``hosted_vllm/o3`` is not).
    if (head != "openai") if prefixed else (prices.provider_of(model_id) != "openai"):
        return None
    name = _name(rest or head)
    if _O_SERIES.match(name):
        return "o"
    if any(series in name for series in _GPT_SERIES) and "gpt-5-chat" not in name:
        return "gpt"
    return None


def _name(model_id: str) -> str:
    """The model's name without its provider prefix or a fine-tune's ``ft:``."""
    return model_id.rpartition("/")[2].removeprefix("ft:")


def _refused(family: str, name: str, sent: Mapping[str, Any]) -> set[str]:
    """The parameters ``name`` of ``family`` refuses, given the others sent with them."""
    if family == "o":
        refused = set(_O_SERIES_REFUSED)
        if _flag(name, "supports_parallel_function_calling") is not True:
            refused.add("parallel_tool_calls")
        temperature_taken = False
    elif _is_search(name):
        refused = {key for key in sent if key in _CHAT_PARAMS and key not in _SEARCH_KEPT}
        temperature_taken = False
    else:
        refused = set(_GPT5_REFUSED)
        temperature_taken = _flag(name, "supports_none_reasoning_effort") is True and (
            _effort_is_none(name, sent.get("reasoning_effort"))
        )
        if not temperature_taken:
            refused.update(_GPT5_SAMPLING)
    if not temperature_taken and sent.get("temperature", 1) != 1:
        refused.add("temperature")
    return refused


def _is_search(name: str) -> bool:
    """Whether ``name`` is a gpt-5 search model (``gpt-5-search-api``), which takes few
    parameters."""
    return "gpt-5" in name and "search" in name


def _flag(name: str, key: str) -> Any:
    """The price map's ``key`` for model ``name`` (None when it lacks the model or the key)."""
    entry = prices.model_info(name)
    return entry.get(key) if entry else None


def _effort_is_none(name: str, effort: Any) -> bool:
    """Whether the call's reasoning effort is ``none``: the one asked for (a string, or the
    Responses API's ``{"effort": ...}``), else the model's default by the price map. A map that
    names no model's default (older than the key) counts ``none`` supported as the default."""
    level = effort.get("effort") if isinstance(effort, Mapping) else effort
    if level is not None:
        return bool(level == "none")
    default = _flag(name, "default_reasoning_effort")
    if default is not None:
        return bool(default == "none")
    return not _map_declares_defaults() and _flag(name, "supports_none_reasoning_effort") is True


@functools.lru_cache(maxsize=1)
def _map_declares_defaults() -> bool:
    return any("default_reasoning_effort" in entry for entry in prices.price_map().values())


def note(model_id: str) -> str | None:
    """What the session header says of ``model_id``'s parameters (None for a model whose
    parameters are sent as given)."""
    family = family_of(model_id)
    if family is None:
        return None
    name = _name(model_id)
    sampling = "temperature other than 1, top_p, logprobs, top_logprobs"
    if family == "o":
        refused = f"{sampling}, penalties"
    elif _is_search(name):
        refused = "sampling parameters, tools, reasoning_effort"
    elif _flag(name, "supports_none_reasoning_effort") is True:
        refused = f"{sampling} unless reasoning_effort is none; penalties, stop, logit_bias"
    else:
        refused = f"{sampling}, penalties, stop, logit_bias"
    return f"reasoning model: max_tokens sent as max_completion_tokens; not sent: {refused}"
