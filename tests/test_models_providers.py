"""Provider trouble through the litellm adapter: retries, Retry-After, timeouts, missing keys.

An outage is an *error* outcome (pytest ERROR in setup), never a low score, and it is kept out of
score means but counted in the error rate of every CSV.
"""

from __future__ import annotations

import csv
import datetime as dt
import email.utils
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported in pytester runs)
import pytest
from conftest import FAKE_KEY, FAKE_KEY_ENV, FRANCE, TWO_CAPITALS, Bench, Rule

from pytest_llmbench.models.providers import transport_retry
from pytest_llmbench.models.providers.completion import CallTarget
from pytest_llmbench.models.providers.litellm_client import _register_prices
from pytest_llmbench.models.providers.transport_retry import backoff_s as _backoff_s
from pytest_llmbench.models.providers.transport_retry import retry_after_s as _retry_after_s


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_server_error_then_success_passes_with_one_retry(bench: Bench) -> None:
    bench.server.add_rule(Rule(status=500, times=1, retry_after=0.05))
    bench.server.add_rule(Rule(reply="Paris."))
    bench.eval_file("capitals", FRANCE)
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["outcome"] == "passed"
    assert record["transport_retries"] == 1
    assert record["error"] is None and record["error_kind"] is None
    assert record["response"] == "Paris."
    assert len(bench.server.chat_requests()) == 2
    (row,) = _csv(bench.out("all_metrics.csv"))
    assert row["transport_retries_total"] == "1"
    assert row["n_errors"] == "0"


@pytest.mark.slow
def test_rate_limit_retry_after_is_honoured(bench: Bench) -> None:
    # Without Retry-After the first backoff is at most 0.5 s; the header asks for longer.
    bench.server.add_rule(Rule(status=429, times=1, retry_after=0.8))
    bench.server.add_rule(Rule(reply="Paris."))
    bench.eval_file("capitals", FRANCE)
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=1)
    first, second = bench.server.chat_requests()
    assert second.time - first.time >= 0.75
    (record,) = bench.records()
    assert record["transport_retries"] == 1


def test_short_retry_after_is_used_instead_of_backoff(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits: list[float] = []
    backoff = transport_retry.backoff_s

    def spy(exc: BaseException, attempt: int) -> float:
        waits.append(backoff(exc, attempt))
        return waits[-1]

    monkeypatch.setattr(transport_retry, "backoff_s", spy)
    bench.server.add_rule(Rule(status=503, times=2, retry_after=0.01))
    bench.server.add_rule(Rule(reply="Paris."))
    bench.eval_file("capitals", FRANCE)
    bench.run("--models=fake").assert_outcomes(passed=1)
    requests = bench.server.chat_requests()
    assert len(requests) == 3
    # Exponential backoff alone would wait at least 0.25 s, then 0.5 s.
    assert waits == [0.01, 0.01]
    assert bench.records()[0]["transport_retries"] == 2


def test_unauthorized_is_an_immediate_setup_error_without_traceback(bench: Bench) -> None:
    bench.server.add_rule(Rule(status=401, error_message="Incorrect API key provided"))
    bench.eval_file("capitals", FRANCE)
    result = bench.run("--models=fake", "--max-retries=3")
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert "ERROR at setup of france[fake-r0]" in out
    assert "FAILED" not in out
    assert "Incorrect API key provided" in out
    assert "Traceback" not in out and "raise " not in out and ".py:" not in out
    assert len(bench.server.chat_requests()) == 1  # no retries for 401
    (record,) = bench.records()
    assert record["outcome"] == "error"
    assert record["passed"] is False
    assert record["error_kind"] == "provider"
    assert record["transport_retries"] == 0
    assert "401" in record["error"] and "Incorrect API key provided" in record["error"]
    assert record["score"] is None and record["response"] is None


def test_persistent_server_error_gives_up_after_max_retries(bench: Bench) -> None:
    bench.server.add_rule(Rule(status=503, retry_after=0.05, error_message="overloaded"))
    bench.eval_file("capitals", FRANCE)
    result = bench.run("--models=fake", "--max-retries=1")
    result.assert_outcomes(errors=1)
    assert len(bench.server.chat_requests()) == 2
    (record,) = bench.records()
    assert record["outcome"] == "error"
    assert record["error_kind"] == "provider"
    assert record["transport_retries"] == 1
    assert "overloaded" in record["error"] and "503" in record["error"]
    assert "after 2 attempts" in record["error"]
    (row,) = _csv(bench.out("all_metrics.csv"))
    assert row["transport_retries_total"] == "1"
    assert row["n_errors"] == "1"


def test_zero_max_retries_makes_one_attempt(bench: Bench) -> None:
    bench.server.add_rule(Rule(status=500, retry_after=0.05))
    bench.eval_file("capitals", FRANCE)
    bench.run("--models=fake", "--max-retries=0").assert_outcomes(errors=1)
    assert len(bench.server.chat_requests()) == 1
    assert bench.records()[0]["transport_retries"] == 0


def test_slow_provider_times_out(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply="Paris.", delay_s=2))
    bench.eval_file("capitals", FRANCE)
    result = bench.run("--models=fake", "--request-timeout=0.5", "--max-retries=0")
    result.assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["outcome"] == "error"
    assert record["error_kind"] == "timeout"
    assert record["response"] is None


def test_missing_key_names_the_variable_and_sends_nothing(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(FAKE_KEY_ENV)
    bench.eval_file("capitals", FRANCE)
    result = bench.run("--models=fake")
    result.assert_outcomes(errors=1)
    assert FAKE_KEY_ENV in result.stdout.str()
    assert "Traceback" not in result.stdout.str()
    assert bench.server.chat_requests() == []
    (record,) = bench.records()
    assert record["outcome"] == "error"
    assert record["error_kind"] == "missing_key"
    assert FAKE_KEY_ENV in record["error"]
    assert record["transport_retries"] == 0


@pytest.mark.parametrize(("policy", "rate"), [("fail", 0.5), ("skip", 1.0)])
def test_errors_are_counted_in_error_rate_and_graded_as_the_policy_says(
    bench: Bench, policy: str, rate: float
) -> None:
    bench.server.add_rule(Rule(match="Japan", status=500, retry_after=0.01))
    bench.server.add_rule(Rule(match="France", reply="Paris."))
    bench.eval_file("capitals", TWO_CAPITALS)
    result = bench.run("--models=fake", "--max-retries=0", f"--errors-count-as={policy}")
    result.assert_outcomes(passed=1, errors=1)
    (row,) = _csv(bench.out("all_metrics.csv"))
    assert row["n_items"] == "2"
    assert row["n_passed"] == "1" and row["n_failed"] == "0" and row["n_errors"] == "1"
    assert float(row["error_rate"]) == pytest.approx(0.5)
    # fail: the error is a failure scored 0; skip: it is left out of both.
    assert float(row["pass_rate"]) == pytest.approx(rate)
    assert float(row["score_mean"]) == pytest.approx(rate)
    assert float(row["coverage"]) == pytest.approx(0.5) and row["incomplete"] == "True"
    per_model = {r["suite"]: r for r in _csv(bench.out("fake/aggregate_metrics.csv"))}
    assert per_model["__all__"]["n_errors"] == "1"
    assert float(per_model["__all__"]["error_rate"]) == pytest.approx(0.5)
    assert float(per_model["__all__"]["score_mean"]) == pytest.approx(rate)
    (board,) = _csv(bench.out("leaderboard.csv"))
    assert board["n_errors"] == "1" and float(board["score_mean"]) == pytest.approx(rate)


def test_key_sent_as_bearer_is_the_profile_key(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply="Paris."))
    bench.eval_file("capitals", FRANCE)
    bench.run("--models=fake").assert_outcomes(passed=1)
    (request,) = bench.server.chat_requests()
    assert request.headers["authorization"] == f"Bearer {FAKE_KEY}"
    assert request.body["model"] == "fake-model"
    assert request.body["stream"] is True
    assert request.body["temperature"] == 0  # from the profile's params


class _LitellmLikeError(Exception):
    """Shaped like litellm's exceptions: real headers apart, a synthetic empty response."""

    def __init__(self, headers: dict[str, str]) -> None:
        super().__init__("rate limited")
        self.status_code = 429
        self.litellm_response_headers = headers
        self.response = SimpleNamespace(headers={})


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "0.25"}, 0.25),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "-4"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_header_forms(headers: dict[str, str], expected: float | None) -> None:
    assert _retry_after_s(_LitellmLikeError(headers)) == expected


def test_retry_after_http_date() -> None:
    when = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=30)
    seconds = _retry_after_s(_LitellmLikeError({"retry-after": email.utils.format_datetime(when)}))
    assert seconds is not None and 25 <= seconds <= 30


def test_retry_after_is_capped_and_used_as_the_backoff() -> None:
    assert _backoff_s(_LitellmLikeError({"retry-after": "0.3"}), 1) == 0.3
    assert _backoff_s(_LitellmLikeError({"retry-after": "3600"}), 1) == 20.0
    assert 0.25 <= _backoff_s(_LitellmLikeError({}), 1) <= 0.5


def test_profile_prices_go_into_litellms_map_once_and_quietly(
    litellm_loaded: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """litellm prices every response itself; with the profile's prices registered it agrees."""
    priced = CallTarget(
        name="priced",
        model_id="openai/llmbench-price-probe",
        cost_per_1k_input=0.5,
        cost_per_1k_output=2.0,
    )
    unpriced = CallTarget(name="unpriced", model_id="openai/llmbench-unpriced-probe")
    with caplog.at_level(logging.WARNING):
        _register_prices(litellm_loaded, priced)
        _register_prices(litellm_loaded, unpriced)
    prompt, completion = litellm_loaded.cost_per_token(
        model="openai/llmbench-price-probe", prompt_tokens=1000, completion_tokens=1000
    )
    assert (prompt, completion) == pytest.approx((0.5, 2.0))
    assert "openai/llmbench-unpriced-probe" not in litellm_loaded.model_cost
    assert not [r for r in caplog.records if "register_model" in r.getMessage()]


def test_cut_stream_is_retried_then_passes(bench: Bench) -> None:
    bench.server.add_rule(Rule(cut_stream=True, times=1))
    bench.server.add_rule(Rule(reply="Paris"))
    bench.eval_file("one", FRANCE)
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["transport_retries"] == 1 and record["response"] == "Paris"


def test_persistently_cut_stream_is_an_error_not_an_empty_answer(bench: Bench) -> None:
    bench.server.add_rule(Rule(cut_stream=True))
    bench.eval_file("one", FRANCE)
    result = bench.run("--models=fake", "--max-retries=1")
    result.assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["outcome"] == "error" and record["score"] is None
    assert "stream ended before any answer" in record["error"]
    assert len(bench.server.chat_requests()) == 2


def test_raw_model_without_its_key_is_an_error_before_any_request(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    bench.eval_file("one", FRANCE)
    result = bench.run("--models=openai/gpt-4o-mini")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*openai/gpt-4o-mini: OPENAI_API_KEY is not set*"])
    (record,) = bench.records()
    assert record["error_kind"] == "missing_key"
    assert "Traceback" not in result.stdout.str()


def test_stream_usage_from_the_provider_is_exact(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply="Paris is the capital"))
    bench.eval_file("one", FRANCE)
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    # The fake server counts words: 6 prompt words, 4 answer words.
    assert (record["input_tokens"], record["output_tokens"]) == (6, 4)
    assert record["tokens_estimated"] is False


def test_stream_without_provider_usage_is_counted_locally_and_flagged(bench: Bench) -> None:
    bench.server.stream_usage = False
    bench.server.add_rule(Rule(reply="Paris is the capital"))
    bench.eval_file("one", FRANCE)
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["tokens_estimated"] is True
    assert record["input_tokens"] > 0 and record["output_tokens"] > 0
