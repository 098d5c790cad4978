"""Where the paths an eval file names may lead: inside the project, and never to a special file.

An eval file names files and folders (``include_dirs``, ``prompts: file://``, ``dataset:``,
``json-schema`` files, ``images``). Their content reaches the provider or an agent's workdir, so
a path that leaves the project (``/proc/self/environ``, ``../../.ssh``, a link pointing out) could
carry secrets away, and a device or FIFO would hang the run. :func:`resolve_eval_path` resolves
a name from the eval file's folder, links followed, and accepts it only inside the eval file's
folder, the rootdir or a folder the user allowed (``--allow-path``, ``llmbench_allowed_paths``);
:func:`check_folder_entries` refuses a folder that holds a special file. :func:`workdir_path`
checks a path inside an agent item's workdir (``files:`` keys, an MCP server's ``cwd``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

#: Kernel file systems: their "files" are views of processes (environments, memory) and devices.
SPECIAL_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))
#: How an error says to allow a path outside the project.
ALLOW_HINT = "allow its folder with --allow-path DIR or the llmbench_allowed_paths ini key"


class PathRefused(ValueError):
    """A path an eval file may not name; the message is one line: the path, why, what to do."""


def resolve_eval_path(name: str, folder: Path, roots: Sequence[Path] = ()) -> Path:
    """``name`` from an eval file in ``folder``, resolved (links followed).

    Allowed inside ``folder`` or one of ``roots`` (the rootdir and the allowed folders); a path
    that does not exist is returned for the caller to report. Raises :class:`PathRefused` for a
    path outside them, a special file (FIFO, socket, device, anything under /proc, /sys, /dev)
    or a name the OS cannot take (a NUL, too long, a link loop).
    """
    shown = name if len(name) <= 200 else name[:197] + "..."
    try:
        written = Path(os.path.normpath(folder / name))
        path = (folder / name).resolve()
        mode = path.stat().st_mode if path.exists() else None
    except (OSError, ValueError, RuntimeError) as exc:  # a NUL, too long, a link loop
        reason = getattr(exc, "strerror", None) or str(exc)
        raise PathRefused(f"{shown!r} is not a usable path ({reason})") from None
    special = _special_reason(written) or _special_reason(path, mode)
    if special is not None:
        raise PathRefused(
            f"{shown!r} is {special}: an eval file may name regular files and folders"
        )
    if not any(path.is_relative_to(root) for root in _roots(folder, roots)):
        where = "" if str(path) == name else f" (resolves to {path})"
        raise PathRefused(
            f"{shown!r}{where} is outside the project (the rootdir and the eval file's folder); "
            + ALLOW_HINT
        )
    return path


def check_folder_entries(folder: Path) -> None:
    """Refuse a folder holding a special file at any depth; links are not followed (they are
    copied as links, and the agent's tools refuse those that point outside)."""
    for top, dirs, files in os.walk(folder, onerror=_raise):
        here = Path(top)
        for name in [*dirs, *files]:
            entry = here / name
            try:
                mode = entry.lstat().st_mode
            except OSError as exc:
                raise PathRefused(f"cannot read {entry}: {exc.strerror}") from None
            special = _special_reason(entry, mode)
            if special is not None:
                inside = entry.relative_to(folder).as_posix()
                raise PathRefused(f"{inside!r} inside {str(folder)!r} is {special}")


def _roots(folder: Path, roots: Sequence[Path]) -> list[Path]:
    return [root.resolve() for root in (folder, *roots)]


def _special_reason(path: Path, mode: int | None = None) -> str | None:
    """Why ``path`` (with its ``stat`` mode, when known) is a special file; None when it is not."""
    for root in SPECIAL_ROOTS:
        if path == root or path.is_relative_to(root):
            return f"under {root}"
    if mode is None or stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode):
        return None
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"))
    return next((what for test, what in kinds if test(mode)), "a device")


def _raise(error: OSError) -> None:
    raise PathRefused(f"cannot read {error.filename}: {error.strerror}")


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
