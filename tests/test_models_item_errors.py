"""The item errors by the part that failed (models/item_errors.py): each names its part and
keeps its cause as ``kind``, the record's ``error_kind``."""

from __future__ import annotations

import pytest

from pytest_llmbench.agent.mcp_launch import McpServerError
from pytest_llmbench.engine.simulated import user_error
from pytest_llmbench.models import (
    ItemError,
    JudgeError,
    ProviderError,
    SandboxError,
    SolverError,
    ToolError,
    UserSimError,
)

FAMILY = [ProviderError, SandboxError, ToolError, JudgeError, UserSimError, SolverError]


@pytest.mark.parametrize(
    ("error", "kind", "words"),
    [
        (ProviderError("down"), "provider", "provider error"),
        (ProviderError("refused", "connection"), "connection", "provider error"),
        (SandboxError("no bwrap"), "sandbox", "sandbox error"),
        (ToolError("server gone"), "tool", "tool error"),
        (JudgeError("all judges failed"), "judge", "judge error"),
        (UserSimError("empty", "malformed"), "malformed", "simulated user error"),
        (SolverError("raised"), "solver", "solver error"),
        # The harness's own reasons name themselves.
        (ItemError("no profile", "config"), "config", "config error"),
        (ItemError("not cached", "cache_miss"), "cache_miss", "cache miss error"),
        (ItemError("what?"), "internal", "internal error"),
    ],
)
def test_each_error_names_its_part_and_keeps_its_cause(
    error: ItemError, kind: str, words: str
) -> None:
    assert (error.kind, error.words) == (kind, words)
    assert error.message == str(error)
    assert (error.retries, error.rate_limit_wait_s, error.partial) == (0, 0.0, None)


def test_the_parts_are_one_family_and_apart() -> None:
    for cls in FAMILY:
        assert issubclass(cls, ItemError)
        # A handler of one part never catches another's error.
        others = [other for other in FAMILY if other is not cls]
        assert not any(issubclass(cls, other) for other in others), cls


def test_an_mcp_server_that_fails_is_a_tool_error() -> None:
    error = McpServerError("MCP server 'probe' did not start")
    assert isinstance(error, ToolError) and not isinstance(error, ProviderError)
    assert (error.kind, error.words) == ("tool", "tool error")


def test_a_simulated_users_error_keeps_its_cause_and_spend() -> None:
    cause = ProviderError("fake2: HTTP 500", "provider", retries=2, rate_limit_wait_s=1.5)
    said = user_error(cause, "fake2")
    assert isinstance(said, UserSimError) and not isinstance(said, ProviderError)
    assert said.message == "simulated user fake2: fake2: HTTP 500"
    assert (said.kind, said.retries, said.rate_limit_wait_s) == ("provider", 2, 1.5)
