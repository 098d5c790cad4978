"""Agent machinery: the tool loop, the tools, their sandbox (after ``models``).

:mod:`.loop` asks the model, runs the tools it calls and feeds back the results until it
answers (what it leaves, its run and a conversation's replies, is :mod:`.agent_run`);
:mod:`.shim` carries tool calls as JSON in plain text for models without native tool calling;
:mod:`.tools` are the tools, confined to the item's workdir, whose shell commands run in
:mod:`.sandbox` (the bubblewrap command line in :mod:`.bwrap`, the limits in :mod:`.limits` and
:mod:`.process_cap`, the running in :mod:`.process`); :mod:`.mcp` adds an MCP server's tools
(started by :mod:`.mcp_launch`, shared through :mod:`.mcp_pool`); :mod:`.environment` serves a
stateful environment's tools from a confined child (:mod:`.environment_runner`, driven by
:mod:`.environment_process`) and seeds, reads and replays its state; :mod:`.post` runs an eval
file's ``post_process`` command. What an agent left behind is checked in
:mod:`pytest_llmbench.scoring.agent`.

This is the stage's face: the names below are what other stages and the pytest shell import from
it (tests/test_layout.py checks that they import nothing else of it). Each is imported from its
module when first asked for, so that importing the stage loads nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import face_attribute

if TYPE_CHECKING:
    from .agent_run import AgentReply, AgentRun, Talk, ToolCall, UserTurn
    from .environment import (
        SeededState,
        StateSnapshot,
        open_environment,
        read_seeded,
        read_state,
        replay_actions,
        seed_state,
    )
    from .limits import SandboxLimits
    from .loop import AsyncToolboxLike, ToolboxLike, run_agent
    from .mcp import open_mcp_tools
    from .mcp_pool import McpPool
    from .post import PostProcessError, run_post_process
    from .process import CommandResult
    from .sandbox import Sandbox, SandboxUnavailable, fallback_notice
    from .shim import (
        calls_reply_text,
        calls_response_format,
        parse_calls_reply,
        shim_tool_result,
        with_shim_prompt,
    )
    from .tool_spans import SpanNotes, timed, use_span_notes
    from .tools import Toolbox, ToolRefusal, resolve_inside

#: Each name of the face, by the module of the stage that defines it.
_FACE: dict[str, str] = {
    "SeededState": "environment",
    "StateSnapshot": "environment",
    "open_environment": "environment",
    "read_seeded": "environment",
    "read_state": "environment",
    "replay_actions": "environment",
    "seed_state": "environment",
    "AgentReply": "agent_run",
    "AgentRun": "agent_run",
    "Talk": "agent_run",
    "UserTurn": "agent_run",
    "AsyncToolboxLike": "loop",
    "ToolCall": "agent_run",
    "ToolboxLike": "loop",
    "run_agent": "loop",
    "open_mcp_tools": "mcp",
    "McpPool": "mcp_pool",
    "PostProcessError": "post",
    "run_post_process": "post",
    "CommandResult": "process",
    "Sandbox": "sandbox",
    "SandboxLimits": "limits",
    "SandboxUnavailable": "sandbox",
    "fallback_notice": "sandbox",
    "calls_reply_text": "shim",
    "calls_response_format": "shim",
    "parse_calls_reply": "shim",
    "shim_tool_result": "shim",
    "with_shim_prompt": "shim",
    "SpanNotes": "tool_spans",
    "timed": "tool_spans",
    "use_span_notes": "tool_spans",
    "ToolRefusal": "tools",
    "Toolbox": "tools",
    "resolve_inside": "tools",
}

__all__ = [
    "AgentReply",
    "AgentRun",
    "AsyncToolboxLike",
    "CommandResult",
    "McpPool",
    "PostProcessError",
    "Sandbox",
    "SandboxLimits",
    "SandboxUnavailable",
    "SeededState",
    "SpanNotes",
    "StateSnapshot",
    "Talk",
    "ToolCall",
    "ToolRefusal",
    "Toolbox",
    "ToolboxLike",
    "UserTurn",
    "calls_reply_text",
    "calls_response_format",
    "fallback_notice",
    "open_environment",
    "open_mcp_tools",
    "parse_calls_reply",
    "read_seeded",
    "read_state",
    "replay_actions",
    "resolve_inside",
    "run_agent",
    "run_post_process",
    "seed_state",
    "shim_tool_result",
    "timed",
    "use_span_notes",
    "with_shim_prompt",
]


def __getattr__(name: str) -> Any:
    """A name of the face, imported from its module on first use."""
    return face_attribute(globals(), _FACE, name)
