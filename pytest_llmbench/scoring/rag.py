"""RAG metrics: how a judge's per-claim and per-chunk verdicts become a 0..1 score.

The judges of ``faithfulness``, ``context-recall`` and ``context-precision`` do not give a
number: they list what they found (each claim supported or not, each chunk relevant or not),
and the score is computed here, the same way for every judge, so a small judge cannot get the
arithmetic wrong and every score can be traced to its claims.

- faithfulness = supported claims of the answer / claims of the answer (Ragas' faithfulness)
- context-recall = claims of ``expected`` found in the context / claims of ``expected``
  (Ragas' LLM context recall)
- context-precision = the rank-weighted average precision of the chunks' relevance
  (Ragas' context precision): ``sum_k(precision@k * v_k) / relevant``, where ``v_k`` is 1 when
  chunk ``k`` is relevant and ``precision@k`` the share of relevant chunks among the first k;
  0 when no chunk is relevant.
- answer-relevance with ``embedding_model`` (Ragas' answer relevancy): the mean cosine
  similarity of the questions a judge wrote from the answer to the case's question, times 0
  when the judge found the answer noncommittal (:func:`questions_score`).

When there is nothing to count (an answer with no claims, a refusal, an expected answer with no
claims) the verdict cannot be determined: :class:`Undetermined`, which the panel turns into an
*unchecked* verdict, never NaN, never a silent 0 or pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .base import clip, quoted

#: The reasons of a RAG verdict quote claims this long at most.
_CLAIM_QUOTE = 120


@dataclass(frozen=True)
class ClaimVerdict:
    """One claim a judge found, and whether the context supports it."""

    claim: str
    supported: bool
    reason: str


@dataclass(frozen=True)
class ChunkVerdict:
    """One chunk of the context (1-based ``rank``), and whether it is relevant to the question."""

    rank: int
    relevant: bool
    reason: str


@dataclass(frozen=True)
class RagScore:
    """A determined RAG score and its one-line reason."""

    score: float
    reason: str


@dataclass(frozen=True)
class Undetermined:
    """Nothing to score (no claims): the verdict is unchecked, for this reason."""

    reason: str


def claims_score(claims: Sequence[ClaimVerdict], what: str) -> RagScore | Undetermined:
    """Supported claims / claims, with every unsupported claim named in the reason.

    ``what`` names whose claims were judged (``"the answer"``, ``"expected"``).
    """
    if not claims:
        return Undetermined(f"no claims found in {what}: nothing to check against the context")
    supported = sum(1 for claim in claims if claim.supported)
    head = f"{supported}/{len(claims)} claims of {what} supported by the context"
    missing = [claim for claim in claims if not claim.supported]
    if not missing:
        return RagScore(supported / len(claims), head)
    named = "; ".join(_claim_line(claim) for claim in missing)
    return RagScore(supported / len(claims), f"{head}; unsupported: {named}")


def _claim_line(claim: ClaimVerdict) -> str:
    why = f" ({clip(claim.reason, _CLAIM_QUOTE)})" if claim.reason.strip() else ""
    return f"{quoted(claim.claim, _CLAIM_QUOTE)}{why}"


def average_precision(relevant: Sequence[bool]) -> float:
    """Ragas' context precision of chunks in rank order: the mean of precision@k over the ranks
    k of the relevant chunks; 0.0 when none is relevant.

    ``[True, False, True]``: (1/1 + 2/3) / 2 = 0.8333.
    """
    hits = 0
    total = 0.0
    for rank, is_relevant in enumerate(relevant, start=1):
        if is_relevant:
            hits += 1
            total += hits / rank
    return total / hits if hits else 0.0


def chunks_score(chunks: Sequence[ChunkVerdict]) -> RagScore | Undetermined:
    """The context precision of the judged chunks, with each irrelevant chunk in the reason."""
    if not chunks:
        return Undetermined("no context chunks to judge")
    score = average_precision([chunk.relevant for chunk in chunks])
    relevant = sum(1 for chunk in chunks if chunk.relevant)
    head = f"{relevant}/{len(chunks)} chunks relevant, rank-weighted precision {score:.3f}"
    off = [chunk for chunk in chunks if not chunk.relevant]
    if not off:
        return RagScore(score, head)
    named = "; ".join(f"chunk {chunk.rank} ({clip(chunk.reason, _CLAIM_QUOTE)})" for chunk in off)
    return RagScore(score, f"{head}; not relevant: {named}")


@dataclass(frozen=True)
class GeneratedQuestion:
    """A question a judge wrote from the answer, and its cosine similarity to the case's."""

    question: str
    similarity: float


def questions_score(
    generated: Sequence[GeneratedQuestion], noncommittal: bool, why: str
) -> RagScore | Undetermined:
    """Ragas' answer relevancy of one judge's questions: their mean cosine similarity to the
    case's question, 0 when the judge found the answer noncommittal (``why`` its reason).

    Ragas multiplies the mean by 0 only when every generation says noncommittal; a judge here
    writes its questions in one reply, with one flag, so that flag decides.
    """
    if not generated:
        return Undetermined("no question generated from the answer: nothing to compare")
    mean = sum(item.similarity for item in generated) / len(generated)
    if noncommittal:
        reason = f"noncommittal answer, score 0 (mean similarity {mean:.3f})"
        return RagScore(0.0, f"{reason}: {clip(why, _CLAIM_QUOTE)}" if why.strip() else reason)
    lowest = min(generated, key=lambda item: item.similarity)
    head = f"mean cosine {mean:.3f} of {len(generated)} generated question(s) to the question"
    return RagScore(
        mean,
        f"{head}; least similar: {quoted(lowest.question, _CLAIM_QUOTE)} ({lowest.similarity:.3f})",
    )
