"""The strict parser of judge replies.

:func:`parse_verdict` accepts exactly the reply shape that :func:`~.prompts.reply_schema`
describes, as one JSON object, optionally in a single ``` (or ```json) fence. Anything else
raises :class:`VerdictError` with a short message that says what is wrong; the engine shows it
to the judge in a retry and, after the last attempt, records it as the judge's error.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..scoring.base import clip, quoted
from ..scoring.model_graded import GRADER_SCORE_KEY
from .prompts import JudgeRequest

if TYPE_CHECKING:
    from ..scoring.model_graded import ModelGradedSpec

#: The score of each factuality choice: only D (disagrees with the expected answer) fails.
FACTUALITY_SCORES: dict[str, float] = {"A": 1.0, "B": 1.0, "C": 1.0, "D": 0.0, "E": 1.0}
CLOSED_QA_SCORES: dict[str, float] = {"Y": 1.0, "N": 0.0}
_QUOTE_LIMIT = 60  # a judge's reply is quoted shorter than an answer
#: A reply that is one fenced block; the body must then hold the object and nothing else.
_FENCED = re.compile(r"```(?i:json)?\s*(.*?)\s*```", re.DOTALL)


class VerdictError(ValueError):
    """A judge reply that is not a valid verdict; the message says what is wrong."""


@dataclasses.dataclass(frozen=True)
class ParsedVerdict:
    """The scores and reasons of one valid judge reply, keyed by the request's score keys."""

    #: key -> score: jury 1..5, rubric 0..1, factuality and closed_qa 1.0 or 0.0
    scores: dict[str, float]
    #: key -> the judge's reason; factuality's starts with "choice X: "
    reasons: dict[str, str]
    #: a RAG metric's per-claim (``{claim, supported, reason}``) or per-chunk
    #: (``{chunk, relevant, reason}``) verdicts; with no score, the verdict is undetermined
    #: (nothing to count) and ``reasons`` says why
    details: tuple[dict[str, Any], ...] = ()
    #: model-graded: the label of the choice the judge picked
    choice: str | None = None


class _DuplicateKey(Exception):
    """A JSON object names a key twice; which value the judge meant is unknowable."""


def parse_verdict(request: JudgeRequest, reply: str) -> ParsedVerdict:
    """Parse a judge's ``reply`` to ``request``, strictly.

    The reply must be exactly one JSON object (whitespace and a single ``` / ```json fence
    around it are allowed) with every key the schema requires, of the right type and range:
    jury scores integers 1..5 (``5.0`` counts as 5), a rubric score a number 0..1, a choice or
    verdict one of the allowed letters (after ``strip().upper()``), reasons strings. Booleans
    are not numbers. Keys the schema does not name are ignored. A user's grader's reply is
    read by :func:`_parse_grader` (JSON or text). Raises only VerdictError.
    """
    if request.grader is not None:
        return _parse_grader(request, reply)
    data = load_object(reply)
    return _PARSERS[request.kind](request, data)


# --- reading the JSON ------------------------------------------------------------------------


def load_object(reply: str) -> dict[str, Any]:
    if not isinstance(reply, str):
        raise VerdictError(f"reply must be text, got {type(reply).__name__}")
    text = _unfenced(reply.strip())
    if not text:
        raise VerdictError("empty reply")
    value, end = _decode(text)
    rest = text[end:].strip()
    if rest.startswith(("{", "[")):
        raise VerdictError(
            f"more than one JSON value: {quoted(rest, _QUOTE_LIMIT)} follows the first"
        )
    if rest:
        raise VerdictError(f"text after the JSON object: {quoted(rest, _QUOTE_LIMIT)}")
    if not isinstance(value, dict):
        raise VerdictError(f"expected a JSON object, got {_json_type(value)}")
    return value


def _unfenced(text: str) -> str:
    if not text.startswith("```"):
        return text
    match = _FENCED.fullmatch(text)
    if match is None:
        raise VerdictError("unclosed ``` fence")
    body = match.group(1)
    if "```" in body:
        raise VerdictError("more than one ``` fence")
    return body


def _decode(text: str) -> tuple[Any, int]:
    # strict=False: a control character written raw inside a string (a newline or a tab in a
    # reason, as small models write under a JSON grammar) is read as it is, not refused: the
    # reply means the same with it escaped.
    decoder = json.JSONDecoder(object_pairs_hook=_unique_keys, strict=False)
    try:
        return decoder.raw_decode(text)
    except json.JSONDecodeError as exc:
        start = text.find("{")
        if exc.pos == 0 and start > 0:
            raise VerdictError(
                f"text before the JSON object: {quoted(text[:start], _QUOTE_LIMIT)}"
            ) from None
        raise VerdictError(f"not JSON: {exc.msg} at {exc.lineno}:{exc.colno}") from None
    except _DuplicateKey as exc:
        raise VerdictError(f"duplicate key {quoted(str(exc), _QUOTE_LIMIT)}") from None
    except (RecursionError, ValueError) as exc:  # nested too deep; an integer too long
        raise VerdictError(f"not JSON: {clip(str(exc), _QUOTE_LIMIT)}") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


# --- checking the shape ----------------------------------------------------------------------


def _parse_jury(request: JudgeRequest, data: dict[str, Any]) -> ParsedVerdict:
    missing = [key for key in request.dimensions if key not in data]
    if missing:
        plural = "s" if len(missing) > 1 else ""
        names = ", ".join(quoted(key, _QUOTE_LIMIT) for key in missing)
        raise VerdictError(clip(f"missing dimension{plural} {names}", 200))
    scores: dict[str, float] = {}
    reasons: dict[str, str] = {}
    for key in request.dimensions:
        entry = data[key]
        if not isinstance(entry, dict):
            shown = _json_type(entry)
            raise VerdictError(
                f"{quoted(key, _QUOTE_LIMIT)} must be an object with score and reason, got {shown}"
            )
        scores[key] = _jury_score(_field(entry, "score", key), f"{key}.score")
        reasons[key] = _reason(entry, key)
    return ParsedVerdict(scores, reasons)


def _jury_score(value: Any, path: str) -> float:
    # The range test comes first: it is safe for huge integers and NaN, float() is not.
    if not _is_number(value) or not 1 <= value <= 5 or value != int(value):
        raise VerdictError(
            f"{quoted(path, _QUOTE_LIMIT)} must be an integer 1..5, got {_shown(value)}"
        )
    return float(value)


def _parse_rubric(request: JudgeRequest, data: dict[str, Any]) -> ParsedVerdict:
    value = _field(data, "score")
    if not _is_number(value) or not 0 <= value <= 1:
        raise VerdictError(f"'score' must be a number 0..1, got {_shown(value)}")
    return ParsedVerdict({"rubric": float(value)}, {"rubric": _reason(data)})


def _parse_factuality(request: JudgeRequest, data: dict[str, Any]) -> ParsedVerdict:
    choice = _letter(data, "choice", FACTUALITY_SCORES)
    reason = f"choice {choice}: {_reason(data)}"
    return ParsedVerdict({"factuality": FACTUALITY_SCORES[choice]}, {"factuality": reason})


def _parse_closed_qa(request: JudgeRequest, data: dict[str, Any]) -> ParsedVerdict:
    verdict = _letter(data, "verdict", CLOSED_QA_SCORES)
    return ParsedVerdict({"closed_qa": CLOSED_QA_SCORES[verdict]}, {"closed_qa": _reason(data)})


def _parse_relevance(request: JudgeRequest, data: dict[str, Any]) -> ParsedVerdict:
    if request.questions:
        return _parse_questions(request, data)
    parsed = _parse_rubric(request, data)
    key = request.score_keys[0]
    return ParsedVerdict({key: parsed.scores["rubric"]}, {key: parsed.reasons["rubric"]})


def _parse_questions(request: JudgeRequest, data: dict[str, Any]) -> ParsedVerdict:
    """answer-relevance with an embedding model: the questions the judge wrote from the
    answer, each in ``details`` with the judge's noncommittal flag. No score yet: the
    embedding model's similarities make it (:mod:`.relevance`). Blank questions are left out;
    with none left, the reason says so."""
    value = _field(data, "questions")
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise VerdictError(f"'questions' must be a list of strings, got {_shown(value)}")
    if len(value) != request.questions:
        raise VerdictError(f"'questions' must have {request.questions}, got {len(value)}")
    noncommittal = _field(data, "noncommittal")
    if not isinstance(noncommittal, bool):
        raise VerdictError(f"'noncommittal' must be true or false, got {_shown(noncommittal)}")
    key = request.score_keys[0]
    written = [text.strip() for text in value if text.strip()]
    details = tuple({"question": text, "noncommittal": noncommittal} for text in written)
    reason = _reason(data) if written else "no question generated from the answer"
    return ParsedVerdict({}, {key: reason}, details)


def _parse_grader(request: JudgeRequest, reply: str) -> ParsedVerdict:
    """A user's grader: the label picked, its score, the reasoning. A structured reply is one
    JSON object (``choice``, and ``reasoning`` with chain of thought); a text reply's last
    non-empty line is ``Choice: X`` or X alone, the lines before it the reasoning."""
    assert request.grader is not None
    label, scores, reasons = _grader_reply(request.grader, reply)
    return ParsedVerdict(scores, reasons, choice=label)


#: The last line of a text reply: ``Choice: X`` (any case of "choice"), or X alone.
_CHOICE_LINE = re.compile(r"choice\s*:\s*(?P<label>.*)", re.IGNORECASE)
#: Marks a judge may wrap its label in: markdown emphasis, code, quotes, brackets.
_WRAPPING = "*`\"'()[] \t"


def _grader_reply(
    spec: ModelGradedSpec, reply: str
) -> tuple[str, dict[str, float], dict[str, str]]:
    """(the label picked, its score, the reasoning) of a judge's ``reply``, read strictly;
    raise :class:`VerdictError` naming what is wrong."""
    if spec.structured:
        label, reasoning = _from_json(spec, reply)
    else:
        label, reasoning = _from_text(spec, reply)
    return (
        label,
        {GRADER_SCORE_KEY: spec.score_of(label)},
        {GRADER_SCORE_KEY: reasoning},
    )


def _from_json(spec: ModelGradedSpec, reply: str) -> tuple[str, str]:
    data = load_object(reply)
    if "choice" not in data:
        raise VerdictError("missing 'choice'")
    value = data["choice"]
    if not isinstance(value, str):
        raise VerdictError(f"'choice' must be one of {', '.join(spec.labels)}, got {value!r}")
    reasoning = data.get("reasoning", "")
    if spec.chain_of_thought and "reasoning" not in data:
        raise VerdictError("missing 'reasoning'")
    if not isinstance(reasoning, str):
        raise VerdictError("'reasoning' must be a string")
    return _label(spec, value), reasoning.strip()


def _from_text(spec: ModelGradedSpec, reply: str) -> tuple[str, str]:
    lines = [line for line in (reply or "").strip().splitlines() if line.strip()]
    if not lines:
        raise VerdictError("empty reply")
    last = lines[-1].strip().strip("*`").strip()
    match = _CHOICE_LINE.fullmatch(last)
    written = match.group("label") if match else last
    reasoning = "\n".join(lines[:-1]).strip()
    if spec.chain_of_thought and not reasoning:
        raise VerdictError("no reasoning before the choice line")
    return _label(spec, written), reasoning


def _label(spec: ModelGradedSpec, written: str) -> str:
    """The label ``written`` names: exactly, or else when it matches one label ignoring case;
    surrounding marks and one trailing period are dropped first."""
    text = written.strip(_WRAPPING)
    text = text[:-1].strip(_WRAPPING) if text.endswith(".") else text
    if text in spec.labels:
        return text
    folded = [label for label in spec.labels if label.casefold() == text.casefold()]
    if len(folded) == 1:
        return folded[0]
    raise VerdictError(
        f"the choice must be one of {', '.join(spec.labels)}, got {quoted(written, _QUOTE_LIMIT)}"
    )


def _parse_claims(request: JudgeRequest, data: dict[str, Any]) -> ParsedVerdict:
    """Faithfulness (the answer's claims) or context recall (the reference's): each claim
    supported by the context or not; the score is computed, not asked for."""
    from ..scoring.rag import ClaimVerdict, claims_score

    entries = _entries(data, "claims")
    claims = []
    for index, entry in enumerate(entries):
        path = f"claims[{index}]"
        claim = _field(entry, "claim", path)
        if not isinstance(claim, str) or not claim.strip():
            raise VerdictError(
                f"{quoted(path + '.claim', _QUOTE_LIMIT)} must be a non-empty string"
            )
        supported = _boolean(entry, "supported", path)
        claims.append(ClaimVerdict(claim.strip(), supported, _reason(entry, path)))
    whose = "expected" if request.kind == "context-recall" else "the answer"
    details = tuple(
        {"claim": c.claim, "supported": c.supported, "reason": c.reason} for c in claims
    )
    return _rag_verdict(request, claims_score(claims, whose), details)


def _parse_chunks(request: JudgeRequest, data: dict[str, Any]) -> ParsedVerdict:
    """Context precision: exactly one entry per chunk, numbered 1..n in order."""
    from ..scoring.rag import ChunkVerdict, chunks_score

    entries = _entries(data, "chunks")
    if len(entries) != len(request.context):
        raise VerdictError(
            f"'chunks' must have one entry per chunk ({len(request.context)}), got {len(entries)}"
        )
    chunks = []
    for rank, entry in enumerate(entries, start=1):
        path = f"chunks[{rank - 1}]"
        number = _field(entry, "chunk", path)
        if not _is_number(number) or number != rank:
            raise VerdictError(
                f"{quoted(path + '.chunk', _QUOTE_LIMIT)} must be {rank}, got {_shown(number)}"
            )
        chunks.append(ChunkVerdict(rank, _boolean(entry, "relevant", path), _reason(entry, path)))
    details = tuple({"chunk": c.rank, "relevant": c.relevant, "reason": c.reason} for c in chunks)
    return _rag_verdict(request, chunks_score(chunks), details)


def _rag_verdict(
    request: JudgeRequest, result: Any, details: tuple[dict[str, Any], ...]
) -> ParsedVerdict:
    """A RAG verdict: its computed score, or none (undetermined) with the reason why."""
    from ..scoring.rag import RagScore

    key = request.score_keys[0]
    scores = {key: result.score} if isinstance(result, RagScore) else {}
    return ParsedVerdict(scores, {key: result.reason}, details)


def _entries(data: dict[str, Any], name: str) -> list[dict[str, Any]]:
    value = _field(data, name)
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise VerdictError(
            f"{quoted(name, _QUOTE_LIMIT)} must be a list of objects, got {_shown(value)}"
        )
    return value


def _boolean(entry: dict[str, Any], name: str, parent: str) -> bool:
    value = _field(entry, name, parent)
    if not isinstance(value, bool):
        raise VerdictError(
            f"{quoted(parent + '.' + name, _QUOTE_LIMIT)} must be true or false, got {_shown(value)}"
        )
    return value


_PARSERS: dict[str, Callable[[JudgeRequest, dict[str, Any]], ParsedVerdict]] = {
    "jury": _parse_jury,
    "llm-rubric": _parse_rubric,
    "factuality": _parse_factuality,
    "closed-qa": _parse_closed_qa,
    "faithfulness": _parse_claims,
    "answer-relevance": _parse_relevance,
    "context-recall": _parse_claims,
    "context-precision": _parse_chunks,
}


def _field(data: dict[str, Any], name: str, parent: str | None = None) -> Any:
    if name not in data:
        path = f"{parent}.{name}" if parent else name
        raise VerdictError(f"missing {quoted(path, _QUOTE_LIMIT)}")
    return data[name]


def _reason(data: dict[str, Any], parent: str | None = None) -> str:
    value = _field(data, "reason", parent)
    if not isinstance(value, str):
        path = f"{parent}.reason" if parent else "reason"
        raise VerdictError(
            f"{quoted(path, _QUOTE_LIMIT)} must be a string, got {_json_type(value)}"
        )
    return value


def _letter(data: dict[str, Any], name: str, allowed: dict[str, float]) -> str:
    value = _field(data, name)
    letter = value.strip().upper() if isinstance(value, str) else None
    if letter is None or letter not in allowed:
        options = ", ".join(allowed)
        raise VerdictError(
            f"{quoted(name, _QUOTE_LIMIT)} must be one of {options}, got {_shown(value)}"
        )
    return letter


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def _shown(value: Any) -> str:
    return clip(json.dumps(value, ensure_ascii=False), _QUOTE_LIMIT)
