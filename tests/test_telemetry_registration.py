"""When the controller's trace export is registered: only for a run that may export a trace, and
without building the run's config in a run that has no eval file."""

from __future__ import annotations

from typing import Any

import pytest

PROBE = """
def pytest_sessionfinish(session):
    from pytest_llmbench.config.resolve import RUN_CONFIG_KEY

    config = session.config
    print("\\nEXPORT", config.pluginmanager.has_plugin("llmbench-trace-export"))
    print("RUN-CONFIG", RUN_CONFIG_KEY in config.stash)
"""


@pytest.fixture
def project(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, litellm_loaded: Any
) -> pytest.Pytester:
    """A plain project (one passing test, no eval file). ``litellm_loaded``: what a run loads
    is loaded before pytester's snapshot of ``sys.modules``, as for the eval runs after it
    (a module loaded first inside an in-process run is unloaded after it, and a later run would
    load a second copy of yaml beside the first's loader)."""
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeconftest(PROBE)
    pytester.makepyfile(test_plain="def test_one():\n    assert 1 + 1 == 2\n")
    return pytester


def probe(result: pytest.RunResult) -> tuple[str, str]:
    result.assert_outcomes(passed=1)
    lines = result.stdout.str().splitlines()
    found = [line for line in lines if line.startswith(("EXPORT", "RUN-CONFIG"))]
    assert len(found) == 2, found
    return found[0], found[1]


def test_a_plain_run_registers_nothing_and_builds_no_config(project: pytest.Pytester) -> None:
    assert probe(project.runpytest("-s", "-p", "no:cacheprovider")) == (
        "EXPORT False",
        "RUN-CONFIG False",
    )


def test_an_endpoint_variable_registers_the_export_without_building_the_config(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Malformed for the run's config, which a run without eval files never reads.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "never")
    assert probe(project.runpytest("-s", "-p", "no:cacheprovider")) == (
        "EXPORT True",
        "RUN-CONFIG False",
    )


@pytest.mark.parametrize(("flags", "registered"), [((), False), (("--otel",), True)])
def test_with_llmbench_options_the_config_decides(
    project: pytest.Pytester, flags: tuple[str, ...], registered: bool
) -> None:
    result = project.runpytest("-s", "-p", "no:cacheprovider", "--repeat=1", *flags)
    assert probe(result) == (f"EXPORT {registered}", "RUN-CONFIG True")


def test_a_missing_otel_extra_is_named_with_its_install_command() -> None:
    from pytest_llmbench.telemetry import missing_extra

    assert missing_extra() is None  # installed here

    def without_sdk(name: str) -> object:
        if name.startswith("opentelemetry.sdk"):
            raise ModuleNotFoundError(name)
        return object()

    message = missing_extra(without_sdk)
    assert message is not None
    assert "opentelemetry.sdk is not installed" in message
    assert "pip install 'pytest-llmbench[otel]'" in message
    assert missing_extra(lambda name: None) is not None
