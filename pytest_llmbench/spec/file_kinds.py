"""The file kinds: the values an eval file's ``kind:`` may take, each registered once.

A file's ``kind:`` says what its items do: ``completion`` (the default) asks the model and
scores its reply, ``agent`` runs a tool loop in a workdir. What each kind allows of the rest of
the file (conversations, log-likelihood scoring, agent checks, tool names) is read here, never
from a comparison with a kind's name elsewhere. The schema accepts any name in
:data:`FILE_KINDS`; an unknown one is a collection error at its line listing the registered
names. The engine looks a file's kind up in its own table (``engine/kinds``) to answer its items.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

#: The kind of a file that names none.
DEFAULT_FILE_KIND = "completion"


@dataclass(frozen=True)
class FileKind:
    """One value of ``kind:`` and what a file of that kind may contain."""

    name: str  #: the value of ``kind:``
    description: str  #: what the items of such a file do, in one phrase
    #: the items run an agent's tool loop: ``tools:`` are tool names, the agent keys
    #: (``limits``, ``mcp_servers``, ``post_process``, ...) apply, a ``solver`` is refused
    agent: bool = False
    #: cases may be conversations (``turns:``, ``simulated_user:``): with the model, or with
    #: an agent that may call tools between the user's messages
    conversations: bool = True
    #: options may be scored by the model's log-probabilities (``loglikelihood:``)
    loglikelihood: bool = True
    #: assertions on an agent's work (files, commands, tool calls) may be used
    agent_checks: bool = False

    @property
    def written(self) -> str:
        """How the file spells it: ```kind: agent```."""
        return f"`kind: {self.name}`"


#: Every file kind, by name: the one place a new kind is added (tests add theirs here).
FILE_KINDS: dict[str, FileKind] = {
    kind.name: kind
    for kind in (
        FileKind(DEFAULT_FILE_KIND, "the model answers each case's prompt"),
        FileKind(
            "agent",
            "a tool loop in a workdir",
            agent=True,
            loglikelihood=False,
            agent_checks=True,
        ),
    )
}


def file_kind(name: str) -> FileKind:
    """The registered kind ``name`` (the schema let only registered names through)."""
    return FILE_KINDS[name]


def file_kind_problem(name: str) -> str | None:
    """Why ``name`` is no file kind (the registered names listed), or None when it is one."""
    if name in FILE_KINDS:
        return None
    return f"unknown kind {name!r}: use one of {', '.join(FILE_KINDS)}"


def kinds_allowing(allows: Callable[[FileKind], bool]) -> str:
    """The kinds that ``allows``, as a file spells them: ```kind: agent```."""
    return " or ".join(kind.written for kind in FILE_KINDS.values() if allows(kind))
