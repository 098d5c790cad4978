"""OpenAI reasoning models' parameters, adapted by both clients as litellm adapts them
(models/providers/reasoning_params.py): checked against litellm's own transformation, then end
to end against the fake server through the lean client and litellm, a judge included."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from conftest import FAKE_KEY, FAKE_KEY_ENV, Bench, FakeLLMServer, Rule

from pytest_llmbench.models.providers import prices
from pytest_llmbench.models.providers.completion import CallTarget
from pytest_llmbench.models.providers.reasoning_params import adapted, family_of, note

#: Models of each kind litellm's price map knows: o-series, gpt-5 without and with effort
#: "none" (5.1+, by default or not), a search model, and models that do not reason.
MODELS = (
    "o1", "openai/o3", "o3-mini", "openai/o4-mini", "o3-pro", "o1-2024-12-17",
    "gpt-5", "openai/gpt-5-mini", "gpt-5-nano", "gpt-5-codex", "gpt-5.1", "gpt-5.2",
    "gpt-5.4-mini", "gpt-5.5", "gpt-6-luna", "gpt-6.1-sol", "gpt-5-search-api",
    "gpt-5-chat-latest", "gpt-4o", "gpt-4.1-mini",
)  # fmt: skip
#: What calls send: a case's max_tokens and temperature, a judge's temperature 0, sampling
#: and penalties, stop and logit_bias, efforts (also the Responses API's dict form).
PARAMS: tuple[dict[str, Any], ...] = (
    {"temperature": 0, "max_tokens": 10},
    {"temperature": 1, "max_tokens": 10, "max_completion_tokens": 20},
    {"temperature": 0.7, "top_p": 0.5, "logprobs": True, "top_logprobs": 2, "seed": 1,
     "presence_penalty": 0.1, "frequency_penalty": 0.1},
    {"stop": ["x"], "logit_bias": {"1": 1}, "n": 2, "reasoning_effort": "high"},
    {"temperature": 0, "top_p": 0.5, "reasoning_effort": "none"},
    {"temperature": 0, "top_p": 0.5, "reasoning_effort": "low"},
    {"temperature": 0, "reasoning_effort": {"effort": "none"}},
    {"parallel_tool_calls": True, "temperature": None, "max_tokens": 5},
)  # fmt: skip


def _litellms(litellm: Any, model: str, params: dict[str, Any], drop: bool) -> dict[str, Any]:
    """What litellm sends of ``params`` (its own additions left out)."""
    sent = litellm.get_optional_params(
        model=model.rpartition("/")[2], custom_llm_provider="openai", drop_params=drop, **params
    )
    return {key: value for key, value in sent.items() if key not in ("stream", "extra_body")}


def _kept_apart(model: str, params: dict[str, Any]) -> bool:
    """The differences kept on purpose (docs/reasoning.md): a reasoning effort that the
    map says the model refuses is sent (litellm drops it), and a model that does not reason
    gets its parameters as given (litellm drops their reasoning_effort)."""
    effort = params.get("reasoning_effort")
    level = effort.get("effort") if isinstance(effort, dict) else effort
    if family_of(model) is None:
        return level is not None
    entry = prices.model_info(model) or {}
    return level == "none" and entry.get("supports_none_reasoning_effort") is not True


@pytest.mark.parametrize("model", MODELS)
def test_parameters_are_adapted_as_litellm_adapts_them(litellm_loaded: Any, model: str) -> None:
    compared = 0
    for params in PARAMS:
        if _kept_apart(model, params):
            continue
        sent, dropped = adapted(model, params)
        sent = {key: value for key, value in sent.items() if value is not None}  # none sent
        assert sent == _litellms(litellm_loaded, model, params, drop=True), params
        # What is dropped is said: every parameter given and not sent, but max_tokens renamed.
        given = {key for key, value in params.items() if value is not None}
        renamed = {"max_tokens"} if "max_completion_tokens" in sent else set()
        assert set(dropped) == given - set(sent) - renamed, params
        # litellm takes what is sent as it is, without being told to drop anything: a judge at
        # temperature 0 is no UnsupportedParamsError.
        assert _litellms(litellm_loaded, model, sent, drop=False) == sent
        compared += 1
    assert compared >= 4


def test_the_differences_kept_from_litellm(litellm_loaded: Any) -> None:
    # A refused effort is the provider's error, never silently the model's default effort.
    assert adapted("gpt-5", {"reasoning_effort": "none", "temperature": 0}) == (
        {"reasoning_effort": "none"},
        ("temperature",),
    )
    assert _litellms(litellm_loaded, "gpt-5", {"reasoning_effort": "none"}, drop=True) == {}
    # An o-series model newer than the map, and a fine-tuned one, are adapted too.
    for model in ("openai/o9-preview", "openai/ft:o4-mini-2025-04-16:acme::abc123"):
        assert adapted(model, {"temperature": 0, "max_tokens": 8}) == (
            {"max_completion_tokens": 8},
            ("temperature",),
        )
    assert _litellms(litellm_loaded, "o9-preview", {"temperature": 0}, drop=False) == {
        "temperature": 0
    }


def test_other_models_and_providers_get_their_parameters_as_given() -> None:
    params = {"temperature": 0, "max_tokens": 8, "top_p": None, "stop": ["x"]}
    for model in ("gpt-4o", "gpt-5-chat-latest", "hosted_vllm/o3", "lm_studio/gpt-5", "fake"):
        assert family_of(model) is None and note(model) is None
        assert adapted(model, params) == (params, ())
    assert [family_of(model) for model in ("o3", "openai/gpt-5.1", "gpt-6-luna")] == [
        "o",
        "gpt",
        "gpt",
    ]
    # A gpt-5.1's temperature rides on its effort: "none" by the map's default, or asked for.
    assert adapted("gpt-5.1", {"temperature": 0})[0] == {"temperature": 0}
    assert adapted("gpt-5.1", {"temperature": 0, "reasoning_effort": "low"})[1] == ("temperature",)
    assert "unless reasoning_effort is none" in (note("gpt-5.1") or "")


# -- end to end: the fake server, both clients ------------------------------------------------

REASONERS = """
models:
  o4:
    model: openai/o4-mini
    api_base: {base}
    api_key_env: {env}
    params: {{temperature: 0}}
  g5:
    model: openai/gpt-5-mini
    api_base: {base}
    api_key_env: {env}
  judge-o3:
    model: openai/o3
    api_base: {base}
    api_key_env: {env}
"""
CAPITALS = """
model_params: {max_tokens: 64, top_p: 0.9}
cases:
  - {id: france, prompt: Capital of France?, assert: [{type: contains, value: Paris}]}
  - {id: italy, prompt: Capital of Italy?, assert: [{type: contains, value: Rome}]}
"""
#: Record fields that differ from run to run, whatever the client.
VOLATILE = frozenset(
    {"latency_s", "ttft_s", "tokens_per_s", "started_at", "seconds", "worker", "workdir"}
)


def _reasoners(bench: Bench) -> None:
    text = REASONERS.format(base=bench.server.base_url, env=FAKE_KEY_ENV)
    bench.pytester.makefile(".yaml", **{"profiles/reasoners": text})
    for country, city in (("France", "Paris"), ("Italy", "Rome")):
        thought = f"The capital of {country} is {city}."
        bench.server.add_rule(Rule(match=country, reply=f"{city}.", reasoning=thought))


def _records(bench: Bench) -> list[dict[str, Any]]:
    return sorted(
        ({k: v for k, v in r.items() if k not in VOLATILE} for r in bench.records()),
        key=lambda r: str(r["nodeid"]),
    )


def _bodies(server: FakeLLMServer) -> list[dict[str, Any]]:
    return [request.body for request in server.chat_requests()]


@pytest.mark.parametrize("models", ["o4", "g5"])
def test_both_clients_send_a_reasoning_model_the_same_call(bench: Bench, models: str) -> None:
    """``openai/o4-mini`` (its profile at temperature 0) and ``openai/gpt-5-mini`` take the
    lean path: the same record as through litellm, with ``max_completion_tokens`` sent and no
    temperature nor top_p; the header says so."""
    _reasoners(bench)
    bench.eval_file("capitals", CAPITALS)
    lean = bench.run(f"--models={models}")
    lean.assert_outcomes(passed=2)
    lean.stdout.fnmatch_lines(
        [f"llmbench: clients: {models} lean (reasoning model: max_tokens sent as *"]
    )
    lean_records, lean_bodies = _records(bench), _bodies(bench.server)
    bench.server.requests.clear()
    other = bench.run(f"--models={models}", "--client=litellm")
    other.assert_outcomes(passed=2)
    other.stdout.fnmatch_lines([f"llmbench: clients: {models} litellm (client: litellm; *"])
    assert _records(bench) == lean_records
    assert lean_records[0]["reasoning"] and lean_records[0]["reasoning_tokens"]
    # The record keeps the parameters asked for; the request has those the model takes.
    asked = {"max_tokens": 64, "top_p": 0.9}
    assert all({k: r["params"].get(k) for k in asked} == asked for r in lean_records), lean_records[
        0
    ]["params"]
    for body in (*lean_bodies, *_bodies(bench.server)):
        assert body["max_completion_tokens"] == 64
        assert not {"max_tokens", "temperature", "top_p"} & set(body), body
    assert len(lean_bodies) == len(_bodies(bench.server)) == 2


GRADED = """
cases:
  - id: paris
    prompt: Capital of France?
    assert:
      - {type: model-graded, judges: [judge-o3], prompt: "Is {{output}} right?",
         choices: {"yes": 1, "no": 0}}
"""


@pytest.mark.parametrize("client", ["auto", "litellm"])
def test_an_o_series_judge_at_temperature_0_works_on_both_paths(bench: Bench, client: str) -> None:
    """A judge's temperature is 0 unless said otherwise: litellm refused it for o3
    (UnsupportedParamsError); now neither client sends it."""
    _reasoners(bench)
    bench.server.add_rule(Rule(model="o3", reply=json.dumps({"choice": "yes"})))
    bench.eval_file("graded", GRADED)
    bench.run("--models=fake", f"--client={client}").assert_outcomes(passed=1)
    (record,) = bench.records()
    (judge,) = record["judges"]
    assert judge["choice"] == "yes" and not judge.get("error")
    (asked,) = [body for body in _bodies(bench.server) if body["model"] == "o3"]
    assert "temperature" not in asked and asked["response_format"]["type"] == "json_schema"


def test_reasoning_models_records_are_the_same_under_xdist(bench: Bench) -> None:
    _reasoners(bench)
    bench.eval_file("capitals", CAPITALS)
    bench.run_subprocess("-n", "2", "--models=o4").assert_outcomes(passed=2)
    assert {r["worker"] for r in bench.records()} == {"gw0", "gw1"}
    with_xdist = _records(bench)
    bench.run("--models=o4").assert_outcomes(passed=2)
    assert _records(bench) == with_xdist
    assert all(
        body["max_completion_tokens"] == 64 and "temperature" not in body
        for body in _bodies(bench.server)
    )


def test_the_preflight_probe_asks_a_reasoning_model_for_max_completion_tokens(
    fake_llm: FakeLLMServer,
) -> None:
    from pytest_llmbench.engine.preflight import CHECK_MAX_TOKENS, _probe

    target = CallTarget("o", "openai/o3", fake_llm.base_url, api_key=FAKE_KEY)
    latency, error = asyncio.run(_probe(target, 5.0))
    assert error is None and latency is not None
    (request,) = fake_llm.chat_requests()
    assert request.body["max_completion_tokens"] == CHECK_MAX_TOKENS
    assert "max_tokens" not in request.body


def test_the_optimizers_call_is_adapted_too() -> None:
    from pytest_llmbench.engine.optimizer import _Prompt, optimizer_params
    from pytest_llmbench.models.profiles import ModelProfile

    params = optimizer_params(ModelProfile(name="o", model="openai/o3"), _Prompt(None, "Say hi."))
    sent, dropped = adapted("openai/o3", params)
    assert dropped == ("temperature",)
    assert sent["max_completion_tokens"] == params["max_tokens"]
    assert set(sent) == {"max_completion_tokens", "response_format"}
