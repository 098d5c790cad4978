"""The run's OpenTelemetry settings: when export is on, where spans go, and what a message about
them may show (config/otel.py)."""

from __future__ import annotations

import pytest

from pytest_llmbench.config.otel import otel_settings

BASE = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}


def test_export_is_off_without_the_option_or_an_endpoint_variable() -> None:
    assert otel_settings(False, False, {}) is None
    assert otel_settings(False, False, {"OTEL_SERVICE_NAME": "x"}) is None


def test_an_endpoint_variable_turns_export_on_and_the_traces_path_is_added() -> None:
    settings = otel_settings(False, False, BASE)
    assert settings is not None
    assert settings.endpoint == "http://127.0.0.1:4318/v1/traces"
    assert otel_settings(True, False, {}) is not None  # --otel alone: the default endpoint


def test_the_traces_endpoint_wins_and_is_taken_as_it_is() -> None:
    environ = {**BASE, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/custom"}
    settings = otel_settings(False, False, environ)
    assert settings is not None and settings.endpoint == "http://127.0.0.1:9/custom"


@pytest.mark.parametrize(
    "environ",
    [
        {**BASE, "OTEL_SDK_DISABLED": "true"},
        {**BASE, "OTEL_TRACES_EXPORTER": "none"},
    ],
)
def test_the_standard_variables_turn_export_off(environ: dict[str, str]) -> None:
    assert otel_settings(True, False, environ) is None


def test_a_query_stays_after_the_traces_path() -> None:
    settings = otel_settings(False, False, {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://h:1/?t=abc"})
    assert settings is not None and settings.endpoint == "https://h:1/v1/traces?t=abc"


def test_credentials_in_the_endpoint_are_never_shown() -> None:
    """A user and password or a query token in the URL stay out of run.json and messages."""
    secret = "https://user:s3cretpass@collector.example:4318/?token=tok123"
    settings = otel_settings(False, False, {"OTEL_EXPORTER_OTLP_ENDPOINT": secret})
    assert settings is not None
    shown = str(settings.to_dict())
    assert "s3cretpass" not in shown and "tok123" not in shown
    assert settings.shown_endpoint == "https://collector.example:4318/v1/traces"
    bad_port = "https://user:s3cretpass@collector.example:99999"
    with pytest.raises(ValueError, match="bad port") as raised:
        otel_settings(False, False, {"OTEL_EXPORTER_OTLP_ENDPOINT": bad_port})
    assert "s3cretpass" not in str(raised.value)


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318", "http:// or https://"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon", "milliseconds"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "-5", "positive"),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd", "none, gzip, deflate"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "http/protobuf"),
    ],
)
def test_a_malformed_variable_is_named(name: str, value: str, says: str) -> None:
    with pytest.raises(ValueError, match=name) as raised:
        otel_settings(True, False, {**BASE, name: value})
    assert says in str(raised.value)


def test_a_malformed_header_is_named_by_position_never_by_its_value() -> None:
    headers = "x-honeycomb-team=abc,api-key-sk-live-999"
    with pytest.raises(ValueError, match="entry 2") as raised:
        otel_settings(True, False, {**BASE, "OTEL_EXPORTER_OTLP_HEADERS": headers})
    assert "sk-live-999" not in str(raised.value) and "abc" not in str(raised.value)


def test_headers_are_decoded_and_only_their_names_are_summarised() -> None:
    environ = {**BASE, "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20tok,x-team=t1"}
    settings = otel_settings(True, False, environ)
    assert settings is not None
    assert dict(settings.headers) == {"authorization": "Bearer tok", "x-team": "t1"}
    assert settings.to_dict()["headers"] == ["authorization", "x-team"]
    assert "tok" not in str(settings.to_dict()).replace("x-team", "")


def test_content_without_export_is_a_mistake_said_plainly() -> None:
    with pytest.raises(ValueError, match="--otel-content needs --otel"):
        otel_settings(False, True, {})
