"""``--stop-early``: skip the repeats of a case once its verdict is settled.

:class:`StopEarly` is a plugin of every process that runs eval items. It keeps, per case (eval
file, case id, model and variant: the repeats of one item), the outcomes of the repeats
reported so far (``pytest_runtest_logreport``: the record's ``passed``, ``failed`` or
``error``). Before a repeat's setup it asks the stop rule whether the case's verdict is settled
(:mod:`~pytest_llmbench.results.stats.stopping`, handed in by the shell: this stage does not
import results) and, if so, skips the item: ``stopped early: pass settled after 3 of 10
repeats (exact)``; its record says ``stopped_early`` (:data:`STOPPED_KEY`).

A repeat whose call started ahead would be paid for even when it is then skipped, so the
:class:`~.prefetch.Prefetcher` asks :meth:`StopEarly.may_start` first: a repeat past the
rule's floor waits until every earlier repeat of its case in this process is scored, while
other cases' calls fill the look-ahead. Under xdist every repeat of a case goes to one worker
(:mod:`.xdist_schedule`), so each process decides alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import pytest

from .lifetime import eval_files_collected

if TYPE_CHECKING:
    from .plan import CallPlan

#: An item skipped by early stopping: the reason it was skipped with.
STOPPED_KEY = pytest.StashKey[str]()
#: The process's :class:`StopEarly` plugin, when ``--stop-early`` is on.
STOP_EARLY_KEY = pytest.StashKey["StopEarly"]()

CaseId = tuple[str, str, str]  # (eval file, case id, model label with its variant)


class StopRule(Protocol):
    """When a case's repeats stop (:class:`~pytest_llmbench.results.stats.stopping.StopRule`)."""

    @property
    def planned(self) -> int:
        """The repeats of each case, N."""

    @property
    def min_repeats(self) -> int:
        """Answered repeats every case takes before it may stop."""

    @property
    def name(self) -> str:
        """How it decides, in words: ``exact`` or ``95% predictive``."""

    def __call__(self, passed: int, failed: int, errors: int) -> str | None:
        """``"pass"``/``"fail"`` once settled, else None."""


@dataclass
class _Tally:
    """What the reported repeats of one case gave."""

    passed: int = 0
    failed: int = 0
    errors: int = 0
    #: the repeats reported (any outcome)
    reported: set[int] = field(default_factory=set)
    #: this process's repeats of the case
    present: set[int] = field(default_factory=set)

    @property
    def taken(self) -> int:
        return self.passed + self.failed + self.errors


def case_of(plan: CallPlan) -> CaseId:
    """The case whose repeats ``plan`` is one of."""
    return (str(plan.path), plan.case.id, plan.label)


class StopEarly:
    """Tallies each case's repeats and skips those its settled verdict makes useless."""

    def __init__(self, config: pytest.Config, rule: StopRule) -> None:
        self.config = config
        self.rule = rule
        self._plans: dict[str, CallPlan] = {}
        self._tallies: dict[CaseId, _Tally] = {}
        config.stash[STOP_EARLY_KEY] = self

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Run the repeats in waves: every case's first repeat, then every case's second, and
        so on (each in collection order). A repeat past the floor starts once its case's
        earlier repeats are scored; in case order, the next case's repeats would wait on the
        one running now, one call (under ``--batch``: one batch) at a time. In waves, a whole
        wave's calls start together: one batch per wave under ``--batch``. The same order in
        every process (xdist's workers compare their collections)."""
        items.sort(key=_repeat_of)  # stable: collection order within each wave

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Learn this process's repeats from the plans the shell stashed."""
        if not eval_files_collected(self.config):
            return
        from .plan import PLANS_KEY, CollectedPlans

        self.track(self.config.stash.get(PLANS_KEY, CollectedPlans()).plans)

    def track(self, plans: Iterable[CallPlan]) -> None:
        """Count ``plans`` as this process's repeats."""
        for plan in plans:
            self._plans[plan.nodeid] = plan
            self._tally(plan).present.add(plan.repeat)

    def _tally(self, plan: CallPlan) -> _Tally:
        key = case_of(plan)
        tally = self._tallies.get(key)
        if tally is None:
            tally = self._tallies[key] = _Tally()
        return tally

    def verdict(self, plan: CallPlan) -> str | None:
        """``"pass"``/``"fail"`` when ``plan``'s case is settled by the repeats scored so far."""
        tally = self._tallies.get(case_of(plan))
        if tally is None or tally.taken == 0:
            return None
        return self.rule(tally.passed, tally.failed, tally.errors)

    def may_start(self, plan: CallPlan) -> bool:
        """Whether ``plan``'s call may start ahead of its item: its case is not settled, and it
        is under the floor or every earlier repeat of its case here has been scored."""
        if plan.nodeid not in self._plans:
            return True
        if self.verdict(plan) is not None:
            return False
        if plan.repeat < self.rule.min_repeats:
            return True
        tally = self._tally(plan)
        return all(r in tally.reported for r in tally.present if r < plan.repeat)

    def held(self, plan: CallPlan) -> bool:
        """Whether ``plan`` waits on earlier repeats (it may start later), rather than being
        settled (it never will)."""
        return plan.nodeid in self._plans and self.verdict(plan) is None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Skip a repeat whose case's verdict is settled, saying when and how."""
        plan = self._plans.get(item.nodeid)
        if plan is None:
            return
        verdict = self.verdict(plan)
        if verdict is None:
            return
        tally = self._tally(plan)
        reason = (
            f"stopped early: {verdict} settled after {tally.taken} of {self.rule.planned} "
            f"repeats ({self.rule.name})"
        )
        item.stash[STOPPED_KEY] = reason
        pytest.skip(reason)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Count a repeat's outcome once its record is final (a rerun's attempt is not)."""
        record = getattr(report, "llmbench_record", None)
        plan = self._plans.get(report.nodeid)
        if plan is None or not isinstance(record, dict) or str(report.outcome) == "rerun":
            return
        tally = self._tally(plan)
        if plan.repeat in tally.reported:
            return
        outcome = record.get("outcome")
        if outcome == "passed":
            tally.passed += 1
        elif outcome == "failed":
            tally.failed += 1
        elif outcome == "error":
            tally.errors += 1
        tally.reported.add(plan.repeat)


def _repeat_of(item: pytest.Item) -> int:
    """An eval item's repeat (0 for any other test, which keeps its place among the first)."""
    plan = getattr(item, "plan", None)
    repeat = getattr(plan, "repeat", 0)
    return repeat if isinstance(repeat, int) else 0
