"""Values exchanged with providers: what a call needs and what it returns."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

#: Default seconds to open a connection (``--connect-timeout``): an unreachable host fails fast.
DEFAULT_CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class PricesPer1k:
    """A profile's prices in USD per 1,000 tokens of each part of a call (None: the input or
    output price)."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None
    reasoning: float | None = None


@dataclass(frozen=True)
class CallTarget:
    """Everything a client needs to reach one model, resolved at run time.

    ``api_key`` is held here only to be sent to the provider; it is never written anywhere.
    """

    name: str
    model_id: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    params: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    cost_per_1k_input: float | None = None
    cost_per_1k_output: float | None = None
    #: the profile's prices of the parts of a call priced apart (None: its input or output
    #: price): input tokens read from the provider's prompt cache, written to it, and output
    #: tokens spent thinking
    cost_per_1k_cached_input: float | None = None
    cost_per_1k_cache_write: float | None = None
    cost_per_1k_reasoning: float | None = None
    #: the profile's prices of a call answered through a batch API (``cost_per_1k_batch``);
    #: None: the price map's batch prices, else half the live ones
    cost_per_1k_batch: PricesPer1k | None = None
    #: ``auto`` (the lean client for OpenAI-compatible endpoints) or ``litellm`` (always)
    client: str = "auto"
    #: the embedded default model: its server listens on a new port each run, so the response
    #: cache keys its answers by this name, not by ``api_base``
    embedded: bool = False
    #: the profile's ``batch``: None (auto), True (batched even at a local endpoint) or False
    #: (always live) under ``--batch``
    batch: bool | None = None

    @property
    def cache_base(self) -> str | None:
        """The endpoint as the response cache keys a call: the same from one run to the next."""
        return "embedded" if self.embedded else self.api_base


@dataclass(frozen=True)
class Usage:
    """What model calls used: one call's tokens, cost and time, or several calls' summed.

    A value the provider did not report is None and adds nothing to a sum, which stays None
    until some call reports it (:func:`add_known`).
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    latency_s: float | None = None

    @property
    def tokens(self) -> int:
        """Input and output tokens together (an unreported count as none)."""
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            add_known(self.input_tokens, other.input_tokens),
            add_known(self.output_tokens, other.output_tokens),
            add_known(self.cost_usd, other.cost_usd),
            add_known(self.latency_s, other.latency_s),
        )

    def fields(self) -> dict[str, Any]:
        """The four values by name, as records and logs write them."""
        return asdict(self)


@dataclass(frozen=True)
class TokenDetails:
    """Of a call's tokens, those priced and shown apart; each a part of the call's input or
    output tokens (never counted on top of them), None when not known.

    ``reasoning_tokens``: output tokens spent thinking, as the provider reported them, else
    counted from the thinking's text (``reasoning_tokens_estimated``). ``cached_input_tokens``
    and ``cache_write_tokens``: input tokens read from, and written to, the provider's prompt
    cache (OpenAI's ``prompt_tokens_details``, Anthropic's cache reads and writes).
    """

    reasoning_tokens: int | None = None
    cached_input_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens_estimated: bool = False


@dataclass(frozen=True)
class Timeouts:
    """How long one attempt may take: all of it (``call_s``), and opening its connection."""

    call_s: float = 60.0  # --request-timeout's default
    connect_s: float = DEFAULT_CONNECT_TIMEOUT_S

    @property
    def connect_bound_s(self) -> float:
        """The connect bound, never longer than the whole attempt's."""
        return min(self.connect_s, self.call_s)


def total_usage(usages: Iterable[Usage]) -> Usage:
    """The sum of ``usages`` (an empty :class:`Usage` for none)."""
    return sum(usages, Usage())


@dataclass(frozen=True)
class Completion:
    """One model answer with its measurements."""

    text: str
    model_id: str
    input_tokens: int | None
    output_tokens: int | None
    tokens_estimated: bool
    ttft_s: float | None
    latency_s: float
    cost_usd: float | None
    retries: int
    streamed: bool
    finish_reason: str | None
    cached: bool = False
    rate_limit_wait_s: float = 0.0
    #: tool calls the model asked for: ``{"id", "name", "arguments"}`` (arguments as sent: a
    #: JSON string); empty for a plain answer
    tool_calls: tuple[dict[str, Any], ...] = ()
    #: the thinking a server gave apart from the answer (``reasoning_content`` / ``reasoning``);
    #: "" when it gave none (thinking inline in ``text`` stays there, as the model wrote it)
    reasoning: str = ""
    #: of ``output_tokens``, those spent thinking, as the provider reported them (None: not
    #: reported)
    reasoning_tokens: int | None = None
    #: of ``input_tokens``, those read from the provider's prompt cache (None: not reported)
    cached_input_tokens: int | None = None
    #: of ``input_tokens``, those written to the provider's prompt cache (Anthropic's cache
    #: writes; None: not reported)
    cache_write_tokens: int | None = None
    #: ``reasoning_tokens`` were counted here from the thinking's text: the provider reported
    #: none for a reply that thought
    reasoning_tokens_estimated: bool = False
    #: why the reply holds no answer (its thinking never finished), as the item's thinking rule
    #: read it; None: it has one, or it was not read yet (a client's, a cached completion)
    unfinished: str | None = None
    #: answered through a provider's batch API (its latency and TTFT say nothing of the model)
    batched: bool = False
    #: the provider's id of the batch that answered it (None: answered live)
    batch_id: str | None = None
    #: seconds from the batch's creation to its answer being read (None: answered live)
    batch_wait_s: float | None = None
    #: the model version the provider said answered (the answer's ``model``, e.g.
    #: ``gpt-4o-2024-08-06``); None: it said none, or the answer was cached before this was kept
    response_model: str | None = None

    def __post_init__(self) -> None:
        # A cached completion comes back from JSON with a list here.
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))

    @property
    def usage(self) -> Usage:
        """This call's tokens, cost and time."""
        return Usage(self.input_tokens, self.output_tokens, self.cost_usd, self.latency_s)

    @property
    def details(self) -> TokenDetails:
        """This call's tokens priced and shown apart."""
        return TokenDetails(
            self.reasoning_tokens,
            self.cached_input_tokens,
            self.cache_write_tokens,
            self.reasoning_tokens_estimated,
        )

    @property
    def tokens_per_s(self) -> float | None:
        """Output tokens per second of generation (after the first token when streamed)."""
        generation = self.latency_s - (self.ttft_s or 0.0)
        if not self.output_tokens or generation <= 0:
            return None
        return self.output_tokens / generation


def batch_fields(calls: Iterable[Completion]) -> dict[str, Any]:
    """An item's ``batched``, ``batch_id`` and ``batch_wait_s`` over its calls, as one
    completion: batched when any call was (its time is then no model's), the first batched
    call's batch, the longest wait."""
    batched = [call for call in calls if call.batched]
    waits = [call.batch_wait_s for call in batched if call.batch_wait_s is not None]
    return {
        "batched": bool(batched),
        "batch_id": batched[0].batch_id if batched else None,
        "batch_wait_s": max(waits) if waits else None,
    }


def whole_answer(
    target: CallTarget,
    text: str,
    tokens: tuple[int | None, int | None],
    latency_s: float,
    retries: int,
    cost_usd: float | None,
) -> Completion:
    """A completion read whole, not streamed (an embedding's or a log-likelihood's)."""
    input_tokens, output_tokens = tokens
    return Completion(
        text=text,
        model_id=target.model_id,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        tokens_estimated=False,
        ttft_s=None,
        latency_s=latency_s,
        cost_usd=cost_usd,
        retries=retries,
        streamed=False,
        finish_reason="stop",
    )


def served_model(value: Any) -> str | None:
    """An answer's ``model`` as the served version: a non-empty string, else None."""
    return (value.strip() or None) if isinstance(value, str) else None


def add_known(total: Any, value: Any) -> Any:
    """Sum where an unreported value (None) adds nothing; None until something is reported."""
    if value is None:
        return total
    return value if total is None else total + value
