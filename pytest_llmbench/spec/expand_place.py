"""Where a case comes from in its eval file, so that every problem names the right line.

Each case kind's expansion (:mod:`.expand`) works on a :class:`Place`: the file, its located
document and the key path of the case (``("cases", 2)``, ``("dataset",)``). A problem with
one field of a case is a :class:`FieldError` naming its key, which the place turns into an
:class:`~.resolved.EvalFileError` at that key's line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .datasets.rows import UNSAFE_ID
from .resolved import EvalFileError

if TYPE_CHECKING:
    from .schema import CaseSpec, EvalSpec, RawAssertion
    from .yamlsource import LocatedDocument


@dataclass(frozen=True)
class Place:
    """Where a case comes from in its eval file, so that problems name the right line."""

    path: Path
    document: LocatedDocument
    loc: tuple[Any, ...]  #: ``("cases", n)`` for an inline case, ``("dataset",)`` for a row
    #: folders besides the eval file's that its paths may lead into (the rootdir, allowed ones)
    roots: tuple[Path, ...] = ()

    @property
    def line(self) -> int:
        """The case's own line."""
        return self.document.line_of(self.loc) or 1

    def error(self, message: str, *key: Any) -> EvalFileError:
        """An error at the line of ``key`` inside the case (the case's line without one)."""
        return EvalFileError(self.path, self.document.line_of((*self.loc, *key)) or 1, message)

    def file_error(self, message: str, *key: Any) -> EvalFileError:
        """An error at the line of the file's own (top-level) ``key``."""
        return EvalFileError(self.path, self.document.line_of(key) or 1, message)

    def text(self, key: str, value: Any) -> str | None:
        """A scalar as written in the file: ``yes`` stays ``yes``, not ``True``."""
        if value is None or isinstance(value, str):
            return value
        return self.document.text_of((*self.loc, key)) or str(value)


class FieldError(ValueError):
    """A problem with one field of a case; ``key`` is its location inside the case."""

    def __init__(self, key: tuple[Any, ...], message: str) -> None:
        super().__init__(message)
        self.key = key


def safe_id(case_id: str) -> str:
    """``case_id`` with what a pytest node id cannot hold replaced by ``-``."""
    return UNSAFE_ID.sub("-", case_id.strip())


def inline_id(case: CaseSpec, place: Place) -> str:
    """The case's id made node-id safe; ``case-<n>`` when it has none (or a blank one)."""
    written = place.text("id", case.id)
    if written is None or not written.strip():
        return f"case-{place.loc[-1] + 1}"
    return safe_id(written)


def written_assertions(spec: EvalSpec) -> list[tuple[tuple[str | int, ...], RawAssertion]]:
    """Every assertion written in the file (not a dataset's) with where it is written: the
    file's ``assert:``, each case's, its turns' and its simulated user's (``stop_on_fail``, a
    mark on the check and no key of it, taken off)."""
    from .schema import without_stop_flag

    written: list[tuple[tuple[str | int, ...], RawAssertion]]
    written = [(("assert", n), raw) for n, raw in enumerate(spec.assertions)]
    for c, case in enumerate(spec.cases):
        written += [(("cases", c, "assert", n), raw) for n, raw in enumerate(case.assertions)]
        for t, turn in enumerate(case.turns or ()):  # a conversation's turns check their reply
            place = ("cases", c, "turns", t, "assert")
            written += [((*place, n), raw) for n, raw in enumerate(turn.assertions)]
        if case.simulated_user is not None:  # checked on every reply of the model
            user: tuple[str | int, ...] = ("cases", c, "simulated_user", "assert")
            checks = case.simulated_user.assertions
            written += [((*user, n), without_stop_flag(raw)) for n, raw in enumerate(checks)]
    return written
