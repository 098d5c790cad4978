"""pytest-llmbench: LLM evals as pytest tests.

The package reads in the order a record flows. On top, the pytest shell: :mod:`.plugin` (hooks,
lazy), :mod:`.config` (options into a ``RunConfig``), :mod:`.collect` and :mod:`.item` (eval
files into items), :mod:`.fixtures`, :mod:`.cli` (the ``llmbench`` command), with
:mod:`.redact`, :mod:`.shard`, :mod:`.userimport` and :mod:`.yamlguard` as shared utilities. Then the stages, each importing only
from those before it: :mod:`.models`, :mod:`.agent`, :mod:`.scoring`, :mod:`.judging`,
:mod:`.spec`, :mod:`.engine`, :mod:`.results`, :mod:`.render`, :mod:`.report`. Importing this
package imports nothing.

PYTEST_DONT_REWRITE: the package holds no test assertions, so pytest's assertion rewriting is
turned off for it (this marker for this module, :func:`_skip_assertion_rewriting` for the rest).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import Any


def _skip_assertion_rewriting() -> None:
    """Take this package off the names pytest's import hook rewrites.

    pytest marks every module of a distribution with a ``pytest11`` entry point for assertion
    rewriting. A rewritten module is loaded from pytest's own cache, not from the compiled files
    the installer wrote; with no bytecode written (``PYTHONDONTWRITEBYTECODE=1``, as Docker CI
    images set it) that cache stays empty and every start parsed, rewrote and compiled each of
    the plugin's modules again. pytest imports this ``__init__`` before any other module of the
    package, so the rest load as plain modules. pytest has no public call to unmark a name: this
    edits its hook's set and cache, and does nothing when they are not there.
    """
    rewrite = sys.modules.get("_pytest.assertion.rewrite")
    if rewrite is None:  # not under pytest's hook: nothing to undo
        return
    for finder in sys.meta_path:
        marked = getattr(finder, "_must_rewrite", None)
        if isinstance(finder, rewrite.AssertionRewritingHook) and isinstance(marked, set):
            marked.discard(__name__)
            getattr(finder, "_marked_for_rewrite_cache", {}).clear()


_skip_assertion_rewriting()


def face_attribute(namespace: dict[str, Any], face: Mapping[str, str], name: str) -> Any:
    """A name of a stage's face (``face``: name -> the stage's module defining it), imported from
    its module when asked for: a stage's ``__getattr__`` calls it, so importing a stage loads
    nothing more. Not kept in the stage's ``namespace``: the module's own object is always the
    one given, even after ``sys.modules`` was restored (as pytester does between runs)."""
    module = face.get(name)
    package = namespace["__name__"]
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", package), name)
