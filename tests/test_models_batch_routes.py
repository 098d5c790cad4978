"""Which batch API answers a model's calls under ``--batch``, or why they stay live: one
backend per endpoint and key, and a reason naming the model and the cause for every other."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_llmbench.engine.targets import Targets
from pytest_llmbench.models.profile_files import load_profiles
from pytest_llmbench.models.profiles import ModelProfile
from pytest_llmbench.models.providers.batch_openai import OpenAIBatches
from pytest_llmbench.models.providers.batch_routes import (
    batch_route,
    describe_batch,
    forget_backends,
)
from pytest_llmbench.models.providers.completion import CallTarget


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_API_BASE",
        "HOSTED_VLLM_API_BASE",
        "HOSTED_VLLM_API_KEY",
        "LM_STUDIO_API_BASE",
    ):
        monkeypatch.delenv(name, raising=False)
    forget_backends()
    yield
    forget_backends()


def _target(model_id: str = "openai/gpt-4o-mini", **changes: Any) -> CallTarget:
    fields: dict[str, Any] = {"name": "m", "model_id": model_id, "api_key": "sk-a"}
    return CallTarget(**{**fields, **changes})


def test_openai_models_share_one_backend_per_endpoint_and_key() -> None:
    first = batch_route(_target())
    assert isinstance(first, OpenAIBatches)
    assert first.endpoint.base_url == "https://api.openai.com/v1"
    assert first.endpoint.api_key == "sk-a"
    assert batch_route(_target("openai/gpt-4o", name="other")) is first
    assert batch_route(_target(), "embed") is first  # one backend, a batch per kind
    assert batch_route(_target(api_key="sk-b")) is not first
    proxy = batch_route(_target(api_base="https://proxy.example/v1"))
    assert isinstance(proxy, OpenAIBatches) and proxy is not first
    assert proxy.endpoint.base_url == "https://proxy.example/v1"


def test_a_key_from_the_environment_is_the_backends_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    backend = batch_route(_target(api_key=None))
    assert isinstance(backend, OpenAIBatches)
    assert backend.endpoint.api_key == "sk-env"


LIVE = [
    pytest.param(_target(batch=False), "m: live (its profile says batch: false)", id="batch-false"),
    pytest.param(
        _target(params={"extra_headers": {"X-Team": "a"}}),
        "m: live (its profile sends extra_headers, which a batch line cannot carry)",
        id="extra-headers",
    ),
    pytest.param(
        _target("hosted_vllm/qwen", api_base="http://127.0.0.1:8000/v1"),
        "m: live (hosted_vllm at 127.0.0.1:8000 is a local endpoint, which has no /batches API; "
        "a profile's batch: true sends its calls there)",
        id="local",
    ),
    pytest.param(
        _target("openai/local", api_base="http://llama:8080/v1", api_key=None),
        "m: live (openai at llama:8080 is a local endpoint, which has no /batches API; a "
        "profile's batch: true sends its calls there)",
        id="local-name",
    ),
    pytest.param(
        _target("openai/x", embedded=True, api_base="http://127.0.0.1:1/v1", batch=True),
        "m: live (the embedded model's server has no batch API)",
        id="embedded",
    ),
    pytest.param(
        _target("gemini/gemini-2.5-flash"),
        "m: live (gemini has no batch API through litellm)",
        id="gemini",
    ),
    pytest.param(
        _target("azure/gpt-4o-mini"),
        "m: live (azure batches need a Global-Batch deployment: not supported yet)",
        id="azure",
    ),
    pytest.param(
        _target("mistral/mistral-small"),
        "m: live (mistral has no batch API here)",
        id="other-provider",
    ),
    pytest.param(
        _target(client="litellm"),
        "m: live (its calls go through litellm (client: litellm), not batched)",
        id="forced-litellm",
    ),
    pytest.param(
        _target(extra={"drop_params": True}),
        "m: live (its calls go through litellm (its profile passes litellm settings), not batched)",
        id="litellm-settings",
    ),
    pytest.param(
        _target(api_key=None),
        "m: live (OPENAI_API_KEY is not set)",
        id="no-key",
    ),
]


@pytest.mark.parametrize(("target", "reason"), LIVE)
def test_calls_that_stay_live_say_why(target: CallTarget, reason: str) -> None:
    assert batch_route(target) == reason


def test_a_local_endpoint_is_batched_when_its_profile_says_so() -> None:
    target = _target("openai/fake-model", api_base="http://127.0.0.1:9/v1", batch=True)
    backend = batch_route(target)
    assert isinstance(backend, OpenAIBatches)
    assert backend.endpoint.base_url == "http://127.0.0.1:9/v1"
    assert backend.endpoint.api_key == "sk-a"
    # False wins over everything; True does not make a provider without a batch API batch
    assert isinstance(batch_route(dataclasses.replace(target, batch=False)), str)
    gemini = _target("gemini/gemini-2.5-flash", batch=True)
    assert batch_route(gemini) == "m: live (gemini has no batch API through litellm)"


def test_a_call_with_headers_of_its_own_stays_live() -> None:
    headers = {"extra_headers": {"X-Trace": "1"}, "temperature": 0}
    assert batch_route(_target(), "chat", headers) == (
        "m: live (its call sends extra_headers, which a batch line cannot carry)"
    )
    assert isinstance(batch_route(_target(), "chat", {"temperature": 0}), OpenAIBatches)


def test_a_kind_without_batch_endpoint_stays_live() -> None:
    assert batch_route(_target(), "loglikelihood") == (
        "m: live (its loglikelihood calls have no batch endpoint)"
    )


def test_anthropic_goes_to_its_own_backend() -> None:
    from pytest_llmbench.models.providers.batch_anthropic import AnthropicBatches

    target = _target("anthropic/claude-haiku-4-5")
    assert batch_route(target, "embed") == (
        "m: live (anthropic batches answer chat calls only, not embed)"
    )
    chosen = batch_route(target)
    assert isinstance(chosen, AnthropicBatches)
    assert batch_route(_target("anthropic/claude-sonnet-4-5", name="o")) is chosen
    # an anthropic-beta header goes on the batch request; any other keeps the call live
    beta = {"extra_headers": {"anthropic-beta": "context-1m-2025-08-07"}}
    assert batch_route(target, "chat", beta) is chosen
    other = {"extra_headers": {"X-Trace": "1"}}
    assert batch_route(target, "chat", other) == (
        "m: live (its call sends extra_headers other than anthropic-beta, which a batch line "
        "cannot carry)"
    )
    assert batch_route(_target("anthropic/claude-haiku-4-5", params=other)) == (
        "m: live (its profile sends extra_headers other than anthropic-beta, which a batch "
        "line cannot carry)"
    )
    assert batch_route(_target("anthropic/claude-haiku-4-5", extra={"num_retries": 2})) == (
        "m: live (its profile passes litellm settings, which a batch cannot carry)"
    )


def test_a_password_in_an_endpoints_url_is_shown_nowhere() -> None:
    base = "https://bob:hunter2pass@proxy.example.com:8443/v1"
    target = _target(name="p", api_base=base, batch=True)
    (line,) = describe_batch([target])
    assert line == "p: batched (openai batch API at proxy.example.com:8443)"
    chosen = batch_route(target)
    assert not isinstance(chosen, str)
    # what its errors name the provider by
    assert chosen._target.name == "openai batch API (proxy.example.com:8443)"  # type: ignore[attr-defined]
    local = _target("openai/fake", name="l", api_base="http://u:hunter2pass@127.0.0.1:9/v1")
    assert "hunter2pass" not in str(batch_route(local))


def test_the_session_header_says_how_each_model_is_called() -> None:
    targets = [
        _target(name="gpt"),
        _target("openai/fake-model", name="fake", api_base="http://127.0.0.1:9/v1", batch=True),
        _target("gemini/gemini-2.5-flash", name="gem"),
        _target(name="slow", batch=False),
    ]
    assert describe_batch(targets) == [
        "gpt: batched (openai batch API at api.openai.com)",
        "fake: batched (openai batch API at 127.0.0.1:9)",
        "gem: live (gemini has no batch API through litellm)",
        "slow: live (its profile says batch: false)",
    ]


def test_the_profile_key_reaches_the_target(tmp_path: Path) -> None:
    (tmp_path / "models.yaml").write_text(
        "models:\n"
        "  nightly: {model: openai/gpt-4o-mini, batch: true}\n"
        "  interactive: {model: openai/gpt-4o, batch: false}\n"
        "  auto: {model: openai/gpt-4o}\n"
    )
    registry = load_profiles([tmp_path])
    targets = Targets(tmp_path, 0)
    made = {name: targets.unresolved(registry.models[name]).batch for name in registry.models}
    assert {name: made[name] for name in ("nightly", "interactive", "auto")} == {
        "nightly": True,
        "interactive": False,
        "auto": None,
    }
    with pytest.raises(ValueError, match="batch"):
        ModelProfile(name="x", model="openai/x", batch="sometimes")  # type: ignore[arg-type]
