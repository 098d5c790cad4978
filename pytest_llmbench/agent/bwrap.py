"""The bubblewrap command line: whether bwrap works here, and what a command sees under it.

A command under bwrap sees a filesystem of its own: the system directories it needs to run
tools (``/usr``, ``/bin``, ``/lib``, the Python that runs pytest) read-only, a minimal ``/etc``
(no ``shadow``, no keys), a private ``/tmp``, ``/dev`` and ``/proc`` (its own PID namespace: the
host's processes are not there), the folders of its :class:`View`, and nothing else: not
``$HOME``, not the project checkout, not other items' workdirs (an MCP server also sees its own
program's install prefix, read-only: :mod:`.programs`). It has no network (a fresh network
namespace) unless asked, and no capabilities. :func:`bwrap_argv` builds that command line.

Where bwrap does not work, :func:`bwrap_problem` says why, worded as a set-up problem: what is
missing or broken, and the command that installs it.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .limits import MB, SandboxLimits

#: What installs bubblewrap (Debian and Ubuntu): tools/debian-packages.sh, which `make eval`
#: and `make test` run, installs the same package.
INSTALL_BWRAP = "sudo apt-get install -y bubblewrap"
_OPT_OUT = (
    "or opt out with 'sandbox: off' in the eval file (commands then run unconfined, with limits "
    "and a scrubbed environment only)"
)
_PROBE_SAID = 200  # characters of a failed probe's stderr kept in the refusal
_PROBE_TIMEOUT_S = 10.0
#: System directories a command may read (and run tools from); the ones that exist are bound.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: What of /etc a command sees: what tools and the dynamic linker read, no secrets.
ETC_ENTRIES = (
    "alternatives", "debian_version", "group", "host.conf", "hosts", "ld.so.cache",
    "ld.so.conf", "ld.so.conf.d", "locale.alias", "localtime", "magic", "magic.mime",
    "mime.types", "nsswitch.conf", "os-release", "passwd", "protocols", "services", "timezone",
)  # fmt: skip
_ETC_GLOBS = ("/etc/python3*",)  # Debian's python3 reads its sitecustomize from there
#: What of /etc a process with the network (an MCP server's ``network: true``) also sees, to
#: resolve names and check certificates; public, unlike /etc/ssl/private beside them.
NETWORK_ETC = ("/etc/resolv.conf", "/etc/gai.conf", "/etc/ssl/certs", "/etc/ca-certificates")


def bwrap_path() -> str | None:
    """The bwrap executable when it exists and works here (probed once), else None."""
    path = shutil.which("bwrap")
    return path if bwrap_problem(path) is None else None


def bwrap_problem(path: str | None) -> str | None:
    """Why commands cannot run under the bwrap found at ``path`` (None: not on PATH), worded
    as a set-up problem with the command that fixes it; None when it works."""
    if path is None:
        return (
            "bubblewrap is not installed (no bwrap on PATH), and agent commands run under it: "
            f"install it with `{INSTALL_BWRAP}` (`make eval` and `make test` do), {_OPT_OUT}"
        )
    failure = _bwrap_failure(path, sized_tmp=False)
    if failure is None:
        return None
    return (
        f"bubblewrap ({path}) cannot run here ({failure}), and agent commands run under it: "
        "it needs unprivileged user namespaces, which this machine or container may not allow; "
        f"install or repair it with `{INSTALL_BWRAP}`, {_OPT_OUT}"
    )


@functools.cache
def _bwrap_failure(path: str, sized_tmp: bool) -> str | None:
    """What went wrong when ``path`` ran a trivial command (probed once), or None."""
    # bwrap can exist yet fail: user namespaces disabled, or a bwrap without some option.
    with tempfile.TemporaryDirectory(prefix="llmbench-bwrap-probe-") as tmp:
        view = View(writable=(Path(tmp),), cwd=Path(tmp))
        argv = _argv(path, view, SandboxLimits(), "true", sized_tmp)
        try:
            done = subprocess.run(argv, capture_output=True, timeout=_PROBE_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return f"it did not finish within {_PROBE_TIMEOUT_S:g} s"
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{type(exc).__name__}: {exc}"
    if done.returncode == 0:
        return None
    said = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
    return f"exit status {done.returncode}" + (f": {said[-1][:_PROBE_SAID]}" if said else "")


@dataclass(frozen=True)
class View:
    """What of the host a command sees besides the system: folders it may write and read."""

    writable: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()  #: files inside those folders it must not read
    cwd: Path = Path("/")
    #: a server's install prefixes (``agent.programs``), read-only, mounted with the Python
    programs: tuple[Path, ...] = ()
    #: symlinks made again at the same place (``path``, ``target``): a server's way to its program
    links: tuple[tuple[Path, Path], ...] = ()


def _bind(path: str) -> list[str]:
    """Mount ``path`` read-only at the same place; a symlink stays a symlink (merged /usr)."""
    if os.path.islink(path):
        return ["--symlink", os.readlink(path), path]
    return ["--ro-bind", path, path] if os.path.exists(path) else []


@functools.cache
def _empty_file() -> Path:
    """An empty, read-only file of this process, mounted over files a command must not read."""
    fd, name = tempfile.mkstemp(prefix="llmbench-hidden-")
    os.close(fd)
    os.chmod(name, 0o444)
    atexit.register(_remove_quietly, name)
    return Path(name)


def _remove_quietly(name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name)


@functools.cache
def _python_dirs() -> tuple[str, ...]:
    """The folders of the Python that runs pytest and of its virtualenv (outside the system
    directories), for the ``python3`` first on a command's PATH. A folder reached through a
    symlink (a virtualenv linked into a checkout, pyenv-virtualenv's) is shown at both paths:
    ``sys.executable`` names the linked one."""
    prefixes = (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
    found = [path for p in prefixes for path in (os.path.realpath(p), os.path.abspath(p))]
    # This plugin's own source too: pytest (in a `command` check, say) loads it by its entry
    # point, and an editable install keeps it in the checkout, which is not mounted.
    for package in _plugin_sources():
        if not any(package.startswith(prefix + "/") for prefix in found):
            found.append(package)
    outside = [p for p in found if not any(p == d or p.startswith(d + "/") for d in SYSTEM_DIRS)]
    return tuple(dict.fromkeys(outside))


def _plugin_sources() -> list[str]:
    """Where this package's source is: the one running, and an editable install's."""
    import importlib.metadata
    import json

    sources = [str(Path(__file__).resolve().parents[1])]
    try:
        direct = importlib.metadata.distribution("pytest-llmbench").read_text("direct_url.json")
        url = json.loads(direct or "{}").get("url", "")
    except (importlib.metadata.PackageNotFoundError, ValueError, AttributeError):
        url = ""
    if url.startswith("file://"):
        editable = Path(url.removeprefix("file://")) / "pytest_llmbench"
        if editable.is_dir():
            sources.append(str(editable.resolve()))
    return sources


def shown_folders() -> tuple[str, ...]:
    """The folders of the host every command sees (read-only): the system directories there
    are, and the Python's (:func:`_python_dirs`)."""
    system = [folder for folder in SYSTEM_DIRS if os.path.lexists(folder)]
    return (*system, *_python_dirs())


def system_view() -> list[str]:
    """bwrap arguments for the read-only system: tools, libraries and a minimal /etc (the
    Python's folders are bound after /tmp, which may hold them)."""
    args: list[str] = []
    for folder in SYSTEM_DIRS:
        args += _bind(folder)
    args += ["--dir", "/etc"]
    entries = [f"/etc/{name}" for name in ETC_ENTRIES]
    entries += sorted(path for pattern in _ETC_GLOBS for path in glob.glob(pattern))
    for entry in entries:
        args += _bind(entry)
    return args


def bwrap_argv(
    bwrap: str, view: View, limits: SandboxLimits, command: str, share_net: bool = False
) -> list[str]:
    """The argv that runs ``/bin/sh -c command`` under ``bwrap`` seeing ``view`` (and the
    host's network when ``share_net``), its private /tmp capped at ``memory_mb`` where this
    bwrap can (``--size``, bubblewrap >= 0.8)."""
    sized = _bwrap_failure(bwrap, sized_tmp=True) is None
    return _argv(bwrap, view, limits, command, sized, share_net)


def _argv(
    bwrap: str,
    view: View,
    limits: SandboxLimits,
    command: str,
    sized_tmp: bool,
    share_net: bool = False,
) -> list[str]:
    # --size (bubblewrap >= 0.8) keeps a command from filling memory through the private /tmp
    size = ["--size", str(limits.memory_mb * MB)] if sized_tmp else []
    programs = [*_python_dirs(), *(str(p) for p in view.programs)]
    python = [arg for prefix in programs for arg in ("--ro-bind", prefix, prefix)]
    python += [arg for path, to in view.links for arg in ("--symlink", str(to), str(path))]
    binds: list[str] = []
    for folder in view.writable:
        binds += ["--bind", str(folder), str(folder)]
    for folder in view.read_only:
        binds += ["--ro-bind", str(folder), str(folder)]
    for secret in view.hidden:  # an empty file over it (bwrap mounts /dev/null nodev)
        binds += ["--ro-bind", str(_empty_file()), str(secret)]
    # the files themselves, symlinks followed (resolv.conf may point into an unshown /run)
    network = [a for f in NETWORK_ETC if os.path.exists(f) for a in ("--ro-bind", f, f)]
    return [
        bwrap,
        *system_view(),
        *(network if share_net else ()),
        *("--dev", "/dev", "--proc", "/proc"),
        *size,
        # /tmp first: the Python and a workdir under /tmp are bound over the private /tmp
        *("--tmpfs", "/tmp", *python, *binds, "--chdir", str(view.cwd)),
        # the new root (with /etc and the mount points bwrap made) read-only; the mounts on it
        # keep their own modes
        *("--remount-ro", "/"),
        *("--unshare-all", "--die-with-parent", "--new-session"),
        *(("--share-net",) if share_net else ()),
        # run as root, bwrap keeps every capability in the sandbox, and CAP_SYS_ADMIN could
        # remount the read-only root writable
        *("--cap-drop", "ALL"),
        *("/bin/sh", "-c", command),
    ]
