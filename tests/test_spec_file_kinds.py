"""Tests for pytest_llmbench.spec.file_kinds: the file kinds of ``kind:``, registered once."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmbench.spec.file_kinds import (
    DEFAULT_FILE_KIND,
    FILE_KINDS,
    FileKind,
    file_kind_problem,
    kinds_allowing,
)
from pytest_llmbench.spec.load import load_spec
from pytest_llmbench.spec.resolved import EvalFileError

#: A toy kind, as a test (or a new feature) registers one: its items echo the prompt.
ECHO = FileKind("echo", "the reply is the prompt", conversations=False, loglikelihood=False)


def eval_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "toy.eval.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def load_error(path: Path) -> str:
    with pytest.raises(EvalFileError) as caught:
        load_spec(path)
    return str(caught.value).removeprefix(f"{path.parent}/")


def test_the_registered_kinds_and_what_each_allows() -> None:
    assert list(FILE_KINDS) == [DEFAULT_FILE_KIND, "agent"]
    assert FILE_KINDS["agent"].agent and FILE_KINDS["agent"].conversations
    assert not FILE_KINDS[DEFAULT_FILE_KIND].agent_checks
    assert kinds_allowing(lambda kind: kind.agent_checks) == "`kind: agent`"


def test_an_unknown_kind_is_an_error_at_its_line_listing_the_registered_names(
    tmp_path: Path,
) -> None:
    path = eval_file(tmp_path, "description: x\nkind: echo\ncases: [{prompt: hi}]\n")
    assert load_error(path) == (
        "toy.eval.yaml:2: kind: unknown kind 'echo': use one of completion, agent"
    )
    assert file_kind_problem("agent") is None


def test_a_toy_kind_registered_in_the_table_loads_with_its_own_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(FILE_KINDS, ECHO.name, ECHO)
    loaded = load_spec(eval_file(tmp_path, "kind: echo\ncases:\n  - {id: a, prompt: hi}\n"))
    assert loaded.kind == "echo" and loaded.agent is None
    assert [(case.id, case.prompt) for case in loaded.cases] == [("a", "hi")]
    turns = eval_file(tmp_path, "kind: echo\ncases:\n  - id: t\n    turns: [{user: hi}]\n")
    assert load_error(turns) == (
        "toy.eval.yaml:4: case 't': `turns` is a conversation with the model itself, "
        "not with `kind: echo`"
    )
    agent_key = eval_file(tmp_path, "kind: echo\npost_process: x\ncases: [{prompt: hi}]\n")
    assert load_error(agent_key) == "toy.eval.yaml:2: 'post_process' needs `kind: agent`"


def test_a_file_without_kind_is_a_completion_file(tmp_path: Path) -> None:
    loaded = load_spec(eval_file(tmp_path, "cases: [{prompt: hi}]\n"))
    assert loaded.kind == DEFAULT_FILE_KIND


AGENT_FILE = "kind: agent\ntools: [read_file]\n{limit}cases: [{{id: a, prompt: hi}}]\n"


def test_an_agents_model_calls_are_max_steps_and_max_turns_is_still_read(tmp_path: Path) -> None:
    def steps(limit: str) -> int:
        agent = load_spec(eval_file(tmp_path, AGENT_FILE.format(limit=limit))).agent
        assert agent is not None
        return agent.max_turns

    assert (steps("max_steps: 3\n"), steps("max_turns: 4\n"), steps("")) == (3, 4, 10)
    both = eval_file(tmp_path, AGENT_FILE.format(limit="max_steps: 3\nmax_turns: 4\n"))
    message = load_error(both)
    assert "give `max_steps` (model calls of an agent loop), not also `max_turns`" in message
