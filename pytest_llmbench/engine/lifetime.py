"""A process's runtime over its life: made on first use, found in the stash, closed at the end;
and whether this process collected an eval file (:func:`eval_files_collected`), the one answer
to "does this run have eval items?" that the plugin's hooks ask before loading the engine.

Kept apart from :mod:`.runtime`, which imports the engine's loop, the call targets and the
redactor at its top: the plugin asks at every item's report whether this process has a runtime
(:data:`RUNTIME_KEY`) and ends every run with :func:`shutdown`, and a run that made no call
never loads the runtime's module.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .session import STATE_DIR_KEY

if TYPE_CHECKING:
    from .runtime import Runtime

#: This process's runtime; absent until :func:`get_runtime` first made it.
RUNTIME_KEY: pytest.StashKey[Runtime] = pytest.StashKey()

#: Set when this process collects its first eval file (:meth:`.collect.EvalFile.collect`).
EVAL_FILES_KEY = pytest.StashKey[bool]()


def eval_files_collected(config: pytest.Config) -> bool:
    """Whether this process collected an eval file: until then (and in a run without one) no
    module of the engine, the items or the collector is loaded, and none needs to be."""
    return config.stash.get(EVAL_FILES_KEY, False)


def get_runtime(config: pytest.Config) -> Runtime:
    """The process's runtime, created on first use."""
    runtime = config.stash.get(RUNTIME_KEY, None)
    if runtime is None:
        from .runtime import Runtime

        runtime = Runtime(config)
        config.stash[RUNTIME_KEY] = runtime
    return runtime


def shutdown(config: pytest.Config) -> None:
    """Close this process's runtime; the owning process also stops the embedded server."""
    runtime = config.stash.get(RUNTIME_KEY, None)
    if runtime is not None:
        runtime.close()
    if hasattr(config, "workerinput"):
        return
    state = config.stash.get(STATE_DIR_KEY, None)
    if state is not None and Path(state[0]).exists():
        from ..models import EmbeddedServer

        EmbeddedServer(Path(state[0]), state[1]).stop()
