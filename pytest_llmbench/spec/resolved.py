"""What loading one eval file gives: resolved cases, the file's settings, or the error.

:mod:`.schema` is the file as written (pydantic models, unknown keys refused); this module holds
the values collection makes of it: each :class:`EvalCase` (what one item sends and how it is
scored, with its :class:`Turn` values, :class:`SimulatedUser` or :class:`ScoredOptions`), the
file's :class:`AgentSpec` and :class:`McpServer` values, and the :class:`LoadedEval` that holds
them. Every problem is an :class:`EvalFileError` carrying the file and line, so collection can
report ``path:line: message`` without a traceback. Nothing here imports pydantic.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .templating import last_user_text, render_chat

if TYPE_CHECKING:
    from ..models import ThinkingRule
    from ..scoring import Assertion
    from .functions import FunctionTools

EVAL_SUFFIX = ".eval.yaml"
#: An agent's tools from an MCP server: ``mcp:SERVER/GLOB``, a glob over the server's tool names.
MCP_TOOL = re.compile(r"mcp:([A-Za-z0-9_-]+)/(.+)")


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
    #: the marker by which the model (an agent) ends the conversation when its reply holds it
    #: (None: only the simulated user and ``max_turns`` end it); hashed only when set
    agent_stop: str | None = field(default=None, metadata={"digest": "when_set"})


@dataclass(frozen=True)
class ExpectedAction:
    """One tool call of a case's ``expected_actions:`` (tau-bench's ``actions``)."""

    name: str  #: the environment tool it calls
    arguments: Mapping[str, Any]  #: its arguments (a JSON object)
    line: int = 0  #: where it is written, for errors that name it


#: The state formats an environment keeps, by the state file's suffix (else JSON).
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


@dataclass(frozen=True)
class EnvironmentTool:
    """One tool of an environment module, as its source declares it (read without running it),
    so that a case's ``expected_actions`` are checked at collection."""

    name: str  #: the function's name: the tool's
    parameters: tuple[str, ...]  #: its parameters after ``state``, in order
    required: tuple[str, ...]  #: those of :attr:`parameters` without a default
    any_keyword: bool = False  #: it takes ``**kwargs``: any argument name is its
    line: int = 0  #: where the module defines it


@dataclass(frozen=True)
class Environment:
    """A ``kind: agent`` file's ``environment:``, resolved: where its tools come from and where
    its state lives. Exactly one of :attr:`module` and :attr:`server` is set."""

    #: the Python file whose public functions taking ``state`` first are the tools (absolute)
    module: Path | None
    #: or the ``mcp_servers`` entry whose tools change the state file
    server: str | None
    #: the state file, relative to the workdir
    state_file: str
    #: the file's default seed: a JSON value (a mapping), SQL text for SQLite, or None (empty)
    seed: Any
    #: the module's tool names, read from its source without running it (empty for a server)
    tool_names: tuple[str, ...] = ()
    #: the module's tools with their parameters, in :attr:`tool_names`' order (empty for a
    #: server)
    tools: tuple[EnvironmentTool, ...] = ()

    def tool(self, name: str) -> EnvironmentTool | None:
        """The module's tool ``name``, or None (a server's tools are known only when it runs)."""
        return next((tool for tool in self.tools if tool.name == name), None)

    @property
    def sqlite(self) -> bool:
        """Whether the state is a SQLite database (else a JSON document)."""
        return self.state_file.lower().endswith(SQLITE_SUFFIXES)


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
    #: the state this case's environment starts from (``state:``, else the environment's
    #: ``seed``): a JSON value, or SQL text for SQLite; None without an environment
    state_seed: Any = None
    #: the tool calls that solve the case (``expected_actions:``), in order; ``()``: none (the
    #: state must stay as seeded); None: not given
    expected_actions: tuple[ExpectedAction, ...] | None = None

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
    #: the file's ``max_steps`` (model calls of the loop); named as before so that the case
    #: hashes of agent items (which digest these fields by name) stay what they were
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
    #: the stateful tool environment (``environment:``), or None
    environment: Environment | None = None

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
    #: the file's ``kind:`` (a name registered in :mod:`.file_kinds`): what its items do
    kind: str = "completion"
    #: the file's ``effort:`` values, in order (empty without the effort axis)
    efforts: tuple[str | int, ...] = ()
    #: the file's ``thinking:`` rule (its keys override each model profile's), or None
    thinking: ThinkingRule | None = None
    #: the file's ``judge_gate:`` keys as given (min_kappa, min_labels, on_fail), or None
    judge_gate: Mapping[str, Any] | None = None


def suite_name(path: Path) -> str:
    """``capitals.eval.yaml`` -> ``capitals``."""
    name = path.name
    return name[: -len(EVAL_SUFFIX)] if name.endswith(EVAL_SUFFIX) else path.stem
