"""Faults that say what happened: cut streams, refused connections, timeouts, malformed bodies.

Every error is an *error* outcome with a precise ``error_kind`` and one line naming the cause,
never a score on a partial answer and never litellm's made-up "HTTP 500".
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from typing import Any

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported in pytester runs)
import pytest
from conftest import FAKE_KEY_ENV, FRANCE, Bench, Rule

from pytest_llmbench.models.providers import errors, litellm_client
from pytest_llmbench.models.providers.completion import CallTarget
from pytest_llmbench.models.providers.transport_retry import Timeouts

LONG_REPLY = "Paris is the capital of France and its largest city by far"


def _profile_at(bench: Bench, name: str, api_base: str) -> None:
    """A profile ``name`` whose endpoint is ``api_base``."""
    bench.pytester.makefile(
        ".yaml",
        **{
            f"profiles/{name}": f"""
models:
  {name}:
    model: openai/fake-model
    api_base: {api_base}
    api_key_env: {FAKE_KEY_ENV}
"""
        },
    )


@pytest.fixture
def closed_port() -> int:
    """A local port nothing listens on (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def unanswered_port() -> Iterator[int]:
    """A local port whose accept queue is full: a connection attempt waits, never completes."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = int(server.getsockname()[1])
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        try:
            filler.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(filler)
    try:
        yield port
    finally:
        for filler in fillers:
            filler.close()
        server.close()


def test_stream_cut_mid_answer_is_retried_not_scored(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply=LONG_REPLY, cut_after=1, times=1))
    bench.server.add_rule(Rule(reply="Paris."))
    bench.eval_file("one", FRANCE)
    result = bench.run("--models=fake", "--stream=all")
    result.assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["transport_retries"] == 1 and record["response"] == "Paris."
    assert len(bench.server.chat_requests()) == 2


def test_stream_always_cut_mid_answer_is_an_error_not_a_failure(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply=LONG_REPLY, cut_after=2))
    bench.eval_file("one", FRANCE)
    result = bench.run("--models=fake", "--stream=all", "--max-retries=1")
    result.assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["outcome"] == "error" and record["score"] is None
    assert record["error_kind"] == "provider" and record["transport_retries"] == 1
    assert "stream was cut after 8 characters" in record["error"]
    assert record.get("response") is None
    assert len(bench.server.chat_requests()) == 2


def test_connection_refused_names_host_and_port(bench: Bench, closed_port: int) -> None:
    _profile_at(bench, "gone", f"http://127.0.0.1:{closed_port}/v1")
    bench.eval_file("one", FRANCE)
    result = bench.run("--models=gone", "--max-retries=1")
    result.assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "connection"
    assert record["transport_retries"] == 1
    assert f"cannot connect to 127.0.0.1:{closed_port}: connection refused" in record["error"]
    assert "HTTP 500" not in record["error"]
    out = result.stdout.str()
    # Said once in the error report (the short summary may repeat it, as wide as the terminal).
    errors_section = out.split("= ERRORS =")[1].split("llmbench leaderboard")[0]
    assert errors_section.count(f"127.0.0.1:{closed_port}: connection refused") == 1
    assert "During handling of the above exception" not in out


def test_unknown_host_is_a_connection_error(bench: Bench) -> None:
    _profile_at(bench, "nowhere", "http://llmbench-no-such-host.invalid:8080/v1")
    bench.eval_file("one", FRANCE)
    result = bench.run("--models=nowhere", "--max-retries=0")
    result.assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "connection"
    assert (
        "cannot connect to llmbench-no-such-host.invalid:8080: host name not resolved"
        in (record["error"])
    )
    assert "HTTP 500" not in record["error"]


def test_connect_timeout_is_its_own_bound(bench: Bench, unanswered_port: int) -> None:
    _profile_at(bench, "stuck", f"http://127.0.0.1:{unanswered_port}/v1")
    bench.eval_file("one", FRANCE)
    args = ("--models=stuck", "--max-retries=0", "--request-timeout=60", "--connect-timeout=0.3")
    result = bench.run(*args)
    result.assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "timeout"
    assert f"cannot connect to 127.0.0.1:{unanswered_port} within 0.3 s" in record["error"]


def test_connect_timeout_reaches_the_http_client() -> None:
    target = CallTarget("t", "openai/m")
    timeouts = Timeouts
    kwargs = litellm_client._request_kwargs(target, [], {}, True, timeouts(30.0, 4.0))
    assert (kwargs["timeout"].connect, kwargs["timeout"].read) == (4.0, 30.0)
    # A connect bound longer than the whole call's is the whole call's.
    kwargs = litellm_client._request_kwargs(target, [], {}, True, timeouts(2.0, 4.0))
    assert kwargs["timeout"].connect == 2.0


def test_request_timeout_bounds_a_slow_stream(bench: Bench) -> None:
    # Every chunk comes in time, but the whole answer does not.
    bench.server.token_delay_s = 0.3
    bench.server.add_rule(Rule(reply=LONG_REPLY))
    bench.eval_file("one", FRANCE)
    args = ("--models=fake", "--stream=all", "--max-retries=0", "--request-timeout=0.5")
    result = bench.run(*args)
    result.assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "timeout"
    assert "no complete answer within 0.5 s" in record["error"]
    assert "HTTP 500" not in record["error"] and "MidStreamFallback" not in record["error"]


def test_unanswered_request_times_out_as_timeout(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply="Paris.", delay_s=3))
    bench.eval_file("one", FRANCE)
    args = ("--models=fake", "--stream=all", "--max-retries=0", "--request-timeout=0.5")
    bench.run(*args).assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "timeout"
    assert "no complete answer within 0.5 s" in record["error"]


def test_malformed_body_is_its_own_kind(bench: Bench) -> None:
    bench.server.add_rule(Rule(raw_body=b'{"id": "chatcmpl-1", "choi'))
    bench.eval_file("one", FRANCE)
    result = bench.run("--models=fake", "--stream=off", "--max-retries=1")
    result.assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "malformed" and record["transport_retries"] == 1
    assert "not valid JSON" in record["error"] and "HTTP 500" not in record["error"]
    assert len(bench.server.chat_requests()) == 2


def test_errored_item_keeps_retries_and_rate_limit_wait(bench: Bench) -> None:
    bench.server.add_rule(Rule(status=429, retry_after=0.2))
    bench.eval_file("one", FRANCE)
    result = bench.run("--models=fake", "--max-retries=2")
    result.assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["transport_retries"] == 2
    # Two waits of the server's Retry-After, as the adapter slept them.
    assert record["rate_limit_wait_s"] == pytest.approx(0.4)
    assert len(bench.server.chat_requests()) == 3


def test_pytest_timeout_on_an_eval_item_is_a_clean_timeout_error(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply="Paris.", delay_s=3))
    bench.eval_file("one", FRANCE)
    args = ("--models=fake", "--max-retries=0", "--request-timeout=60", "--timeout=0.5")
    result = bench.run(*args)
    result.assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["error_kind"] == "timeout"
    assert "pytest-timeout: the item ran past --timeout 0.5 s" in record["error"]
    out = result.stdout.str() + result.stderr.str()
    assert "Stack of" not in out and "+ Timeout +" not in out
    assert "Traceback" not in out and "During handling" not in out


FIRST_CALLS = """
import asyncio, json, sys

from pytest_llmbench.models.providers import calls, litellm_client
from pytest_llmbench.models.providers.completion import CallTarget

litellm = litellm_client.import_litellm()
completion = litellm.acompletion
imported_while_timed = []


async def timed(**kwargs):
    # _call_once starts its clock just before this call and stops it after the stream.
    before = set(sys.modules)
    response = await completion(**kwargs)
    imported_while_timed.append(sorted(set(sys.modules) - before))
    return response


litellm.acompletion = timed
target = CallTarget("first", "openai/fake-model", sys.argv[1], "sk-test", client="litellm")


async def main():
    pending = [
        calls.acomplete(target, [{"role": "user", "content": f"q{n}"}], {})
        for n in range(4)
    ]
    await asyncio.gather(*pending)


asyncio.run(main())
print(json.dumps(imported_while_timed))
"""


LEAN_FIRST_CALLS = """
import asyncio, json, sys

from pytest_llmbench.models.providers import calls, openai_compatible
from pytest_llmbench.models.providers.completion import CallTarget

post = openai_compatible._post
imported_while_timed = []


class Timed:
    # chat_once starts its clock just before _post and stops it after the answer is read.
    def __init__(self, *args):
        self.before = set(sys.modules)
        self.request = post(*args)

    async def __aenter__(self):
        return await self.request.__aenter__()

    async def __aexit__(self, *exc):
        await self.request.__aexit__(*exc)
        imported_while_timed.append(sorted(set(sys.modules) - self.before))


openai_compatible._post = Timed
target = CallTarget("first", "openai/fake-model", sys.argv[1], "sk-test")


async def main():
    pending = [
        calls.acomplete(target, [{"role": "user", "content": f"q{n}"}], {}, stream=n % 2 == 0)
        for n in range(4)
    ]
    await asyncio.gather(*pending)
    await openai_compatible.close_sessions()


asyncio.run(main())
print(json.dumps(imported_while_timed))
"""


@pytest.mark.parametrize("client", ["litellm", "lean"])
def test_first_calls_time_no_first_use_work(
    pytester: pytest.Pytester, fake_llm: Any, client: str
) -> None:
    """A fresh process's first concurrent calls import nothing while their clocks run: the
    first-use imports (litellm: about 500 modules, 0.4 s; the lean client: aiohttp's) are done
    before, outside latency and TTFT."""
    text = FIRST_CALLS if client == "litellm" else LEAN_FIRST_CALLS
    script = pytester.makepyfile(first_calls=text)
    result = pytester.run(sys.executable, str(script), fake_llm.base_url)
    assert result.ret == 0, result.stderr.str()
    imported = json.loads(result.stdout.lines[-1])
    assert len(imported) == 4
    counts = [len(modules) for modules in imported]
    assert counts == [0, 0, 0, 0], f"modules imported inside each first call's clock: {counts}"


def test_a_stream_that_timed_out_mid_way_is_a_timeout_not_an_http_500(litellm_loaded: Any) -> None:
    """litellm wraps a stream's read timeout in a MidStreamFallbackError (a made-up 503), its
    cause kept as an attribute, not chained."""
    import httpx
    from litellm.exceptions import MidStreamFallbackError

    cause = httpx.ReadTimeout("read timed out")
    wrapped = MidStreamFallbackError(
        message="stream failed", model="m", llm_provider="openai", original_exception=cause
    )
    target = CallTarget("slow", "openai/m", "http://127.0.0.1:9/v1")
    limits = Timeouts(2.0, 1.0)
    error = errors.provider_error(wrapped, target, 1, limits)
    assert error.kind == "timeout" and error.retries == 1
    assert error.message == "slow: Timeout after 2 attempts: no complete answer within 2 s"
