"""The judge kinds that give one verdict on one answer against a text of the file's:
``llm-rubric`` (a score 0..1 for how well the answer meets the rubric), ``factuality`` (a
choice A..E comparing its facts with the expected answer, only D fails) and ``closed-qa``
(Y or N: does it meet the criterion). Their tasks, reply shapes and schemas, and their strict
readings.
"""

from __future__ import annotations

from typing import Any

from .replies import ParsedVerdict, VerdictError, is_number, letter, reason_text, required, shown
from .tagging import REASON_SHAPE

#: The score of each factuality choice: only D (disagrees with the expected answer) fails.
FACTUALITY_SCORES: dict[str, float] = {"A": 1.0, "B": 1.0, "C": 1.0, "D": 0.0, "E": 1.0}
CLOSED_QA_SCORES: dict[str, float] = {"Y": 1.0, "N": 0.0}

#: Each kind's task, as the judge is told it.
RUBRIC_SCALES: dict[str, str] = {
    "llm-rubric": "Score how well the answer meets the rubric in <rubric>, from 0 to 1: "
    "1 fully, 0.5 partly, 0 not at all.",
    "factuality": "Compare the facts in the answer with the expert answer in <expected>; "
    "ignore style, grammar and punctuation. Choose one:\n"
    "A: the answer is a subset of the expert answer and fully consistent with it.\n"
    "B: the answer is a superset of the expert answer and fully consistent with it.\n"
    "C: the answer contains all the same details as the expert answer.\n"
    "D: the answer disagrees with the expert answer.\n"
    "E: the answers differ, but the differences do not matter for factuality.",
    "closed-qa": "Decide whether the answer meets the criterion in <criterion>: "
    "Y if it does, N if it does not.",
}
#: A score 0..1 and its reason, as the judge is shown it (answer-relevance's too).
SCORE_SHAPE = '{"score": <number 0 to 1>, ' + REASON_SHAPE + "}"
#: Each kind's reply shape, as the judge is shown it.
RUBRIC_SHAPES: dict[str, str] = {
    "llm-rubric": SCORE_SHAPE,
    "factuality": '{"choice": "<A, B, C, D or E>", ' + REASON_SHAPE + "}",
    "closed-qa": '{"verdict": "<Y or N>", ' + REASON_SHAPE + "}",
}
#: The schema of the field that carries each kind's verdict (answer-relevance's score too).
VERDICT_FIELDS: dict[str, dict[str, Any]] = {
    "llm-rubric": {"score": {"type": "number", "minimum": 0, "maximum": 1}},
    "factuality": {"choice": {"type": "string", "enum": ["A", "B", "C", "D", "E"]}},
    "closed-qa": {"verdict": {"type": "string", "enum": ["Y", "N"]}},
    "answer-relevance": {"score": {"type": "number", "minimum": 0, "maximum": 1}},
}


def parse_score(key: str, data: dict[str, Any]) -> ParsedVerdict:
    """A score 0..1 (booleans are not numbers) and its reason, under ``key``."""
    value = required(data, "score")
    if not is_number(value) or not 0 <= value <= 1:
        raise VerdictError(f"'score' must be a number 0..1, got {shown(value)}")
    return ParsedVerdict({key: float(value)}, {key: reason_text(data)})


def parse_factuality(data: dict[str, Any]) -> ParsedVerdict:
    """A choice A..E (any case, spaces around it ignored); the reason names it."""
    choice = letter(data, "choice", FACTUALITY_SCORES)
    reason = f"choice {choice}: {reason_text(data)}"
    return ParsedVerdict({"factuality": FACTUALITY_SCORES[choice]}, {"factuality": reason})


def parse_closed_qa(data: dict[str, Any]) -> ParsedVerdict:
    """A verdict Y or N (any case, spaces around it ignored)."""
    verdict = letter(data, "verdict", CLOSED_QA_SCORES)
    return ParsedVerdict({"closed_qa": CLOSED_QA_SCORES[verdict]}, {"closed_qa": reason_text(data)})
