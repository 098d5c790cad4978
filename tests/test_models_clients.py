"""Two clients, one record: the lean OpenAI-compatible client and litellm give the same answer.

Every eval below runs twice against the same fake server, once with ``--client=litellm`` and
once on the default route (the lean client for an OpenAI-compatible endpoint); the records must
agree in every field but timings, and the server must have received the same requests. Faults
(429, 500, a timeout, a cut stream, a body that is not JSON) must end in the same error kind
and message.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported in pytester runs)
import pytest
from conftest import FAKE_KEY, FAKE_KEY_ENV, REPO_ROOT, Bench, FakeLLMServer, Rule

from pytest_llmbench.engine.targets import Targets
from pytest_llmbench.models.item_errors import ProviderError
from pytest_llmbench.models.profiles import ModelProfile
from pytest_llmbench.models.providers import litellm_client, prices, routes, tokens
from pytest_llmbench.models.providers.completion import CallTarget
from pytest_llmbench.models.providers.transport_retry import Timeouts

#: Record fields that are measurements of time (or where a run put its files), not answers.
TIMINGS = frozenset(
    {"latency_s", "ttft_s", "tokens_per_s", "started_at", "seconds", "worker", "workdir"}
)
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64

SUITE = """
cases:
  - id: plain
    prompt: What is the capital of France?
    expected: Paris
    assert: [contains]
  - id: json-mode
    prompt: Give json please
    model_params: {response_format: {type: json_object}, max_tokens: 20, seed: 7}
    assert: [{type: is-json}]
  - id: image
    prompt: Describe the picture
    images: [dot.png]
    expected: red dot
    assert: [icontains]
  - id: rate-limited
    prompt: You are rate limited
    expected: x
  - id: server-error
    prompt: The server broke
    expected: x
  - id: too-slow
    prompt: This is too slow
    expected: x
  - id: cut
    prompt: Cut short please
    expected: Paris
    assert: [contains]
  - id: garbled
    prompt: A garbled answer
    expected: x
"""
#: The model version the fake server says served every chat answer.
SERVED = "fake-model-2026-11-01"
AGENT = """
kind: agent
tools: [write_file, read_file]
max_turns: 4
cases:
  - id: notes
    prompt: Write notes.txt with hello, then say done.
    expected: done
    assert: [{type: file-contains, path: notes.txt, value: hello}, icontains]
"""


def _arrange(server: FakeLLMServer) -> None:
    """The same answers, ids included, for each run."""
    server.reset()
    server._ids = itertools.count(1)
    server._call_ids = itertools.count(1)
    write = {"name": "write_file", "arguments": {"path": "notes.txt", "content": "hello"}}
    for rule in (
        Rule(match="capital of France", reply="Paris is the capital."),
        Rule(match="json please", reply='{"answer": 42}'),
        Rule(match="Describe the picture", reply="A red dot."),
        Rule(match="rate limited", status=429, retry_after=0.05, error_message="slow down"),
        Rule(match="server broke", status=500, error_message="kaput"),
        Rule(match="too slow", reply="late", delay_s=4.0),
        Rule(match="Cut short", reply="Paris, the capital of France", cut_after=1),
        Rule(match="garbled", raw_body=b'{"id": "chatcmpl-1", "choi'),
        Rule(match="notes.txt with hello", tool_calls=[write], times=1),
        Rule(match_last="wrote 5", reply="done"),
    ):
        server.add_rule(rule)


def _without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [_without_timings(item) for item in value]
    return value


def _run(
    bench: Bench, out: str, *args: str
) -> tuple[list[dict[str, Any]], list[tuple[str, str]], str]:
    _arrange(bench.server)
    result = bench.pytester.runpytest(
        # 3 s: room for a loaded machine (litellm's first image call imports more), below the
        # 4 s the "too slow" answer takes.
        "-p", "no:cacheprovider", f"--results-dir={out}", "--models=fake", "--max-retries=1",
        "--request-timeout=3", *args,
    )  # fmt: skip
    path = bench.pytester.path / out / "results.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    # In arrival order per case (calls of several items overlap in time).
    requests = sorted(
        (json.dumps(request.body, sort_keys=True), request.path)
        for request in bench.server.chat_requests()
    )
    return sorted(records, key=lambda r: r["nodeid"]), requests, result.stdout.str()


@pytest.fixture
def suite(bench: Bench) -> Bench:
    bench.eval_file("answers", SUITE)
    bench.eval_file("agent", AGENT)
    (bench.pytester.path / "dot.png").write_bytes(PNG)
    return bench


@pytest.mark.parametrize("stream", ["all", "off"])
def test_both_clients_give_the_same_records(suite: Bench, stream: str) -> None:
    # The provider names the version it served, not the model asked for (an alias's snapshot).
    suite.server.served_model = SERVED
    lean, lean_requests, lean_out = _run(suite, "lean", f"--stream={stream}")
    other, other_requests, other_out = _run(
        suite, "other", f"--stream={stream}", "--client=litellm"
    )
    assert "llmbench: clients: fake lean" in lean_out
    assert "llmbench: clients: fake litellm (client: litellm)" in other_out
    assert len(lean) == len(other) == 9
    by_case = {record["case_id"]: record for record in lean}
    # The runs are what the rules say, so that equal records mean something.
    assert by_case["plain"]["outcome"] == "passed" and by_case["image"]["outcome"] == "passed"
    assert by_case["json-mode"]["response"] == '{"answer": 42}'
    assert by_case["notes"]["outcome"] == "passed" and by_case["notes"]["tool_call_count"]
    # the served version of a plain answer and of an agent's last step; none for an error
    assert {by_case[case]["response_model"] for case in ("plain", "image", "notes")} == {SERVED}
    assert by_case["server-error"]["response_model"] is None
    expected_kinds = {
        "rate-limited": "provider",
        "server-error": "provider",
        "too-slow": "timeout",
        # A stream request answered with no event at all is a stream that ended before any.
        "garbled": "provider" if stream == "all" else "malformed",
    }
    assert {case: by_case[case]["error_kind"] for case in expected_kinds} == expected_kinds
    if stream == "all":
        assert by_case["cut"]["error_kind"] == "provider"
        assert "stream was cut after" in by_case["cut"]["error"]
    for mine, theirs in zip(lean, other, strict=True):
        assert _without_timings(mine) == _without_timings(theirs), mine["case_id"]
    for mine, theirs in itertools.zip_longest(lean_requests, other_requests):
        if mine != theirs:
            a, b = json.loads(mine[0]), json.loads(theirs[0])
            print(
                "DIFF", {k: (a.get(k), b.get(k)) for k in set(a) | set(b) if a.get(k) != b.get(k)}
            )
        assert mine == theirs


def test_estimated_counts_agree_without_provider_usage(suite: Bench) -> None:
    """A server that reports no usage on streams (llama.cpp's): both count locally, alike."""
    suite.server.stream_usage = False
    lean, _, _ = _run(suite, "lean", "--stream=all", "-k", "plain or image or notes")
    other, _, _ = _run(suite, "other", "--stream=all", "-k", "plain or image", "--client=litellm")
    plain = [record for record in lean if record["case_id"] in ("plain", "image")]
    assert [r["tokens_estimated"] for r in plain] == [True, True]
    assert all(r["input_tokens"] > 0 and r["output_tokens"] > 0 for r in plain)
    assert [_without_timings(r) for r in plain] == [_without_timings(r) for r in other]


def test_a_lean_run_never_imports_litellm(bench: Bench) -> None:
    bench.eval_file("one", SUITE.split("  - id: json-mode")[0])
    bench.server.add_rule(Rule(reply="Paris"))
    bench.pytester.makeconftest(
        """
import sys

def pytest_sessionfinish(session):
    print("litellm loaded:", "litellm" in sys.modules, "openai loaded:", "openai" in sys.modules)
"""
    )
    result = bench.run_subprocess("--models=fake", "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*litellm loaded: False openai loaded: False*"])
    forced = bench.run_subprocess("--models=fake", "-s", "--client=litellm")
    forced.stdout.fnmatch_lines(["*litellm loaded: True*"])


def test_a_profile_can_force_litellm(bench: Bench) -> None:
    bench.pytester.makefile(
        ".yaml",
        **{
            "profiles/forced": f"""
models:
  forced:
    model: openai/fake-model
    api_base: {bench.server.base_url}
    api_key_env: {FAKE_KEY_ENV}
    client: litellm
"""
        },
    )
    bench.eval_file("one", SUITE.split("  - id: json-mode")[0])
    bench.server.add_rule(Rule(reply="Paris"))
    result = bench.run("--models=fake,forced")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["llmbench: clients: fake lean, forced litellm (client: litellm)"])


def test_a_bad_client_is_a_usage_error(bench: Bench) -> None:
    bench.eval_file("one", SUITE.split("  - id: json-mode")[0])
    result = bench.run("--models=fake", "--client=curl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--client*auto*litellm*"])


# -- routing --


@pytest.fixture
def no_provider_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_API_BASE",
        "HOSTED_VLLM_API_BASE",
        "HOSTED_VLLM_API_KEY",
        "LM_STUDIO_API_BASE",
    ):
        monkeypatch.delenv(name, raising=False)
    yield


@pytest.mark.parametrize(
    ("target", "client", "why"),
    [
        (CallTarget("a", "openai/fake", "http://127.0.0.1:9/v1"), "lean", "OpenAI-compatible"),
        (CallTarget("b", "gpt-4o-mini"), "lean", "OpenAI-compatible"),
        (CallTarget("c", "openai/gpt-4o-mini"), "lean", "OpenAI-compatible"),
        (
            CallTarget("d", "hosted_vllm/llama", "http://127.0.0.1:9/v1"),
            "lean",
            "OpenAI-compatible",
        ),
        (
            CallTarget("e", "hosted_vllm/llama"),
            "litellm",
            "hosted_vllm without an endpoint (api_base)",
        ),
        (CallTarget("f", "anthropic/claude-haiku-4-5"), "litellm", "anthropic provider"),
        (CallTarget("g", "ollama/llama3", "http://127.0.0.1:11434"), "litellm", "ollama provider"),
        (CallTarget("h", "claude-haiku-4-5"), "litellm", "anthropic provider"),
        (
            CallTarget("i", "openai/fake", "http://127.0.0.1:9/v1", extra={"organization": "x"}),
            "litellm",
            "its profile passes litellm settings",
        ),
        (
            CallTarget("j", "openai/fake", "http://127.0.0.1:9/v1", client="litellm"),
            "litellm",
            "client: litellm",
        ),
        (CallTarget("k", "no-such-model-anywhere"), "litellm", "an unknown provider"),
    ],
)
def test_routes(no_provider_env: None, target: CallTarget, client: str, why: str) -> None:
    chosen = routes.route(target)
    assert (chosen.client, chosen.why) == (client, why)


def test_reasoning_models_take_the_lean_path(no_provider_env: None) -> None:
    """Both clients adapt an OpenAI reasoning model's parameters (reasoning_params.py): it is
    routed as any other model of its provider, and the header says what is adapted."""
    for model in ("openai/o3-mini", "o4-mini", "gpt-5-mini", "openai/gpt-5.1", "gpt-5-chat"):
        chosen = routes.route(CallTarget("r", model, "http://127.0.0.1:9/v1"))
        assert chosen == routes.Route("lean", "OpenAI-compatible")
    # Without an endpoint, or through litellm, as any model.
    assert routes.route(CallTarget("e", "hosted_vllm/o3")).client == "litellm"
    shown = routes.describe(
        [
            CallTarget("o", "openai/o3", "http://127.0.0.1:9/v1"),
            CallTarget("g", "gpt-5-mini", "http://127.0.0.1:9/v1", client="litellm"),
            CallTarget("c", "gpt-5-chat", "http://127.0.0.1:9/v1"),
        ]
    )
    sampling = "temperature other than 1, top_p, logprobs, top_logprobs"
    assert shown == (
        "o lean (reasoning model: max_tokens sent as max_completion_tokens; not sent: "
        f"{sampling}, penalties), g litellm (client: litellm; reasoning model: max_tokens sent "
        f"as max_completion_tokens; not sent: {sampling}, penalties, stop, logit_bias), c lean"
    )


def test_endpoints_follow_litellms_variables(
    no_provider_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # OpenAI's own API without a key: refused before either client sends anything.
    with pytest.raises(ProviderError) as refused:
        routes.check_key(CallTarget("b", "gpt-4o-mini"))
    assert refused.value.kind == "missing_key"
    assert str(refused.value) == "b: OPENAI_API_KEY is not set (needed for gpt-4o-mini)"
    assert routes.missing_key(CallTarget("b", "gpt-4o-mini")) == ["OPENAI_API_KEY"]
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    bare = routes.endpoint(CallTarget("b", "gpt-4o-mini"))
    assert (bare.base_url, bare.model) == (routes.OPENAI_BASE, "gpt-4o-mini")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    found = routes.endpoint(CallTarget("c", "openai/gpt-4o-mini"))
    assert (found.base_url, found.model) == ("http://127.0.0.1:9/v1", "gpt-4o-mini")
    assert found.headers == {"Authorization": f"Bearer {FAKE_KEY}"}
    assert FAKE_KEY not in repr(found)
    assert routes.missing_key(CallTarget("b", "gpt-4o-mini")) == []
    # vLLM's server takes any key: litellm's stand-in is sent when none is set.
    vllm = CallTarget("v", "hosted_vllm/m", "http://127.0.0.1:8000/v1")
    assert routes.endpoint(vllm).api_key == "fake-api-key"
    # A local endpoint needs no key; a profile's own key wins over the environment's.
    local = CallTarget("l", "hosted_vllm/m", "http://127.0.0.1:8000/v1", api_key="sk-own")
    assert routes.missing_key(local) == [] and routes.endpoint(local).api_key == "sk-own"


# -- prices, model facts and token counts as litellm has them --


@pytest.mark.parametrize(
    "model",
    ["gpt-4o-mini", "openai/gpt-4o-mini", "gpt-4.1-nano", "anthropic/claude-haiku-4-5"],
)
def test_prices_read_as_data_equal_litellms(litellm_loaded: Any, model: str) -> None:
    target = CallTarget("p", model)
    per_token = litellm_loaded.cost_per_token(model=model, prompt_tokens=1234, completion_tokens=56)
    assert prices.cost_usd(target, 1234, 56) == pytest.approx(sum(per_token), rel=1e-12)
    assert prices.cost_usd(CallTarget("u", "openai/no-such-model"), 10, 10) is None
    priced = CallTarget("q", model, cost_per_1k_input=1.0, cost_per_1k_output=2.0)
    assert prices.cost_usd(priced, 1000, 1000) == pytest.approx(3.0)


@pytest.mark.parametrize(
    "model",
    ["openai/gpt-4o", "openai/o3-mini", "bedrock/converse/us.amazon.nova-pro-v1:0", "gpt-4o-mini"],
)
def test_vision_flags_read_as_data_equal_litellms(litellm_loaded: Any, model: str) -> None:
    assert prices.supports_vision(model) == litellm_loaded.get_model_info(model=model).get(
        "supports_vision"
    )


CONVERSATION = [
    {"role": "system", "content": "You are terse. " * 200},
    {"role": "user", "content": "What is 2 + 2?", "name": "alice"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "4"},
    {"role": "user", "content": [{"type": "text", "text": "Thanks! And 3 + 3?"}]},
]


@pytest.mark.parametrize(
    "model", ["openai/fake-model", "openai/gpt-4o-mini", "gpt-4o-mini", "gpt-4", "o3-mini"]
)
def test_token_counts_equal_litellms(litellm_loaded: Any, model: str) -> None:
    counted = tokens.prompt_tokens(model, CONVERSATION)
    assert counted == litellm_loaded.token_counter(model=model, messages=CONVERSATION)
    reply = "Six. " * 400  # longer than one 1,024-character piece
    estimate = tokens.used(model, CONVERSATION, reply, None)
    assert estimate.output_tokens == litellm_loaded.token_counter(model=model, text=reply)
    assert estimate.estimated and estimate.input_tokens == counted
    reported = tokens.used(model, CONVERSATION, reply, {"prompt_tokens": 3, "completion_tokens": 4})
    assert (reported.input_tokens, reported.output_tokens, reported.estimated) == (3, 4, False)


def test_zero_usage_is_no_usage() -> None:
    """litellm fills a whole answer's missing usage with zeros: counted locally, not as 0."""
    counted = tokens.used(
        "openai/m", CONVERSATION, "Six.", {"prompt_tokens": 0, "completion_tokens": 0}
    )
    assert counted.estimated and counted.input_tokens and counted.output_tokens == 2
    assert not tokens.reported(None, 3) and not tokens.reported(True, 3)
    assert tokens.reported(12, 0)


def test_prices_and_tokens_need_no_litellm_import() -> None:
    code = (
        "import sys\n"
        "from pytest_llmbench.models.providers import prices, tokens\n"
        "from pytest_llmbench.models.providers.completion import CallTarget\n"
        "print(prices.cost_usd(CallTarget('x', 'gpt-4o-mini'), 1000, 1000) > 0)\n"
        "print(tokens.prompt_tokens('gpt-4o-mini', [{'role': 'user', 'content': 'hi'}]) > 0)\n"
        "print('litellm' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT
    )
    assert done.stdout.split() == ["True", "True", "False"]


def test_a_stream_event_longer_than_64_kib_is_read(bench: Bench) -> None:
    """aiohttp's own line reader stops at 64 KiB; one server-sent event can be longer."""
    long = "Paris " * 20_000  # 120,000 characters in one event
    bench.server.chunk_size = len(long)
    bench.server.add_rule(Rule(reply=long))
    bench.eval_file("one", SUITE.split("  - id: json-mode")[0])
    bench.run("--models=fake", "--stream=all").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["response"] == long and record["streamed"] is True


def test_a_whole_answer_that_is_an_error_is_retried_and_named(bench: Bench) -> None:
    bench.server.add_rule(Rule(raw_body=b'{"error": {"message": "model overloaded"}}', times=1))
    bench.server.add_rule(Rule(raw_body=b'{"id": "x", "object": "chat.completion"}', times=1))
    bench.server.add_rule(Rule(reply="Paris"))
    bench.eval_file("one", SUITE.split("  - id: json-mode")[0])
    bench.run("--models=fake", "--stream=off").assert_outcomes(passed=1)
    assert bench.records()[0]["transport_retries"] == 2
    bench.server.reset()
    bench.server.add_rule(Rule(raw_body=b'{"error": {"message": "model overloaded"}}'))
    bench.run("--models=fake", "--stream=off", "--max-retries=0").assert_outcomes(errors=1)
    (record,) = bench.records()[-1:]
    assert record["error"] == "fake: AnswerError: model overloaded"
    assert record["error_kind"] == "provider"


def test_proxies_come_from_the_environment_once_per_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """HTTP(S)_PROXY and NO_PROXY apply to the lean client as they do to litellm's httpx."""
    from pytest_llmbench.models.providers.openai_compatible import proxy_for

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://user:pw@127.0.0.1:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    proxy_for.cache_clear()
    try:
        assert proxy_for("https://api.openai.com/v1") == "http://user:pw@127.0.0.1:3128"
        assert proxy_for("https://internal.example/v1") is None
        assert proxy_for("http://127.0.0.1:8000/v1") is None  # no HTTP_PROXY set
    finally:
        proxy_for.cache_clear()


@pytest.mark.parametrize(
    "model",
    ["hosted_vllm/gpt-4o-mini", "lm_studio/gpt-4o", "custom_openai/gpt-4o", "openai/deepseek-chat"],
)
def test_another_providers_price_is_no_price(litellm_loaded: Any, model: str) -> None:
    """A local vLLM serving a model named like OpenAI's is not billed at OpenAI's rates:
    litellm finds no price there either."""
    with pytest.raises(Exception, match=r"(?i)not mapped|isn't mapped"):
        litellm_loaded.cost_per_token(model=model, prompt_tokens=1000, completion_tokens=1000)
    assert prices.cost_usd(CallTarget("p", model), 1000, 1000) is None


def test_litellm_settings_among_the_parameters_are_sent_as_litellm_sends_them(
    bench: Bench,
) -> None:
    bench.pytester.makefile(
        ".yaml",
        **{
            "profiles/extra": f"""
models:
  extra:
    model: openai/fake-model
    api_base: {bench.server.base_url}
    api_key_env: {FAKE_KEY_ENV}
    params:
      drop_params: true
      num_retries: 3
      extra_body: {{chat_template_kwargs: {{enable_thinking: false}}}}
      extra_headers: {{X-Team: evals}}
"""
        },
    )
    bench.eval_file("one", SUITE.split("  - id: json-mode")[0])
    bench.server.add_rule(Rule(reply="Paris"))
    for client in ("auto", "litellm"):
        bench.server.requests.clear()
        bench.run("--models=extra", "--stream=off", f"--client={client}").assert_outcomes(passed=1)
        (request,) = bench.server.chat_requests()
        assert request.body["chat_template_kwargs"] == {"enable_thinking": False}, client
        assert "extra_body" not in request.body and "drop_params" not in request.body, client
        assert "num_retries" not in request.body, client
        assert request.headers.get("x-team") == "evals", client


def test_a_stream_event_that_is_no_object_is_malformed(bench: Bench) -> None:
    from pytest_llmbench.models.providers import openai_compatible

    class Stub:
        class content:
            @staticmethod
            async def iter_any() -> Any:
                yield b"data: []\n\n"

    with pytest.raises(json.JSONDecodeError, match="not a JSON object"):
        asyncio.run(openai_compatible._read_stream(Stub(), 0.0))


def test_a_trailing_slash_on_openais_base_still_needs_the_key(
    no_provider_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "https://api.openai.com/v1/")
    assert routes.missing_key(CallTarget("b", "gpt-4o-mini")) == ["OPENAI_API_KEY"]


# -- a missing key: one rule, one record, from either client --


@pytest.mark.parametrize(
    ("base", "local"),
    [
        ("http://127.0.0.1:8000/v1", True),
        ("http://localhost:11434/v1", True),
        ("http://[::1]:8080/v1", True),
        ("http://10.1.2.3/v1", True),
        ("http://192.168.0.7:8000/v1", True),
        ("http://ollama:11434/v1", True),  # a Docker Compose service
        ("http://host.docker.internal:8000/v1", True),
        ("http://gpu-box.local:8000/v1", True),
        ("https://api.openai.com/v1", False),
        ("HTTPS://API.OpenAI.com", False),
        ("https://openrouter.ai/api/v1", False),
        ("http://8.8.8.8/v1", False),
        ("http://134744072/v1", False),  # 8.8.8.8 written as one number: a resolver reads it so
        ("http://0x08080808/v1", False),
        ("http://2130706433:8000/v1", True),  # 127.0.0.1
        ("http://localhost.example.com/v1", False),
        ("localhost:8000/v1", False),  # no scheme: no host to trust
        ("http://[::1/v1", False),
    ],
)
def test_which_endpoints_are_local(base: str, local: bool) -> None:
    assert routes.is_local(base) is local


REMOTE = "https://llm.example.com/v1"


@pytest.mark.parametrize(
    ("env", "target", "key", "missing"),
    [
        ({"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, CallTarget("a", "openai/m"), "fake-api-key", []),
        ({"OPENAI_API_BASE": "http://localhost:9/v1"}, CallTarget("a", "gpt-4o-mini"), "fake-api-key", []),
        ({}, CallTarget("a", "openai/m", "http://127.0.0.1:9/v1"), "fake-api-key", []),
        ({}, CallTarget("a", "openai/m"), None, ["OPENAI_API_KEY"]),
        ({"OPENAI_BASE_URL": "https://api.openai.com"}, CallTarget("a", "openai/m"), None, ["OPENAI_API_KEY"]),
        ({"OPENAI_BASE_URL": REMOTE}, CallTarget("a", "openai/m"), None, ["OPENAI_API_KEY"]),
        ({}, CallTarget("a", "openai/m", REMOTE), None, ["OPENAI_API_KEY"]),
        ({"OPENAI_API_KEY": "sk-env"}, CallTarget("a", "openai/m", REMOTE), "sk-env", []),
        ({}, CallTarget("a", "openai/m", REMOTE, api_key="sk-own"), "sk-own", []),
        ({"HOSTED_VLLM_API_BASE": REMOTE}, CallTarget("a", "hosted_vllm/m"), "fake-api-key", []),
    ],
)  # fmt: skip
def test_both_clients_take_one_key_rule(
    no_provider_env: None,
    monkeypatch: pytest.MonkeyPatch,
    env: dict[str, str],
    target: CallTarget,
    key: str | None,
    missing: list[str],
) -> None:
    """A key, or the stand-in for a local endpoint, or the variable that is missing: the lean
    client's endpoint, litellm's call, the check made before either and the engine's
    resolution of a profile (before any call) are one rule."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert routes.api_key(target) == key
    assert routes.missing_key(target) == missing
    assert litellm_client.call_kwargs(target, Timeouts()).get("api_key") == key
    # A profile cannot hold a key: the ones without one are resolved as the engine does.
    profile = ModelProfile(name="a", model=target.model_id, api_base=target.api_base)
    resolved = None if target.api_key else Targets(Path(), 0)
    if missing:
        with pytest.raises(ProviderError) as refused:
            routes.check_key(target)
        assert refused.value.kind == "missing_key"
        if resolved is not None:
            with pytest.raises(ProviderError) as early:
                resolved.target(profile)
            assert (early.value.kind, str(early.value)) == ("missing_key", str(refused.value))
    else:
        routes.check_key(target)
        assert routes.endpoint(target).api_key == key
        if resolved is not None:
            assert routes.api_key(resolved.target(profile)) == key


#: A model id no other test gives a price: litellm's price map is the process's (a price
#: registered for another test's model would price litellm's records alone).
KEYLESS_PROFILES = """
models:
  local:
    model: openai/keyless-model
    api_base: {base}
  remote:
    model: openai/keyless-model
    api_base: https://llm.example.com/v1
"""


@pytest.mark.parametrize("endpoint", ["custom", "default", "openai-spelled-otherwise", "remote"])
def test_a_missing_key_gives_one_record_from_either_client(
    bench: Bench, no_provider_env: None, monkeypatch: pytest.MonkeyPatch, endpoint: str
) -> None:
    """No key set. A bare litellm id on ``OPENAI_BASE_URL`` (the fake server, on 127.0.0.1) or
    a profile's local ``api_base`` is called with the stand-in key; the bare id on OpenAI's
    own API (by default, or ``OPENAI_BASE_URL`` spelling it otherwise) or on a remote
    ``OPENAI_BASE_URL``, or a profile on a remote host, is a ``missing_key`` error with no
    request, the remote host named. Both clients, the same records."""
    bases = {
        "custom": bench.server.base_url,
        "openai-spelled-otherwise": "HTTPS://API.OpenAI.com/",
        "remote": REMOTE,
    }
    if endpoint in bases:
        monkeypatch.setenv("OPENAI_BASE_URL", bases[endpoint])
    bench.pytester.makefile(
        ".yaml", **{"profiles/keyless": KEYLESS_PROFILES.format(base=bench.server.base_url)}
    )
    bench.eval_file("one", SUITE.split("  - id: json-mode")[0])
    runs = {}
    for client in ("auto", "litellm"):
        bench.server.reset()
        bench.server.add_rule(Rule(reply="Paris is the capital."))
        bench.run("--models=openai/keyless-model,local,remote", f"--client={client}")
        records = sorted(bench.records(), key=lambda record: record["model"])
        # Every request the server saw (a chat call is the only kind this eval makes).
        keys = [r.headers.get("authorization") for r in bench.server.requests]
        runs[client] = ([_without_timings(record) for record in records], keys)
    assert runs["auto"] == runs["litellm"]
    records, keys = runs["auto"]
    got = {r["model"]: (r["outcome"], r["error_kind"], r["error"]) for r in records}
    bare = "openai/keyless-model"
    unset = "OPENAI_API_KEY is not set (needed for openai/keyless-model"
    remote = " at llm.example.com, which is not on this machine or a private network)"
    assert got.pop(bare) == {
        "custom": ("passed", None, None),
        "remote": ("error", "missing_key", f"{bare}: {unset}{remote}"),
    }.get(endpoint, ("error", "missing_key", f"{bare}: {unset})"))
    assert got == {
        "local": ("passed", None, None),
        "remote": ("error", "missing_key", f"remote: {unset}{remote}"),
    }
    assert all(r["transport_retries"] == 0 for r in records)
    assert keys == ["Bearer fake-api-key"] * (2 if endpoint == "custom" else 1)


@pytest.mark.parametrize("kind", ["chat", "embedding", "loglikelihood"])
def test_a_remote_endpoint_without_a_key_is_never_sent_a_request(
    fake_llm: FakeLLMServer, no_provider_env: None, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """Every kind of call, through either client, is refused before it is sent: the fake
    server stands in for a remote host here, and receives nothing."""
    from pytest_llmbench.models.providers.calls import acomplete, aembed
    from pytest_llmbench.models.providers.loglikelihood import aloglikelihood

    monkeypatch.setattr(routes, "is_local", lambda base: False)
    calls = {
        "chat": lambda where: acomplete(where, [{"role": "user", "content": "Hi"}], {}),
        "embedding": lambda where: aembed(where, ["Hi"]),
        "loglikelihood": lambda where: aloglikelihood(where, "The sky is", " blue"),
    }
    fake_llm.reset()
    errors = set()
    for client in ("auto", "litellm"):
        target = CallTarget("far", "openai/fake-model", fake_llm.base_url, client=client)
        with pytest.raises(ProviderError) as refused:
            asyncio.run(calls[kind](target))
        errors.add((refused.value.kind, str(refused.value), refused.value.retries))
    assert errors == {
        (
            "missing_key",
            "far: OPENAI_API_KEY is not set (needed for openai/fake-model at 127.0.0.1, "
            "which is not on this machine or a private network)",
            0,
        )
    }
    assert fake_llm.requests == []


@pytest.mark.parametrize("model", ["openai/fake-model", "hosted_vllm/fake-model"])
def test_a_provider_error_echoing_the_key_reads_the_same_from_either_client(
    fake_llm: FakeLLMServer, no_provider_env: None, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    """The key comes from the environment (not the profile): each client redacts the key it
    sent the same way, and litellm's whole error body of a vLLM server is read for its words,
    as the lean client reads it."""
    from pytest_llmbench.models.providers.calls import acomplete

    secret = "sk-envSECRET-9876543210zyxw"
    variable = "OPENAI_API_KEY" if model.startswith("openai/") else "HOSTED_VLLM_API_KEY"
    monkeypatch.setenv(variable, secret)
    fake_llm.add_rule(Rule(status=400, echo_auth=True, error_message="bad thing"))
    errors = set()
    for client in ("auto", "litellm"):
        target = CallTarget("m", model, fake_llm.base_url, client=client)
        with pytest.raises(ProviderError) as failed:
            asyncio.run(acomplete(target, [{"role": "user", "content": "Hi"}], {}))
        errors.add(str(failed.value))
    assert errors == {"m: BadRequestError (HTTP 400): bad thing (Authorization: Bearer [REDACTED])"}
