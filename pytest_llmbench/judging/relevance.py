"""``answer-relevance`` with ``embedding_model``, as Ragas scores it (answer relevancy).

Each judge of the panel writes N questions the answer would answer, from the answer alone,
and says whether the answer is noncommittal (:mod:`.prompts`, :mod:`.verdicts`); the embedding
model then embeds the case's question with that judge's questions, in one call, and the
judge's score is :func:`~pytest_llmbench.scoring.rag.questions_score` of the similarities.
Each judge's score is its own, so a panel aggregates them as it does every RAG metric's (mean
by default) and its agreement measures how alike the judges' questions came out. The calls go
through the judge's ``complete`` and the engine's ``embed``: paced, cached and budgeted.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ..models import Completion, ItemError
from ..scoring import RelevanceSpec
from .panel import CompleteFn, GradedAssertion, JudgeCall, aggregate, ask, unchecked
from .prompts import JudgeRequest

if TYPE_CHECKING:
    from ..models import ModelProfile
    from ..scoring import Assertion
    from .answer_view import AnswerView, JudgedEntry
    from .panel import PanelForm

__all__ = ["RelevanceSpec", "grade_answer_relevance", "grade_relevance"]

#: One embedding call: the texts -> a completion whose text is the vectors, as JSON.
EmbedFn = Callable[[Sequence[str]], Awaitable[Completion]]


async def grade_answer_relevance(
    entry: JudgedEntry, view: AnswerView, form: PanelForm
) -> GradedAssertion:
    """The kind's grading: with ``embedding_model``, Ragas' way (:func:`grade_relevance`, the
    embedding model last of ``entry.judges``, put there at collection); without, a panel
    scoring relevance itself."""
    from .panel_kinds import grade_by_panel, judged_request

    spec = entry.spec
    if not isinstance(spec, RelevanceSpec):
        return await grade_by_panel(entry, view, form)
    request = judged_request(entry, view)
    if isinstance(request, GradedAssertion):
        return request
    *judges, embedder = entry.judges

    def embed(texts: Sequence[str]) -> Awaitable[Completion]:
        return view.embed(embedder, texts)

    return await grade_relevance(
        entry.index, entry.assertion, spec, request, judges, view.complete, embed, embedder.name
    )


async def grade_relevance(
    index: int,
    assertion: Assertion,
    spec: RelevanceSpec,
    request: JudgeRequest,
    judges: Sequence[ModelProfile],
    complete: CompleteFn,
    embed: EmbedFn,
    embedder: str,
) -> GradedAssertion:
    """Ask every judge for its questions, embed each judge's with the question, aggregate.

    ``request`` is the assertion's judge request; ``embedder`` names the embedding model in
    the reasons. A case with no question to compare with is unchecked, no judge asked.
    """
    if not (request.question or "").strip():
        return unchecked(index, assertion, "the case has no question to compare the answer's with")
    asked = replace(request, questions=spec.questions)
    calls = await asyncio.gather(
        *(_judged(index, spec, asked, judge, complete, embed, embedder) for judge in judges)
    )
    return aggregate(index, assertion, spec, asked.score_keys, tuple(calls))


async def _judged(
    index: int,
    spec: RelevanceSpec,
    request: JudgeRequest,
    judge: ModelProfile,
    complete: CompleteFn,
    embed: EmbedFn,
    embedder: str,
) -> JudgeCall:
    """One judge's questions, then their similarities: its call entry, scored or failed. The
    embedding call's tokens and cost are counted in the judge's entry."""
    call = await ask(index, spec, request, judge, complete)
    if call.error is not None or not call.details:  # failed, or no question written
        return call
    questions = [str(item["question"]) for item in call.details]
    try:
        completion = await embed([str(request.question), *questions])
    except ItemError as exc:
        return replace(call, error=f"embedding model {embedder} ({exc.kind}): {exc.message}")
    call = replace(
        call,
        usage=call.usage + completion.usage,
        cached=call.cached and completion.cached,
        batched=call.batched or completion.batched,
    )
    try:
        similarities = _similarities(completion.text, len(questions))
    except (ValueError, TypeError) as exc:  # a corrupt cache entry, vectors of two sizes
        return replace(call, error=f"embedding model {embedder}: bad embeddings: {exc}")
    return _scored(call, request, similarities)


def _similarities(text: str, count: int) -> list[float]:
    """The cosine of each of ``count`` questions' vectors to the first (the case's question)."""
    from ..scoring import cosine

    vectors = json.loads(text)
    if not isinstance(vectors, list) or len(vectors) != count + 1:
        raise ValueError(f"expected {count + 1} vectors")
    question, *generated = vectors
    return [cosine(vector, question) for vector in generated]


def _scored(call: JudgeCall, request: JudgeRequest, similarities: Sequence[float]) -> JudgeCall:
    """``call`` with its score, reason and per-question details (question, similarity)."""
    from ..scoring import GeneratedQuestion, RagScore, questions_score

    key = request.score_keys[0]
    noncommittal = bool(call.details[0]["noncommittal"])
    generated = [
        GeneratedQuestion(str(item["question"]), similarity)
        for item, similarity in zip(call.details, similarities, strict=True)
    ]
    result = questions_score(generated, noncommittal, call.reasons.get(key, ""))
    details = tuple(
        {"question": item.question, "similarity": item.similarity, "noncommittal": noncommittal}
        for item in generated
    )
    scores = {key: result.score} if isinstance(result, RagScore) else {}
    return replace(call, scores=scores, reasons={key: result.reason}, details=details)
