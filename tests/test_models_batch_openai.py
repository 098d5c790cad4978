"""OpenAI's Batch API through the lean client, against the fake server's files and batches
endpoints: upload, create, poll, results; expiry, failure, cancellation; missing, duplicated,
malformed and unknown lines; a batch found again after a kill; no request sent twice."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest
from conftest import FakeLLMServer, Rule
from fakeserver import BatchScript

from pytest_llmbench.models.item_errors import BatchError, ProviderError
from pytest_llmbench.models.providers import routes
from pytest_llmbench.models.providers.batch_backend import (
    CANCELLED,
    COMPLETED,
    EXPIRED,
    FAILED,
    IN_PROGRESS,
    BatchLine,
    BatchState,
    Results,
)
from pytest_llmbench.models.providers.batch_lines import input_sha256
from pytest_llmbench.models.providers.batch_openai import MAX_BYTES, SHA_KEY, OpenAIBatches
from pytest_llmbench.models.providers.completion import CallTarget, Completion
from pytest_llmbench.models.providers.openai_compatible import close_sessions

T = TypeVar("T")
KEY = "sk-batch-secret-0123456789"


def run(make: Callable[[], Awaitable[T]]) -> T:
    """``make()`` on a fresh event loop, its HTTP session closed at the end."""

    async def main() -> T:
        try:
            return await make()
        finally:
            await close_sessions()

    return asyncio.run(main())


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    rules = [Rule(match="capital", reply="Paris"), Rule(match="refuse", status=400,
             error_message="this prompt is refused")]  # fmt: skip
    with FakeLLMServer(rules) as fake:
        yield fake


def _target(server: FakeLLMServer, **changes: Any) -> CallTarget:
    fields: dict[str, Any] = {
        "name": "fake",
        "model_id": "openai/fake-model",
        "api_base": server.base_url,
        "api_key": KEY,
        "cost_per_1k_input": 1.0,
        "cost_per_1k_output": 2.0,
    }
    return CallTarget(**{**fields, **changes})


def _lines(server: FakeLLMServer, *prompts: str, kind: str = "chat") -> list[BatchLine]:
    target = _target(server)
    return [
        BatchLine(f"id-{n}", target, [{"role": "user", "content": prompt}], {}, kind)
        for n, prompt in enumerate(prompts, start=1)
    ]


def _backend(server: FakeLLMServer) -> OpenAIBatches:
    return OpenAIBatches(routes.endpoint(_target(server)))


async def _until_done(
    backend: OpenAIBatches, batch_id: str, seen: list[str] | None = None
) -> BatchState:
    for _ in range(20):
        state = await backend.poll(batch_id)
        if seen is not None:
            seen.append(state.provider_status)
        if state.terminal:
            return state
    raise AssertionError("the batch never ended")


def _round_trip(
    server: FakeLLMServer, lines: list[BatchLine], seen: list[str] | None = None
) -> tuple[BatchState, Results]:
    backend = _backend(server)

    async def go() -> tuple[BatchState, Results]:
        batch_id = await backend.create(lines, {"llmbench_run": "r1"})
        state = await _until_done(backend, batch_id, seen)
        return state, await backend.results(state, {line.custom_id: line for line in lines})

    return run(go)


def _error(results: Results, custom_id: str) -> str:
    answer = results[custom_id]
    assert isinstance(answer, BatchError), answer
    assert answer.kind == "batch"
    return answer.message


def test_a_batch_goes_through_its_lifecycle_and_answers_each_call(server: FakeLLMServer) -> None:
    server.batch = BatchScript(polls=3)
    lines = _lines(server, "capital of France?", "capital again?", "anything")
    seen: list[str] = []
    state, results = _round_trip(server, lines, seen)
    assert seen == ["validating", "in_progress", "finalizing", "completed"]
    assert (state.status, state.total, state.done, state.failed) == (COMPLETED, 3, 3, 0)
    assert state.created_at is not None and state.expires_at == state.created_at + 86400
    texts = {custom_id: answer.text for custom_id, answer in results.items()}  # type: ignore[union-attr]
    assert texts == {"id-1": "Paris", "id-2": "Paris", "id-3": "ok"}
    answer = results["id-1"]
    assert isinstance(answer, Completion)
    assert (answer.batched, answer.batch_id, answer.latency_s, answer.ttft_s) == (
        True,
        state.batch_id,
        0.0,
        None,
    )
    assert answer.batch_wait_s is not None and answer.batch_wait_s >= 0
    # 3 input words, 1 output word at $1 and $2 per 1,000, halved
    assert answer.cost_usd == pytest.approx((3 * 1.0 + 1 * 2.0) / 1000 / 2)
    # what went over the wire: one upload, one create, the polls; no live request
    assert (server.uploads, server.creates, server.polls, server.cancels) == (1, 1, 4, 0)
    assert server.lines_received == {"id-1": 1, "id-2": 1, "id-3": 1}
    assert server.chat_requests() == []
    upload = next(r for r in server.requests if r.path == "/v1/files")
    assert upload.headers["authorization"] == f"Bearer {KEY}"
    assert upload.headers["content-type"].startswith("multipart/form-data")
    create = next(r for r in server.requests if r.path == "/v1/batches")
    backend = _backend(server)
    assert create.body["endpoint"] == "/v1/chat/completions"
    assert create.body["completion_window"] == "24h"
    assert create.body["metadata"] == {
        SHA_KEY: input_sha256(backend.input_file(lines)),
        "llmbench_run": "r1",
    }
    sent = server._batches.contents[create.body["input_file_id"]]
    assert sent == backend.input_file(lines)
    assert [json.loads(line)["custom_id"] for line in sent.splitlines()] == [
        "id-1",
        "id-2",
        "id-3",
    ]


def test_rules_answer_batch_lines_as_they_answer_live_calls(server: FakeLLMServer) -> None:
    server.add_rule(Rule(match="once", reply="first", times=1))
    lines = _lines(server, "once", "once")
    _, results = _round_trip(server, lines)
    assert [answer.text for answer in results.values()] == ["first", "ok"]  # type: ignore[union-attr]


def test_embedding_lines_are_answered_as_the_embeddings_endpoint_does(
    server: FakeLLMServer,
) -> None:
    lines = _lines(server, "abc", "zz", kind="embed")
    _, results = _round_trip(server, lines)
    vectors = {custom_id: json.loads(answer.text) for custom_id, answer in results.items()}  # type: ignore[union-attr]
    assert vectors["id-1"] == [[1.0, 1.0, 1.0] + [0.0] * 23]
    assert vectors["id-2"] == [[0.0] * 25 + [2.0]]
    create = next(r for r in server.requests if r.path == "/v1/batches")
    assert create.body["endpoint"] == "/v1/embeddings"


def test_an_expired_batch_keeps_its_answers_and_names_the_rest(server: FakeLLMServer) -> None:
    server.batch = BatchScript(end="expired", answered=1, created_ago_s=86400)
    state, results = _round_trip(server, _lines(server, "capital?", "b", "c"))
    assert (state.status, state.done, state.failed) == (EXPIRED, 1, 2)
    answer = results["id-1"]
    assert isinstance(answer, Completion)
    assert answer.batch_wait_s is not None and 86400 <= answer.batch_wait_s < 86400 + 60
    assert _error(results, "id-2") == (
        f"batch {state.batch_id}, error file line 1: batch_expired: This request could not be "
        "executed before the completion window expired."
    )
    assert "error file line 2: batch_expired" in _error(results, "id-3")


def test_an_expired_batch_without_error_lines_leaves_no_call_unanswered(
    server: FakeLLMServer,
) -> None:
    server.batch = BatchScript(end="expired", answered=1, unexecuted=False)
    state, results = _round_trip(server, _lines(server, "a", "b"))
    assert isinstance(results["id-1"], Completion)
    assert (
        _error(results, "id-2") == f"batch {state.batch_id}: no answer line for this call (expired)"
    )


def test_a_failed_batch_gives_every_call_its_errors(server: FakeLLMServer) -> None:
    failure = [{"code": "invalid_request", "message": "bad max_tokens", "line": 2}]
    server.batch = BatchScript(end="failed", failure=failure)
    state, results = _round_trip(server, _lines(server, "a", "b", "c"))
    assert state.status == FAILED
    assert state.errors == ("input line 2: invalid_request: bad max_tokens",)
    said = f"batch {state.batch_id} failed: input line 2: invalid_request: bad max_tokens"
    assert {custom_id: _error(results, custom_id) for custom_id in results} == {
        "id-1": said,
        "id-2": said,
        "id-3": said,
    }
    # the input file was read back to find line 2's call
    assert any(r.path.endswith("/content") for r in server.requests)


def test_a_batch_refused_without_line_numbers(server: FakeLLMServer) -> None:
    server.batch = BatchScript(end="failed")
    state, results = _round_trip(server, _lines(server, "a"))
    assert _error(results, "id-1") == (
        f"batch {state.batch_id} failed: invalid_request: fake batch refused"
    )


def test_a_cancelled_batch_keeps_what_was_answered(server: FakeLLMServer) -> None:
    server.batch = BatchScript(polls=5, answered=1)
    lines = _lines(server, "capital?", "b")
    backend = _backend(server)

    async def go() -> tuple[list[str], BatchState, Results]:
        batch_id = await backend.create(lines, {})
        first = await backend.poll(batch_id)
        await backend.cancel(batch_id)
        seen = [first.provider_status]
        state = await _until_done(backend, batch_id, seen)
        return seen, state, await backend.results(state, {line.custom_id: line for line in lines})

    seen, state, results = run(go)
    assert seen == ["validating", "cancelled"]
    assert state.status == CANCELLED
    assert server.cancels == 1
    assert isinstance(results["id-1"], Completion)
    assert "batch_cancelled" in _error(results, "id-2")


def test_cancelling_is_in_progress_until_cancelled(server: FakeLLMServer) -> None:
    server.batch = BatchScript(polls=5)
    backend = _backend(server)

    async def go() -> str:
        batch_id = await backend.create(_lines(server, "a"), {})
        await backend.cancel(batch_id)
        return batch_id

    batch_id = run(go)
    # the fake's batch is cancelling until the next poll
    assert server._batches.batches[batch_id]["status"] == "cancelling"
    from pytest_llmbench.models.providers.batch_openai import state_of

    state = state_of(batch_id, server._batches.batches[batch_id])
    assert (state.status, state.terminal) == (IN_PROGRESS, False)


SCRIPTED = [
    pytest.param(
        BatchScript(drop=(2,)),
        "batch {id}: no answer line for this call (completed)",
        id="dropped",
    ),
    pytest.param(
        BatchScript(duplicate=(2,)),
        "batch {id}: custom_id id-2 has 2 answer lines (output file line 2, output file line "
        "3): none is used",
        id="duplicated",
    ),
    pytest.param(
        BatchScript(malformed=(2,)),
        "batch {id}: no answer line for this call (completed); lines the batch's files hold "
        "for no call sent: batch {id}, output file line 2: not JSON",
        id="malformed",
    ),
    pytest.param(
        BatchScript(no_custom_id=(2,)),
        "batch {id}: no answer line for this call (completed); lines the batch's files hold "
        "for no call sent: batch {id}, output file line 2: no custom_id",
        id="no-custom-id",
    ),
]


@pytest.mark.parametrize(("script", "said"), SCRIPTED)
def test_a_bad_output_file_never_attaches_an_answer_to_another_call(
    server: FakeLLMServer, script: BatchScript, said: str
) -> None:
    server.batch = script
    state, results = _round_trip(server, _lines(server, "capital?", "b", "c"))
    assert _error(results, "id-2").startswith(said.format(id=state.batch_id))
    assert results["id-1"].text == "Paris"  # type: ignore[union-attr]
    assert results["id-3"].text == "ok"  # type: ignore[union-attr]


def test_an_unknown_custom_id_is_reported_and_ignored(server: FakeLLMServer) -> None:
    server.batch = BatchScript(unknown=1, reverse=True)
    state, results = _round_trip(server, _lines(server, "capital?", "b"))
    assert [answer.text for answer in results.values()] == ["Paris", "ok"]  # type: ignore[union-attr]
    assert results.problems == (
        f"batch {state.batch_id}, output file line 1: custom_id not-sent-1 was not sent in this "
        "batch",
    )


@pytest.mark.parametrize("shape", ["nested", "top"])
def test_a_batch_whose_every_line_failed_has_no_output_file(
    server: FakeLLMServer, shape: str
) -> None:
    server.batch = BatchScript(error_shape=shape)
    state, results = _round_trip(server, _lines(server, "refuse 1", "refuse 2"))
    batch = server._batches.batches[state.batch_id]
    assert batch["output_file_id"] is None and batch["error_file_id"] is not None
    assert (state.status, state.done, state.failed) == (COMPLETED, 0, 2)
    where = f"batch {state.batch_id}, error file line 2"
    said = {
        "nested": f"{where}: HTTP 400: bad_request: this prompt is refused",
        "top": f"{where}: bad_request: this prompt is refused",
    }[shape]
    assert _error(results, "id-2") == said


def test_a_batch_created_before_a_kill_is_found_by_its_input(server: FakeLLMServer) -> None:
    lines = _lines(server, "capital?", "b")

    async def go() -> tuple[str, str | None, str | None]:
        batch_id = await _backend(server).create(lines, {})
        # a new process: nothing in memory, only the input's hash written down
        again = _backend(server)
        sha = input_sha256(again.input_file(lines))
        return batch_id, await again.find(sha), await again.find("0" * 64)

    batch_id, found, other = run(go)
    assert found == batch_id
    assert other is None
    assert server.creates == 1
    assert server.lines_received == {"id-1": 1, "id-2": 1}


def test_find_reads_more_than_one_page(server: FakeLLMServer) -> None:
    lines = _lines(server, "first")
    backend = _backend(server)
    first = run(lambda: backend.create(lines, {}))
    file_id = server._batches.batches[first]["input_file_id"]
    for n in range(101):  # newer batches push it to the second page of the list
        body = {"input_file_id": file_id, "endpoint": "/v1/chat/completions",
                "completion_window": "24h", "metadata": {SHA_KEY: f"other {n}"}}  # fmt: skip
        assert server._batches._create(body)[0] == 200
    found = run(lambda: backend.find(input_sha256(backend.input_file(lines))))
    assert found == first
    listed = [r.path for r in server.requests if r.path.startswith("/v1/batches?")]
    assert listed == ["/v1/batches?limit=100", f"/v1/batches?limit=100&after={_hundredth(server)}"]


def _hundredth(server: FakeLLMServer) -> str:
    """The id of the 100th newest batch (the last of the first page)."""
    return list(reversed(list(server._batches.batches)))[99]


def test_a_create_whose_answer_is_lost_is_found_not_sent_again(server: FakeLLMServer) -> None:
    server.batch = BatchScript(lost_creates=1)
    lines = _lines(server, "capital?")
    backend = _backend(server)

    async def go() -> tuple[str, Results]:
        batch_id = await backend.create(lines, {})
        state = await _until_done(backend, batch_id)
        return batch_id, await backend.results(state, {line.custom_id: line for line in lines})

    batch_id, results = run(go)
    assert server.creates == 1
    assert server.lines_received == {"id-1": 1}
    assert list(server._batches.batches) == [batch_id]
    assert results["id-1"].text == "Paris"  # type: ignore[union-attr]


def test_http_errors_are_provider_errors_without_the_key(server: FakeLLMServer) -> None:
    backend = _backend(server)
    with pytest.raises(ProviderError) as raised:
        run(lambda: backend.poll("batch_nope"))
    error = raised.value
    assert error.kind == "provider"
    assert error.message == (
        f"openai batch API (127.0.0.1:{server.port}): NotFoundError (HTTP 404): No such Batch "
        "object: batch_nope"
    )
    assert KEY not in error.message
    with pytest.raises(ProviderError, match=r"HTTP 400\): Cannot cancel a batch with status"):

        async def cancel_done() -> None:
            batch_id = await backend.create(_lines(server, "a"), {})
            await _until_done(backend, batch_id)
            await backend.cancel(batch_id)

        run(cancel_done)


def test_a_server_without_the_batch_api_is_a_provider_error() -> None:
    with FakeLLMServer() as plain:
        backend = _backend(plain)
        with pytest.raises(ProviderError) as raised:
            run(lambda: backend.poll("batch_x"))
    assert "NotFoundError (HTTP 404)" in raised.value.message


def test_lines_that_cannot_be_one_batch_are_refused(server: FakeLLMServer) -> None:
    backend = _backend(server)
    chat, embed = _lines(server, "a")[0], _lines(server, "b", kind="embed")[0]
    other_model = BatchLine("o", _target(server, model_id="openai/other-model"), chat.messages, {})
    elsewhere = BatchLine("e", _target(server, api_base="http://127.0.0.2:1/v1"), [], {})
    cases = [
        ([], "a batch needs at least one line"),
        ([chat, embed], "one kind of call per batch, not chat, embed"),
        ([chat, chat], "custom_id id-1 is twice in the batch"),
        ([chat, other_model], "one model per batch, not fake-model, other-model"),
        ([elsewhere], "fake is served at http://127.0.0.2:1/v1, not http://127.0.0.1"),
    ]
    for lines, said in cases:
        with pytest.raises(ValueError, match=said.replace("(", r"\(")):
            backend.input_file(lines)
    assert backend.max_lines == 50_000
    assert backend.max_bytes == MAX_BYTES == 190_000_000
    backend.max_lines = 1
    with pytest.raises(ValueError, match="2 lines: a batch holds at most 1"):
        backend.input_file(_lines(server, "a", "b"))
    many = [{"role": "user", "content": "a"}] * 50_001
    too_many = BatchLine("m", _target(server), many, {}, "embed")
    with pytest.raises(ValueError, match="50001 texts to embed: a batch embeds at most 50000"):
        OpenAIBatches(backend.endpoint).input_file([too_many])
    with pytest.raises(ValueError, match="batch metadata holds at most 16 pairs"):
        run(lambda: backend.create([chat], {f"k{n}": "v" for n in range(16)}))
    assert server.uploads == 0


def test_a_batch_of_two_models_is_refused_by_the_fake_as_openai_does(
    server: FakeLLMServer,
) -> None:
    """The fake validates an input file as OpenAI does (one model, the batch's endpoint)."""
    lines = [
        {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": "m1", "messages": []}},
        {"custom_id": "b", "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": "m2", "messages": []}},
        {"custom_id": "b", "method": "POST", "url": "/v1/embeddings", "body": {"model": "m1"}},
    ]  # fmt: skip
    file_id = server._batches._store(
        b"".join(json.dumps(line).encode() + b"\n" for line in lines), "in.jsonl", "batch"
    )
    status, created = server._batches._create(
        {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    )
    assert status == 200
    backend = _backend(server)
    state = run(lambda: backend.poll(str(created["id"])))
    assert state.status == FAILED
    assert state.errors == (
        "input line 2: mismatched_model: All requests in a batch must use one model.",
        "input line 3: duplicate_custom_id: The custom_id for this request is a duplicate.",
        "input line 3: mismatched_endpoint: The url must be /v1/chat/completions.",
    )
