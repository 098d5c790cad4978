"""Batch lines of OpenAI's protocol: the input line is the live call's body, and reading the
output and error files is strict (every malformed case an error naming the batch and line,
never an answer attached to another call), with a batched answer equal to the live one."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import urllib.request
from typing import Any

import pytest
from conftest import FakeLLMServer, Rule

from pytest_llmbench.models.item_errors import BatchError
from pytest_llmbench.models.providers import routes
from pytest_llmbench.models.providers.batch_backend import BatchLine
from pytest_llmbench.models.providers.batch_lines import (
    UnbatchableError,
    collected,
    failed_results,
    input_ids,
    input_line,
    line_body,
    parse_output,
)
from pytest_llmbench.models.providers.calls import acomplete
from pytest_llmbench.models.providers.completion import CallTarget, Completion
from pytest_llmbench.models.providers.openai_compatible import chat_body

BATCH = "batch_abc"
#: A model priced by its profile: $1 per 1,000 input tokens, $2 per 1,000 output tokens.
PRICED = CallTarget(
    name="fake",
    model_id="openai/fake-model",
    api_base="http://127.0.0.1:9/v1",
    params={"temperature": 0},
    cost_per_1k_input=1.0,
    cost_per_1k_output=2.0,
)
MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]


def _line(custom_id: str = "a", **changes: Any) -> BatchLine:
    fields: dict[str, Any] = {
        "custom_id": custom_id,
        "target": PRICED,
        "messages": MESSAGES,
        "params": {"max_tokens": 20},
    }
    return BatchLine(**{**fields, **changes})


def _body(text: str = "Paris", **usage: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 1, **usage},
    }


def _ok(custom_id: str, body: Any = None) -> dict[str, Any]:
    response = {"status_code": 200, "request_id": "req_1", "body": body or _body()}
    return {"id": "batch_req_1", "custom_id": custom_id, "response": response, "error": None}


def _jsonl(*lines: Any) -> bytes:
    return b"".join(
        (line if isinstance(line, bytes) else json.dumps(line).encode()) + b"\n" for line in lines
    )


# -- the input line --


def test_an_input_line_is_the_live_calls_body_without_streaming() -> None:
    line = _line(params={"max_tokens": 20, "stream": True, "stream_options": {"x": 1}})
    entry = json.loads(input_line(line, routes.Endpoint("http://h/v1", "fake-model")))
    live, headers = chat_body(PRICED, "fake-model", MESSAGES, {"max_tokens": 20})
    assert headers == {}
    assert entry == {
        "custom_id": "a",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": live,
    }
    assert live == {
        "temperature": 0,
        "max_tokens": 20,
        "model": "fake-model",
        "messages": MESSAGES,
    }


def test_an_embedding_line_sends_the_texts_as_the_live_call_does() -> None:
    line = _line(kind="embed", messages=[{"role": "user", "content": "x y"}])
    entry = json.loads(input_line(line, routes.Endpoint("http://h/v1", "emb")))
    assert entry["url"] == "/v1/embeddings"
    assert entry["body"] == {"model": "emb", "input": ["x y"]}


def test_a_call_with_headers_cannot_be_a_batch_line() -> None:
    target = dataclasses.replace(PRICED, params={"extra_headers": {"X-Team": "a"}})
    with pytest.raises(UnbatchableError, match=r"fake: its call sends headers \(X-Team\)"):
        line_body(_line(target=target), "fake-model")


def test_a_kind_without_batch_endpoint_is_refused() -> None:
    with pytest.raises(UnbatchableError, match="no batch endpoint for 'loglikelihood'"):
        line_body(_line(kind="loglikelihood"), "m")


def test_input_ids_follow_the_lines_of_the_input_file() -> None:
    data = _jsonl({"custom_id": "a"}, b"not json", {"url": "x"}, {"custom_id": "b"})
    assert input_ids(data) == ["a", None, None, "b"]


# -- reading the files: a table of every malformed case --

SENT = {"a": _line("a"), "b": _line("b")}

MALFORMED = [
    pytest.param(
        [b"{not json", _ok("b")],
        "batch batch_abc: no answer line for this call (completed); lines the batch's files "
        "hold for no call sent: batch batch_abc, output file line 1: not JSON",
        id="not-json",
    ),
    pytest.param(
        [{k: v for k, v in _ok("a").items() if k != "custom_id"}, _ok("b")],
        "output file line 1: no custom_id",
        id="no-custom-id",
    ),
    pytest.param(
        [_ok("zzz"), _ok("b")],
        "output file line 1: custom_id zzz was not sent in this batch",
        id="unknown-custom-id",
    ),
    pytest.param(
        [_ok("a"), _ok("b"), _ok("a", _body("Rome"))],
        "batch batch_abc: custom_id a has 2 answer lines (output file line 1, output file line "
        "3): none is used",
        id="duplicate",
    ),
    pytest.param(
        [_ok("a", {"id": "x", "object": "chat.completion", "choices": []}), _ok("b")],
        "batch batch_abc, output file line 1: the answer has no choices",
        id="no-choices",
    ),
    pytest.param(
        [_ok("a", {"error": {"message": "overloaded"}}), _ok("b")],
        "batch batch_abc, output file line 1: overloaded",
        id="200-with-error-body",
    ),
    pytest.param(
        [{"id": "r", "custom_id": "a", "response": None, "error": None}, _ok("b")],
        "batch batch_abc, output file line 1: neither a response nor an error",
        id="neither",
    ),
    pytest.param(
        [_ok("b")],
        "batch batch_abc: no answer line for this call (completed)",
        id="missing",
    ),
]


@pytest.mark.parametrize(("lines", "said"), MALFORMED)
def test_a_bad_output_line_is_an_error_never_an_answer(lines: list[Any], said: str) -> None:
    read = parse_output(BATCH, _jsonl(*lines), SENT, file="output", created_at=0.0, now=1.0)
    results = collected(BATCH, "completed", SENT, [read])
    assert set(results) == set(SENT)
    error = results["a"]
    assert isinstance(error, BatchError)
    assert error.kind == "batch"
    assert said in error.message
    assert BATCH in error.message
    # the other call's answer is its own and whole
    answer = results["b"]
    assert isinstance(answer, Completion)
    assert answer.text == "Paris"
    assert answer.batch_id == BATCH


def test_a_batched_answer_keeps_the_version_its_body_names() -> None:
    sent = {"a": _line("a"), "b": _line("b")}
    named = {**_body(), "model": "fake-model-2026-11-01"}
    read = parse_output(BATCH, _jsonl(_ok("a", named), _ok("b")), sent, created_at=1.0, now=2.0)
    answers = collected(BATCH, "completed", sent, [read])
    served = {key: answer.response_model for key, answer in answers.items()
              if isinstance(answer, Completion)}  # fmt: skip
    assert served == {"a": "fake-model-2026-11-01", "b": None}  # b's body names no model


def test_lines_for_no_call_are_reported_with_the_results() -> None:
    data = _jsonl(_ok("a"), _ok("b"), b"garbage", _ok("stranger"))
    results = collected(BATCH, "completed", SENT, [parse_output(BATCH, data, SENT)])
    assert all(isinstance(answer, Completion) for answer in results.values())
    assert results.problems == (
        "batch batch_abc, output file line 3: not JSON (Expecting value: line 1 column 1 (char 0))",
        "batch batch_abc, output file line 4: custom_id stranger was not sent in this batch",
    )


def test_an_answer_in_both_files_is_no_answer() -> None:
    output = parse_output(BATCH, _jsonl(_ok("a"), _ok("b")), SENT, file="output")
    expired = {"id": "r", "custom_id": "a", "response": None,
               "error": {"code": "batch_expired", "message": "not run"}}  # fmt: skip
    errors = parse_output(BATCH, _jsonl(expired), SENT, file="error")
    results = collected(BATCH, "expired", SENT, [output, errors])
    assert isinstance(results["a"], BatchError)
    assert results["a"].message == (
        "batch batch_abc: custom_id a has 2 answer lines (output file line 1, error file line "
        "1): none is used"
    )
    assert isinstance(results["b"], Completion)


ERRORS = [
    pytest.param(
        {
            "id": "r",
            "custom_id": "a",
            "response": {
                "status_code": 400,
                "request_id": "req",
                "body": {
                    "error": {
                        "message": "max_tokens is too large",
                        "type": "invalid_request_error",
                        "param": "max_tokens",
                        "code": None,
                    }
                },
            },
            "error": None,
        },
        "batch batch_abc, error file line 1: HTTP 400: invalid_request_error: max_tokens is "
        "too large",
        id="nested-response-body-error",
    ),
    pytest.param(
        {
            "id": "r",
            "custom_id": "a",
            "response": None,
            "error": {
                "code": "batch_expired",
                "message": "This request could not be executed before the completion window "
                "expired.",
            },
        },
        "batch batch_abc, error file line 1: batch_expired: This request could not be executed "
        "before the completion window expired.",
        id="top-level-error",
    ),
    pytest.param(
        {"id": "r", "custom_id": "a", "response": {"status_code": 500, "body": None}},
        "batch batch_abc, error file line 1: HTTP 500: null",
        id="status-without-body",
    ),
]


@pytest.mark.parametrize(("line", "said"), ERRORS)
def test_error_lines_of_both_shapes_name_the_batch_and_line(
    line: dict[str, Any], said: str
) -> None:
    sent = {"a": _line("a")}
    read = parse_output(BATCH, _jsonl(line), sent, file="error")
    results = collected(BATCH, "completed", sent, [read])
    error = results["a"]
    assert isinstance(error, BatchError)
    assert error.message == said


def test_a_failed_batch_gives_each_call_its_own_line_or_every_error() -> None:
    errors = [
        {"code": "invalid_json_line", "message": "not JSON", "line": 2},
        {"code": "mismatched_model", "message": "one model", "line": 3},
    ]
    sent = {"a": _line("a"), "b": _line("b"), "c": _line("c")}
    results = failed_results(BATCH, sent, errors, ["a", "b", "c"])
    assert (
        results["b"].message == "batch batch_abc failed: input line 2: invalid_json_line: not JSON"
    )  # type: ignore[union-attr]
    assert results["a"].message == (  # type: ignore[union-attr]
        "batch batch_abc failed: input line 2: invalid_json_line: not JSON; input line 3: "
        "mismatched_model: one model"
    )
    without_order = failed_results(BATCH, sent, errors)
    assert {error.message for error in without_order.values()} == {results["a"].message}  # type: ignore[union-attr]
    assert all(isinstance(error, BatchError) for error in results.values())
    bare = failed_results(BATCH, {"a": _line("a")}, [])
    assert bare["a"].message == "batch batch_abc failed: no reason given"  # type: ignore[union-attr]


def test_an_embedding_line_is_read_as_the_live_embedding() -> None:
    line = _line("e", kind="embed", messages=[{"role": "user", "content": "ab"}])
    body = {"data": [{"embedding": [1, 2]}], "usage": {"prompt_tokens": 4}}
    read = parse_output(BATCH, _jsonl(_ok("e", body)), {"e": line}, created_at=10.0, now=25.0)
    answer = collected(BATCH, "completed", {"e": line}, [read])["e"]
    assert isinstance(answer, Completion)
    assert json.loads(answer.text) == [[1.0, 2.0]]
    assert (answer.input_tokens, answer.output_tokens) == (4, 0)
    assert answer.cost_usd == pytest.approx(4 * 1.0 / 1000 / 2)
    assert (answer.batched, answer.batch_id, answer.batch_wait_s) == (True, BATCH, 15.0)
    wrong = {"data": [], "usage": {"prompt_tokens": 4}}
    read = parse_output(BATCH, _jsonl(_ok("e", wrong)), {"e": line})
    error = collected(BATCH, "completed", {"e": line}, [read])["e"]
    assert isinstance(error, BatchError)
    assert error.message == "batch batch_abc, output file line 1: 0 embeddings for 1 texts"


# -- the batched answer equals the live one --

REPLIES = {
    "plain": Rule(match="plain", reply="Paris is the capital"),
    "reasoning": Rule(match="reasoning", reply="Paris", reasoning="France's capital is Paris"),
    "tools": Rule(match="tools", tool_calls=[{"name": "lookup", "arguments": {"q": "France"}}]),
    "truncated": Rule(match="truncated", reply="one two three four five six"),
    "cached": Rule(match="cached", reply="Paris", cached_tokens=3),
    "inline-thinking": Rule(match="inline", reply="<think>hmm</think>Paris"),
}
#: The fields a batched answer has of its own (the rest must equal the live answer's).
OWN = {"latency_s", "cost_usd", "batched", "batch_id", "batch_wait_s"}


def _live_body(server: FakeLLMServer, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{server.base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, Any] = json.load(response)
    return answer


@pytest.mark.parametrize("case", list(REPLIES))
def test_a_batched_answer_equals_the_live_one_at_half_the_price(
    fake_llm: FakeLLMServer, case: str
) -> None:
    fake_llm.add_rule(REPLIES[case])
    target = dataclasses.replace(PRICED, api_base=fake_llm.base_url)
    messages = [{"role": "user", "content": f"Say it: {case}"}]
    params = {"max_tokens": 3} if case == "truncated" else {}
    live = asyncio.run(acomplete(target, messages, params, stream=False))
    # The same request answered again by the same rule: the reply a batch line holds.
    body, _ = chat_body(target, "fake-model", messages, params)
    reply = _live_body(fake_llm, body)
    line = BatchLine("k", target, messages, params)
    read = parse_output(BATCH, _jsonl(_ok("k", reply)), {"k": line}, created_at=100.0, now=160.0)
    batched = collected(BATCH, "completed", {"k": line}, [read])["k"]
    assert isinstance(batched, Completion)
    mine = {name: value for name, value in dataclasses.asdict(batched).items() if name in OWN}
    theirs = dataclasses.asdict(live)
    for name in OWN:
        theirs.pop(name)
    same = {name: value for name, value in dataclasses.asdict(batched).items() if name not in OWN}
    if case == "tools":  # each answer of the fake has fresh call ids
        same["tool_calls"] = [{**call, "id": ""} for call in same["tool_calls"]]
        theirs["tool_calls"] = [{**call, "id": ""} for call in theirs["tool_calls"]]
    assert same == theirs
    assert live.cost_usd is not None
    assert mine == {
        "latency_s": 0.0,
        "cost_usd": pytest.approx(live.cost_usd / 2),
        "batched": True,
        "batch_id": BATCH,
        "batch_wait_s": 60.0,
    }
    assert (batched.ttft_s, batched.streamed, batched.retries) == (None, False, 0)
    expected = {
        "plain": ("Paris is the capital", "stop", ""),
        "reasoning": ("Paris", "stop", "France's capital is Paris"),
        "tools": ("", "tool_calls", ""),
        "truncated": ("one two three", "length", ""),
        "cached": ("Paris", "stop", ""),
        "inline-thinking": ("Paris", "stop", "hmm"),
    }[case]
    assert (batched.text, batched.finish_reason, batched.reasoning) == expected
    if case == "tools":
        assert batched.tool_calls[0]["name"] == "lookup"
        assert json.loads(batched.tool_calls[0]["arguments"]) == {"q": "France"}
    if case == "cached":
        assert batched.cached_input_tokens == 3
    if case == "reasoning":
        assert batched.reasoning_tokens == 4
