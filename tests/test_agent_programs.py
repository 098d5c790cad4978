"""Where a stdio MCP server's program lives (agent/programs.py): the install prefix the sandbox
shows for each way of installing one, on folder layouts made here (a virtualenv, a ``uv tool``
install behind ``~/.local/bin``, the npx cache, an nvm Node, a standalone program), and the
commands it refuses, with why. In-process: the layouts are files, nothing runs (the runs are in
tests/test_agent_mcp_programs.py)."""

from __future__ import annotations

import fnmatch
import os
import shutil
from pathlib import Path

import pytest

from pytest_llmbench.agent.limits import SandboxLimits
from pytest_llmbench.agent.programs import Link, Program, ProgramNotVisible, locate
from pytest_llmbench.agent.sandbox import Sandbox


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def python_installation(root: Path) -> Path:
    """A Python installation's layout (pyenv's, uv's): bin/python3.12 and its stdlib."""
    executable(root / "bin" / "python3.12", "binary")
    (root / "lib" / "python3.12").mkdir(parents=True)
    (root / "lib" / "python3.12" / "os.py").write_text("")
    return root / "bin" / "python3.12"


def virtualenv(root: Path, base: Path) -> Path:
    """A virtualenv on the installation of ``base``, with a console script ``server``."""
    (root / "bin").mkdir(parents=True)
    (root / "pyvenv.cfg").write_text(f"home = {base.parent}\n")
    (root / "bin" / "python3").symlink_to(base)
    (root / "bin" / "python").symlink_to("python3")
    return executable(root / "bin" / "server", f"#!{root}/bin/python\nimport server\n")


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    """A bwrap sandbox ("required": a broken bwrap fails these tests); nothing is run."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    return Sandbox(workdir, SandboxLimits(), mode="required")


def test_a_script_in_a_virtualenv_shows_the_venv_and_its_base_python(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    base = python_installation(tmp_path / "pythons" / "3.12")
    server = virtualenv(tmp_path / "venvs" / "mcp", base)
    program = locate(str(server), sandbox)
    assert program == Program(str(server), (tmp_path / "venvs/mcp", tmp_path / "pythons/3.12"))


def test_a_uv_tool_link_in_local_bin_is_made_again_and_its_venv_shown(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    base = python_installation(home / ".local/share/uv/python/cpython-3.12-linux")
    tool = home / ".local/share/uv/tools/srv"
    target = virtualenv(tool, base)
    link = home / ".local/bin/srv"
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    program = locate(str(link), sandbox)
    assert program.command == str(link)  # what runs is the link, as on the host
    assert program.links == (Link(link, target),)
    assert program.mounts == (tool, home / ".local/share/uv/python/cpython-3.12-linux")
    # nothing else of ~/.local: not bin/ (only the one link), not share/
    assert not any(home / ".local" == m or home / ".local/share" == m for m in program.mounts)


def test_a_bare_name_is_found_on_the_path_of_this_process(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = python_installation(tmp_path / "py")
    target = virtualenv(tmp_path / "tools/srv", base)
    bin_folder = tmp_path / "local-bin"
    bin_folder.mkdir()
    (bin_folder / "srv-mcp").symlink_to(target)
    monkeypatch.setenv("PATH", f"{bin_folder}:{os.environ['PATH']}")
    program = locate("srv-mcp", sandbox)
    assert program.command == str(bin_folder / "srv-mcp")
    assert program.mounts == (tmp_path / "tools/srv", tmp_path / "py")
    assert program.path == (bin_folder,)  # what it runs by name is found too


def test_a_name_on_the_sandboxs_own_path_needs_nothing(sandbox: Sandbox) -> None:
    program = locate("sh", sandbox)
    assert Path(program.command).name == "sh"
    assert (program.mounts, program.links, program.path) == ((), (), ())


def test_an_npx_install_shows_its_node_modules(sandbox: Sandbox, tmp_path: Path) -> None:
    """The npx cache's layout: node_modules/.bin/NAME links into the package, whose script
    runs `#!/usr/bin/env node`; the dependencies sit beside it in the same node_modules."""
    cache = tmp_path / "home/.npm/_npx/1a2b3c4d"
    script = executable(
        cache / "node_modules/@scope/server-thing/dist/index.js", "#!/usr/bin/env node\n"
    )
    (cache / "node_modules/zod").mkdir(parents=True)
    (cache / "node_modules/.bin").mkdir()
    entry = cache / "node_modules/.bin/server-thing"
    entry.symlink_to(os.path.relpath(script, entry.parent))
    (cache / "package.json").write_text("{}")
    node = shutil.which("node", path=sandbox.search_path)
    program = locate(str(entry), sandbox)
    assert program.command == str(entry)
    assert program.mounts == (cache / "node_modules",)  # not the cache's other installs
    assert program.links == ()  # the link lies in what is shown
    assert program.path == (() if node else (Path(str(shutil.which("node"))).parent,))


def test_an_env_interpreter_found_outside_the_sandbox_is_shown_and_put_on_path(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An nvm Node (no node on the sandbox's PATH by that name): its installation is shown,
    and its bin/ goes first on the server's PATH, where `env` looks."""
    nvm = tmp_path / "home/.nvm/versions/node/v20.1.0"
    executable(nvm / "bin/node", "binary")
    executable(nvm / "bin/llmbench-test-node", "binary")
    (nvm / "lib/node_modules/npm").mkdir(parents=True)
    script = executable(
        tmp_path / "srv/node_modules/srv/index.js", "#!/usr/bin/env -S llmbench-test-node --x\n"
    )
    monkeypatch.setenv("PATH", f"{nvm / 'bin'}:{os.environ['PATH']}")
    program = locate(str(script), sandbox)
    assert program.mounts == (tmp_path / "srv/node_modules", nvm)
    assert program.path == (nvm / "bin",)


def test_a_standalone_program_is_shown_alone(sandbox: Sandbox, tmp_path: Path) -> None:
    binary = executable(tmp_path / "home/go/bin/github-mcp-server", "\x7fELF")
    (tmp_path / "home/go/bin/other").write_text("not shown")
    assert locate(str(binary), sandbox) == Program(str(binary), (binary,))


def test_a_relative_path_is_the_servers_own_in_its_workdir(sandbox: Sandbox) -> None:
    assert locate("./bin/server", sandbox) == Program("./bin/server")


def test_unconfined_the_program_is_located_but_nothing_is_mounted(tmp_path: Path) -> None:
    base = python_installation(tmp_path / "py")
    server = virtualenv(tmp_path / "venv", base)
    off = Sandbox(tmp_path, SandboxLimits(), mode="off")
    assert locate(str(server), off) == Program(str(server))
    with pytest.raises(ProgramNotVisible, match="does not exist on this machine"):
        locate(str(tmp_path / "missing"), off)


@pytest.mark.parametrize(
    ("layout", "said"),
    [
        ("missing", "/venv/bin/server does not exist on this machine"),
        ("not-executable", "/venv/bin/server is not an executable file"),
        ("dotenv", "/venv holds .env, and a folder holding credentials is never shown"),
        ("npmrc", "/venv holds .npmrc, and a folder holding credentials is never shown"),
        ("venv-in-home", "its install prefix * holds the home directory, never shown"),
        ("node-in-local", "its install prefix */.local is a folder of the home directory where*"),
        ("venv-in-project", "its install prefix */venv holds a project (pyproject.toml)*"),
        ("no-interpreter", "its interpreter 'llmbench-no-such-node' is on neither the sandbox's"),
    ],
)
def test_what_the_sandbox_cannot_show_is_refused_with_why(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str, said: str
) -> None:
    base = python_installation(tmp_path / "py")
    server = virtualenv(tmp_path / "venv", base)
    if layout == "missing":
        server.unlink()
    elif layout == "not-executable":
        server.chmod(0o644)
    elif layout == "dotenv":
        (tmp_path / "venv/.env").write_text("OPENAI_API_KEY=sk-x")
    elif layout == "npmrc":
        (tmp_path / "venv/.npmrc").write_text("//registry.npmjs.org/:_authToken=x")
    elif layout == "venv-in-home":  # a virtualenv made in the home directory itself
        monkeypatch.setenv("HOME", str(tmp_path / "venv"))
    elif layout == "node-in-local":  # Node's tarball unpacked into ~/.local, then npm -g
        home = tmp_path / "home"
        monkeypatch.setenv("HOME", str(home))
        executable(home / ".local/bin/node", "\x7fELF")
        (home / ".local/share/opencode").mkdir(parents=True)
        (home / ".local/share/opencode/auth.json").write_text('{"key": "sk-x"}')
        server = executable(home / ".local/bin/mcp-srv", "#!/bin/sh\n")
    elif layout == "venv-in-project":  # python -m venv . in a project's root
        (tmp_path / "venv/pyproject.toml").write_text("[project]\n")
        (tmp_path / "venv/config").mkdir()
        (tmp_path / "venv/config/.env").write_text("OPENAI_API_KEY=sk-x")
    else:
        server.write_text("#!/usr/bin/env llmbench-no-such-node\n")
    with pytest.raises(ProgramNotVisible) as raised:
        locate(str(server), sandbox)
    assert fnmatch.fnmatch(str(raised.value), f"*{said}*"), raised.value


def test_a_name_found_nowhere_names_both_paths(sandbox: Sandbox) -> None:
    with pytest.raises(ProgramNotVisible) as raised:
        locate("llmbench-no-such-server", sandbox)
    message = str(raised.value)
    assert message.startswith("'llmbench-no-such-server' is on neither the sandbox's PATH (")
    assert sandbox.search_path in message
