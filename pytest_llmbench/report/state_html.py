"""An agent item's environment state in HTML: what the run changed from the seed (path, before,
after) and, when the case has an expected state, where the final state differs from it; shown
with the item's transcript in report.html and on the viewer's item page.

Reads the record's ``state`` (:mod:`pytest_llmbench.results.record`); every value is escaped.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

#: The characters of one value shown in a cell (the record keeps up to 2,000).
VALUE_CHARS = 300
#: The look of the state tables: the same in report.html and the viewer.
STATE_STYLE = """
div.state table{border-collapse:collapse;margin:4px 0}
div.state td,div.state th{border:1px solid #d0d7de;padding:2px 6px;vertical-align:top}
div.state td.added{color:#1a7f37}div.state td.removed{color:#cf222e}
div.state td.changed{color:#9a6700}
"""


def _text(value: Any) -> str:
    return html.escape(str(value))


def state_block(record: Mapping[str, Any]) -> str:
    """The item's state diff, and its differences from the expected state; empty for an item
    without an environment."""
    state = record.get("state")
    if not isinstance(state, Mapping):
        return ""
    where = f"<h4>state ({_text(state.get('file'))})</h4>"
    changes = _changes(state.get("diff"))
    if changes:
        diff = _table(changes, ("seed", "final"), state.get("diff_more"), "state-diff")
    else:
        diff = '<p class="note">the run left the state as seeded</p>'
    expected = _expected(state, record)
    return f'<div class="state">{where}{diff}{expected}</div>'


def _expected(state: Mapping[str, Any], record: Mapping[str, Any]) -> str:
    """Where the final state differs from the expected one (None: the case has none)."""
    if state.get("expected_diff") is None:
        return ""
    changes = _changes(state.get("expected_diff"))
    if not changes:
        return '<p class="note">the final state equals the expected state</p>'
    failed = _failed_state_equals(record.get("assertions"))
    title = "final state vs expected" + (" (state-equals failed)" if failed else "")
    table = _table(
        changes, ("final", "expected"), state.get("expected_diff_more"), "state-expected"
    )
    return f"<h4>{_text(title)}</h4>{table}"


def _failed_state_equals(verdicts: Any) -> bool:
    if not isinstance(verdicts, list):
        return False
    return any(
        isinstance(verdict, Mapping)
        and str(verdict.get("type", "")).endswith("state-equals")
        and not verdict.get("passed")
        for verdict in verdicts
    )


def _changes(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _table(
    changes: Sequence[Mapping[str, Any]], sides: tuple[str, str], more: Any, css: str
) -> str:
    """One row per change: its path, what happened, and the value on each side."""
    rows = "".join(
        f"<tr><td><code>{_text(change.get('path') or '(the whole state)')}</code></td>"
        f'<td class="{_text(change.get("op"))}">{_text(change.get("op"))}</td>'
        f"<td>{_side(change, 'before', 'added')}</td>"
        f"<td>{_side(change, 'after', 'removed')}</td></tr>"
        for change in changes
    )
    header = f"<tr><th>path</th><th>change</th><th>{sides[0]}</th><th>{sides[1]}</th></tr>"
    note = ""
    if isinstance(more, int) and more > 0:
        note = f'<p class="note">and {more:,} more changes, not recorded</p>'
    return f'<table class="{css}">{header}{rows}</table>{note}'


def _side(change: Mapping[str, Any], side: str, absent_when: str) -> str:
    """One side of a change as JSON shows it (a string quoted, so that ``"[x]"`` never looks
    like a list); a side the record clipped is already JSON text, shown as it is."""
    if change.get("op") == absent_when:
        return '<span class="note">(absent)</span>'
    value = change.get(side)
    clipped = change.get("clipped")
    if isinstance(value, str) and isinstance(clipped, list) and side in clipped:
        shown = value
    else:
        shown = json.dumps(value, ensure_ascii=False, default=str)
    if len(shown) > VALUE_CHARS:
        shown = shown[: VALUE_CHARS - 3] + "..."
    return f"<code>{_text(shown)}</code>"
