"""``similarity`` with ``method: embedding``: the answer and the reference embedded in one call,
scored by their cosine. A judge kind without a panel: the embedding model is its one "judge",
and its call is recorded as a judge entry (dimension ``cosine``), so its tokens, cost and
failures are counted with the judges'.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from ..models import Completion, ItemError
from ..scoring import EmbeddingSpec
from .panel import AttemptsUsage, GradedAssertion

if TYPE_CHECKING:
    from ..models import ModelProfile
    from ..scoring import Assertion
    from .answer_view import AnswerView, JudgedEntry
    from .panel import PanelForm


async def grade_similarity(
    entry: JudgedEntry, view: AnswerView, form: PanelForm
) -> GradedAssertion:
    """The kind's grading: the model's reply against the assertion's value, else the case's
    expected answer. ``form`` is unused: no judge is prompted."""
    (embedder,) = entry.judges
    reference = entry.assertion.value or view.expected or ""
    embedding = view.embed(embedder, [view.reply, str(reference)])
    return await grade_embedding(entry.index, entry.assertion, embedding, embedder)


async def grade_embedding(
    index: int,
    assertion: Assertion,
    embedding: Awaitable[Completion],
    embedder: ModelProfile,
) -> GradedAssertion:
    """``similarity`` by embedding cosine: the answer against the reference, one call for both."""
    from ..scoring import Verdict, cosine

    spec = assertion.graded
    assert isinstance(spec, EmbeddingSpec)
    usage = AttemptsUsage()
    try:
        completion = await embedding
    except ItemError as exc:
        failed = usage.call(index, assertion.type, embedder, 1, error=exc.message)
        return GradedAssertion(index, None, (failed,))
    usage.add(completion)
    try:
        answer, reference = json.loads(completion.text)
        score = cosine(answer, reference)
    except (ValueError, TypeError) as exc:  # a corrupt cache entry, vectors of two sizes
        failed = usage.call(index, assertion.type, embedder, 1, error=f"bad embeddings: {exc}")
        return GradedAssertion(index, None, (failed,))
    passed = score >= spec.threshold
    reason = f"embedding cosine {score:.3f} {'>=' if passed else '<'} {spec.threshold:g}"
    call = usage.call(index, assertion.type, embedder, 1, {"cosine": score}, {"cosine": reason})
    verdict = Verdict(assertion.type, passed, max(score, 0.0), assertion.weight, reason)
    return GradedAssertion(index, verdict, (call,), {"cosine": score})
