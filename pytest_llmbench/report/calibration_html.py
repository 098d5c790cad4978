"""The report's "Judges against people" section: each judge group's agreement with people's
labels (the rows of ``judge_calibration.csv``), as ``llmbench calibrate`` prints it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .html_tables import text

#: The section's heading.
CALIBRATION_SECTION = "Judges against people"


def calibration_table(rows: Sequence[Mapping[str, Any]], min_labels: int = 50) -> str:
    """A table of judge groups: n, kappa, TPR and FPR with their 95% intervals, the confusion
    cells, the leaning and the unsure labels; empty without rows."""
    if not rows:
        return ""
    head = ("Judge", "Type", "Criterion", "n", "Kappa [95% CI]", "TPR [95% CI]",
            "FPR [95% CI]", "tp", "fp", "fn", "tn", "Leaning", "Unsure", "")  # fmt: skip
    numeric = {3, 4, 5, 6, 7, 8, 9, 10, 12}
    header = "".join(
        f'<th class="num">{text(name)}</th>' if i in numeric else f"<th>{text(name)}</th>"
        for i, name in enumerate(head)
    )
    body = "".join(_row(row) for row in rows)
    note = (
        '<p class="note">Each label of a person beside the judge\'s verdict on the same answer; '
        "pass is positive: TPR is the share of what people passed that the judge passed, FPR "
        "the share of what people failed that it passed. Kappa's interval is large-sample "
        f"(Fleiss, Cohen &amp; Everitt), the rates' Wilson. Under {min_labels} labels the "
        "figures are told as too few.</p>"
    )
    return f"<table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>{note}"


def _row(row: Mapping[str, Any]) -> str:
    cells = [
        text(row.get("judges")),
        text(row.get("type")),
        text(row.get("criterion") or ""),
    ]
    numbers = [
        str(row.get("n")),
        _figure(row, "kappa", "{:+.2f}"),
        _figure(row, "tpr", "{:.2f}"),
        _figure(row, "fpr", "{:.2f}"),
        *(str(row.get(cell)) for cell in ("tp", "fp", "fn", "tn")),
    ]
    tail = [text(row.get("leaning")), str(row.get("unsure")), text(row.get("note") or "")]
    return (
        "<tr>"
        + "".join(f"<td>{cell}</td>" for cell in cells)
        + "".join(f'<td class="num">{text(cell)}</td>' for cell in numbers)
        + f'<td>{tail[0]}</td><td class="num">{text(tail[1])}</td><td>{tail[2]}</td>'
        + "</tr>"
    )


def _figure(row: Mapping[str, Any], name: str, shape: str) -> str:
    value, low, high = row.get(name), row.get(f"{name}_low"), row.get(f"{name}_high")
    if value is None:
        return "-"
    if low is None or high is None:
        return shape.format(value)
    return f"{shape.format(value)} [{shape.format(low)}, {shape.format(high)}]"
