"""The eval file schema, and loading one file into concrete cases.

``load_spec`` reads a ``*.eval.yaml`` file, validates it with pydantic (unknown keys refused)
and turns it into :class:`EvalCase` values (the expansion of cases, prompt variants and dataset
rows is in :mod:`pytest_llmbench.spec.expand`). Every problem is an :class:`EvalFileError` carrying
the file and line, so collection can report ``path:line: message`` without a traceback.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..scoring.assertions import Assertion, AssertionSpecError, parse_assertion
from .context import context_chunks
from .datasets import DatasetSource
from .functions import FunctionTools
from .templating import last_user_text, render_chat

EVAL_SUFFIX = ".eval.yaml"


class EvalFileError(Exception):
    """A problem in an eval file: ``str()`` is ``path:line: message``."""

    def __init__(
        self, path: Path, line: int | None, message: str, also: Sequence[EvalFileError] = ()
    ) -> None:
        where = f"{path}:{line}" if line is not None else f"{path}"
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line
        self.message = message
        #: the file's other problems found in the same pass (the schema reports them all)
        self.also = tuple(also)

    def problems(self) -> tuple[EvalFileError, ...]:
        """This problem and the others found with it, in file order."""
        return (self, *self.also)


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


#: An agent's tools from an MCP server: ``mcp:SERVER/GLOB``, a glob over the server's tool names.
MCP_TOOL = re.compile(r"mcp:([A-Za-z0-9_-]+)/(.+)")
#: An MCP server's name: it starts the tool names the model sees (``time__get_current_time``).
_MCP_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")
_STDIO_ONLY = ("args", "env", "cwd", "network")


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


#: The longest name of one file or folder, in bytes (Linux's NAME_MAX, on every filesystem).
NAME_MAX = 255
#: What a path inside a workdir may take of Linux's PATH_MAX (4,096 bytes): the rest is left to
#: the workdir's own folder (pytest's temporary folder, the item's name).
WORKDIR_PATH_MAX = 4096 - 1024
#: Folders a workdir file may be in, one inside the other: what the filesystem allows deeper
#: (1,500 levels of ``x/``) breaks the recursive walkers of folders (pathlib's ``mkdir``,
#: ``shutil.rmtree``, pytest's clean-up of old temporary folders).
WORKDIR_MAX_DEPTH = 64


def workdir_path(name: str) -> PurePosixPath:
    """``name`` as a path inside an item's workdir; ``ValueError`` when it would leave it, or
    when a part of it or the whole is longer than the filesystem allows."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts or "\x00" in name:
        raise ValueError(f"workdir file {_shown(name)} must be a relative path inside the workdir")
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > WORKDIR_PATH_MAX:
        raise ValueError(
            f"workdir file {_shown(name)} is a path of {size:,} bytes; the filesystem allows "
            f"{WORKDIR_PATH_MAX:,} inside a workdir"
        )
    if len(path.parts) > WORKDIR_MAX_DEPTH:
        raise ValueError(
            f"workdir file {_shown(name)} is nested {len(path.parts) - 1:,} folders deep; "
            f"at most {WORKDIR_MAX_DEPTH - 1} are allowed"
        )
    for part in path.parts:
        size = len(part.encode("utf-8", "surrogatepass"))
        if size > NAME_MAX:
            which = f" ({_shown(part)})" if len(path.parts) > 1 else ""
            raise ValueError(
                f"workdir file {_shown(name)} has a name of {size:,} bytes{which}; "
                f"the filesystem allows {NAME_MAX}"
            )
    return path


def _shown(name: str, keep: int = 40) -> str:
    """``name`` quoted, a long one by its ends."""
    return repr(name) if len(name) <= 2 * keep else f"{name[:keep]!r}...{name[-keep:]!r}"


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

    _validate_assertions = field_validator("assertions")(_check_turn_assertions)


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
    kind: Literal["completion", "agent"] = Field("completion", description="agent: a tool loop")
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
    max_turns: int = Field(10, ge=1, le=200, description="Model calls of an agent loop")
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
    solver: str | None = Field(
        None, description="module:function producing the answer from the case and a client"
    )
    answer_base: Literal[0, 1] = Field(
        0, description="Numeric multiple choice answers count from 0 (default) or 1"
    )
    loglikelihood: LoglikelihoodSpec | None = Field(
        None, description="Score options by log-probability (lm-eval's multiple_choice)"
    )

    @field_validator("loglikelihood", mode="before")
    @classmethod
    def _loglikelihood_flag(cls, value: Any) -> Any:
        # `loglikelihood: true` is the defaults; false is none.
        if value is True:
            return {}
        return None if value is False else value

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


@dataclass(frozen=True)
class ScoredOptions:
    """A multiple choice case scored by log-likelihood (lm-eval's ``multiple_choice``)."""

    #: per option, in order: (context, continuation); the continuation is what is scored
    pairs: tuple[tuple[str, str], ...]
    #: per option, the characters ``acc_norm`` divides its log-probability by
    lengths: tuple[int, ...]
    verdict: str = "acc"  #: ``acc`` or ``acc_norm``: which choice is the item's answer


@dataclass(frozen=True)
class Turn:
    """One turn of a scripted conversation (a case's ``turns:``), rendered."""

    role: str  #: ``user`` (the model answers it, unless a verbatim reply follows) or ``assistant``
    content: str  #: the message text, ``{{vars}}`` rendered
    #: whether the model under test answers this turn: a user turn that no verbatim assistant
    #: turn follows
    answered: bool = False
    weight: float = 1.0  #: multiplies the weights of this turn's assertions in the case score
    #: the indices into the case's ``assertions`` checked on the reply to this turn
    checks: tuple[int, ...] = ()


@dataclass(frozen=True)
class SimulatedUser:
    """A case's simulated user, rendered: who plays the user, until when, and what is checked."""

    instructions: str  #: persona and goal, ``{{vars}}`` rendered
    model: str | None  #: the profile playing the user (None: the run's default)
    max_turns: int  #: most replies of the model under test
    stop: str  #: the marker by which the simulated user ends the conversation
    first_message: str | None  #: the user's opening line, or None: the simulated user writes it
    #: indices into the case's ``assertions`` checked on every reply of the model
    checks: tuple[int, ...] = ()
    #: those of :attr:`checks` whose failure ends the conversation
    stop_on_fail: tuple[int, ...] = ()


@dataclass(frozen=True)
class EvalCase:
    """A fully resolved case: what one item sends and how it is scored."""

    id: str
    messages: tuple[dict[str, str], ...]
    expected: str | None
    assertions: tuple[Assertion, ...]
    threshold: float
    model_params: dict[str, Any]
    tags: tuple[str, ...]
    files: dict[str, str]
    vars: dict[str, Any]
    task: dict[str, Any] | None
    expected_output_tokens: int | None
    line: int
    #: extra jury dimensions (normalised keys): the file's, then the case's
    judge_metrics: tuple[str, ...] = ()
    #: folders (resolved, the file's then the case's) copied into an agent item's workdir
    include_dirs: tuple[Path, ...] = ()
    #: the name of the ``prompts:`` variant this case was rendered with
    prompt_variant: str | None = None
    #: images sent with the last user message: absolute paths or URLs
    images: tuple[str, ...] = ()
    #: multiple choice options, the right one (0-based) and the dataset's labels of them
    choices: tuple[str, ...] | None = None
    answer_index: int | None = None
    choice_labels: tuple[str, ...] | None = None
    #: the chat before ``{{vars}}`` were rendered, and the vars (None: literal text)
    template: tuple[dict[str, str], ...] = ()
    template_vars: dict[str, Any] | None = None
    #: a case scored by log-likelihood: each option's context and continuation
    loglikelihood: ScoredOptions | None = None
    #: the files besides the eval file that the case was read from: its dataset's files, its
    #: ``prompts:`` variant's ``file://`` (hashed into run.json's ``source``)
    sources: tuple[Path, ...] = ()
    #: digests what decides the case's outcome when :attr:`case_hash` is first read (set by the
    #: loader: :class:`pytest_llmbench.fingerprint.CaseHasher` with the file's settings)
    hasher: Callable[[EvalCase], str] | None = field(default=None, repr=False, compare=False)
    #: a scripted conversation (``turns:``); ``messages`` is then its first call's chat: the
    #: system prompt and the turns up to the first one the model answers
    turns: tuple[Turn, ...] = ()
    #: a conversation with a simulated user (``simulated_user:``); ``messages`` is then the
    #: system prompt alone
    simulated_user: SimulatedUser | None = None
    #: the retrieved context the case answers from (``context:``), its chunks in order; ():
    #: an empty retrieval (``context: []``); None: the case gives none
    context: tuple[str, ...] | None = None
    #: the function definitions offered with this case alone (a dataset's ``tools`` column);
    #: None: the file's, if any
    functions: FunctionTools | None = None

    @property
    def conversational(self) -> bool:
        """Whether the case is a conversation: scripted turns or a simulated user."""
        return bool(self.turns) or self.simulated_user is not None

    @functools.cached_property
    def case_hash(self) -> str | None:
        """What decides the case's outcome, digested (:func:`pytest_llmbench.fingerprint.case_hash`):
        once, when first asked (a record, not collection: collecting 10,000 cases spent 0.2 s
        on it); None for a case no loader gave a hasher."""
        return None if self.hasher is None else self.hasher(self)

    def turn_of(self, index: int) -> int | None:
        """The 0-based turn whose reply assertion ``index`` checks (None outside turns)."""
        return next((n for n, turn in enumerate(self.turns) if index in turn.checks), None)

    def render(self, template: Sequence[Mapping[str, str]]) -> tuple[dict[str, str], ...]:
        """``template`` (this case's, or a rewrite of it) with the case's vars and choices.

        Raises ValueError for a placeholder the vars lack.
        """
        return render_chat(template, self.template_vars, self.choices)

    @property
    def prompt(self) -> str | None:
        """The last user message."""
        return last_user_text(self.messages)


@dataclass(frozen=True)
class AgentSpec:
    """How the items of a ``kind: agent`` file run: tools, turns, budgets, sandbox."""

    tools: tuple[str, ...]
    max_turns: int
    limit_seconds: float | None
    limit_tokens: int | None
    sandbox: str
    tool_shim: str
    post_process: str | None
    #: a second model (profile name or litellm id) reading free-text replies in shim mode
    shim_model: str | None = None
    #: the MCP servers the ``mcp:SERVER/GLOB`` entries of :attr:`tools` name
    mcp_servers: tuple[McpServer, ...] = ()

    @property
    def local_tools(self) -> tuple[str, ...]:
        """The built-in and ``module:function`` tools (those not from an MCP server)."""
        return tuple(name for name in self.tools if not MCP_TOOL.fullmatch(name))

    @property
    def mcp_selections(self) -> tuple[tuple[str, str], ...]:
        """The ``(server, glob)`` of each ``mcp:SERVER/GLOB`` entry of :attr:`tools`."""
        found = (MCP_TOOL.fullmatch(name) for name in self.tools)
        return tuple((match[1], match[2]) for match in found if match)


@dataclass(frozen=True)
class McpServer:
    """An MCP server of an agent file, as written (``${VAR}`` resolved only when it starts)."""

    name: str
    command: str | None
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    cwd: str | None
    url: str | None
    headers: tuple[tuple[str, str], ...]
    network: bool
    tool_timeout_s: float
    startup_timeout_s: float
    shared: bool = False  #: one session per process, not per item (``agent.mcp_pool``)

    @classmethod
    def of(cls, name: str, spec: McpServerSpec) -> McpServer:
        """The server ``name`` as its spec gives it."""
        return cls(
            name=name,
            command=spec.command,
            args=tuple(spec.args),
            env=tuple(spec.env.items()),
            cwd=spec.cwd,
            url=spec.url,
            headers=tuple(spec.headers.items()),
            network=spec.network,
            tool_timeout_s=spec.tool_timeout_s,
            startup_timeout_s=spec.startup_timeout_s,
            shared=spec.shared,
        )


@dataclass(frozen=True)
class LoadedEval:
    """An eval file after validation and expansion."""

    path: Path
    suite: str
    description: str | None
    cases: tuple[EvalCase, ...]
    parallel_safe: bool = True
    agent: AgentSpec | None = None
    #: ``module:function`` that answers each case (``solver:``)
    solver: str | None = None
    #: the names of the file's ``prompts:`` variants, in order (empty without variants)
    prompt_variants: tuple[str, ...] = ()
    #: a plain file's function definitions offered to the model (``tools:``), or None
    functions: FunctionTools | None = None


def suite_name(path: Path) -> str:
    """``capitals.eval.yaml`` -> ``capitals``."""
    name = path.name
    return name[: -len(EVAL_SUFFIX)] if name.endswith(EVAL_SUFFIX) else path.stem
