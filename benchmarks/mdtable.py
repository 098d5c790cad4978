"""Markdown tables, cell formats and target verdicts shared by the sections of RESULTS.md."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scenarios import Row

DASH = "—"


@dataclass(frozen=True)
class TargetCheck:
    """One target and whether the measurements meet it."""

    target: str
    measured: str
    verdict: str


def md_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return lines


def fmt(value: float | None, digits: int = 2) -> str:
    """A number with ``digits`` decimals, or a dash."""
    return DASH if value is None else f"{value:.{digits}f}"


def fmt_int(value: int | None) -> str:
    """An integer, or a dash."""
    return DASH if value is None else str(value)


def ratio(wall: float | None, base: float | None) -> str:
    """``wall / base`` to two decimals, or a dash."""
    return DASH if wall is None or not base else f"{wall / base:.2f}"


def outcomes_cell(row: Row) -> str:
    """The row's outcome counts, e.g. ``2 passed``."""
    return ", ".join(f"{count} {name}" for name, count in sorted(row.outcomes.items())) or DASH


def status_cell(row: Row) -> str:
    """The row's status and note."""
    return "; ".join(part for part in (row.status, row.note) if part)


def verdict(ok: bool) -> str:
    """``met`` or ``NOT met``."""
    return "met" if ok else "NOT met"
