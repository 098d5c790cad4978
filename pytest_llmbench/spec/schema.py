"""The eval file as written: the pydantic models of a ``*.eval.yaml`` file.

:class:`EvalSpec` is a whole file, :class:`CaseSpec` one inline case; unknown keys are refused
and each field documents itself (``llmbench validate`` and the docs show the descriptions).
:mod:`.expand` turns a validated file into the resolved values of :mod:`.resolved`
(:class:`EvalCase` and friends).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..models import ThinkingRule
from ..scoring import AssertionSpecError, parse_assertion
from .context import context_chunks
from .datasets import DatasetSource
from .file_kinds import DEFAULT_FILE_KIND, file_kind_problem
from .paths import workdir_path
from .resolved import MCP_TOOL


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Message(_Strict):
    """One chat message."""

    role: Literal["system", "user", "assistant", "tool"] = Field(description="Chat role")
    content: str = Field(description="Message text; may use {{vars}}")


class TaskSpec(_Strict):
    """360-eval style task description, used by judges in later features."""

    task_type: str = Field(description="Kind of task, e.g. summarization")
    task_criteria: str | None = Field(None, description="What a good answer does")


RawAssertion = str | dict[str, Any]
#: The agent tools every ``kind: agent`` file may name; others are ``module:function`` refs.
BUILTIN_TOOL_NAMES = ("read_file", "write_file", "list_dir", "run_command")
_TOOL_REF = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


#: An MCP server's name: it starts the tool names the model sees (``time__get_current_time``).
_MCP_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")
_STDIO_ONLY = ("args", "env", "cwd", "network")
#: Model calls of an agent loop when the file gives no `max_steps`.
DEFAULT_AGENT_STEPS = 10


class McpServerSpec(_Strict):
    """One ``mcp_servers:`` entry: a stdio server the item starts, or a running HTTP one."""

    command: str | None = Field(
        None,
        description="Program of a stdio server, run in the sandbox: python3 (this Python), a "
        "name on PATH, or an absolute path (its install prefix is shown read-only)",
    )
    args: list[str] = Field(default_factory=list, description="Arguments of the stdio server")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="The only variables the stdio server gets besides the sandbox's; ${VAR} "
        "is read from the environment at run time",
    )
    cwd: str | None = Field(None, description="Where the stdio server starts, in the workdir")
    url: str | None = Field(None, description="Streamable HTTP endpoint of a running server")
    headers: dict[str, str] = Field(
        default_factory=dict, description="HTTP headers; ${VAR} is read from the environment"
    )
    shared: bool = Field(
        False,
        description="Start it once per process (per xdist worker) and share its session "
        "among the items there, a stdio server in a scratch folder of its own",
    )
    network: bool = Field(False, description="The stdio server may use the network")
    tool_timeout_s: float = Field(30.0, gt=0, description="Bound on one tool call")
    startup_timeout_s: float = Field(30.0, gt=0, description="Bound on start and tools/list")

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSpec:
        if (self.command is None) == (self.url is None):
            which = "both" if self.command is not None else "neither"
            raise ValueError(f"give either `command` (stdio) or `url` (HTTP), not {which}")
        if self.url is not None:
            written = [key for key in _STDIO_ONLY if key in self.model_fields_set]
            if written:
                raise ValueError(f"`{written[0]}` is for a stdio server (`command`), not `url`")
            if not self.url.startswith(("http://", "https://")):
                raise ValueError(f"url {self.url!r} must start with http:// or https://")
        if self.command is not None and self.headers:
            raise ValueError("`headers` are for an HTTP server (`url`), not `command`")
        if self.cwd is not None:
            workdir_path(self.cwd)
        return self


class AgentLimits(_Strict):
    """Budgets of one agent item's whole loop."""

    seconds: float | None = Field(None, gt=0, description="Wall time of the loop")
    tokens: int | None = Field(None, gt=0, description="Input + output tokens of the loop")


class AssertionItemError(ValueError):
    """A bad ``assert:`` item; ``loc`` is where it sits inside the ``assert:`` list."""

    def __init__(self, index: int, error: AssertionSpecError, raw: RawAssertion) -> None:
        super().__init__(str(error))
        in_mapping = isinstance(raw, dict) and error.field in raw
        self.loc: tuple[Any, ...] = (index, error.field) if in_mapping else (index,)


def _check_assertions(value: list[RawAssertion]) -> list[RawAssertion]:
    for index, raw in enumerate(value):
        try:
            parse_assertion(raw)
        except AssertionSpecError as exc:
            raise AssertionItemError(index, exc, raw) from None
    return value


def _check_files(value: dict[str, str]) -> dict[str, str]:
    """``files:`` keys are relative paths inside the workdir, none a folder of another."""
    paths = {name: workdir_path(name) for name in value}
    folders = {parent for path in paths.values() for parent in path.parents}
    clash = sorted(name for name, path in paths.items() if path in folders)
    if clash:
        raise ValueError(f"workdir file {clash[0]!r} is also a folder of another file")
    return value


class LoglikelihoodSpec(_Strict):
    """``loglikelihood:``: score each multiple choice option by the model's log-probability."""

    target_delimiter: str = Field(" ", description="Text between the prompt and each option")
    blank: str | None = Field(
        None, description="Winogrande: options fill this blank; the rest of the prompt is scored"
    )
    verdict: Literal["acc", "acc_norm"] = Field(
        "acc", description="Which choice decides pass or fail: acc, or length-normalised acc_norm"
    )

    @field_validator("blank")
    @classmethod
    def _some_blank(cls, value: str | None) -> str | None:
        if value is not None and not value:
            raise ValueError("an empty blank matches everywhere: give the marker, e.g. '_'")
        return value


class PromptVariantSpec(_Strict):
    """One entry of ``prompts:`` written as a mapping."""

    name: str | None = Field(None, description="Variant name in ids and results")
    prompt: str | None = Field(None, description="User prompt template with {{vars}}")
    file: str | None = Field(None, description="File holding the template, next to the eval file")
    system: str | None = Field(None, description="System prompt of this variant")


class TurnSpec(_Strict):
    """One entry of a case's ``turns:``: a user message the model under test answers, or an
    assistant reply given verbatim (no call)."""

    user: str | None = Field(None, description="User message the model answers; may use {{vars}}")
    assistant: str | None = Field(None, description="Assistant reply given verbatim: no call")
    assertions: list[RawAssertion] = Field(
        default_factory=list, alias="assert", description="Assertions on the reply to this turn"
    )
    weight: float = Field(1.0, ge=0, description="Multiplies the weights of this turn's assertions")

    _validate_assertions = field_validator("assertions")(_check_assertions)


#: The default marker by which a simulated user says the conversation is over.
DEFAULT_STOP_MARKER = "<<DONE>>"


def _check_turn_assertions(value: list[RawAssertion]) -> list[RawAssertion]:
    """A simulated user's assertions: each may be marked ``stop_on_fail: true`` (a boolean)."""
    for index, raw in enumerate(value):
        flag = raw.get("stop_on_fail", False) if isinstance(raw, dict) else False
        if not isinstance(flag, bool):
            raise ValueError(f"assert[{index}].stop_on_fail: expected true or false, got {flag!r}")
    _check_assertions([without_stop_flag(raw) for raw in value])
    return value


def without_stop_flag(raw: RawAssertion) -> RawAssertion:
    """``raw`` without its ``stop_on_fail`` mark (the assertion itself)."""
    if not isinstance(raw, dict) or "stop_on_fail" not in raw:
        return raw
    return {key: value for key, value in raw.items() if key != "stop_on_fail"}


class SimulatedUserSpec(_Strict):
    """A case's ``simulated_user:``: a second model plays the user from its instructions."""

    instructions: str = Field(description="The simulated user's persona and goal; may use {{vars}}")
    model: str | None = Field(
        None, description="Profile playing the user; default: --judges's first model"
    )
    max_turns: int = Field(5, ge=1, le=100, description="Most replies of the model under test")
    stop: str = Field(
        DEFAULT_STOP_MARKER, min_length=1, description="What the simulated user says when done"
    )
    first_message: str | None = Field(
        None, description="The user's opening line, sent as written; may use {{vars}}"
    )
    assertions: list[RawAssertion] = Field(
        default_factory=list,
        alias="assert",
        description="Assertions on every reply of the model (stop_on_fail: true ends it)",
    )
    agent_stop: str | None = Field(
        None,
        min_length=1,
        description="What the model (an agent) says when it is done: a reply holding it ends "
        "the conversation",
    )

    _validate_assertions = field_validator("assertions")(_check_turn_assertions)


class ExpectedActionSpec(_Strict):
    """One ``expected_actions:`` entry: a tool call of the environment, as tau-bench writes it."""

    name: str = Field(description="The environment tool the action calls")
    arguments: dict[str, Any] = Field(
        default_factory=dict, alias="kwargs", description="Its arguments (tau-bench: kwargs)"
    )


class EnvironmentSpec(_Strict):
    """A ``kind: agent`` file's ``environment:``: tools that read and change a per-item state."""

    module: str | None = Field(
        None,
        description="Python file next to the eval file whose functions (first parameter "
        "`state`) are the tools; it runs in the sandbox",
    )
    server: str | None = Field(
        None, description="Or an mcp_servers entry (stdio) whose tools change the state file"
    )
    state: str = Field(
        "state.json",
        description="The state file in the workdir: .json, or .db/.sqlite/.sqlite3 for SQLite",
    )
    seed: dict[str, Any] | str | None = Field(
        None,
        description="The state each case starts from: a mapping, or file://NAME (JSON; SQL "
        "for SQLite); a case's `state:` replaces it",
    )


class CaseSpec(_Strict):
    """One inline case of an eval file."""

    id: str | int | None = Field(None, description="Case id; defaults to case-<n> (1-based)")
    prompt: str | None = Field(None, description="User prompt; may use {{vars}}")
    messages: list[Message] | None = Field(None, description="Chat messages instead of prompt")
    turns: list[TurnSpec] | None = Field(
        None,
        description="A scripted conversation instead of prompt: the model answers each user turn",
    )
    simulated_user: SimulatedUserSpec | None = Field(
        None, description="A second model plays the user instead of prompt or turns"
    )
    system: str | None = Field(None, description="System prompt for this case")
    vars: dict[str, Any] = Field(default_factory=dict, description="Values for {{vars}}")
    expected: str | int | float | bool | None = Field(None, description="Expected answer")
    assertions: list[RawAssertion] = Field(
        default_factory=list, alias="assert", description="Assertions scoring the answer"
    )
    threshold: float | None = Field(None, ge=0, le=1, description="Score needed to pass")
    model_params: dict[str, Any] = Field(default_factory=dict, description="litellm params")
    tags: list[str] = Field(default_factory=list, description="Tags, also pytest markers")
    files: dict[str, str] = Field(default_factory=dict, description="Files seeding the workdir")
    task: TaskSpec | None = Field(None, description="Task type and criteria")
    expected_output_tokens: int | None = Field(None, gt=0, description="Expected answer length")
    judge_metrics: list[str] = Field(
        default_factory=list, description="Extra dimensions the case's juries score"
    )
    include_dirs: list[str] = Field(
        default_factory=list, description="Folders copied into the workdir (agent files)"
    )
    images: list[str] = Field(default_factory=list, description="Images sent with the prompt")
    choices: list[str] | None = Field(None, description="Multiple choice options")
    answer: str | int | None = Field(None, description="The right choice: letter, index or text")
    state: dict[str, Any] | str | None = Field(
        None,
        description="kind: agent with an environment: the state this case starts from "
        "(a mapping or file://NAME), in place of the environment's seed",
    )
    expected_actions: list[ExpectedActionSpec] | None = Field(
        None,
        description="kind: agent with an environment: the tool calls that solve the case; "
        "state-equals compares the final state with the state they produce",
    )
    context: tuple[str, ...] | None = Field(
        None,
        description="Retrieved context: a string, or a list of chunks ([]: the retrieval found "
        "nothing), each a string or a document (page_content, text or content); {{context}} "
        "in prompts",
    )

    _validate_assertions = field_validator("assertions")(_check_assertions)
    _validate_files = field_validator("files")(_check_files)
    # Read before pydantic's own check, whose union errors name no accepted shape.
    _validate_context = field_validator("context", mode="before")(context_chunks)


class JudgeGateSpec(_Strict):
    """An eval file's ``judge_gate:``: the gate on its judges against people's labels, over
    ``--judge-gate`` (keys left out keep the run's, else the defaults)."""

    min_kappa: float | None = Field(
        None, ge=-1, le=1, description="Cohen's kappa a judge needs against people (0.6)"
    )
    min_labels: int | None = Field(
        None, ge=1, description="Labels a judge needs before it is gated (50)"
    )
    on_fail: Literal["demote", "fail"] | None = Field(
        None, description="demote: its verdicts become unchecked; fail: the run fails"
    )


class EvalSpec(_Strict):
    """A whole ``*.eval.yaml`` file."""

    description: str | None = Field(None, description="Human-readable suite description")
    system: str | None = Field(None, description="System prompt for every case")
    prompt: str | None = Field(None, description="Prompt template for cases without prompt")
    model_params: dict[str, Any] = Field(default_factory=dict, description="litellm params")
    threshold: float = Field(1.0, ge=0, le=1, description="Score a case needs to pass")
    assertions: list[RawAssertion] = Field(
        default_factory=list, alias="assert", description="Assertions added to every case"
    )
    tags: list[str] = Field(default_factory=list, description="Tags added to every case")
    task: TaskSpec | None = Field(
        None, description="Task type and criteria of every case that gives none of its own"
    )
    dataset: DatasetSource | None = Field(
        None, description="Cases from CSV, JSONL, parquet, a Hugging Face folder or a factory"
    )
    cases: list[CaseSpec] = Field(default_factory=list, description="Inline cases")
    parallel_safe: bool = Field(True, description="False: this file's calls run one at a time")
    judge_metrics: list[str] = Field(
        default_factory=list, description="Extra dimensions every jury of the file scores"
    )
    kind: str = Field(
        DEFAULT_FILE_KIND, description="What the items do: completion, or agent (a tool loop)"
    )
    tools: list[str | dict[str, Any]] | str = Field(
        default_factory=list,
        description="kind: agent: tool names (built-ins or refs); a plain file: function "
        "definitions offered to the model, inline or file://tools.json",
    )
    tool_choice: str | dict[str, Any] | None = Field(
        None, description="With function definitions: auto, none, required or one function"
    )
    mcp_servers: dict[str, McpServerSpec] = Field(
        default_factory=dict, description="kind: agent: MCP servers, named; tools: mcp:NAME/GLOB"
    )
    environment: EnvironmentSpec | None = Field(
        None,
        description="kind: agent: a stateful tool environment (module or MCP server), seeded "
        "per case, its final state checked by state-equals and state-subset",
    )
    max_steps: int | None = Field(
        None, ge=1, le=200, description="Model calls of an agent loop (default 10)"
    )
    max_turns: int | None = Field(
        None, ge=1, le=200, description="The older name of max_steps, still read"
    )
    limits: AgentLimits | None = Field(None, description="Agent loop budgets")
    sandbox: Literal["auto", "required", "off"] = Field(
        "auto", description="run_command under bubblewrap: when available, required, or never"
    )
    tool_shim: Literal["auto", "always", "never"] = Field(
        "auto", description="JSON-in-text tool calls for models without native tool calls"
    )
    tool_shim_model: str | None = Field(
        None, description="A second model that turns free-text replies into shim tool calls"
    )
    post_process: str | None = Field(
        None, description="Command run after each agent item with {results}; prints JSON scores"
    )
    include_dirs: list[str] = Field(
        default_factory=list, description="Folders copied into every agent item's workdir"
    )
    prompts: list[str | PromptVariantSpec] = Field(
        default_factory=list, description="Prompt variants: each case runs under each"
    )
    effort: list[str | int] | None = Field(
        None,
        description="Reasoning efforts: each case runs under each (none, minimal, low, medium, "
        "high, xhigh, max, or a thinking budget in tokens)",
    )
    solver: str | None = Field(
        None, description="module:function producing the answer from the case and a client"
    )
    answer_base: Literal[0, 1] = Field(
        0, description="Numeric multiple choice answers count from 0 (default) or 1"
    )
    loglikelihood: LoglikelihoodSpec | None = Field(
        None, description="Score options by log-probability (lm-eval's multiple_choice)"
    )
    judge_gate: JudgeGateSpec | None = Field(
        None,
        description="Gate on the file's judges against people's labels: min_kappa, min_labels, "
        "on_fail (demote or fail); over --judge-gate",
    )
    thinking: ThinkingRule | None = Field(
        None,
        description="How replies' thinking is read: strip (true), tags ([[open, close], ...]), "
        "implicit_open (true); over each model profile's thinking",
    )

    @field_validator("effort", mode="before")
    @classmethod
    def _efforts(cls, value: Any) -> Any:
        # One value or a list; each a level or a budget, once (models/providers/effort.py).
        from ..models import parse_effort

        if value is None:
            return None
        efforts = [parse_effort(one) for one in (value if isinstance(value, list) else [value])]
        twice = next((one for n, one in enumerate(efforts) if one in efforts[:n]), None)
        if twice is not None:
            raise ValueError(f"effort {twice} is given twice")
        return efforts

    @field_validator("loglikelihood", mode="before")
    @classmethod
    def _loglikelihood_flag(cls, value: Any) -> Any:
        # `loglikelihood: true` is the defaults; false is none.
        if value is True:
            return {}
        return None if value is False else value

    @model_validator(mode="after")
    def _one_step_limit(self) -> EvalSpec:
        if self.max_steps is not None and self.max_turns is not None:
            raise ValueError(
                "give `max_steps` (model calls of an agent loop), not also `max_turns`, its "
                "older name"
            )
        return self

    @property
    def agent_max_steps(self) -> int:
        """Model calls of an agent loop: ``max_steps``, or its older name ``max_turns``, else 10."""
        return self.max_steps or self.max_turns or DEFAULT_AGENT_STEPS

    @field_validator("kind")
    @classmethod
    def _registered_kind(cls, value: str) -> str:
        problem = file_kind_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("sandbox", mode="before")
    @classmethod
    def _sandbox_off(cls, value: Any) -> Any:
        # YAML reads an unquoted `sandbox: off` as false: that is the opt-out it spells.
        return "off" if value is False else value

    @field_validator("solver")
    @classmethod
    def _solver_ref(cls, value: str | None) -> str | None:
        if value is not None and not _TOOL_REF.fullmatch(value):
            raise ValueError(f"expected 'module:function', got {value!r}")
        return value

    @field_validator("tools")
    @classmethod
    def _known_tools(
        cls, value: list[str | dict[str, Any]] | str
    ) -> list[str | dict[str, Any]] | str:
        # function definitions (mappings, file://) are read by .functions, for plain files
        if isinstance(value, str):
            if not value.startswith("file://"):
                raise ValueError("expected a list, or file://tools.json of function definitions")
            return value
        for name in value:
            if isinstance(name, dict):
                continue
            if name.startswith("mcp:") and not MCP_TOOL.fullmatch(name):
                raise ValueError(f"tool {name!r}: an MCP server's tools are 'mcp:SERVER/GLOB'")
            if name in BUILTIN_TOOL_NAMES or _TOOL_REF.fullmatch(name) or MCP_TOOL.fullmatch(name):
                continue
            known = ", ".join(BUILTIN_TOOL_NAMES)
            raise ValueError(
                f"unknown tool {name!r}: use one of {known}, 'module:function' or 'mcp:SERVER/GLOB'"
            )
        return value

    @field_validator("mcp_servers")
    @classmethod
    def _server_names(cls, value: dict[str, McpServerSpec]) -> dict[str, McpServerSpec]:
        for name in value:
            if not _MCP_SERVER_NAME.fullmatch(name):
                raise ValueError(f"MCP server name {name!r}: use letters, digits, _ and - (<= 40)")
        return value

    _validate_assertions = field_validator("assertions")(_check_assertions)
