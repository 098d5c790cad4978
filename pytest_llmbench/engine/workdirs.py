"""Items' workdirs: made and seeded here, so that an agent's loop can start before its item runs.

An agent item needs its workdir from its first tool call. The ``workdir`` fixture made it in
the item's setup, so agent loops could not be started ahead like other calls, and ran one at a
time. :func:`prepare` makes an item's workdir when its call is started ahead (in pytest's
temporary folder, named after the item as ``tmp_path`` would be), seeded from ``files:`` and
``include_dirs:``; the fixture then hands the item that folder (:func:`take_prepared`).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from ..spec import workdir_path

_PREPARED = pytest.StashKey[dict[str, Path]]()
_FAILED = pytest.StashKey[dict[str, "WorkdirError"]]()
#: pytest's own limit on a tmp_path folder's name.
_NAME_CHARS = 30


class WorkdirError(ValueError):
    """A workdir that cannot be made or seeded: what, and the OS's reason."""


def seed(root: Path, files: Mapping[str, str], include_dirs: Sequence[Path] = ()) -> Path:
    """Fill ``root`` (made if missing) with copies of ``include_dirs`` and the ``files``.

    Links in the folders are copied as links: the agent's tools refuse those that point out.
    ``files`` names are checked (ValueError for one that leaves the folder, or longer than the
    filesystem allows); what the OS refuses anyway (the whole path past PATH_MAX under a long
    temporary folder, a full disk) is a :class:`WorkdirError` naming the file.
    """
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WorkdirError(f"cannot make the workdir {root}: {exc.strerror or exc}") from None
    for folder in include_dirs:
        try:
            shutil.copytree(folder, root, symlinks=True, dirs_exist_ok=True)
        except OSError as exc:
            raise WorkdirError(f"cannot copy {folder} into the workdir: {exc}") from None
    for name, content in files.items():
        target = root / Path(*workdir_path(name).parts)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
        except OSError as exc:
            shown = name if len(name) <= 80 else f"{name[:40]}...{name[-40:]}"
            where = f"{len(str(target)):,} characters with the workdir's folder"
            reason = exc.strerror or str(exc)
            raise WorkdirError(f"cannot write workdir file {shown!r} ({where}): {reason}") from None
    return root


def prepare(
    config: pytest.Config,
    nodeid: str,
    name: str,
    files: Mapping[str, str],
    include_dirs: Sequence[Path],
) -> Path:
    """Make and seed the workdir of item ``nodeid`` (pytest item name ``name``) now."""
    prepared = config.stash.setdefault(_PREPARED, {})
    if nodeid in prepared:
        return prepared[nodeid]
    root = scratch(config, name) / "workdir"
    try:
        seed(root, files, include_dirs)
    except WorkdirError as exc:
        # Ahead of the item, in the engine's prefetch: the item's setup raises it (an error of
        # that item), not the prefetch (an internal error of the run).
        config.stash.setdefault(_FAILED, {})[nodeid] = exc
    prepared[nodeid] = root
    return root


def scratch(config: pytest.Config, name: str) -> Path:
    """A fresh, empty folder ``name*`` in pytest's temporary folder, beside the workdirs."""
    safe = re.sub(r"[\W]", "_", name)[:_NAME_CHARS]
    factory = getattr(config, "_tmp_path_factory", None)  # pytest's, as tmp_path uses
    return factory.mktemp(safe, numbered=True) if factory else Path(tempfile.mkdtemp(prefix=safe))


def take_prepared(config: pytest.Config, nodeid: str) -> Path | None:
    """The workdir :func:`prepare` made for ``nodeid`` (handed out once), or None; the
    :class:`WorkdirError` of one that could not be seeded."""
    failure = config.stash.get(_FAILED, {}).pop(nodeid, None)
    root = config.stash.get(_PREPARED, {}).pop(nodeid, None)
    if failure is not None:
        raise failure
    return root
