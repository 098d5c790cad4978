"""Import the user's ``module:function`` references (python checks, custom agent tools).

The module is imported with the eval file's folder first on ``sys.path`` (restored afterwards),
so a check or tool lives next to the eval file that names it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


class UserImportError(Exception):
    """``module:function`` could not be imported, or is not callable; the message says why."""


def load_callable(ref: str, base_dir: Path) -> Callable[..., Any]:
    """The function that ``ref`` (``module.sub:function``) names, imported from ``base_dir``."""
    module_name, _, name = ref.partition(":")
    if not module_name or not name.isidentifier():
        raise UserImportError(f"{ref!r}: expected module:function")
    saved = list(sys.path)
    sys.path.insert(0, str(base_dir))
    try:
        if module_name not in sys.modules:
            importlib.invalidate_caches()  # the module may be newer than the finders' caches
        function: object = getattr(importlib.import_module(module_name), name)
    except Exception as exc:
        raise UserImportError(f"{ref}: cannot load: {type(exc).__name__}: {exc}") from None
    finally:
        sys.path[:] = saved
    if not callable(function):
        raise UserImportError(f"{ref}: {name} is not callable")
    return function
