"""The wire record: one plain dict of JSON primitives per finished item.

It is built on the process that ran the item (an xdist worker or the main process), put on
the ``TestReport`` as ``report.llmbench_record``, and crosses xdist unchanged. The controller
appends it to ``results.jsonl`` and aggregates it at session end. Every writer of a record goes
through :func:`build_record`, so the field list below is the whole contract.

Fields (``None`` where a value does not apply or was not measured):

- ``schema`` (int): record format version, currently 2 (a schema-1 record of an older run is
  read with schema 2's names: :func:`pytest_llmbench.results_folder.upgrade_record`).
- ``nodeid`` (str): the pytest node id of the item.
- ``suite`` (str): the eval's suite name (file ``description`` is separate; the suite name is the
  file name without ``.eval.yaml``, or the test module name for plain tests).
- ``eval_file`` (str): path of the eval file (or test module) relative to the rootdir.
- ``case_id`` (str): the case id inside the suite.
- ``case_hash`` (str | None): 16 hex characters digesting what decides the case's outcome: its
  rendered messages, expected answer, assertions with their weights and thresholds, model
  parameters, files, variables, choices, tools and solver or agent settings; not its id, tags
  or description, not the model under test, not the run's options
  (:func:`pytest_llmbench.fingerprint.case_hash`). Equal in every process; ``None`` for a plain
  Python test. Baselines pair only cases whose hashes match.
- ``model`` (str): the contestant that results rank: the model name as selected (profile name
  or litellm id), plus the item's variant: ``:prompt`` for a ``prompts:`` variant, ``_optimized``
  for a rewritten prompt, ``@t<temperature>`` under ``--temperature-variations``, ``@<effort>``
  under the effort axis (``smollm2:concise@t0.2``, ``gpt-5@high``). Without variants it is the
  model name.
- ``model_id`` (str): the litellm model string actually called.
- ``response_model`` (str | None): the model version the provider said answered: the answer's
  ``model`` (``gpt-4o-2024-08-06`` for ``openai/gpt-4o``), streamed or whole, live, batched or
  cached; a conversation's last reply's, an agent's last step's, a solver's last call's. None
  when the provider named none, for an item with no model call, and for an answer cached before
  this field was kept.
- ``profile`` (str | None): the model name without variant suffixes (a deployment variant of a
  profile is its own profile, e.g. ``nova-pro_priority``).
- ``prompt_variant`` (str | None): the eval file's ``prompts:`` variant, ``_optimized`` suffixed
  when the prompt was rewritten.
- ``temperature`` (float | None): the temperature sent, when one was set.
- ``effort`` (str | int | None): the reasoning effort of the item's variant (``effort:`` of the
  eval file or ``--efforts``): a level (``high``) or a thinking budget in tokens; None outside the
  effort axis. The contestant ends in ``@<effort>``.
- ``optimized`` (bool): the prompt was rewritten by ``--optimize-prompts``.
- ``optimization`` (dict | None): the rewrite's ``status`` (rewritten, skipped, failed) and
  ``reason``; the rewrite itself is in ``prompt_optimizations.jsonl``.
- ``eval_type`` (str): ``quality``, or ``latency`` under ``--latency-only`` (no assertions, no
  judges, score empty).
- ``model_tags`` (dict[str, str]): the profile's tags (region, tier, provider, ...).
- ``images`` (list[str]): images sent with the prompt: paths and URLs (data URLs abridged).
- ``solver`` (str | None): the ``module:function`` that produced the answer.
- ``choice`` (dict | None): a multiple choice item's ``chosen`` letter (None when the answer
  named none), the right ``answer`` letter and whether it was ``correct``.
- ``loglikelihood`` (dict | None): a ``loglikelihood:`` item's option scores: ``logprobs``,
  ``tokens`` and ``lengths`` per option, the letters ``chosen`` (acc) and ``chosen_norm``
  (acc_norm), the ``answer`` letter, and ``acc``/``acc_norm`` (1.0 or 0.0, also in ``metrics``).
- ``repeat`` (int): repeat index, 0-based.
- ``samples_planned`` (int | None): the repeats planned for the case (``--repeat N``) when N > 1;
  ``--stop-early`` may run fewer (the case's records with an outcome other than ``skipped``).
- ``stopped_early`` (bool): ``--stop-early`` skipped this repeat, its case's verdict being
  settled (``outcome`` ``skipped``, ``error`` the reason: ``stopped early: pass settled after 3
  of 10 repeats (exact)``).
- ``tags`` (list[str]): the case's tags.
- ``task`` (dict | None): the case's ``{"task_type", "task_criteria"}``, if any.
- ``outcome`` (str): ``passed``, ``failed``, ``error`` or ``skipped``.
- ``score`` (float | None): weighted mean of assertion scores, 0..1; ``None`` on error or when
  the case has no assertion.
- ``threshold`` (float): the score a case needs to pass.
- ``passed`` (bool): ``outcome == "passed"``.
- ``verdict_source`` (str): ``machine``, or ``human`` when a person's label (``reviews.jsonl``,
  :mod:`.effective`) holds for this answer and decided its verdict: ``outcome``, ``passed`` and
  ``score`` are then the effective ones (the label's), and the machine's are kept beside.
- ``machine_outcome`` (str | None): the machine's outcome when ``verdict_source`` is ``human``
  (None otherwise); ``machine_score`` (float | None) its score.
- ``review`` (dict | None): the label that decided: ``label`` (pass, fail), ``comment``,
  ``reviewer``, ``at`` and, for a label on one assertion, ``assertion`` (its index; the first
  such when several). An assertion a person labelled has ``verdict_source: human``,
  ``machine_passed``, ``machine_score`` and ``review`` in its entry of ``assertions``, its
  ``passed`` and ``score`` (1.0 or 0.0) the label's.
- ``ttft_s``, ``latency_s`` (float | None): time to first token and total call time, seconds;
  ``None`` for a batched answer (``batched``: the batch's wait says nothing of the model).
- ``input_tokens``, ``output_tokens`` (int | None): token usage reported by the provider
  (or counted locally when the provider does not report it; see ``tokens_estimated``).
- ``tokens_estimated`` (bool): True when token counts were computed locally.
- ``reasoning_tokens`` (int | None): of ``output_tokens``, those a reasoning model spent thinking,
  as the provider reported them, else counted from the thinking's text (``None``: not
  reported, or none).
- ``reasoning_tokens_estimated`` (bool): True when ``reasoning_tokens`` were counted locally
  from the thinking's text: the provider reported none for a reply that thought.
- ``cached_input_tokens`` (int | None): of ``input_tokens``, those read from the provider's
  prompt cache, as reported (``None``: not reported).
- ``cache_write_tokens`` (int | None): of ``input_tokens``, those written to the provider's
  prompt cache (Anthropic's cache writes), as reported (``None``: not reported, or none).
- ``tokens_per_s`` (float | None): output tokens / (latency - ttft); ``None`` when batched.
- ``cost_usd`` (float | None): cost of the call (profile prices, else litellm's price map):
  cached input tokens, cache writes and reasoning tokens at their own prices where the prices
  have them, the rest at the input and output prices; a batched call at the batch prices
  (``cost_per_1k_batch``, else the map's ``*_batches`` keys, else half the live prices).
- ``judge_cost_usd`` (float | None): USD spent on this item's judge calls (``None`` when no judge
  call had a known cost).
- ``judge_tokens`` (int): input + output tokens of this item's judge calls.
- ``user_sim_cost_usd`` (float | None): USD spent on a ``simulated_user:`` conversation's
  (a model's or an agent's) simulated-user calls, apart from the model's ``cost_usd``
  (``None`` for other items, or when no call of it had a known cost).
- ``user_sim_tokens`` (int | None): input + output tokens of those calls (``None`` for other
  items).
- ``transport_retries`` (int): provider calls retried for this item by the transport (a
  429, a dropped connection); not a re-run of the item (those are ``attempts``).
- ``tool_call_count`` (int): tool calls made (0 for plain completions): an agent's, or a
  function-calling reply's (the length of ``tool_calls``).
- ``agent_steps`` (int | None): model calls of an agent item's loop, summed over the replies of
  an agent's conversation (``None`` for other items).
- ``tool_counts`` (dict[str, int]): an agent item's tool calls per tool.
- ``agent_stopped`` (str | None): why an agent loop ended: ``answer``, ``max_steps``,
  ``seconds``, ``tokens``, ``error`` (a call failed: the item is an error, its steps so far are
  kept); in an agent's conversation, why its last reply ended.
- ``conversation_stopped`` (str | None): how a ``simulated_user:`` conversation, or an agent's
  conversation (``kind: agent`` with ``turns:`` or ``simulated_user:``), ended: ``goal`` (the
  simulated user said its stop marker), ``max_turns`` (the model replied ``max_turns`` times),
  ``failed`` (an assertion marked ``stop_on_fail`` failed), ``agent_done`` (a reply held
  ``simulated_user.agent_stop``); an agent's also ``last_turn`` (its last scripted turn was
  answered), ``max_steps`` (a reply took ``max_steps`` steps without an answer), ``seconds`` or
  ``tokens`` (``limits``, over the whole conversation, ran out in a reply). ``None`` for
  other items, a scripted conversation of the model, and a conversation an error or
  ``--max-cost`` cut short. (``agent_stopped`` is an agent loop's.)
- ``transcript`` (list[dict]): an agent item's whole conversation: every model step, its tool
  calls and the tool results it was shown.
- ``timeline`` (list[dict]): an agent item's calls in order: each model call (``kind: model``:
  ``role`` ``step`` or ``interpreter`` (a shim interpreter's call), ``step`` (1-based), latency,
  TTFT, tokens, cost, cached) and the tool calls it asked for (``kind: tool``: the ``step`` that
  asked, name, seconds, error, the start of the result); in an agent's conversation each user
  message before the steps that answer it (``kind: user``: ``turn`` (1-based), ``text``, cut
  as a tool's result is). Every entry has ``actor``: ``user``, ``agent`` (a model call) or
  ``tool``.
- ``tool_calls`` (list[dict]): the calls a function-calling reply asked for (a plain file's
  ``tools:``), recorded, never run: ``{id, name, arguments}`` each, arguments as sent (a JSON
  string); empty for other items.
- ``state`` (dict | None): an agent item's environment state (``environment:``): ``file`` (the
  state file in the workdir), ``diff`` (seed to final state: ``{path, op, before, after}`` per
  changed leaf, ``op`` ``added``/``removed``/``changed``, paths like ``orders/W1001/status``,
  list items ``#0``; a side past 2,000 characters of JSON is that text, clipped, and named in
  the change's ``clipped`` list; at most 200), ``diff_more`` (changes left out),
  ``expected_diff`` (final to expected state of the first ``state-equals``: its value, else the
  case's ``expected_actions`` replayed; the paths its ``ignore:`` globs match left out; None
  without one), ``expected_diff_more``, ``final`` (the final state; None past 100 kB).
  ``None`` for other items.
- ``shimmed`` (bool): the tools went through the tool shim (JSON in the prompt, the calls read
  from the reply's JSON) instead of native tool calls: an agent's, or a function-calling
  reply's on a model without tool calling (the embedded one); false for other items.
- ``workdir`` (str | None): an agent item's folder (kept after the run, as pytest keeps tmp_path).
- ``streamed`` (bool): whether the call was streamed (TTFT is only measured when it was).
- ``finish_reason`` (str | None): why the model stopped, as the provider said: ``stop``,
  ``length`` (``max_tokens`` reached), ``tool_calls``, ``content_filter``, ...; a
  conversation's is its last reply's; ``None`` for an agent (why its loop ended is
  ``agent_stopped``), a log-likelihood item (nothing generated) and a solver.
- ``cached`` (bool): the answer came from the response cache (no call was made this run).
- ``batched`` (bool): the item's answer came through a provider's batch API (``--batch``): its
  ``latency_s``, ``ttft_s`` and ``tokens_per_s`` are ``None``, its latency and TTFT checks
  unchecked, and it is left out of the latency columns and the timed gates. A judge's batched
  verdict does not make the item batched (its cost is in ``judge_cost_usd``, at the batch price).
- ``batch_id`` (str | None): the provider's id of the batch that answered it.
- ``batch_wait_s`` (float | None): seconds from that batch's creation to its answer being read.
- ``rate_limit_wait_s`` (float): seconds the call waited for rate limits (429 backoff,
  requests/tokens per minute).
- ``error`` (str | None): the error message, secrets redacted.
- ``error_kind`` (str | None): ``provider`` (an HTTP error, a dropped or cut-off stream),
  ``connection`` (refused or DNS failure), ``timeout``, ``malformed`` (an answer that is not
  JSON), ``missing_key``, ``config``, ``sandbox`` (an agent's commands need bubblewrap, which
  is missing or cannot run on this machine: a set-up problem, the message names the command
  that installs it), ``unsupported`` (images to a text-only model), ``solver``,
  ``post_process``, ``cache_miss`` (``--cache=replay`` found no answer), ``judge`` (every judge
  of a model-graded assertion failed), ``budget`` (skipped by ``--max-cost``), ``unchecked``
  (answered, nothing to check, or nothing measured for its only checks: skipped),
  ``crashed`` (the xdist worker running the item died; the record has what the node id says),
  ``internal``.
- ``prompt`` (str | None): the rendered last user message.
- ``messages`` (list[dict]): the chat messages sent.
- ``response`` (str | None): the model's answer text (a conversation's: its last reply).
- ``reasoning`` (str | None): a reasoning model's thinking, kept apart from ``response``: what
  the server gave apart (``reasoning_content`` / ``reasoning``), or a ``<think>...</think>``
  block that opened the reply; at most :data:`REASONING_CHARS` characters (longer is cut, with
  a note of how much); ``None`` when there was none.
- ``conversation`` (list[dict] | None): a scripted conversation (a case's ``turns:``), a
  simulated user's, or an agent's (each reply: the agent's answer to that turn, its steps'
  tokens, cost and latency summed, its ``tool_calls`` the calls it made), ``None`` for any
  other item: every message in order (the system prompt is in ``messages``), each with
  ``turn`` (1-based, the entry of ``turns:``), ``role``, ``content``, ``generated`` (a reply of
  the model, not a turn of the file), ``assertions`` (the verdicts on that reply, as in
  ``assertions``), and for a reply its ``latency_s``, ``ttft_s``, ``input_tokens``,
  ``output_tokens``, ``cost_usd``, ``cached`` and ``tool_calls`` (its tool calls, as the
  item's; empty for other entries). The item's ``latency_s``, tokens and cost are the sums over
  its replies, its ``ttft_s`` the first reply's, its ``tool_calls`` every reply's in order.
  An error or ``--max-cost`` ending the conversation keeps what was said before, up to the
  turn whose call did not complete.
  A plain test's: its ``llm.chat`` conversations one after another in the order they were
  opened, each entry also with ``chat`` (1-based), a chat's system prompt its first entry
  (``turn`` 0, ``role`` system), each send a turn; ``None`` when it opened none.
- ``expected`` (str | None): the expected answer, if any.
- ``context`` (dict | None): the retrieved context of a RAG case, as its judges read it:
  ``{"source": "case" | "solver", "chunks": [str, ...]}`` (a solver's returned context
  replaces the case's; ``chunks`` empty for an empty retrieval); None for a case without one.
- ``assertions`` (list[dict]): each assertion's verdict: ``type``, ``passed``, ``score``,
  ``weight``, ``reason``, and ``unchecked: true`` for a check with nothing to measure (a
  cached answer's latency, a cost without a price): neither passed nor failed. In a
  conversation each also has ``turn`` (the 1-based turn whose reply it checked), and its
  ``weight`` is the assertion's times the turn's.
- ``judges`` (list[dict]): one entry per judge per model-graded assertion: ``assertion`` (index
  into ``assertions``), ``type``, ``judge`` (name), ``model_id``, ``scores`` (dimension -> score
  by this judge; empty when it failed), ``reasons`` (dimension -> text), ``error`` (why the judge
  was excluded, or ``None``), ``call_attempts`` (calls made to get its verdict),
  ``input_tokens``, ``output_tokens``, ``cost_usd``,
  ``latency_s``, ``cached``.
- ``dimensions`` (dict[str, float]): the item's aggregated score per judged dimension: jury
  dimensions on the 1..5 scale, ``rubric``, ``factuality`` and ``closed_qa`` on 0..1.
- ``params`` (dict): the model parameters used (temperature, max_tokens, ...).
- ``metrics`` (dict[str, float]): extra numeric metrics recorded by a test (``record_score``).
- ``worker`` (str): ``main`` or the xdist worker id.
- ``started_at`` (str): ISO-8601 UTC time the item started (a prefetched call starts earlier).
- ``trace`` (dict | None): the item's place in the run's OpenTelemetry trace, when the run
  exports one (``--otel``; None otherwise): ``trace_id`` (32 hex digits), ``span_id`` (the
  item's span, 16 hex digits: :func:`pytest_llmbench.engine.call_spans.item_span_id`),
  ``parent_id`` (the run's span), ``start_ns`` and ``end_ns`` (the item's span, nanoseconds
  since the epoch: from its first call, which look-ahead may start before the item, to its
  report) and ``calls``: the item's timed model, judge, simulated-user, tool, MCP and sandbox
  calls, each a call span as :mod:`pytest_llmbench.engine.call_spans` documents it.
- ``attempts`` (list[dict]): the earlier attempts of an item that pytest-rerunfailures ran again,
  or whose errored record a ``--retry-errors`` run replaced, oldest first, each with the
  :data:`ATTEMPT_FIELDS` of its own record; empty when the item ran once. The record's other
  fields are its final attempt's.
"""

from __future__ import annotations

import datetime as dt
import functools
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 2

#: The most characters of a reply's thinking a record keeps (a reasoning model may think for
#: tens of thousands of tokens; the answer is what is judged).
REASONING_CHARS = 20_000

#: Column order of a record; also the order of keys in results.jsonl.
FIELDS: tuple[str, ...] = (
    "schema",
    "nodeid",
    "suite",
    "eval_file",
    "case_id",
    "case_hash",
    "model",
    "model_id",
    "response_model",
    "profile",
    "prompt_variant",
    "temperature",
    "effort",
    "optimized",
    "optimization",
    "eval_type",
    "model_tags",
    "repeat",
    "samples_planned",
    "stopped_early",
    "tags",
    "task",
    "outcome",
    "score",
    "threshold",
    "passed",
    "verdict_source",
    "machine_outcome",
    "machine_score",
    "review",
    "ttft_s",
    "latency_s",
    "input_tokens",
    "output_tokens",
    "tokens_estimated",
    "reasoning_tokens",
    "reasoning_tokens_estimated",
    "cached_input_tokens",
    "cache_write_tokens",
    "tokens_per_s",
    "cost_usd",
    "judge_cost_usd",
    "judge_tokens",
    "user_sim_cost_usd",
    "user_sim_tokens",
    "transport_retries",
    "tool_call_count",
    "agent_steps",
    "tool_counts",
    "agent_stopped",
    "conversation_stopped",
    "streamed",
    "finish_reason",
    "cached",
    "batched",
    "batch_id",
    "batch_wait_s",
    "rate_limit_wait_s",
    "error",
    "error_kind",
    "prompt",
    "messages",
    "response",
    "reasoning",
    "conversation",
    "transcript",
    "timeline",
    "tool_calls",
    "state",
    "shimmed",
    "workdir",
    "images",
    "solver",
    "choice",
    "loglikelihood",
    "expected",
    "context",
    "assertions",
    "judges",
    "dimensions",
    "params",
    "metrics",
    "worker",
    "started_at",
    "trace",
    "attempts",
)

#: The fields of a record kept for each earlier attempt in ``attempts``.
ATTEMPT_FIELDS: tuple[str, ...] = (
    "outcome",
    "score",
    "error",
    "error_kind",
    "response",
    "latency_s",
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cached_input_tokens",
    "cost_usd",
    "judge_cost_usd",
    "transport_retries",
    "cached",
    "batched",
    "worker",
    "started_at",
)

_DEFAULTS: dict[str, Any] = {
    "schema": SCHEMA_VERSION,
    "optimized": False,
    "eval_type": "quality",
    "verdict_source": "machine",
    "model_tags": {},
    "images": [],
    "tags": [],
    "tokens_estimated": False,
    "reasoning_tokens_estimated": False,
    "transport_retries": 0,
    "tool_call_count": 0,
    "tool_counts": {},
    "transcript": [],
    "timeline": [],
    "tool_calls": [],
    "shimmed": False,
    "stopped_early": False,
    "streamed": False,
    "cached": False,
    "batched": False,
    "rate_limit_wait_s": 0.0,
    "messages": [],
    "assertions": [],
    "judges": [],
    "dimensions": {},
    "judge_tokens": 0,
    "params": {},
    "metrics": {},
    "worker": "main",
    "attempts": [],
}


#: Every field with its default, in order; the list and dict defaults are copied per record.
_BLANK: dict[str, Any] = {name: _DEFAULTS.get(name) for name in FIELDS}
_FIELD_NAMES = frozenset(FIELDS)
_CONTAINERS = tuple(name for name, value in _DEFAULTS.items() if isinstance(value, (list, dict)))


def build_record(**values: Any) -> dict[str, Any]:
    """Return a record with every field of :data:`FIELDS`, in order.

    Unknown keys are refused so that a typo cannot silently add a column.
    """
    unknown = values.keys() - _FIELD_NAMES
    if unknown:
        raise TypeError(f"unknown record fields: {sorted(unknown)}")
    record = _BLANK.copy()
    for name in _CONTAINERS:
        if name not in values:
            record[name] = type(_BLANK[name])()
    record.update(values)
    record["passed"] = record["outcome"] == "passed"
    return record


def attempt_fields(record: dict[str, Any]) -> dict[str, Any]:
    """What ``attempts`` keeps of an earlier attempt's ``record``."""
    return {name: record.get(name) for name in ATTEMPT_FIELDS}


@functools.lru_cache(maxsize=256)
def file_field(path: Path, root: Path) -> str:
    """The record's ``eval_file``: the test file's path from the rootdir (absolute outside it)."""
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def utc_now() -> str:
    """The current time as ISO-8601 UTC, to the second (the ``started_at`` format)."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def worker_id(config: Any) -> str:
    """``main``, or the xdist worker id of the process that owns ``config``."""
    workerinput = getattr(config, "workerinput", None)
    return str(workerinput.get("workerid", "main")) if workerinput else "main"
