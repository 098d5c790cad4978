"""The run's config in the stash: built on first use (or at configure time when an llmbench
option was given) by :mod:`.build`, which loads only then; the folders eval files may read;
the session header's notes on ``--models``/``--judges``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .options import setting

if TYPE_CHECKING:
    from .run_config import RunConfig

RUN_CONFIG_KEY = pytest.StashKey["RunConfig"]()
ALLOWED_PATHS_KEY = pytest.StashKey[tuple[Path, ...]]()


def get_run_config(config: pytest.Config) -> RunConfig:
    """The run's config, built and cached on first use."""
    run = config.stash.get(RUN_CONFIG_KEY, None)
    if run is None:
        from .build import build_run_config

        run = build_run_config(config)
        config.stash[RUN_CONFIG_KEY] = run
    return run


def shadowed_model_notes(config: pytest.Config) -> list[str]:
    """Lines for the session header: each ``--models``/``--judges`` entry written as a litellm
    id that a profile file turned into a profile (its deployments, its rate limit)."""
    profiles = get_run_config(config).profiles
    notes = []
    for dest in ("models", "judges"):
        selection = setting(config, dest) or ""
        notes += [f"llmbench: --{dest} {note}" for note in profiles.shadowed_ids(selection)]
    return notes


def allowed_paths(config: pytest.Config) -> tuple[Path, ...]:
    """The folders besides the rootdir that paths in eval files may lead into, resolved:
    ``--allow-path`` (from the invocation folder), else ``llmbench_allowed_paths`` (from the ini
    file's folder). One that is not a folder is a ``UsageError``."""
    known = config.stash.get(ALLOWED_PATHS_KEY, None)
    if known is None:
        given = config.getoption("llmbench_allow_path")
        paths = [config.invocation_params.dir / raw for raw in given or ()]
        source = "--allow-path"
        if not given:
            paths, source = list(config.getini("llmbench_allowed_paths")), "llmbench_allowed_paths"
        missing = [str(path) for path in paths if not path.is_dir()]
        if missing:
            raise pytest.UsageError(f"llmbench: {source}: not a folder: {', '.join(missing)}")
        known = config.stash[ALLOWED_PATHS_KEY] = tuple(path.resolve() for path in paths)
    return known
