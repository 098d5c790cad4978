"""A reply's tool calls in HTML: each call's name and its arguments pretty-printed as JSON.

report.html's item detail, ``llmbench view``'s item page and pytest-html's extras show a
function-calling reply's calls (a record's ``tool_calls``, or a conversation entry's) with
:func:`function_calls_html`; every text is escaped.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from typing import Any

#: The calls' look: the same in report.html and in the viewer.
FUNCTION_CALLS_STYLE = """
ol.function-calls{margin:4px 0;padding-left:22px}
ol.function-calls .name{font-family:monospace;font-weight:600}
ol.function-calls pre{margin:2px 0}
"""


def function_calls_html(calls: Any) -> str:
    """The calls ``{id, name, arguments}`` as a list, empty for none (or a value that is not a
    list of calls)."""
    shown = [call for call in calls if isinstance(call, Mapping)] if isinstance(calls, list) else []
    if not shown:
        return ""
    items = "".join(
        f'<li><span class="name">{_text(call.get("name"))}</span>'
        f"<pre>{_text(pretty_arguments(call.get('arguments')))}</pre></li>"
        for call in shown
    )
    return f'<ol class="function-calls">{items}</ol>'


def pretty_arguments(arguments: Any) -> str:
    """A call's arguments (the JSON text the model sent) indented; a text that is not JSON
    as sent, since a broken call is worth seeing as the model wrote it."""
    if not isinstance(arguments, str):
        return json.dumps(arguments, ensure_ascii=False, indent=2)
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    return json.dumps(value, ensure_ascii=False, indent=2)


def _text(value: Any) -> str:
    return html.escape(str(value))
