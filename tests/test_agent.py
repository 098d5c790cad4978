"""Agent eval files end to end: collection, the loop through the engine, checks, records.

A fake tool-calling server scripts the model's tool calls; the tools, the sandbox and the checks
are real.
"""

from __future__ import annotations

import json
from fnmatch import fnmatch
from pathlib import Path

import pytest
from conftest import Bench, Rule

AGENT = """
kind: agent
tools: [read_file, write_file, list_dir, run_command]
max_steps: 5
cases:
  - id: hello
    files: {notes.txt: "remember the milk"}
    prompt: Write hello.txt with hello, then say done.
    assert:
      - {type: file-contains, path: hello.txt, value: hello}
      - {type: tool-sequence, value: [read_file, write_file]}
      - {type: command, value: "cat hello.txt", output_contains: hello}
      - {type: not-tool-called, value: run_command}
      - icontains
    expected: done
"""


def _script_hello(bench: Bench) -> None:
    """Turn 1 reads notes.txt; turn 2 (after the read) writes hello.txt; turn 3 answers."""
    bench.server.add_rule(
        Rule(match_last="wrote", reply="All done.")  # after write_file's result
    )
    bench.server.add_rule(
        Rule(
            match_last="remember the milk",  # after read_file's result
            tool_calls=[
                {"name": "write_file", "arguments": {"path": "hello.txt", "content": "hello"}}
            ],
        )
    )
    bench.server.add_rule(
        Rule(
            match="Write hello.txt",
            tool_calls=[{"name": "read_file", "arguments": {"path": "notes.txt"}}],
        )
    )


#: A conftest under which the sandbox cannot start the command check's command.
SANDBOX_CANNOT_START = """
import pytest_llmbench.agent.sandbox as sandbox

_run = sandbox.Sandbox.run

def run(self, command):
    if command != "cat hello.txt":
        return _run(self, command)
    return sandbox.CommandResult(
        None, "", "", False, False, True, 0.0,
        error="cannot start /bin/sh: SubprocessError: Exception occurred in preexec_fn.",
    )

sandbox.Sandbox.run = run
"""


def test_a_check_the_sandbox_cannot_run_makes_the_item_a_sandbox_error(bench: Bench) -> None:
    """No verdict on the agent's work: the machine failed, so the item is an error, not a
    failure, and it says so in the terminal and the record."""
    _script_hello(bench)
    bench.eval_file("agent", AGENT)
    bench.pytester.makeconftest(SANDBOX_CANNOT_START)
    result = bench.run_subprocess("--models=fake")  # the conftest patches the sandbox module
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*llmbench sandbox error: fake: command 'cat hello.txt' could "
                                 "not run: cannot start /bin/sh*"])  # fmt: skip
    (record,) = bench.records()
    assert record["outcome"] == "error" and record["error_kind"] == "sandbox"
    assert record["score"] is None
    assert "could not run: cannot start /bin/sh" in record["error"]


def test_an_agent_item_runs_the_loop_and_is_checked_on_its_workdir(bench: Bench) -> None:
    _script_hello(bench)
    bench.eval_file("agent", AGENT)
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["agent_steps"] == 3 and record["agent_stopped"] == "answer"
    assert record["tool_call_count"] == 2
    assert record["tool_counts"] == {"read_file": 1, "write_file": 1}
    assert record["response"] == "All done."
    workdir = Path(record["workdir"])
    assert (workdir / "hello.txt").read_text() == "hello"
    roles = [message["role"] for message in record["transcript"]]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    # The timeline: each model call, then the tools it asked for, with timing and tokens.
    steps = [(s["kind"], s.get("name") or s["step"]) for s in record["timeline"]]
    assert steps == [("model", 1), ("tool", "read_file"), ("model", 2), ("tool", "write_file"),
                     ("model", 3)]  # fmt: skip
    model_steps = [s for s in record["timeline"] if s["kind"] == "model"]
    assert sum(s["input_tokens"] for s in model_steps) == record["input_tokens"]
    assert all(s["latency_s"] > 0 for s in model_steps)
    tool_steps = [s for s in record["timeline"] if s["kind"] == "tool"]
    assert all(s["seconds"] >= 0 and s["error"] is False for s in tool_steps)
    assert "remember the milk" in tool_steps[0]["result"]
    # tokens summed over the three turns
    requests = bench.server.chat_requests()
    assert len(requests) == 3 and all(r.body.get("tools") for r in requests)
    assert record["input_tokens"] > 0 and record["cost_usd"] > 0
    assert all(verdict["passed"] for verdict in record["assertions"])


def test_an_escape_attempt_is_a_tool_error_the_model_sees(bench: Bench) -> None:
    bench.server.add_rule(Rule(match_last="error:", reply="I could not."))
    bench.server.add_rule(
        Rule(
            match="escape",
            tool_calls=[
                {"name": "write_file", "arguments": {"path": "../outside.txt", "content": "x"}}
            ],
        )
    )
    bench.eval_file(
        "agent",
        """
kind: agent
tools: [write_file]
cases:
  - id: escape
    prompt: Please escape.
    assert: [{type: not-file-exists, path: outside.txt}, {type: tool-called, value: write_file}]
""",
    )
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    tool_message = next(m for m in record["transcript"] if m["role"] == "tool")
    assert tool_message["content"].startswith("error: ")
    assert not (Path(record["workdir"]).parent / "outside.txt").exists()


def test_agent_settings_are_checked_at_collection(bench: Bench) -> None:
    bench.eval_file(
        "bad",
        """
kind: agent
tools: [read_file, teleport]
cases:
  - {id: x, prompt: hi}
""",
    )
    result = bench.run("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*bad.eval.yaml:2: tools: unknown tool 'teleport'*"])


def test_agent_checks_need_kind_agent(bench: Bench) -> None:
    bench.eval_file(
        "plain",
        """
cases:
  - id: x
    prompt: hi
    assert: [{type: file-exists, path: a.txt}]
""",
    )
    result = bench.run("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*plain.eval.yaml:4: case 'x': `file-exists` checks an agent's work: it needs `kind: agent`"
        ]
    )


def test_post_process_scores_are_merged_into_the_record(bench: Bench) -> None:
    _script_hello(bench)
    bench.pytester.makefile(
        ".py",
        score="""
import json, sys
item = json.load(open(sys.argv[1]))
print("log line first")
print(json.dumps({"tools_used": sum(item["tool_counts"].values()), "note": "text is dropped",
                  "steps": item["agent_steps"], "old_steps": item["turns"]}))
""",
    )
    script = bench.pytester.path / "score.py"
    bench.eval_file(
        "agent",
        AGENT.replace(
            "max_steps: 5", f'max_steps: 5\npost_process: "python3 {script} {{results}}"'
        ),
    )
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    # agent_steps are the loop's model calls; turns, their older name, still reads them
    assert record["metrics"] == {"tools_used": 2.0, "steps": 3.0, "old_steps": 3.0}
    # ...and averaged per model, as aster-bench's aggregate metrics are.
    header, row = bench.out("leaderboard.csv").read_text().splitlines()[:2]
    assert (
        dict(zip(header.split(","), row.split(","), strict=True))["metric_tools_used_mean"] == "2.0"
    )


def test_a_failing_post_process_is_the_items_error(bench: Bench) -> None:
    _script_hello(bench)
    bench.eval_file("agent", AGENT.replace("max_steps: 5", 'max_steps: 5\npost_process: "exit 3"'))
    result = bench.run("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*llmbench post_process: 'exit 3' exited with 3*"])
    assert bench.records()[0]["error_kind"] == "post_process"


EVIL_SCORER = """
import json, os, pathlib
pathlib.Path({marker!r}).write_text(os.environ.get("OPENAI_API_KEY", "none"))
print(json.dumps({{"evil": 1}}))
"""

HONEST_SCORER = """
import json, os, pathlib, sys
item = json.load(open(sys.argv[1]))
workdir = pathlib.Path(item["workdir"])
try:
    (workdir / "tampered.txt").write_text("x")
    writable = 1
except OSError:
    writable = 0
env_file = pathlib.Path(".env").read_text() if pathlib.Path(".env").exists() else ""
print(json.dumps({
    "honest": 1,
    "key_seen": int(any("PLANTED" in v for v in os.environ.values())),
    "env_file_chars": len(env_file),
    "workdir_writable": writable,
    "read_agent_file": int((workdir / "score.py").exists()),
}))
"""


def _agent_writes_a_scorer(bench: Bench, marker: Path) -> None:
    bench.server.add_rule(Rule(match_last="wrote", reply="All done."))
    content = EVIL_SCORER.format(marker=str(marker))
    bench.server.add_rule(
        Rule(
            match="Score yourself",
            tool_calls=[
                {"name": "write_file", "arguments": {"path": "score.py", "content": content}}
            ],
        )
    )


POST_AGENT = """
kind: agent
tools: [write_file]
post_process: "python3 score.py {results}"
cases:
  - {id: x, prompt: Score yourself., assert: [{type: max-turns, value: 5}]}
"""


def test_post_process_runs_the_evals_own_script_not_the_agents(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    planted = "sk-PLANTED-0123456789abcdef0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", planted)
    marker = tmp_path / "escaped.txt"
    _agent_writes_a_scorer(bench, marker)
    bench.pytester.makefile(".py", score=HONEST_SCORER)
    (bench.pytester.path / ".env").write_text(f"OPENAI_API_KEY={planted}\n")
    bench.eval_file("agent", POST_AGENT)
    bench.run("--models=fake", "--env-file=.env").assert_outcomes(passed=1)
    (record,) = bench.records()
    # The eval's own score.py ran, read-only over the workdir, without the key or the .env.
    assert record["metrics"] == {
        "honest": 1.0,
        "key_seen": 0.0,
        "env_file_chars": 0.0,
        "workdir_writable": 0.0,
        "read_agent_file": 1.0,
    }
    assert not marker.exists()
    assert not (Path(record["workdir"]) / "tampered.txt").exists()


def test_post_process_never_runs_a_script_the_agent_wrote(bench: Bench, tmp_path: Path) -> None:
    marker = tmp_path / "escaped.txt"
    _agent_writes_a_scorer(bench, marker)
    bench.eval_file("agent", POST_AGENT)  # no score.py beside the eval: only the agent's
    result = bench.run("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*llmbench post_process: 'python3 score.py {results}' exited*"])
    assert not marker.exists()
    (record,) = bench.records()
    assert record["error_kind"] == "post_process"
    assert not record.get("metrics")


@pytest.mark.slow
@pytest.mark.usefixtures("no_bwrap")
def test_post_process_without_bwrap_needs_sandbox_off(bench: Bench) -> None:
    bench.pytester.makefile(".py", score='import json; print(json.dumps({"ok": 1}))')
    bench.server.add_rule(Rule(reply="done"))
    refused = POST_AGENT.replace("tools: [write_file]", "tools: [read_file]")
    bench.eval_file("agent", refused)
    result = bench.run_subprocess("--models=fake")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*llmbench sandbox error: bubblewrap *" + INSTALL[1:]])
    assert bench.records()[0]["error_kind"] == "sandbox"
    bench.eval_file("agent", refused.replace("kind: agent", "kind: agent\nsandbox: off"))
    bench.run_subprocess("--models=fake").assert_outcomes(passed=1)
    assert bench.records()[0]["metrics"] == {"ok": 1.0}


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.slow
def test_agent_records_are_the_same_with_and_without_xdist(bench: Bench, workers: str) -> None:
    _script_hello(bench)
    bench.eval_file("agent", AGENT)
    result = bench.run_subprocess("-n", workers, "--models=fake")
    result.assert_outcomes(passed=1)
    (record,) = bench.records()
    assert (record["agent_steps"], record["tool_counts"]) == (3, {"read_file": 1, "write_file": 1})
    assert json.dumps(record["assertions"])  # plain JSON across the xdist boundary


SANDBOXED = """
kind: agent
tools: [run_command]
sandbox: {mode}
cases:
  - {{id: x, prompt: Run it., assert: [{{type: tool-called, value: run_command}}]}}
"""


#: What a fake bwrap that cannot run says (as bwrap does where user namespaces are off).
BROKEN_BWRAP = "bwrap: No permissions to create new namespace"


@pytest.fixture(params=["missing", "broken"])
def no_bwrap(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str:
    """A machine where bubblewrap is missing (nothing on PATH) or cannot run (a ``bwrap`` first
    on PATH that fails as bwrap does without user namespaces), for pytest run in a subprocess
    (this Python by its full path: PATH holds nothing else)."""
    folder = tmp_path / "path"
    folder.mkdir()
    if request.param == "broken":
        fake = folder / "bwrap"
        fake.write_text(f"#!/bin/sh\necho '{BROKEN_BWRAP}' >&2\nexit 1\n")
        fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))
    return str(request.param)


#: The set-up wording of a sandbox error, by why bwrap does not work.
SANDBOX_ERROR = {
    "missing": "*llmbench sandbox error: *bubblewrap is not installed (no bwrap on PATH)*",
    "broken": f"*llmbench sandbox error: *bubblewrap (*/path/bwrap) cannot run here (exit status 1: {BROKEN_BWRAP})*",
}
INSTALL = "*install*with `sudo apt-get install -y bubblewrap`*or opt out with 'sandbox: off'*"


def _assert_sandbox_error(bench: Bench, result: pytest.RunResult, why: str) -> None:
    """One error of kind ``sandbox``, worded as a set-up problem, before any model call."""
    result.assert_outcomes(errors=1)
    wording = SANDBOX_ERROR[why] + INSTALL[1:]
    result.stdout.fnmatch_lines([wording])
    out = result.stdout.str()
    assert "provider error" not in out and "Traceback" not in out
    assert bench.server.chat_requests() == []  # no model call without the sandbox it needs
    (record,) = bench.records()
    assert record["error_kind"] == "sandbox"
    assert fnmatch(record["error"], wording.split("llmbench sandbox error: ")[1])


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["auto", "required"])
def test_without_bwrap_an_agent_that_runs_commands_is_a_sandbox_error(
    bench: Bench, no_bwrap: str, mode: str
) -> None:
    bench.eval_file("agent", SANDBOXED.format(mode=mode))
    result = bench.run_subprocess("--models=fake")
    _assert_sandbox_error(bench, result, no_bwrap)
    if mode == "required":
        result.stdout.fnmatch_lines(
            ["*llmbench sandbox error: sandbox: required, but bubblewrap *"]
        )


@pytest.mark.slow
@pytest.mark.parametrize("no_bwrap", ["missing"], indirect=True)
def test_without_bwrap_a_command_check_is_a_sandbox_error(bench: Bench, no_bwrap: str) -> None:
    # No run_command tool: the eval's own `command` check needs bubblewrap all the same.
    bench.eval_file(
        "agent",
        "kind: agent\ntools: [read_file]\ncases:\n  - {id: x, prompt: Read., assert: "
        "[{type: command, value: 'true'}]}\n",
    )
    _assert_sandbox_error(bench, bench.run_subprocess("--models=fake", "-n", "2"), no_bwrap)


@pytest.mark.slow
@pytest.mark.usefixtures("no_bwrap")
def test_sandbox_off_runs_commands_and_says_so_once(bench: Bench) -> None:
    bench.server.add_rule(Rule(match_last="exit code", reply="ran"))
    bench.server.add_rule(
        Rule(
            match="Run it",
            tool_calls=[{"name": "run_command", "arguments": {"command": "echo hi"}}],
        )
    )
    bench.eval_file("agent", SANDBOXED.format(mode="off"))
    result = bench.run_subprocess("--models=fake", "--repeat=2")
    result.assert_outcomes(passed=2)
    assert result.stdout.str().count("SandboxWarning") == 1


@pytest.mark.slow
@pytest.mark.usefixtures("no_bwrap")
def test_an_agent_without_commands_runs_without_bwrap(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply="done"))
    bench.eval_file(
        "agent",
        "kind: agent\ntools: [read_file]\ncases:\n  - {id: x, prompt: Read., assert: "
        "[{type: max-turns, value: 3}]}\n",
    )
    bench.run_subprocess("--models=fake").assert_outcomes(passed=1)


def test_a_second_model_reads_free_text_replies_in_shim_mode(bench: Bench) -> None:
    # The agent (fake) writes prose; the interpreter (fake2) turns it into a protocol call.
    bench.server.add_rule(
        Rule(model="fake-model", match_last="returned", reply='{"answer": "done"}')
    )
    bench.server.add_rule(Rule(model="fake-model", reply="I will write hello into hello.txt now."))
    call = '{"tool": "write_file", "arguments": {"path": "hello.txt", "content": "hello"}}'
    bench.server.add_rule(Rule(model="fake-model-2", reply=call))
    bench.eval_file(
        "agent",
        """
kind: agent
tools: [write_file]
tool_shim: always
tool_shim_model: fake2
cases:
  - id: prose
    prompt: Write hello.txt.
    assert: [{type: file-contains, path: hello.txt, value: hello}]
""",
    )
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["agent_steps"] == 2 and record["tool_counts"] == {"write_file": 1}
    assert record["response"] == "done"
    models = [r.body["model"] for r in bench.server.chat_requests()]
    assert models == ["fake-model", "fake-model-2", "fake-model"]  # read once, then protocol
    interpreter = bench.server.chat_requests()[1]
    assert "I will write hello into hello.txt now." in interpreter.body["messages"][-1]["content"]
    assert interpreter.body["response_format"]["type"] == "json_object"


@pytest.mark.slow
def test_escape_attempts_through_the_loop_all_fail_and_are_reported(bench: Bench) -> None:
    outside = bench.pytester.path / "outside-target.txt"
    attempts = [
        {"name": "read_file", "arguments": {"path": "/etc/passwd"}},
        {"name": "write_file", "arguments": {"path": "../../escaped.txt", "content": "x"}},
        {"name": "read_file", "arguments": {"path": "link/secret.txt"}},
        {"name": "run_command", "arguments": {"command": f"echo x > {outside}"}},
        {"name": "run_command", "arguments": {"command": "yes"}},
        {"name": "run_command", "arguments": {"command": "bomb(){ bomb|bomb & }; bomb; sleep 5"}},
    ]
    bench.server.add_rule(Rule(match_last="error", reply="gave up"))
    bench.server.add_rule(Rule(match="break out", tool_calls=attempts))
    secrets = bench.pytester.mkdir("secrets")
    (secrets / "secret.txt").write_text("top secret")
    seed = bench.pytester.mkdir("seed")
    (seed / "link").symlink_to(secrets)  # a symlink in the workdir that points outside
    bench.eval_file(
        "agent",
        """
kind: agent
tools: [read_file, write_file, run_command]
include_dirs: [seed]
cases:
  - {id: escape, prompt: Please break out., assert: [{type: tool-called, value: run_command}]}
""",
    )
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    results = [m["content"] for m in record["transcript"] if m["role"] == "tool"]
    assert len(results) == len(attempts)
    read_etc, write_up, read_link, write_out, endless, bomb = results
    for refused in (read_etc, write_up, read_link):
        assert refused.startswith("error: ")
    assert "root:" not in read_etc and "top secret" not in read_link
    assert not outside.exists() and not (bench.pytester.path / "escaped.txt").exists()
    assert "exit code" in write_out.lower() or write_out.startswith("error: ")
    assert endless.startswith("error: the command printed more than") and len(endless) < 20_000
    assert bomb.startswith("error: ")  # the process cap or the timeout stopped it


def test_an_agent_that_errors_mid_loop_keeps_what_it_did(bench: Bench) -> None:
    # Turn 1 writes a file; turn 2's call fails: the item errors, its record keeps turn 1.
    bench.server.add_rule(Rule(match_last="wrote", status=500, error_message="overloaded"))
    bench.server.add_rule(
        Rule(
            match="Write it",
            tool_calls=[{"name": "write_file", "arguments": {"path": "a.txt", "content": "a"}}],
        )
    )
    bench.eval_file(
        "agent",
        "kind: agent\ntools: [write_file]\ncases:\n"
        "  - {id: x, prompt: Write it., assert: [{type: file-exists, path: a.txt}]}\n",
    )
    result = bench.run("--models=fake", "--max-retries=1")
    result.assert_outcomes(errors=1)
    (record,) = bench.records()
    assert record["outcome"] == "error" and record["error_kind"] == "provider"
    assert (record["agent_steps"], record["tool_call_count"]) == (1, 1)
    assert record["agent_stopped"] == "error"
    assert record["tool_counts"] == {"write_file": 1}
    roles = [message["role"] for message in record["transcript"]]
    assert roles[-2:] == ["assistant", "tool"]
    assert record["input_tokens"] and record["output_tokens"]  # turn 1 was answered, and counted
    assert record["transport_retries"] == 1  # the failed turn's retry
    assert len(bench.server.chat_requests()) == 3  # turn 1, turn 2 and its retry
    assert (Path(record["workdir"]) / "a.txt").read_text() == "a"


def test_agent_loops_run_concurrently(bench: Bench) -> None:
    """Agent items start ahead like other calls (their workdirs made ahead): with
    --concurrency 4, four loops are in flight at once (one at a time before)."""
    from fakeserver import peak_in_flight

    bench.server.add_rule(Rule(match_last="wrote", reply="Done.", delay_s=0.3))
    bench.server.add_rule(
        Rule(
            match="Write it",
            tool_calls=[{"name": "write_file", "arguments": {"path": "a.txt", "content": "a"}}],
            delay_s=0.3,
        )
    )
    cases = "".join(
        f"  - {{id: c{i}, prompt: Write it {i}., files: {{seed.txt: s{i}}}, "
        "assert: [{type: file-exists, path: a.txt}, {type: file-exists, path: seed.txt}]}\n"
        for i in range(4)
    )
    bench.eval_file("agent", f"kind: agent\ntools: [write_file]\ncases:\n{cases}")
    result = bench.run("--models=fake", "--concurrency", "4")
    result.assert_outcomes(passed=4)
    requests = bench.server.chat_requests()
    assert len(requests) == 8
    assert peak_in_flight(requests) == 4
    records = bench.records()
    # Each item kept its own workdir, seeded before its loop started.
    workdirs = {record["workdir"] for record in records}
    assert len(workdirs) == 4
    for record in records:
        folder = Path(record["workdir"])
        assert (folder / "a.txt").read_text() == "a"
        assert (folder / "seed.txt").read_text() == f"s{record['case_id'][1:]}"


def test_file_checks_and_python_checks_see_the_rows_values_and_workdir(bench: Bench) -> None:
    """Per dataset row: the agent wrote the row's expected answer into the row's file."""
    bench.server.add_rule(Rule(match_last="wrote", reply="Done."))
    for row, content in (("one", "42"), ("two", "wrong")):
        bench.server.add_rule(
            Rule(
                match=f"Answer {row}",
                tool_calls=[
                    {"name": "write_file", "arguments": {"path": f"{row}.txt", "content": content}}
                ],
            )
        )
    (bench.pytester.path / "rows.jsonl").write_text(
        '{"id": "one", "prompt": "Answer one", "expected": "42", "file": "one.txt"}\n'
        '{"id": "two", "prompt": "Answer two", "expected": "43", "file": "two.txt"}\n'
    )
    bench.pytester.makepyfile(
        checks="""
def wrote_expected(answer, ctx):
    return (ctx.workdir / ctx.vars["file"]).read_text() == ctx.expected
"""
    )
    bench.eval_file(
        "agent",
        """
kind: agent
tools: [write_file]
dataset: rows.jsonl
assert:
  - {type: file-contains, path: "{{file}}", value: "{{expected}}"}
  - {type: python, value: "checks:wrote_expected"}
""",
    )
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=1, failed=1)
    records = {record["case_id"]: record for record in bench.records()}
    assert [v["passed"] for v in records["one"]["assertions"]] == [True, True]
    assert [v["passed"] for v in records["two"]["assertions"]] == [False, False]
    assert "43" in records["two"]["assertions"][0]["reason"]  # the row's value, filled in


def test_an_unknown_name_in_a_file_check_is_a_failed_check_that_says_so(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply="Done."))
    bench.eval_file(
        "agent",
        "kind: agent\ntools: [write_file]\ncases:\n  - {id: x, prompt: Go., assert: "
        '[{type: file-contains, path: a.txt, value: "{{nothing}}"}]}\n',
    )
    bench.run("--models=fake").assert_outcomes(failed=1)
    (verdict,) = bench.records()[0]["assertions"]
    assert "unknown template variable 'nothing'" in verdict["reason"]
