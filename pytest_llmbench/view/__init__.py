"""`llmbench view`: the local dashboard over results folders (the ``view`` extra).

:mod:`.runs` finds runs and their state, :mod:`.pages` and :mod:`.compare` render the pages,
:mod:`.queue` runs launched runs one after another, :mod:`.app` serves it all on 127.0.0.1.
Nothing of it is imported by a pytest run.

This is the stage's face: the names below are what other stages and the pytest shell import from
it (tests/test_layout.py checks that they import nothing else of it). Each is imported from its
module when first asked for, so that importing the stage loads nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import face_attribute

if TYPE_CHECKING:
    from .app import ViewSettings, serve

#: Each name of the face, by the module of the stage that defines it.
_FACE: dict[str, str] = {
    "ViewSettings": "app",
    "serve": "app",
}

__all__ = [
    "ViewSettings",
    "serve",
]


def __getattr__(name: str) -> Any:
    """A name of the face, imported from its module on first use."""
    return face_attribute(globals(), _FACE, name)
