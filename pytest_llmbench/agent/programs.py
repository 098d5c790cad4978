"""Where a stdio MCP server's program lives, and what of the host the sandbox shows for it.

The sandbox shows the system, the Python that runs pytest with its virtualenv, and the workdir
(:func:`.bwrap.shown_folders`). A server's program installed elsewhere is shown read-only by
its *install prefix*, and nothing else of the host:

- a program inside a virtualenv (``pyvenv.cfg`` in a folder above it: its own venv, a pipx or
  ``uv tool`` install): that virtualenv, and the Python installation its ``bin/python`` links
  to (the folder holding that interpreter's ``bin/`` and ``lib/pythonX.Y``);
- a program inside ``node_modules`` (a project's, a global npm install's, the npx cache's): the
  outermost ``node_modules`` folder on its path, where its dependencies are;
- a program in the ``bin/`` of a Python or Node installation (``lib/pythonX.Y/os.py`` or
  ``bin/node`` beside it: pyenv, uv-managed Python, conda, nvm): that installation;
- any other file (a static binary, a lone script): that file alone.

The command runs by the path it was given. Each symlink on the way to the file (``~/.local/bin
/NAME``, pipx's and ``uv tool``'s link into the tool's virtualenv) is made again in the sandbox
where it is not shown already, and the file it ends at is shown by the rules above. A script's
``#!`` interpreter is located the same way. A bare name (no ``/``), and the ``NAME`` of
``#!/usr/bin/env NAME``, is looked up on the sandbox's PATH, then on the PATH of the process
running pytest, when the server starts; a folder found on the latter comes first on the
server's PATH. A relative path with a ``/`` is the server's own, in its workdir, and runs as
given.

Never shown, the command being then an error that says why: ``/``, the home directory or a
folder above it, a folder above the current directory (the project checkout) or the workdir,
and a folder that directly holds ``.env`` files or other credentials.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .bwrap import shown_folders
from .sandbox import Sandbox

#: What a server's ``command`` may be, for error messages.
ACCEPTED = (
    "`command` may be python3 (the Python running pytest), a name on PATH, a path in the "
    "workdir, or an absolute path to a program in a virtualenv (its own, a pipx or uv tool "
    "install's, also through a symlink such as ~/.local/bin/NAME), in node_modules (an npm or "
    "npx install), in a Python or Node installation's bin/, or a standalone program"
)
#: Files and folders that hold credentials: a prefix holding one directly is never shown.
CREDENTIALS = (".netrc", ".npmrc", ".pypirc", ".git-credentials", ".ssh", ".aws", ".gnupg")
#: Folders of the home directory that hold many programs' settings, data and tokens: an
#: install prefix is never one of them (a Node tarball unpacked into ``~/.local`` makes it look
#: like a Node installation).
SHARED_HOME_FOLDERS = (".local", ".local/share", ".local/state", ".config", ".cache")
#: What a project's folder holds at its top and an install prefix does not: a virtualenv made
#: in a project's root would show the whole project (its .env files in subfolders too).
PROJECT_MARKS = (".git", "pyproject.toml", "setup.py", "package.json")
_MAX_HOPS = 40  # symlinks followed, and interpreters of interpreters, before giving up
_SHEBANG_BYTES = 512


class ProgramNotVisible(Exception):
    """The sandbox cannot show a server's program: why, in a sentence."""

    def explained(self, command: str, sandbox: Sandbox) -> str:
        """An error's message: ``command``, why, what ``sandbox`` shows, and what a command
        may be."""
        return (
            f"the sandbox cannot show its command {command!r}: {self}. The sandbox shows "
            f"{described(sandbox)}. {ACCEPTED}"
        )


@dataclass(frozen=True)
class Link:
    """A symlink of the host that the sandbox makes again, at the same place."""

    path: Path
    target: Path  #: absolute: the next hop, which the sandbox shows in turn


@dataclass(frozen=True)
class Program:
    """A server's command as the sandbox runs it."""

    command: str  #: what is executed: as given, or where on PATH a bare name was found
    mounts: tuple[Path, ...] = ()  #: install prefixes shown read-only (not shown otherwise)
    links: tuple[Link, ...] = ()  #: symlinks on the way to it, made again (~/.local/bin/NAME)
    path: tuple[Path, ...] = ()  #: folders first on its PATH (a ``#!/usr/bin/env`` interpreter's)


def locate(command: str, sandbox: Sandbox) -> Program:
    """``command`` as ``sandbox`` runs it, with what of the host it needs (nothing when
    unconfined: all of the host is there); :class:`ProgramNotVisible` when it cannot."""
    if "/" not in command:
        found = _on_path(command, sandbox)
        if found is None:
            raise ProgramNotVisible(
                f"{command!r} is on neither the sandbox's PATH ({sandbox.search_path}) nor the "
                f"PATH of this process ({os.environ.get('PATH', '')})"
            )
        program, extra = found
    elif not os.path.isabs(command):
        return Program(command)  # the server's own, in its workdir
    else:
        program, extra = Path(os.path.normpath(command)), ()
    shown = (*shown_folders(), str(sandbox.workdir))
    located = _located(program, sandbox, shown, _MAX_HOPS)
    path = tuple(dict.fromkeys((*extra, *located.path)))
    if not sandbox.sandboxed:
        return Program(located.command, path=path)
    mounts = tuple(p for p in dict.fromkeys(located.mounts) if not _under(p, shown))
    for prefix in mounts:
        _check_mountable(prefix, sandbox.workdir)
    return Program(located.command, mounts, tuple(dict.fromkeys(located.links)), path)


def _on_path(name: str, sandbox: Sandbox) -> tuple[Path, tuple[Path, ...]] | None:
    """Where ``name`` is: on the sandbox's PATH, else on this process's (whose folder then goes
    first on the server's PATH, for what it runs by name)."""
    inside = shutil.which(name, path=sandbox.search_path)
    if inside is not None:
        return Path(inside), ()
    outside = shutil.which(name)
    if outside is None:
        return None
    found = Path(os.path.abspath(outside))
    return found, (found.parent,)


def _located(path: Path, sandbox: Sandbox, shown: tuple[str, ...], hops: int) -> Program:
    """The program at absolute ``path``: each hop of its symlinks, its install prefix and its
    interpreter's (nothing for what lies in the ``shown`` folders)."""
    if not path.exists():
        raise ProgramNotVisible(f"{path} does not exist on this machine")
    if not path.is_file() or not os.access(path, os.X_OK):
        raise ProgramNotVisible(f"{path} is not an executable file")
    chain = _chain(path)
    mounts: list[Path] = []
    links: list[Link] = []
    for hop, target in itertools.pairwise(chain):
        root = None if _under(hop, shown) else _prefix_root(hop)
        if root is not None:
            mounts += [root, *_base_python(root)]  # the link lies in a prefix shown whole
        elif not _under(hop, shown):
            links.append(Link(hop, target))
    if not _under(chain[-1], shown):
        mounts += install_prefixes(chain[-1])
    program = Program(str(path), tuple(mounts), tuple(links))
    return _with_interpreter(program, chain[-1], sandbox, shown, hops)


def _with_interpreter(
    program: Program, target: Path, sandbox: Sandbox, shown: tuple[str, ...], hops: int
) -> Program:
    """``program`` with what the ``#!`` interpreter of its file, ``target``, needs."""
    interpreter = _interpreter(target, sandbox)
    if interpreter is None:
        return program
    if hops <= 0:
        raise ProgramNotVisible(f"{target}: too many interpreters of interpreters")
    found, on_path = interpreter
    inner = _located(found, sandbox, shown, hops - 1)
    return Program(
        program.command,
        (*program.mounts, *inner.mounts),
        (*program.links, *inner.links),
        (*on_path, *inner.path),
    )


def _chain(path: Path) -> list[Path]:
    """``path``, then each file its symlinks lead to, absolute, up to one that is no symlink."""
    chain = [path]
    while chain[-1].is_symlink():
        if len(chain) > _MAX_HOPS:
            raise ProgramNotVisible(f"{path}: too many symlinks")
        hop = chain[-1]
        target = Path(os.path.realpath(hop.parent)) / os.readlink(hop)
        chain.append(Path(os.path.normpath(target)))
    return chain


def install_prefixes(program: Path) -> tuple[Path, ...]:
    """What of the host ``program`` needs, by the rules of the module: its install prefix (or
    itself), and a virtualenv's base Python installation."""
    root = _prefix_root(program)
    if root is None:
        return (program,)
    return (root, *_base_python(root))


def _prefix_root(program: Path) -> Path | None:
    """The install prefix ``program`` lies in: a virtualenv, the outermost ``node_modules``,
    or a Python or Node installation whose ``bin/`` holds it; None for none."""
    parents = list(program.parents)
    venv = next((p for p in parents if (p / "pyvenv.cfg").is_file()), None)
    if venv is not None:
        return venv
    modules = [p for p in parents if p.name == "node_modules"]
    if modules:
        return modules[-1]
    folder = program.parent
    if folder.name == "bin" and _is_installation(folder.parent):
        return folder.parent
    return None


def _is_installation(folder: Path) -> bool:
    """A Python installation (its standard library) or a Node one (its ``node``)."""
    has_stdlib = any((lib / "os.py").is_file() for lib in folder.glob("lib/python3*"))
    return has_stdlib or (folder / "bin" / "node").is_file()


def _base_python(root: Path) -> tuple[Path, ...]:
    """The Python installation a virtualenv's ``bin/python`` links to (none for another
    prefix, or a venv without one)."""
    if not (root / "pyvenv.cfg").is_file():
        return ()
    for name in ("python3", "python"):
        link = root / "bin" / name
        if link.exists():
            real = Path(os.path.realpath(link))
            return (_prefix_root(real) or real,)
    return ()


def _interpreter(program: Path, sandbox: Sandbox) -> tuple[Path, tuple[Path, ...]] | None:
    """The interpreter a ``#!`` line names, with the folder to put on PATH when it was found
    by name on this process's PATH; None for a program without one."""
    words = _shebang(program)
    if not words:
        return None
    if os.path.basename(words[0]) != "env":
        return Path(os.path.normpath(words[0])), ()
    names = [word for word in words[1:] if not word.startswith("-")]
    if not names:
        raise ProgramNotVisible(f"{program}: its #! line names no interpreter")
    found = _on_path(names[0], sandbox)
    if found is None:
        raise ProgramNotVisible(
            f"{program}: its interpreter {names[0]!r} is on neither the sandbox's PATH "
            f"({sandbox.search_path}) nor the PATH of this process"
        )
    return found


def _shebang(program: Path) -> list[str]:
    """The words of ``program``'s ``#!`` line ([] for none)."""
    try:
        with open(program, "rb") as file:
            head = file.read(_SHEBANG_BYTES)
    except OSError as exc:
        raise ProgramNotVisible(f"{program} cannot be read: {exc.strerror}") from None
    if not head.startswith(b"#!"):
        return []
    line = head[2:].split(b"\n", 1)[0]
    return line.decode("utf-8", errors="replace").split()


def _under(path: Path, folders: Iterable[str]) -> bool:
    return any(path == Path(f) or path.is_relative_to(f) for f in folders)


def _check_mountable(prefix: Path, workdir: Path) -> None:
    """:class:`ProgramNotVisible` when showing ``prefix`` would show what the sandbox hides."""
    real = Path(os.path.realpath(prefix))
    above = [("the home directory", Path.home()), ("the current directory", Path.cwd())]
    above.append(("the workdir", workdir))
    for what, place in above:
        if place.resolve() == real or place.resolve().is_relative_to(real):
            raise ProgramNotVisible(f"its install prefix {prefix} holds {what}, never shown")
    if real == Path("/"):
        raise ProgramNotVisible(f"its install prefix {prefix} is the root, never shown")
    home = Path.home().resolve()
    if any(real == home / folder for folder in SHARED_HOME_FOLDERS):
        raise ProgramNotVisible(
            f"its install prefix {prefix} is a folder of the home directory where many programs "
            "keep their settings and tokens, never shown (install the server in a virtualenv "
            "or a tool folder of its own)"
        )
    marks = [mark for mark in PROJECT_MARKS if (real / mark).exists()]
    if marks:
        raise ProgramNotVisible(
            f"its install prefix {prefix} holds a project ({marks[0]}), and a project's folder "
            "is never shown whole (make the server's virtualenv outside it, or in a folder of "
            "its own such as .venv)"
        )
    secrets = _credentials(real) if real.is_dir() else []
    if secrets:
        raise ProgramNotVisible(
            f"its install prefix {prefix} holds {secrets[0]}, and a folder holding credentials "
            "is never shown"
        )


def _credentials(folder: Path) -> list[str]:
    """The ``.env`` files and credential files directly in ``folder``."""
    found = sorted(p.name for p in folder.glob(".env*"))
    return found + [name for name in CREDENTIALS if (folder / name).exists()]


def described(sandbox: Sandbox, mounts: Sequence[Path] = ()) -> str:
    """What the sandbox shows of the host, for an error: the folders, then the workdir."""
    folders = [*shown_folders(), *(str(p) for p in mounts)]
    home = " (its HOME)" if sandbox.writable else ""
    return f"{', '.join(folders)}, the workdir {sandbox.workdir}{home} and a private /tmp"
