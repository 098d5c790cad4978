"""How well a judge agrees with people: Cohen's kappa, true and false positive rates, the
confusion matrix and the judge's leaning, per judge group, each with a 95% interval and n.

A *pair* is one person's label (pass or fail; ``unsure`` is counted apart, never paired) beside
the machine's verdict on the same answer. Pairs come from the labels alone: each label keeps the
verdict it was given beside (:class:`pytest_llmbench.results.reviews.MachineVerdict`), so labels
made on last month's run calibrate the judge as well as today's. A label on a judged assertion
pairs with that assertion's verdict; a label on a whole item pairs with the item's verdict when
the item was decided by one judged assertion only (its other checks unchecked or absent), since
then both answer the same question; otherwise it calibrates nothing and is counted as such.

"Positive" is *pass*: the true positive rate is the share of answers people passed that the
judge passed, the false positive rate the share people failed that the judge passed. A judge
that passes more than people do is *lenient*, fewer *strict*: decided by the off-diagonal cells
(judge pass / person fail against judge fail / person pass) with a two-sided sign test at 5%.

Pure code (no numpy): it runs in the viewer, the CLI and at session start.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..reviews import Labels, Review
from .intervals import wilson

_Z95 = 1.959963984540054


@dataclass(frozen=True, order=True)
class JudgeGroup:
    """What a calibration is of: the judges (model ids), the assertion type and its criterion
    (rubric). A change of any of them is another judge."""

    judges: tuple[str, ...]
    type: str
    criterion: str | None = None

    def label(self, width: int = 60) -> str:
        """``gpt-4o-mini llm-rubric "Is polite..."``, the criterion cut to ``width``."""
        who = "+".join(self.judges) or "?"
        if self.criterion is None:
            return f"{who} {self.type}"
        text = " ".join(self.criterion.split())
        text = text if len(text) <= width else text[: width - 1] + "…"
        return f'{who} {self.type} "{text}"'


@dataclass(frozen=True)
class LabelPair:
    """A person's verdict beside the judge's on one answer."""

    group: JudgeGroup
    human: bool  #: the person passed it
    judge: bool  #: the judge passed it
    where: str = ""  #: the label's node id (for listing disagreements)


@dataclass(frozen=True)
class Confusion:
    """Counts, pass being positive: ``tp`` both passed, ``fp`` the judge passed what the
    person failed, ``fn`` the judge failed what the person passed, ``tn`` both failed."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn


@dataclass(frozen=True)
class Calibration:
    """One judge group's agreement with people."""

    group: JudgeGroup
    n: int  #: labels paired (pass or fail)
    unsure: int  #: labels of ``unsure`` on this group's verdicts (not paired)
    confusion: Confusion
    agreement: float | None  #: share of pairs where judge and person agree
    kappa: float | None  #: Cohen's kappa; None when undefined (no pair, or chance agreement 1)
    kappa_ci: tuple[float, float] | None  #: 95%, large-sample (Fleiss, Cohen & Everitt 1969)
    tpr: float | None  #: judge passes among what people passed (None: people passed none)
    tpr_ci: tuple[float, float] | None  #: Wilson 95%
    fpr: float | None  #: judge passes among what people failed (None: people failed none)
    fpr_ci: tuple[float, float] | None  #: Wilson 95%
    leaning: str  #: ``lenient``, ``strict`` or ``balanced`` (no significant lean)


def cohen_kappa(confusion: Confusion) -> float | None:
    """Cohen's kappa of a 2x2 table; None when it is undefined (empty, or one category only
    on both sides, where chance agreement is 1). Equals scikit-learn's ``cohen_kappa_score``."""
    n = confusion.n
    if n == 0:
        return None
    observed = (confusion.tp + confusion.tn) / n
    chance = _chance(confusion)
    if chance >= 1.0:
        return None
    return (observed - chance) / (1.0 - chance)


def _chance(c: Confusion) -> float:
    n = c.n
    judge_pass, human_pass = (c.tp + c.fp) / n, (c.tp + c.fn) / n
    return judge_pass * human_pass + (1 - judge_pass) * (1 - human_pass)


def kappa_interval(confusion: Confusion) -> tuple[float, float] | None:
    """95% interval of kappa from its large-sample variance (Fleiss, Cohen & Everitt, 1969),
    clipped to [-1, 1]; None when kappa is undefined."""
    kappa = cohen_kappa(confusion)
    if kappa is None:
        return None
    n = confusion.n
    # cells p[i][j]: i the judge's category, j the person's (0 pass, 1 fail)
    p = [[confusion.tp / n, confusion.fp / n], [confusion.fn / n, confusion.tn / n]]
    rows = [p[0][0] + p[0][1], p[1][0] + p[1][1]]
    cols = [p[0][0] + p[1][0], p[0][1] + p[1][1]]
    chance = _chance(confusion)
    diagonal = sum(p[i][i] * (1 - (rows[i] + cols[i]) * (1 - kappa)) ** 2 for i in range(2))
    off = (1 - kappa) ** 2 * sum(
        p[i][j] * (cols[i] + rows[j]) ** 2 for i in range(2) for j in range(2) if i != j
    )
    variance = (diagonal + off - (kappa - chance * (1 - kappa)) ** 2) / (n * (1 - chance) ** 2)
    half = _Z95 * math.sqrt(max(variance, 0.0))
    return max(-1.0, kappa - half), min(1.0, kappa + half)


def leaning(confusion: Confusion) -> str:
    """``lenient`` when the judge passes significantly more of what people fail than it fails
    of what they pass (exact two-sided sign test on fp against fn, 5%), ``strict`` the other
    way, else ``balanced``."""
    discordant = confusion.fp + confusion.fn
    if discordant == 0:
        return "balanced"
    low = min(confusion.fp, confusion.fn)
    tail = sum(math.comb(discordant, k) for k in range(low + 1)) / 2**discordant
    if min(1.0, 2 * tail) >= 0.05:
        return "balanced"
    return "lenient" if confusion.fp > confusion.fn else "strict"


def calibrate_group(group: JudgeGroup, pairs: Iterable[LabelPair], unsure: int = 0) -> Calibration:
    """One group's calibration from its pairs."""
    counts = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    for pair in pairs:
        cell = ("t" if pair.judge == pair.human else "f") + ("p" if pair.judge else "n")
        counts[cell] += 1
    confusion = Confusion(**counts)
    n = confusion.n
    positives, negatives = confusion.tp + confusion.fn, confusion.fp + confusion.tn
    return Calibration(
        group=group,
        n=n,
        unsure=unsure,
        confusion=confusion,
        agreement=(confusion.tp + confusion.tn) / n if n else None,
        kappa=cohen_kappa(confusion),
        kappa_ci=kappa_interval(confusion),
        tpr=confusion.tp / positives if positives else None,
        tpr_ci=wilson(confusion.tp / positives, positives) if positives else None,
        fpr=confusion.fp / negatives if negatives else None,
        fpr_ci=wilson(confusion.fp / negatives, negatives) if negatives else None,
        leaning=leaning(confusion),
    )


def label_pairs(reviews: Iterable[Review]) -> tuple[list[LabelPair], dict[JudgeGroup, int]]:
    """The pairs ``reviews`` give (labels with a judged machine verdict, pass or fail on both
    sides), and the ``unsure`` labels per group."""
    pairs: list[LabelPair] = []
    unsure: dict[JudgeGroup, int] = {}
    judged = [(r, g) for r in reviews if (g := review_group(r)) is not None]
    # One answer counts once per group: a label on its judged assertion wins over a label on
    # the whole item that the same assertion decided.
    on_assertion = {_answer_of(r, g) for r, g in judged if r.key.assertion is not None}
    for review, group in judged:
        if review.key.assertion is None and _answer_of(review, group) in on_assertion:
            continue
        machine = review.machine
        assert machine is not None
        if review.label == "unsure":
            unsure[group] = unsure.get(group, 0) + 1
        elif review.label in ("pass", "fail") and machine.passed is not None:
            pairs.append(LabelPair(group, review.label == "pass", machine.passed, review.nodeid))
    return pairs, unsure


def review_group(review: Review) -> JudgeGroup | None:
    """The judge group a label's machine verdict belongs to; None when no judge decided it
    (no snapshot, or an item not decided by one judged assertion)."""
    machine = review.machine
    if machine is None or not machine.judges or machine.type is None:
        return None
    return JudgeGroup(machine.judges, machine.type, machine.criterion)


def _answer_of(review: Review, group: JudgeGroup) -> tuple[str, str, int, str, JudgeGroup]:
    key = review.key
    return key.case, key.model, key.repeat, review.answer, group


def calibrate(labels: Labels | Iterable[Review]) -> dict[JudgeGroup, Calibration]:
    """Every judge group's calibration over ``labels``, sorted by group."""
    reviews = labels.current.values() if isinstance(labels, Labels) else labels
    pairs, unsure = label_pairs(reviews)
    grouped: dict[JudgeGroup, list[LabelPair]] = {}
    for pair in pairs:
        grouped.setdefault(pair.group, []).append(pair)
    # Not ``sorted(groups)``: a criterion of None beside text for the same judges and type
    # (a per-turn verdict without one) cannot be compared.
    groups = sorted(set(grouped) | set(unsure), key=group_order)
    return {g: calibrate_group(g, grouped.get(g, ()), unsure.get(g, 0)) for g in groups}


def group_order(group: JudgeGroup) -> tuple[tuple[str, ...], str, bool, str]:
    """A sort key of judge groups (``sorted(groups)`` fails on a criterion of None beside
    text for the same judges and type)."""
    return group.judges, group.type, group.criterion is not None, group.criterion or ""


def calibration_row(calibration: Calibration) -> Mapping[str, object]:
    """A calibration as one flat row (CSV, JSON): the group, n, kappa and its interval, the
    rates and theirs, the four cells and the leaning."""
    c = calibration
    return {
        "judges": "+".join(c.group.judges),
        "type": c.group.type,
        "criterion": c.group.criterion,
        "n": c.n,
        "unsure": c.unsure,
        "kappa": c.kappa,
        "kappa_low": c.kappa_ci[0] if c.kappa_ci else None,
        "kappa_high": c.kappa_ci[1] if c.kappa_ci else None,
        "agreement": c.agreement,
        "tpr": c.tpr,
        "tpr_low": c.tpr_ci[0] if c.tpr_ci else None,
        "tpr_high": c.tpr_ci[1] if c.tpr_ci else None,
        "fpr": c.fpr,
        "fpr_low": c.fpr_ci[0] if c.fpr_ci else None,
        "fpr_high": c.fpr_ci[1] if c.fpr_ci else None,
        "tp": c.confusion.tp,
        "fp": c.confusion.fp,
        "fn": c.confusion.fn,
        "tn": c.confusion.tn,
        "leaning": c.leaning,
    }
