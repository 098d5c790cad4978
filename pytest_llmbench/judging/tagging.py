"""How untrusted text is put before a judge: each block in an XML-like tag of ours, with copies
of our tags inside the text defused (``<`` written ``&lt;``), so that an answer cannot close its
block early and speak as the prompt; and the JSON Schema object every verdict's shape is built
from. Shared by the judge kinds' prompts (:mod:`.prompts`, :mod:`.rag_metrics`).
"""

from __future__ import annotations

import re
from typing import Any

#: Every tag a judge prompt puts text in.
TAGS = (
    "system_prompt",
    "question",
    "expected",
    "rubric",
    "criterion",
    "answer",
    "reasoning",
    "conversation",
    "user",
    "assistant",
    "context",
    "chunk",
)
#: An opening or closing tag of ours inside untrusted text.
_OWN_TAG = re.compile(r"<(?=\s*/?\s*(?:" + "|".join(TAGS) + r")\b)", re.IGNORECASE)
#: The reason every verdict's shape ends with, as the judge is shown it.
REASON_SHAPE = '"reason": "<one short sentence>"'
#: The last line of a judge's data: what to do now.
FINAL = "Judge the answer now. Reply with only the JSON object."


def defused(text: str) -> str:
    """``text`` with every copy of one of our tags made harmless."""
    # "&lt;" keeps the text readable while no copy of our tags can end the block early.
    return _OWN_TAG.sub("&lt;", text)


def tagged(tag: str, text: str) -> str:
    """``text`` in the block ``tag``, defused."""
    return f"<{tag}>\n{defused(text)}\n</{tag}>"


def json_object(properties: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of an object with exactly ``properties``, every one required."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
