"""--check-models and --skip-unavailable: one call per model before the run, in parallel.

The project has, beside conftest's `fake` profiles: `ok`, `ok2`, `ok3` answered by the fake
server, `down` (a closed port), `nokey` (its key variable unset) and `broken` (the server answers
it with HTTP 503 and echoes the request's Authorization header, the provider key, in its error).
"""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from conftest import FAKE_KEY, FAKE_KEY_ENV, FRANCE, TWO_CAPITALS, Bench, Rule
from fakeserver import RecordedRequest, peak_in_flight

from pytest_llmbench.engine.preflight import CHECK_PROMPT

ABSENT_KEY_ENV = "LLMBENCH_PREFLIGHT_ABSENT_KEY"
#: Writes the check's summary (what the lead puts in run.json) to summary.json at session end.
SUMMARY_CONFTEST = """
import json
from pathlib import Path

from pytest_llmbench.engine.preflight import check_summary


def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):
        summary = check_summary(session.config)
        Path("summary.json").write_text(json.dumps(summary))
"""


def closed_port() -> int:
    """A local port that nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def project(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> Bench:
    """``bench`` with the check profiles, the broken model's rule and the summary conftest."""
    monkeypatch.delenv(ABSENT_KEY_ENV, raising=False)
    base = bench.server.base_url

    def profile(name: str, model: str, api_base: str, key_env: str = FAKE_KEY_ENV) -> str:
        return (
            f"  {name}:\n    model: openai/{model}\n    api_base: {api_base}\n"
            f"    api_key_env: {key_env}\n"
        )

    text = "models:\n" + "".join(
        [
            profile("ok", "fake-model", base),
            profile("ok2", "fake-model-2", base),
            profile("ok3", "fake-model-3", base),
            profile("down", "fake-model", f"http://127.0.0.1:{closed_port()}/v1"),
            profile("nokey", "fake-model", base, ABSENT_KEY_ENV),
            profile("broken", "broken-model", base),
        ]
    )
    bench.pytester.makefile(".yaml", **{"profiles/check": text})
    bench.pytester.makeconftest(SUMMARY_CONFTEST)
    bench.server.add_rule(Rule(model="broken-model", status=503, echo_auth=True))
    return bench


def check_requests(bench: Bench) -> list[RecordedRequest]:
    """The check calls the fake server received (the items' prompts are questions)."""
    return [
        r for r in bench.server.chat_requests() if r.body["messages"][-1]["content"] == CHECK_PROMPT
    ]


def summary(bench: Bench) -> dict[str, Any]:
    """What check_summary returned at the end of the run."""
    return json.loads((bench.pytester.path / "summary.json").read_text())


def output(result: pytest.RunResult) -> str:
    return result.stdout.str() + result.stderr.str()


def test_unavailable_models_stop_the_run_before_collection(project: Bench) -> None:
    project.eval_file("capitals", FRANCE)
    result = project.run("--models=ok,down,nokey,broken", "--check-models")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        [
            "*= llmbench check-models =*",
            "ok      ok  *.* s",
            "down    UNAVAILABLE  *Connection*",
            f"nokey   UNAVAILABLE  {ABSENT_KEY_ENV} is not set (needed for openai/fake-model)",
            "broken  UNAVAILABLE  *HTTP 503*fake failure*",
        ]
    )
    result.stderr.fnmatch_lines(
        [
            "ERROR: llmbench: --check-models: 3 of 4 models unavailable:",
            "  down: *",
            "  nokey: *",
            "  broken: *",
            "*add --skip-unavailable*",
        ]
    )
    assert "collected" not in result.stdout.str(), "nothing was collected"
    assert FAKE_KEY not in output(result)
    assert "REDACTED" in result.stdout.str(), "the echoed key was there to be redacted"
    checks = check_requests(project)
    assert sorted(r.body["model"] for r in checks) == ["broken-model", "fake-model"]
    assert len(project.server.chat_requests()) == 2, "no item ran, and the 503 was not retried"
    for request in checks:
        assert request.body["max_tokens"] == 1
        assert not request.body.get("stream")
    assert not project.out("results.jsonl").exists()


def test_skip_unavailable_runs_only_the_available_models(project: Bench) -> None:
    project.eval_file("capitals", TWO_CAPITALS)
    project.server.add_rule(Rule(match="France", reply="Paris"))
    project.server.add_rule(Rule(match="Japan", reply="Tokyo"))
    result = project.run(
        "-v", "--models=ok,down,nokey,broken", "--check-models", "--skip-unavailable"
    )

    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*= llmbench check-models =*",
            "*capitals.eval.yaml::france[[]ok-r0] PASSED*",
            "*UnavailableModelWarning: llmbench: --check-models: --skip-unavailable: "
            "running without down, nokey, broken",
        ]
    )
    assert sorted(r["nodeid"] for r in project.records()) == [
        "capitals.eval.yaml::france[ok-r0]",
        "capitals.eval.yaml::japan[ok-r0]",
    ]
    assert {r["model"] for r in project.records()} == {"ok"}
    found = summary(project)
    assert found["checked"] == ["ok", "down", "nokey", "broken"]
    assert sorted(found["unavailable"]) == ["broken", "down", "nokey"]
    assert found["skipped"] == ["down", "nokey", "broken"]
    assert set(found["latency_s"]) == {"ok"}
    run_json = project.out("run.json").read_text()
    assert [m["name"] for m in json.loads(run_json)["config"]["models"]] == ["ok"]
    assert FAKE_KEY not in output(result) + json.dumps(found) + run_json


@pytest.mark.slow
def test_xdist_workers_collect_the_same_reduced_models(project: Bench) -> None:
    project.eval_file("capitals", TWO_CAPITALS)
    project.server.add_rule(Rule(match="France", reply="Paris"))
    project.server.add_rule(Rule(match="Japan", reply="Tokyo"))
    result = project.run_subprocess(
        "-n", "2", "--models=ok,down,ok2,broken", "--check-models", "--skip-unavailable"
    )

    result.assert_outcomes(passed=4)
    nodeids = sorted(record["nodeid"] for record in project.records())
    assert nodeids == [
        f"capitals.eval.yaml::{case}[{model}-r0]"
        for case in ("france", "japan")
        for model in ("ok", "ok2")
    ]
    assert summary(project)["skipped"] == ["down", "broken"]
    assert len(check_requests(project)) == 3, "checked once, by the controller"
    assert FAKE_KEY not in output(result)


@pytest.mark.slow
def test_xdist_run_stops_before_starting_workers(project: Bench) -> None:
    project.eval_file("capitals", FRANCE)
    result = project.run_subprocess("-n", "2", "--models=ok,down", "--check-models")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: llmbench: --check-models: 1 of 2 models unavailable:"])
    assert "created: 2/2 workers" not in result.stdout.str()
    assert len(project.server.chat_requests()) == 1


def test_the_checks_are_made_concurrently(project: Bench) -> None:
    delay = 0.3
    project.server.add_rule(Rule(match=CHECK_PROMPT, delay_s=delay))
    project.eval_file("capitals", FRANCE)
    project.run("--models=ok,ok2,ok3", "--check-models", "--collect-only").assert_outcomes()

    requests = check_requests(project)
    assert len(requests) == 3
    # One at a time, each call would arrive after the previous one's answer.
    assert peak_in_flight(requests) == 3, "all three calls were in the server at once"


def test_no_model_left_is_an_error(project: Bench) -> None:
    project.eval_file("capitals", FRANCE)
    result = project.run("--models=down,nokey", "--check-models", "--skip-unavailable")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: llmbench: --check-models: no model is available (2 checked):",
            "  down: *",
            "  nokey: *",
        ]
    )


def test_unavailable_judge_and_optimizer_are_reported_not_skipped(project: Bench) -> None:
    project.eval_file("capitals", FRANCE)
    project.server.add_rule(Rule(match="France", reply="Paris"))
    args = ["--models=ok", "--judges=broken,ok", "--optimizer=down", "--check-models"]
    result = project.run(*args, "--collect-only", "--optimize-prompts=both")

    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "*= llmbench check-models =*",
            "ok (model, judge)  ok  *.* s",
            "broken (judge)     UNAVAILABLE  *HTTP 503*",
            "down (optimizer)   UNAVAILABLE  ConnectionError: cannot connect to 127.0.0.1:*: "
            "connection refused",
            "*UnavailableModelWarning: llmbench: --check-models: unavailable: broken (judge), "
            "down (optimizer); the items that need them will fail",
        ]
    )
    assert summary(project)["skipped"] == []
    assert FAKE_KEY not in output(result)


def test_default_judge_is_not_checked_and_no_flag_no_check(project: Bench) -> None:
    project.eval_file("capitals", FRANCE)
    project.server.add_rule(Rule(match="France", reply="Paris"))
    result = project.run("--models=ok", "--check-models", "--collect-only")
    result.stdout.fnmatch_lines(["*= llmbench check-models =*", "ok  ok  *.* s"])
    assert "smollm2" not in result.stdout.str(), "the embedded default judge is not started"

    project.run("--models=ok").assert_outcomes(passed=1)
    assert len(check_requests(project)) == 1, "only the run with --check-models checked"
    assert summary(project) is None


@pytest.mark.parametrize("flag", ["--cache=replay", "--rescore"])
def test_replay_and_check_are_refused(project: Bench, flag: str) -> None:
    project.eval_file("capitals", FRANCE)
    result = project.run("--models=ok", "--check-models", flag)

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: llmbench: --check-models calls every model, {flag} calls none: drop one*"]
    )
    assert project.server.chat_requests() == []


@pytest.mark.parametrize("client", ["auto", "litellm"])
def test_a_remote_endpoint_without_a_key_is_unavailable_with_no_call(
    project: Bench, monkeypatch: pytest.MonkeyPatch, client: str
) -> None:
    """A profile on a remote host with no key is refused as its target is resolved, the host
    named, the same through either client; the check calls only the available model."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    far = (
        "models:\n  far:\n    model: openai/fake-model\n    api_base: https://llm.example.com/v1\n"
    )
    project.pytester.makefile(".yaml", **{"profiles/far": far})
    project.eval_file("capitals", FRANCE)
    result = project.run("--models=ok,far", "--check-models", f"--client={client}")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        [
            "far  UNAVAILABLE  OPENAI_API_KEY is not set (needed for openai/fake-model at "
            "llm.example.com, which is not on this machine or a private network)",
        ]
    )
    assert [r.body["model"] for r in project.server.requests] == ["fake-model"], "ok's check"
