"""The agent kind (a file's ``kind: agent``): a tool loop in a sandboxed workdir, every turn a
paced, cached, budgeted call of the model; then the file's ``post_process`` and the workdir
checks, made in the item's setup; the record's steps, tool calls, transcript and timeline.
A file's stateful environment (its tools beside the others, its state seeded, snapshot and
checked) is :mod:`.agent_state`'s."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ...models import Completion, EnvError, ItemError, SandboxError
from . import agent_state
from .case_kind import CaseKind, Checking, Engine, KindCall, KindResult, Settling, sent_messages

if TYPE_CHECKING:
    from ...agent import AgentRun, AsyncToolboxLike, Talk, Toolbox, ToolboxLike
    from ...scoring import Assertion, Verdict
    from ..plan import CallPlan
    from ..request import Answer

#: Put first on an agent command's PATH: this Python (with pytest) as ``python``/``python3``.
_PYTHON_BIN = (Path(sys.executable).parent,)


class SandboxWarning(UserWarning):
    """Agent commands ran without bubblewrap, with resource limits only."""


class AgentKind(CaseKind):
    """A tool loop."""

    name = "agent"

    def prepare(self, engine: Engine, plan: CallPlan, workdir: Path | None) -> Toolbox:
        """The agent's tools on its workdir (made in setup). A sandbox that is required but
        unavailable, or one that would refuse the item's commands, fails here as the item's
        ``sandbox`` error (a set-up problem of this machine, not the model's nor the file's)."""
        from ...agent import Sandbox, SandboxLimits, SandboxUnavailable, Toolbox

        agent = plan.agent
        assert agent is not None and workdir is not None
        try:
            sandbox = Sandbox(workdir, SandboxLimits(), mode=agent.sandbox, path_prefix=_PYTHON_BIN)
            toolbox = Toolbox(workdir, agent.local_tools, sandbox, base_dir=plan.base_dir)
        except SandboxUnavailable as exc:  # sandbox: required
            raise SandboxError(str(exc)) from None
        except ValueError as exc:  # a bad custom tool
            raise ItemError(f"{plan.model.name}: {exc}", "config") from None
        if sandbox.refusal is not None and _runs_commands(plan):
            # Before any model call: an agent that cannot run its commands is not measured.
            raise SandboxError(sandbox.refusal)
        if agent.environment is not None:
            agent_state.seed(plan, workdir, sandbox)
        return toolbox

    async def answer(self, engine: Engine, call: KindCall) -> Answer:
        from ..request import Answer, agent_completion

        plan, request, toolbox = call.plan, call.request, call.prepared
        run = await _loop(engine, call)
        completion = agent_completion(run, request.target.model_id)
        graded = await engine.grade(plan, completion, call.targets, run=run)
        messages = sent_messages(plan, request)
        return Answer(completion, graded, run, toolbox.sandbox, messages=messages)

    def keep_partial(self, result: KindResult, error: BaseException) -> None:
        """The run an error cut short, and the environment's state where it still reads."""
        from ...agent import AgentRun

        partial = getattr(error, "partial", None)
        if isinstance(partial, AgentRun):
            result.agent_run = partial
        result.state_snapshot = agent_state.partial_snapshot(result)

    def settle(self, settling: Settling) -> None:
        """Say once per process that commands fell back to rlimits; run the file's
        ``post_process``; make the workdir checks."""
        result = settling.result
        if result.agent_run is None:
            agent_state.forget(result.workdir)
            return
        _warn_sandbox_fallback()
        agent = result.plan.agent
        if agent is not None and agent.environment is not None:
            _snapshot(settling)
        if agent is not None and agent.post_process:
            _post_process(settling, agent.post_process)
        if not result.plan.latency_only:
            result.agent_verdicts = _agent_verdicts(settling)
            if result.state_snapshot is not None:
                result.agent_verdicts.update(agent_state.state_verdicts(result))

    def verdicts(self, checking: Checking) -> list[Verdict]:
        made = checking.result.agent_verdicts
        case = checking.result.plan.case
        return [
            made.get(index) or checking.verdict(index, assertion)
            for index, assertion in enumerate(case.assertions)
        ]

    def record_fields(self, result: KindResult) -> dict[str, Any]:
        """Steps, tool calls, why it stopped, the transcript."""
        run = result.agent_run
        if run is None:
            return {**super().record_fields(result), **agent_state.state_fields(result)}
        return {
            "agent_steps": run.turns,
            "tool_call_count": len(run.tool_calls),
            "tool_counts": run.tool_counts(),
            "agent_stopped": run.stopped,
            "transcript": [dict(message) for message in run.transcript],
            "timeline": run.timeline(),
            "shimmed": run.shimmed,
            **agent_state.state_fields(result),
        }

    def spent(self, result: KindResult) -> Completion | None:
        from ..request import agent_completion

        run = result.agent_run
        return agent_completion(run, result.plan.model.model) if run is not None else None


async def _loop(engine: Engine, call: KindCall, talk: Talk | None = None) -> AgentRun:
    """The agent loop: every turn is a paced, cached, budgeted call of the plan's model; with
    ``talk``, a conversation (:func:`~...agent.run_agent`)."""
    from ...agent import run_agent
    from ...models import merged_rule, read_reply
    from ...spec import shim_applies

    plan, request, targets = call.plan, call.request, call.targets
    agent = plan.agent
    assert agent is not None
    rule = plan.thinking_rule.model_copy(update={"strip": True})

    async def complete(messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
        turn = dataclasses.replace(
            request,
            messages=tuple(messages),
            params={**request.params, **params},
            key_params={**request.key_params, **params},
            stream=False,  # an agent run records no TTFT: its turns are read whole
        )
        # Each step is read apart from its thinking (after the cache, as an item's reply is):
        # the loop reads calls and the answer from the answer alone, whatever `strip` says.
        return read_reply(await engine.pacer.paced(turn), rule)

    interpret = None
    interpreter = plan.shim_interpreter
    if interpreter is not None:

        async def interpret(messages: list[dict[str, Any]], params: dict[str, Any]) -> Completion:
            asked = engine.helpers.request(
                plan, interpreter, targets, messages, params, role="interpreter"
            )
            said = await engine.helpers.call(asked)
            return read_reply(said, merged_rule(interpreter.thinking, None))

    shim = shim_applies(agent.tool_shim, plan.model.embedded)
    tools: ToolboxLike | AsyncToolboxLike = call.prepared
    names: Sequence[str] = agent.tools
    async with contextlib.AsyncExitStack() as sessions:
        if agent.mcp_selections:
            from ...agent import open_mcp_tools

            # One session per server for this item, closed when the loop ends (or fails);
            # a shared server's is the process's (the pool's).
            servers, selections = agent.mcp_servers, agent.mcp_selections
            mcp = open_mcp_tools(servers, selections, call.prepared, engine.mcp_pool())
            tools = await sessions.enter_async_context(mcp)
            names = tools.names
        environment = agent.environment
        if environment is not None and environment.module is not None:
            from ...agent import open_environment

            # The environment's tools beside the others, its runner stopped with the loop.
            box = call.prepared.sandbox
            opened = open_environment(environment, box.workdir, box, tools)
            tools = await sessions.enter_async_context(opened)
            names = [schema["function"]["name"] for schema in tools.schemas()]
        return await run_agent(
            complete,
            tools,
            request.messages,
            max_turns=agent.max_turns,
            limit_seconds=agent.limit_seconds,
            limit_tokens=agent.limit_tokens,
            shim=shim,
            tool_names=names,
            interpret=interpret,
            talk=talk,
        )


def _runs_commands(plan: CallPlan) -> bool:
    """Whether the item runs shell commands: the ``run_command`` tool, a ``command`` check,
    the file's ``post_process``, or a stdio MCP server its tools come from."""
    agent = plan.agent
    assert agent is not None
    checks = (assertion.agent_check for assertion in plan.case.assertions)
    commands = any(check is not None and check.base_type == "command" for check in checks)
    used = {server for server, _ in agent.mcp_selections}
    stdio = any(s.command is not None and s.name in used for s in agent.mcp_servers)
    module = agent.environment is not None and agent.environment.module is not None
    runs = "run_command" in agent.tools or commands or agent.post_process is not None
    return runs or stdio or module


def _warn_sandbox_fallback() -> None:
    """Say once per process that ``run_command`` fell back to rlimits (no working bwrap)."""
    from ...agent import fallback_notice

    notice = fallback_notice()
    if notice is not None:
        warnings.warn(notice, SandboxWarning, stacklevel=2)


def _snapshot(settling: Settling) -> None:
    """The environment's states, kept on the result; one that cannot be read (or replayed)
    is the item's error."""
    result = settling.result
    run = result.agent_run
    assert run is not None
    last = run.tool_calls[-1].name if run.tool_calls else None  # any tool: a command too
    try:
        result.state_snapshot = agent_state.snapshot(result, last)
    except EnvError as exc:
        settling.fail(EnvError(f"{result.plan.model.name}: {exc.message}"))


def _post_process(settling: Settling, command: str) -> None:
    """Run the file's ``post_process`` command; its JSON object becomes extra metrics.

    A command that fails or prints no JSON object is the item's error (setup phase).
    """
    from ...agent import PostProcessError, run_post_process

    result = settling.result
    agent = result.plan.agent
    assert result.agent_run is not None and result.workdir is not None and agent is not None
    try:
        result.post_metrics = run_post_process(
            command,
            result.workdir,
            _post_process_input(settling),
            eval_dir=result.plan.base_dir,
            mode=agent.sandbox,
            hidden=[settling.env_file] if settling.env_file is not None else [],
        )
    except PostProcessError as exc:
        result.item_error = ItemError(str(exc), "post_process")
        pytest.fail(f"llmbench post_process: {exc}", pytrace=False)


def _post_process_input(settling: Settling) -> dict[str, Any]:
    """What ``post_process`` reads in ``{results}``: ``agent_steps`` are the loop's model calls
    (``turns``, their older name, is kept for scripts that read it)."""
    result = settling.result
    run = result.agent_run
    assert run is not None
    return {
        "nodeid": settling.nodeid,
        "case_id": result.plan.case.id,
        "model": result.plan.model.name,
        "answer": run.answer,
        "workdir": str(result.workdir),
        "agent_steps": run.turns,
        "turns": run.turns,
        "tool_counts": run.tool_counts(),
        "stopped": run.stopped,
        "transcript": list(run.transcript),
    }


def _agent_verdicts(settling: Settling) -> dict[int, Verdict]:
    """The workdir checks of an agent item, made in its setup (after ``post_process``): a
    command check the sandbox cannot start makes the item an error of kind ``sandbox``."""
    return {
        index: _agent_verdict(settling, assertion)
        for index, assertion in enumerate(settling.result.plan.case.assertions)
        if assertion.agent_check is not None
    }


def _agent_verdict(settling: Settling, assertion: Assertion) -> Verdict:
    from ...scoring import AgentOutcome, SandboxFailure, evaluate_agent

    result = settling.result
    run, workdir, sandbox = result.agent_run, result.workdir, result.sandbox
    assert run is not None and workdir is not None and sandbox is not None
    check = assertion.agent_check
    assert check is not None
    case = result.plan.case
    try:
        check = _with_case_values(check, {**case.vars, "expected": case.expected})
    except ValueError as exc:  # a {{name}} the case does not have
        from ...scoring import Verdict

        return Verdict(check.type, False, 0.0, check.weight, f"{check.type}: {exc}")
    try:
        return evaluate_agent(check, AgentOutcome(workdir, run, sandbox))
    except SandboxFailure as exc:  # no verdict: the machine, not the agent, is at fault
        settling.fail(SandboxError(f"{result.plan.model.name}: {exc}"))


def _with_case_values(check: Any, variables: dict[str, Any]) -> Any:
    """An agent check with ``{{expected}}`` and the case's (or dataset row's) variables filled
    into its value, path and ``output_contains``: ValueError for an unknown name."""
    from ...spec import render_template

    changes = {
        field: render_template(value, variables)
        for field in ("value", "path", "output_contains")
        if isinstance(value := getattr(check, field), str) and "{{" in value
    }
    return dataclasses.replace(check, **changes) if changes else check
