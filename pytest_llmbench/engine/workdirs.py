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

from ..spec.schema import workdir_path

_PREPARED = pytest.StashKey[dict[str, Path]]()
#: pytest's own limit on a tmp_path folder's name.
_NAME_CHARS = 30


def seed(root: Path, files: Mapping[str, str], include_dirs: Sequence[Path] = ()) -> Path:
    """Fill ``root`` (made if missing) with copies of ``include_dirs`` and the ``files``.

    Links in the folders are copied as links: the agent's tools refuse those that point out.
    ``files`` names are checked (ValueError for one that leaves the folder).
    """
    root.mkdir(parents=True, exist_ok=True)
    for folder in include_dirs:
        shutil.copytree(folder, root, symlinks=True, dirs_exist_ok=True)
    for name, content in files.items():
        target = root / Path(*workdir_path(name).parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
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
    safe = re.sub(r"[\W]", "_", name)[:_NAME_CHARS]
    factory = getattr(config, "_tmp_path_factory", None)  # pytest's, as tmp_path uses
    base = factory.mktemp(safe, numbered=True) if factory else Path(tempfile.mkdtemp(prefix=safe))
    root = seed(base / "workdir", files, include_dirs)
    prepared[nodeid] = root
    return root


def take_prepared(config: pytest.Config, nodeid: str) -> Path | None:
    """The workdir :func:`prepare` made for ``nodeid`` (handed out once), or None."""
    return config.stash.get(_PREPARED, {}).pop(nodeid, None)
