"""The strict parser of judge replies: :func:`parse_verdict` reads a reply to a request by its
kind's parser (:mod:`.jury`, :mod:`.rubric`, :mod:`.rag_metrics`, :mod:`.grader`).

It accepts exactly the reply shape that :func:`~.prompts.reply_schema` describes, as one JSON
object, optionally in a single ``` (or ```json) fence (:mod:`.replies`); a user's grader's
reply may be text. Anything else raises :class:`VerdictError` with a short message that says
what is wrong; the engine shows it to the judge in a retry and, after the last attempt, records
it as the judge's error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .grader import parse_grader
from .jury import parse_jury
from .prompts import JudgeRequest
from .rag_metrics import parse_chunks, parse_claims, parse_questions
from .replies import ParsedVerdict, VerdictError, load_object
from .rubric import (
    CLOSED_QA_SCORES,
    FACTUALITY_SCORES,
    parse_closed_qa,
    parse_factuality,
    parse_score,
)

__all__ = [
    "CLOSED_QA_SCORES",
    "FACTUALITY_SCORES",
    "ParsedVerdict",
    "VerdictError",
    "load_object",
    "parse_verdict",
]


def parse_verdict(request: JudgeRequest, reply: str) -> ParsedVerdict:
    """Parse a judge's ``reply`` to ``request``, strictly.

    The reply must be exactly one JSON object (whitespace and a single ``` / ```json fence
    around it are allowed) with every key the schema requires, of the right type and range:
    jury scores integers 1..5 (``5.0`` counts as 5), a rubric score a number 0..1, a choice or
    verdict one of the allowed letters (after ``strip().upper()``), reasons strings. Booleans
    are not numbers. Keys the schema does not name are ignored. A user's grader's reply is
    read by :func:`~.grader.parse_grader` (JSON or text). Raises only VerdictError.
    """
    if request.grader is not None:
        return parse_grader(request.grader, reply)
    data = load_object(reply)
    return _PARSERS[request.kind](request, data)


def _relevance(request: JudgeRequest, data: dict[str, Any]) -> ParsedVerdict:
    key = request.score_keys[0]
    if request.questions:
        return parse_questions(key, request.questions, data)
    return parse_score(key, data)


#: Each kind's parser, reading the request's part of it (dimensions, context, questions).
_PARSERS: dict[str, Callable[[JudgeRequest, dict[str, Any]], ParsedVerdict]] = {
    "jury": lambda request, data: parse_jury(request.dimensions, data),
    "llm-rubric": lambda request, data: parse_score("rubric", data),
    "factuality": lambda request, data: parse_factuality(data),
    "closed-qa": lambda request, data: parse_closed_qa(data),
    "faithfulness": lambda request, data: parse_claims(request.kind, request.score_keys[0], data),
    "answer-relevance": _relevance,
    "context-recall": lambda request, data: parse_claims(request.kind, request.score_keys[0], data),
    "context-precision": lambda r, data: parse_chunks(r.score_keys[0], len(r.context), data),
}
