"""The judge kinds, one table: each judged assertion type registered once, by its name, with
the class of its settings, how an answer is graded (the calls: a panel, an embedding, both
orders against a baseline, a contest) and its panel's form (the prompt, the parser of a reply
and the aggregation of a panel's verdicts, :class:`~.panel.PanelForm`).

The engine (:func:`pytest_llmbench.engine.grading.grade`) looks each judged assertion's kind
up here by its type, and hands it the answer's view (:class:`~.answer_view.AnswerView`); it
never asks what class an assertion's settings are. A new judge kind is its module and one
line in :data:`JUDGE_KINDS`.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..scoring import EmbeddingSpec, JudgeSpec, ModelGradedSpec, SelectBestSpec
from .embedding import grade_similarity
from .pairwise_judge import grade_pairwise
from .panel import STANDARD_FORM, PanelForm
from .panel_kinds import grade_by_panel, grade_grader
from .relevance import grade_answer_relevance
from .select_best_judge import grade_select_best

if TYPE_CHECKING:
    from .answer_view import AnswerView, GradeFn, JudgedEntry
    from .panel import GradedAssertion


@dataclass(frozen=True)
class JudgeKind:
    """One judged assertion type, end to end."""

    name: str  #: the assertion type, as written in eval files
    #: the class of its settings (:mod:`pytest_llmbench.scoring`); a variant may be a subclass
    #: (``scope: conversation``, answer-relevance with an embedding model)
    spec: type[JudgeSpec] | type[EmbeddingSpec]
    grade: GradeFn  #: how an answer is graded: the calls made and their verdict
    form: PanelForm = STANDARD_FORM  #: its panel's prompt, parser and aggregation

    def verdict(self, entry: JudgedEntry, view: AnswerView) -> Awaitable[GradedAssertion]:
        """The verdict of ``entry`` on the answer ``view`` shows."""
        return self.grade(entry, view, self.form)


#: Every judge kind, by name, in documentation order.
JUDGE_KINDS: dict[str, JudgeKind] = {
    kind.name: kind
    for kind in (
        JudgeKind("llm-rubric", JudgeSpec, grade_by_panel),
        JudgeKind("jury", JudgeSpec, grade_by_panel),
        JudgeKind("factuality", JudgeSpec, grade_by_panel),
        JudgeKind("closed-qa", JudgeSpec, grade_by_panel),
        JudgeKind("faithfulness", JudgeSpec, grade_by_panel),
        JudgeKind("answer-relevance", JudgeSpec, grade_answer_relevance),
        JudgeKind("context-recall", JudgeSpec, grade_by_panel),
        JudgeKind("context-precision", JudgeSpec, grade_by_panel),
        JudgeKind("model-graded", ModelGradedSpec, grade_grader),
        JudgeKind("pairwise", JudgeSpec, grade_pairwise),
        JudgeKind("select-best", SelectBestSpec, grade_select_best),
        JudgeKind("similarity", EmbeddingSpec, grade_similarity),
    )
}


def judge_kind(name: str) -> JudgeKind:
    """The judge kind of the assertion type ``name``; a KeyError naming the known ones for a
    type that is not judged (collection lets none through)."""
    try:
        return JUDGE_KINDS[name]
    except KeyError:
        known = ", ".join(JUDGE_KINDS)
        raise KeyError(f"{name!r} is not a judge kind (known: {known})") from None
