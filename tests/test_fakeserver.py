"""Tests for the fake OpenAI-compatible server used as a test double."""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

try:  # tests/ on sys.path (no tests/__init__.py)
    from fakeserver import FakeLLMServer, Rule, fake_llm, peak_in_flight
except ImportError:  # pragma: no cover - tests is a package
    from tests.fakeserver import FakeLLMServer, Rule, fake_llm, peak_in_flight  # noqa: F401


def _msgs(text: Any) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def post(
    server: FakeLLMServer,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
    path: str = "/v1/chat/completions",
) -> tuple[int, dict[str, str], dict[str, Any]]:
    """POST JSON; return (status, lower-cased headers, parsed JSON body) also for errors."""
    req = urllib.request.Request(
        server.root_url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, json.load(resp)
    except urllib.error.HTTPError as err:
        with err:
            return err.code, {k.lower(): v for k, v in err.headers.items()}, json.load(err)


def stream(
    server: FakeLLMServer, body: dict[str, Any]
) -> tuple[http.client.HTTPResponse, list[Any]]:
    """POST a streamed request; return the response and the SSE data payloads (parsed)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request(
        "POST",
        "/v1/chat/completions",
        body=json.dumps({**body, "stream": True}),
        headers={"Content-Type": "application/json"},
    )
    resp = conn.getresponse()
    raw = resp.read().decode()  # no Content-Length: reads until the server closes
    conn.close()
    events: list[Any] = []
    for block in raw.split("\n\n"):
        if not block.strip():
            continue
        assert block.startswith("data: "), block
        data = block[len("data: ") :]
        events.append(data if data == "[DONE]" else json.loads(data))
    return resp, events


def reply_of(body: dict[str, Any]) -> str:
    return body["choices"][0]["message"]["content"]


def test_non_streamed_reply_and_usage(fake_llm: FakeLLMServer) -> None:
    fake_llm.add_rule(Rule(reply="the answer is forty two"))
    status, headers, body = post(
        fake_llm,
        {
            "model": "fake-model",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "what is  the\nanswer?"},
            ],
        },
    )
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert body["object"] == "chat.completion"
    assert body["model"] == "fake-model"
    assert body["id"].startswith("chatcmpl-")
    assert isinstance(body["created"], int)
    choice = body["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "the answer is forty two"}
    assert choice["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 6, "completion_tokens": 5, "total_tokens": 11}


def test_default_reply_and_min_one_prompt_token() -> None:
    with FakeLLMServer(default_reply="fallback text") as srv:
        status, _, body = post(srv, {"model": "m", "messages": _msgs("")})
    assert status == 200
    assert reply_of(body) == "fallback text"
    assert body["usage"]["prompt_tokens"] == 1
    assert body["usage"]["completion_tokens"] == 2


def test_streamed_chunks_reassemble_with_usage() -> None:
    reply = "Paris is the capital of France."
    with FakeLLMServer([Rule(reply=reply)], chunk_size=5) as srv:
        resp, events = stream(
            srv,
            {
                "model": "fake-model",
                "messages": _msgs("capital of France?"),
                "stream_options": {"include_usage": True},
            },
        )
    assert resp.status == 200
    assert resp.getheader("Content-Type") == "text/event-stream"
    assert resp.getheader("Connection") == "close"
    assert resp.getheader("Content-Length") is None
    assert resp.getheader("Transfer-Encoding") is None
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content = [c["choices"][0]["delta"]["content"] for c in chunks[1:-2]]
    assert all(len(p) <= 5 for p in content)
    assert len(content) == 7  # ceil(31 / 5)
    assert "".join(content) == reply
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-2]["choices"][0]["delta"] == {}
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {"prompt_tokens": 3, "completion_tokens": 6, "total_tokens": 9}
    assert all("usage" not in c for c in chunks[:-1])


def test_streamed_without_include_usage_has_no_usage_chunk(fake_llm: FakeLLMServer) -> None:
    _, events = stream(fake_llm, {"model": "fake-model", "messages": _msgs("hi")})
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["choices"] for c in chunks)
    assert all("usage" not in c for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "ok"


def test_stream_token_delay_spaces_chunks() -> None:
    with FakeLLMServer([Rule(reply="abcdefgh")], chunk_size=2, token_delay_s=0.05) as srv:
        t0 = time.monotonic()
        _, events = stream(srv, {"model": "m", "messages": _msgs("x")})
        elapsed = time.monotonic() - t0
    assert len(events) == 1 + 4 + 1 + 1  # role, 4 pieces, finish, [DONE]
    assert elapsed >= 0.15  # three sleeps between four pieces


def test_rules_by_substring_first_match_wins(fake_llm: FakeLLMServer) -> None:
    fake_llm.add_rule(Rule(match="weather", reply="sunny"))
    fake_llm.add_rule(Rule(match="weather in London", reply="never reached"))
    fake_llm.add_rule(Rule(match="capital", reply="Paris"))
    body = {
        "model": "fake-model",
        "messages": [
            {"role": "user", "content": "tell me the capital"},
            {"role": "assistant", "content": "which one?"},
            {"role": "user", "content": "weather in London please"},
        ],
    }
    assert reply_of(post(fake_llm, body)[2]) == "sunny"  # last user message only
    assert reply_of(post(fake_llm, {**body, "messages": _msgs("capital?")})[2]) == "Paris"
    assert reply_of(post(fake_llm, {**body, "messages": _msgs("something else")})[2]) == "ok"


def test_rules_by_model(fake_llm: FakeLLMServer) -> None:
    fake_llm.add_rule(Rule(model="model-a", reply="from a"))
    fake_llm.add_rule(Rule(model="model-b", match="hello", reply="from b"))
    assert reply_of(post(fake_llm, {"model": "model-a", "messages": _msgs("hello")})[2]) == "from a"
    assert reply_of(post(fake_llm, {"model": "model-b", "messages": _msgs("hello")})[2]) == "from b"
    assert reply_of(post(fake_llm, {"model": "model-b", "messages": _msgs("bye")})[2]) == "ok"
    assert reply_of(post(fake_llm, {"model": "model-c", "messages": _msgs("hello")})[2]) == "ok"


def test_rule_times_then_falls_through(fake_llm: FakeLLMServer) -> None:
    fake_llm.add_rule(Rule(match="q", status=503, error_message="busy", times=2))
    fake_llm.add_rule(Rule(match="q", reply="finally"))
    req = {"model": "fake-model", "messages": _msgs("q")}
    # a non-matching request does not consume the budget
    assert reply_of(post(fake_llm, {**req, "messages": _msgs("other")})[2]) == "ok"
    statuses = [post(fake_llm, req)[0] for _ in range(2)]
    assert statuses == [503, 503]
    status, _, body = post(fake_llm, req)
    assert status == 200 and reply_of(body) == "finally"
    assert post(fake_llm, req)[0] == 200


def test_error_status_json_body_and_retry_after(fake_llm: FakeLLMServer) -> None:
    fake_llm.add_rule(Rule(status=429, error_message="slow down", retry_after=2))
    status, headers, body = post(fake_llm, {"model": "fake-model", "messages": _msgs("hi")})
    assert status == 429
    assert headers["content-type"] == "application/json"
    assert headers["retry-after"] == "2"
    assert body["error"]["message"] == "slow down"
    assert body["error"]["type"] == "rate_limit_error"
    assert body["error"]["code"] == "rate_limit_exceeded"


def test_error_for_streamed_request_is_json_and_no_retry_after_by_default() -> None:
    with FakeLLMServer([Rule(status=500, error_message="boom")]) as srv:
        status, headers, body = post(srv, {"model": "m", "messages": _msgs("x"), "stream": True})
    assert status == 500
    assert "retry-after" not in headers
    assert body["error"]["message"] == "boom"
    assert body["error"]["type"] == "server_error"


def test_echo_auth_puts_authorization_in_message(fake_llm: FakeLLMServer) -> None:
    fake_llm.add_rule(Rule(status=401, error_message="bad key", echo_auth=True))
    status, _, body = post(
        fake_llm,
        {"model": "fake-model", "messages": _msgs("hi")},
        headers={"Authorization": "Bearer sk-secret-123"},
    )
    assert status == 401
    assert body["error"]["message"].startswith("bad key")
    assert "Bearer sk-secret-123" in body["error"]["message"]


def test_error_without_echo_auth_keeps_secret_out(fake_llm: FakeLLMServer) -> None:
    fake_llm.add_rule(Rule(status=400, error_message="nope"))
    _, _, body = post(
        fake_llm,
        {"model": "fake-model", "messages": _msgs("hi")},
        headers={"Authorization": "Bearer sk-secret-123"},
    )
    assert body["error"]["message"] == "nope"


def test_max_tokens_truncates_and_sets_length(fake_llm: FakeLLMServer) -> None:
    fake_llm.add_rule(Rule(reply="one two  three four five"))
    base = {"model": "fake-model", "messages": _msgs("count")}
    _, _, body = post(fake_llm, {**base, "max_tokens": 3})
    assert reply_of(body) == "one two  three"
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 3
    _, _, body = post(fake_llm, {**base, "max_tokens": 5})
    assert reply_of(body) == "one two  three four five"
    assert body["choices"][0]["finish_reason"] == "stop"
    _, events = stream(
        fake_llm, {**base, "max_tokens": 2, "stream_options": {"include_usage": True}}
    )
    chunks = events[:-1]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == "one two"
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["usage"]["completion_tokens"] == 2


def test_requests_recorded_with_body_and_headers(fake_llm: FakeLLMServer) -> None:
    before = time.time()
    body = {"model": "fake-model", "messages": _msgs("record me"), "temperature": 0}
    post(fake_llm, body, headers={"Authorization": "Bearer k", "X-Custom": "v1"})
    post(fake_llm, body, path="/chat/completions")
    assert len(fake_llm.requests) == 2
    first, second = fake_llm.requests
    assert first.path == "/v1/chat/completions"
    assert first.body == body
    assert first.headers["authorization"] == "Bearer k"
    assert first.headers["x-custom"] == "v1"
    assert all(k == k.lower() for k in first.headers)
    assert before <= first.time <= second.time <= time.time()
    assert second.path == "/chat/completions"
    fake_llm.add_rule(Rule(reply="r"))
    fake_llm.reset()
    assert fake_llm.requests == []
    assert reply_of(post(fake_llm, body)[2]) == "ok"  # rules were cleared too


def test_get_models(fake_llm: FakeLLMServer) -> None:
    with urllib.request.urlopen(fake_llm.base_url + "/models", timeout=5) as resp:
        assert resp.status == 200
        body = json.load(resp)
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["fake-model"]


def test_content_as_list_of_parts(fake_llm: FakeLLMServer) -> None:
    fake_llm.add_rule(Rule(match="blue sky", reply="matched parts"))
    content = [
        {"type": "text", "text": "why is the"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "text", "text": "blue sky blue?"},
    ]
    status, _, body = post(fake_llm, {"model": "fake-model", "messages": _msgs(content)})
    assert status == 200
    assert reply_of(body) == "matched parts"
    assert body["usage"]["prompt_tokens"] == 6


def test_delay_before_first_byte(fake_llm: FakeLLMServer) -> None:
    fake_llm.add_rule(Rule(match="slow", delay_s=0.2, reply="late"))
    t0 = time.monotonic()
    _, _, body = post(fake_llm, {"model": "fake-model", "messages": _msgs("slow")})
    assert time.monotonic() - t0 >= 0.2
    assert reply_of(body) == "late"


def test_peak_in_flight_counts_requests_held_at_once(fake_llm: FakeLLMServer) -> None:
    fake_llm.add_rule(Rule(match="slow", delay_s=0.3))
    body = {"model": "fake-model", "messages": _msgs("slow")}
    post(fake_llm, {"model": "fake-model", "messages": _msgs("quick")})
    post(fake_llm, {"model": "fake-model", "messages": _msgs("quick")})
    assert peak_in_flight(fake_llm.chat_requests()) == 1, "one after the other"
    threads = [threading.Thread(target=post, args=(fake_llm, body)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    requests = fake_llm.chat_requests()
    assert all(r.arrived < r.answered for r in requests if r.answered is not None)
    assert [r.answered is not None for r in requests] == [True] * 5
    assert peak_in_flight(requests[2:]) == 3
    assert peak_in_flight(requests) == 3
    assert peak_in_flight([]) == 0


def test_keep_alive_json_and_unknown_routes(fake_llm: FakeLLMServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", fake_llm.port, timeout=5)
    try:
        payload = json.dumps({"model": "fake-model", "messages": _msgs("a")})
        for _ in range(2):  # two requests on one connection need correct Content-Length
            conn.request("POST", "/v1/chat/completions", body=payload)
            resp = conn.getresponse()
            assert resp.status == 200
            assert int(resp.getheader("Content-Length")) > 0
            assert reply_of(json.loads(resp.read())) == "ok"
        conn.request("POST", "/v1/audio/speech", body=payload)
        resp = conn.getresponse()
        assert resp.status == 404
        assert "error" in json.loads(resp.read())
        conn.request("POST", "/v1/chat/completions", body=b"{not json")
        resp = conn.getresponse()
        assert resp.status == 400
        assert json.loads(resp.read())["error"]["type"] == "invalid_request_error"
    finally:
        conn.close()


def test_embeddings_are_letter_counts_with_usage(fake_llm: FakeLLMServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", fake_llm.port, timeout=5)
    try:
        payload = json.dumps({"model": "emb", "input": ["ab a", "zz"]})
        conn.request("POST", "/v1/embeddings", body=payload)
        body = json.loads(conn.getresponse().read())
        first, second = (item["embedding"] for item in body["data"])
        assert first[:3] == [2.0, 1.0, 0.0] and second[25] == 2.0 and len(second) == 26
        assert body["usage"] == {"prompt_tokens": 3, "total_tokens": 3}
        conn.request("POST", "/v1/embeddings", body=json.dumps({"input": 3}))
        assert conn.getresponse().status == 400
    finally:
        conn.close()


def test_lifecycle_base_url_and_stop() -> None:
    srv = FakeLLMServer()
    with pytest.raises(RuntimeError):
        _ = srv.base_url
    srv.start()
    port = srv.port
    assert srv.base_url == f"http://127.0.0.1:{port}/v1"
    # an idle keep-alive connection must not keep stop() from finishing
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", "/v1/models")
    conn.getresponse().read()
    serving = srv._thread
    assert serving is not None
    srv.stop()
    assert not serving.is_alive()
    assert conn.sock.recv(1) == b"", "stop() closed the idle connection"
    conn.close()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1)
    srv.stop()  # idempotent
