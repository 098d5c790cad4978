"""Starting an MCP server, in process: its command line and environment, ``${VAR}`` values."""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import pytest

from pytest_llmbench.agent.capabilities import dropped_argv
from pytest_llmbench.agent.limits import SandboxLimits
from pytest_llmbench.agent.mcp_launch import McpServerError, resolve, server_cap, server_process
from pytest_llmbench.agent.sandbox import CLEAN_PATH, Sandbox

LIMITS = SandboxLimits(cpu_s=9)


def test_an_unconfined_server_gets_the_clean_environment_and_its_own(tmp_path: Path) -> None:
    box = Sandbox(tmp_path, LIMITS, "off")
    argv, env = server_process(
        box, ["node", "server.js"], {"TOKEN": "t", "TERM": "dumb"}, path=[Path("/opt/node/bin")]
    )
    assert env == {
        "PATH": f"/opt/node/bin:{CLEAN_PATH}",
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "TOKEN": "t",
        "TERM": "dumb",
    }
    # as root, behind the script that drops every capability (agent/capabilities.py)
    prefix = dropped_argv([]) if os.geteuid() == 0 else []
    assert argv[: len(prefix)] == prefix
    shell = argv[len(prefix) :]
    assert shell[:2] == ["/bin/sh", "-c"]
    unset, started = shell[2].split("; ", 1)
    # what a launcher adds (the MCP SDK: LOGNAME, SHELL, TERM, USER) is unset unless asked for
    assert unset == "unset LOGNAME SHELL USER"
    words = shlex.split(started)
    assert words[:2] == ["exec", "prlimit"] and "--cpu=9" in words
    assert words[-3:] == ["--", "node", "server.js"]


def test_a_confined_server_sees_its_program_and_the_network_only_when_asked(
    tmp_path: Path,
) -> None:
    assert shutil.which("bwrap") is not None
    box = Sandbox(tmp_path, LIMITS, "required")
    argv, _ = server_process(box, ["server"], {}, programs=[Path("/opt/srv")])
    assert argv[0] == shutil.which("bwrap") and "--share-net" not in argv
    assert argv[argv.index("/opt/srv") - 1] == "--ro-bind"
    assert argv[argv.index("--chdir") + 1] == str(tmp_path.resolve())
    argv, _ = server_process(box, ["server"], {}, network=True, cwd=tmp_path / "sub")
    assert "--share-net" in argv and argv[argv.index("--chdir") + 1] == str(tmp_path / "sub")


def test_the_cap_is_a_cgroup_prefix_only_where_there_is_one(tmp_path: Path) -> None:
    box = Sandbox(tmp_path, LIMITS, "off")
    with server_cap(box) as cap:
        assert (cap != []) is (box.process_limit == "cgroup")


def test_a_variable_is_read_and_noted_as_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCS_TOKEN", "s3cret")
    secrets: list[tuple[str, str]] = []
    said = resolve("Bearer ${DOCS_TOKEN}", "docs", "header Authorization", secrets)
    assert said == "Bearer s3cret" and secrets == [("s3cret", "DOCS_TOKEN")]


def test_an_unset_variable_is_the_server_s_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOT_SET_HERE", raising=False)
    with pytest.raises(
        McpServerError, match=r"'docs': env KEY uses \$\{NOT_SET_HERE\}, which is not set"
    ):
        resolve("${NOT_SET_HERE}", "docs", "env KEY", [])
