"""Reasoning models in the combinations users run: every shape a server gives (thinking apart as
``reasoning_content`` or ``reasoning``, inline tags, a reply cut while thinking, cached input
tokens), through the lean client and litellm, in one process and under ``-n 2``, then replayed
from the response cache without a request. The records are the same in all five runs but for
their timings."""

from __future__ import annotations

from typing import Any

from conftest import Bench, Rule

THOUGHT = "The user asks for the capital of France. That is Paris."

SHAPES = """
cases:
  - id: apart-reasoning-content
    prompt: Capital of France?
    assert: [{type: equals, value: Paris.}, {type: finish-reason, value: stop}]
  - id: apart-reasoning
    prompt: Capital of Spain?
    assert: [{type: equals, value: Madrid.}]
  - id: inline-tags
    prompt: Capital of Italy?
    assert: [{type: equals, value: Rome.}, {type: not-icontains, value: think}]
  - id: cut-while-thinking
    prompt: Capital of Peru?
    model_params: {max_tokens: 5}
    assert: [{type: icontains, value: lima}]
  - id: cached-prompt
    prompt: Capital of Japan?
    assert: [{type: icontains, value: tokyo}]
  - id: talk
    turns:
      - user: Capital of Chile?
        assert: [{type: icontains, value: santiago}]
      - user: And of Kenya?
        assert: [{type: icontains, value: nairobi}]
"""

#: Record fields that measure time or place, not answers.
TIMINGS = frozenset(
    {"latency_s", "ttft_s", "tokens_per_s", "started_at", "seconds", "worker", "workdir",
     "cached", "rate_limit_wait_s", "streamed"}
)  # fmt: skip


def _arrange(bench: Bench) -> None:
    bench.server.reset()
    for rule in (
        Rule(
            match="France", reply="Paris.", reasoning=THOUGHT, reasoning_field="reasoning_content"
        ),
        Rule(
            match="Spain", reply="Madrid.", reasoning="Spain: Madrid.", reasoning_field="reasoning"
        ),
        Rule(match="Italy", reply="<think>Italy: Rome, I think.</think>Rome."),
        Rule(match="Peru", reply="<think>Peru has Lima as its capital, and"),
        Rule(match="Japan", reply="Tokyo.", cached_tokens=4),
        Rule(match="Kenya", reply="<think>Kenya: Nairobi.</think>Nairobi."),
        Rule(match="Chile", reply="Santiago.", reasoning="Chile: Santiago.", cached_tokens=2),
    ):
        bench.server.add_rule(rule)


def _answers(value: Any) -> Any:
    """A record (or a part of one) without its timings."""
    if isinstance(value, dict):
        return {k: _answers(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [_answers(item) for item in value]
    return value


def _records(bench: Bench) -> dict[str, dict[str, Any]]:
    return {record["case_id"]: _answers(record) for record in bench.records()}


def _differences(one: dict[str, dict[str, Any]], other: dict[str, dict[str, Any]]) -> list[str]:
    """``case: field: value != value`` for each field where two runs' records differ."""
    return [
        f"{case}: {field}: {one[case].get(field)!r} != {other[case].get(field)!r}"
        for case in sorted(one.keys() | other.keys())
        for field in sorted(one.get(case, {}).keys() | other.get(case, {}).keys())
        if one.get(case, {}).get(field) != other.get(case, {}).get(field)
    ]


def test_every_shape_gives_the_same_records_on_both_clients_under_xdist_and_in_replay(
    bench: Bench,
) -> None:
    bench.eval_file("shapes", SHAPES)
    cache = ("--cache=use", f"--cache-dir={bench.pytester.path / 'cache'}")
    runs: dict[str, dict[str, dict[str, Any]]] = {}
    requests: dict[str, int] = {}
    for name, args in (
        ("litellm", ("--client=litellm",)),
        ("lean", cache),
        ("lean -n 2", ("-n", "2")),
        ("litellm -n 2", ("-n", "2", "--client=litellm")),
    ):
        _arrange(bench)
        bench.run_subprocess("--models=fake", *args).assert_outcomes(passed=5, skipped=1)
        runs[name] = _records(bench)
        requests[name] = len(bench.server.chat_requests())
    bench.server.reset()  # no rule: any request would fail the item
    bench.run_subprocess("--models=fake", "--cache=replay", cache[1]).assert_outcomes(
        passed=5, skipped=1
    )
    runs["replay"] = _records(bench)
    assert bench.server.chat_requests() == []
    assert requests["lean"] == requests["litellm"] == 7
    first = runs["lean"]
    for name, records in runs.items():
        assert _differences(records, first) == [], name
    # What each shape recorded.
    france, spain, italy = (first[k] for k in ("apart-reasoning-content", "apart-reasoning", "inline-tags"))  # fmt: skip
    assert (france["response"], france["reasoning"]) == ("Paris.", THOUGHT)
    assert france["reasoning_tokens"] == len(THOUGHT.split())
    assert (spain["response"], spain["reasoning"]) == ("Madrid.", "Spain: Madrid.")
    assert (italy["response"], italy["reasoning"]) == ("Rome.", "Italy: Rome, I think.")
    cut = first["cut-while-thinking"]
    assert (cut["outcome"], cut["error_kind"], cut["finish_reason"]) == ("skipped", "unchecked", "length")  # fmt: skip
    assert first["cached-prompt"]["cached_input_tokens"] == 4
    talk = first["talk"]
    assert (talk["response"], talk["reasoning"], talk["cached_input_tokens"]) == ("Nairobi.", "Kenya: Nairobi.", 2)  # fmt: skip
