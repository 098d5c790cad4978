"""Select-best contests of this process: gather the answers of a case's contestants, judge them
once, and give each contestant its verdict.

A contestant's answer coroutine (:meth:`~.answer.Answerer.answer`) reaches its select-best
assertion after its model answered, and waits in :meth:`Contests.verdict` until every other
contestant of the contest has answered or failed; the contest is then judged once
(:func:`~pytest_llmbench.judging.select_best_judge.judge_contest`) and every waiting contestant gets
its verdict: 1 for the pick, 0 for the others. So the judged answers are the ones recorded.

Who is a contestant is decided at collection (:func:`contest_groups`): the eval items of a case
and repeat that carry a select-best assertion, selected in this run, not marked to skip, and
not a conversation (which has no one answer). The scheduler starts every contestant's answer
together (:class:`~.scheduler.CallScheduler`), and under xdist our scheduler sends a case's
items to one worker (:mod:`.xdist_schedule`), so no contestant waits for an answer another
process gives. A contestant whose answer fails (a provider error, a cache miss) leaves the
contest: the others are judged without it, and a contest left with one answer is unchecked.

All of this runs on the engine loop; :meth:`Contests.withdraw` is a coroutine for the calls
from the main thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import pytest

from ..scoring import LABELS, SELECT_BEST_SCORE_KEY, Contestant, SelectBestSpec, contest_seed

if TYPE_CHECKING:
    from ..judging import CompleteFn, ContestResult, GradedAssertion, JudgeCall, JudgedEntry
    from .plan import CallPlan


#: xdist's ``--dist`` modes that run all the items of a case in one process: ``load`` (ours,
#: :mod:`.xdist_schedule`, sends a case's items together), ``loadfile`` and ``loadscope`` (a
#: file's items together), ``each`` (every worker runs every item).
_KEEPS_CASES: tuple[str, ...] = ("load", "loadfile", "loadscope", "each")


def contest_refusal(config: pytest.Config) -> str | None:
    """Why select-best contests cannot be held in this process, or None: an xdist worker whose
    controller's scheduler may send a case's contestants to different workers (its mode is
    handed over by :func:`~.xdist_schedule.dist_mode`)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return None
    mode = str(workerinput.get("llmbench_dist", "load"))
    if mode in _KEEPS_CASES:
        return None
    return (
        f"select-best compares a case's contestants in one process, and --dist {mode} may "
        "send them to different xdist workers: run with --dist load (the default of -n, "
        "without --maxschedchunk), loadfile or loadscope"
    )


def contest_key(nodeid: str, repeat: int) -> str:
    """The contest of an item: its file and case (its node id without the ``[...]`` part)
    and its repeat, the same in every process and on every machine."""
    return f"{nodeid.rsplit('[', 1)[0]}::r{repeat}"


def is_contestant(plan: CallPlan) -> bool:
    """Whether ``plan`` enters a select-best contest (one on a conversation is a collection
    error)."""
    return any(isinstance(entry.spec, SelectBestSpec) for entry in plan.graded)


def contest_groups(plans: Iterable[CallPlan]) -> dict[str, tuple[str, ...]]:
    """Each contestant's node id -> every contestant of its contest (itself included), in run
    order; contests of one contestant are left out (their verdicts are unchecked)."""
    by_key: dict[str, list[str]] = {}
    for plan in plans:
        if is_contestant(plan):
            by_key.setdefault(contest_key(plan.nodeid, plan.repeat), []).append(plan.nodeid)
    return {
        nodeid: tuple(members)
        for members in by_key.values()
        if len(members) > 1
        for nodeid in members
    }


@dataclass(frozen=True)
class _Entry:
    """A contestant's answer, the question it answered, and how its judges are called."""

    plan: CallPlan
    answer: str
    question: str | None
    complete: CompleteFn


@dataclass
class _Contest:
    """One contest's answers so far, and its verdicts once judged (one per assertion)."""

    members: tuple[str, ...]
    #: :func:`contest_key` (file, case, repeat), set by the first contestant that asks
    key: str = ""
    entered: dict[str, _Entry] = field(default_factory=dict)
    gone: dict[str, str] = field(default_factory=dict)  #: contestants that failed, and why
    asked: set[tuple[str, int]] = field(default_factory=set)  #: (node id, assertion) verdicts
    all_in: asyncio.Event = field(default_factory=asyncio.Event)
    judged: dict[int, asyncio.Task[ContestResult]] = field(default_factory=dict)

    def settle(self) -> None:
        """Wake the waiting contestants once every contestant answered or failed."""
        if len(self.entered) + len(self.gone) >= len(self.members):
            self.all_in.set()


class Contests:
    """The select-best contests of this process (created with the scheduler)."""

    def __init__(
        self,
        groups: Mapping[str, tuple[str, ...]],
        refusal: str | None = None,
        incomplete: Mapping[str, str] | None = None,
    ) -> None:
        self._groups = groups
        #: contestants whose contest is not held (some contestants deselected), and why
        self._incomplete = incomplete or {}
        #: why contests cannot be held in this run (an xdist scheduler that splits cases)
        self._refusal = refusal
        self._contests: dict[tuple[str, ...], _Contest] = {}
        #: (contest, assertion) -> the contestant whose record holds the judge calls
        self._claims: dict[tuple[tuple[str, ...], int], str] = {}

    def claim(
        self, plan: CallPlan, graded: tuple[GradedAssertion, ...]
    ) -> tuple[GradedAssertion, ...]:
        """``plan``'s verdicts as its item reports them (main thread): a contest's judge calls
        stay on the first contestant whose item takes its verdict, and leave the others', so
        that they are counted once, on an item that is recorded."""
        members = self.members(plan.nodeid)
        contested = {e.index for e in plan.graded if isinstance(e.spec, SelectBestSpec)}
        if not members or not contested:
            return graded
        claimed = []
        for each in graded:
            if each.index in contested and each.calls:
                owner = self._claims.setdefault((members, each.index), plan.nodeid)
                if owner != plan.nodeid:
                    each = _unbilled(each, owner)
            claimed.append(each)
        return tuple(claimed)

    def members(self, nodeid: str) -> tuple[str, ...]:
        """The contestants of ``nodeid``'s contest, or () when it has none."""
        return () if self._refusal is not None else self._groups.get(nodeid, ())

    def _contest(self, nodeid: str) -> _Contest | None:
        members = self.members(nodeid)
        if not members:
            return None
        contest = self._contests.get(members)
        if contest is None:
            contest = self._contests[members] = _Contest(members)
        return contest

    async def withdraw(self, nodeid: str, why: str) -> None:
        """``nodeid`` has no answer to judge (its call failed, or it was cancelled)."""
        contest = self._contest(nodeid)
        if contest is None or nodeid in contest.entered or nodeid in contest.gone:
            return
        contest.gone[nodeid] = why
        contest.settle()

    async def verdict(
        self,
        plan: CallPlan,
        entry: JudgedEntry,
        answer: str,
        question: str | None,
        complete: CompleteFn,
    ) -> GradedAssertion:
        """``plan``'s verdict of the select-best assertion ``entry``, once its contest is
        judged; unchecked, saying why, when it cannot be."""
        if self._refusal is not None:
            return _unchecked(entry, self._refusal)
        if plan.nodeid in self._incomplete:
            return _unchecked(entry, self._incomplete[plan.nodeid])
        contest = self._contest(plan.nodeid)
        if contest is None:
            return _unchecked(entry, "no other contestant of this case runs in this session")
        if (plan.nodeid, entry.index) in contest.asked:  # pytest-rerunfailures ran it again
            return await _again(contest, plan, entry)
        if plan.nodeid in contest.gone:  # run again after a first attempt that failed
            why = contest.gone[plan.nodeid]
            return _unchecked(entry, f"its first attempt failed ({why}): judged without it")
        contest.asked.add((plan.nodeid, entry.index))
        contest.key = contest_key(plan.nodeid, plan.repeat)  # the same for every contestant
        if plan.nodeid not in contest.gone:
            contest.entered.setdefault(plan.nodeid, _Entry(plan, answer, question, complete))
        contest.settle()
        await contest.all_in.wait()
        task = contest.judged.get(entry.index)
        if task is None:
            task = contest.judged[entry.index] = asyncio.ensure_future(_judge(contest, entry))
        result = await asyncio.shield(task)
        return _member_verdict(contest, plan, entry, result)


async def _judge(contest: _Contest, entry: JudgedEntry) -> ContestResult:
    """Judge the answers of the contestants that answered. The first of them (in run order)
    hosts the contest: the judges see the question it was asked (prompt variants word it
    differently), and are called through its ``complete``."""
    from ..judging import ContestResult, judge_contest

    answered = [nodeid for nodeid in contest.members if nodeid in contest.entered]
    spec = entry.spec
    assert isinstance(spec, SelectBestSpec)
    seed = contest_seed(spec, contest.key)
    if len(answered) < 2:
        why = "; ".join(f"{_short(n)}: {reason}" for n, reason in sorted(contest.gone.items()))
        return ContestResult(seed, (), None, f"only one contestant answered ({why})")
    entries = [contest.entered[nodeid] for nodeid in answered]
    contestants = [Contestant(e.plan.label, e.answer) for e in entries]
    host = entries[0]
    return await judge_contest(
        entry.index,
        entry.assertion,
        spec,
        host.question,
        contestants,
        seed,
        entry.judges,
        host.complete,
    )


async def _again(contest: _Contest, plan: CallPlan, entry: JudgedEntry) -> GradedAssertion:
    """A contestant run again (pytest-rerunfailures): the contest was judged once, on its
    first answer, and its verdict stands (a rerun cannot turn a lost contest into a pass, nor
    into an unchecked one); the judges' calls are not counted again."""
    task = contest.judged.get(entry.index)
    if task is None:
        return _unchecked(entry, "the contest of this item's first attempt was not judged")
    result = await asyncio.shield(task)
    graded = _member_verdict(contest, plan, entry, result)
    if graded.verdict is None:
        return graded
    reason = f"{graded.verdict.reason} (judged on this item's first attempt)"
    verdict = replace(graded.verdict, reason=reason)
    return replace(graded, verdict=verdict, calls=(), judged_elsewhere=graded.judges)


def _member_verdict(
    contest: _Contest, plan: CallPlan, entry: JudgedEntry, result: ContestResult
) -> GradedAssertion:
    """One contestant's verdict from its contest's result, with the judge calls (claimed by
    one contestant's record: :meth:`Contests.claim`)."""
    from ..judging import GradedAssertion
    from ..scoring import Verdict

    calls = result.calls  # every contestant's, until the first to report claims them
    if result.failed:  # every judge failed: no verdict, every contestant errors
        return GradedAssertion(entry.index, None, calls)
    if result.picked is not None and plan.label not in result.shown:
        return _unchecked(entry, "its answer was not among those judged")
    shown = ", ".join(f"{LABELS[i]}={label}" for i, label in enumerate(result.shown))
    if result.picked is None:
        why = f"select-best decided nothing: {result.reason}"
        if shown:
            why += f" (shown {shown}; seed {result.seed})"
        return _unchecked(entry, why, calls)
    won = result.picked == plan.label
    score = 1.0 if won else 0.0
    spec = entry.spec
    assert isinstance(spec, SelectBestSpec)
    passed = score >= spec.threshold
    said = "picked" if won else f"not picked: {result.picked} was"
    reason = (
        f"select-best {said}, of {len(result.shown)} answers (shown {shown}; seed "
        f"{result.seed}); {result.reason}"
    )
    verdict = Verdict(entry.assertion.type, passed, score, entry.assertion.weight, reason)
    return GradedAssertion(entry.index, verdict, calls, {SELECT_BEST_SCORE_KEY: score})


def _unbilled(graded: GradedAssertion, owner: str) -> GradedAssertion:
    """A contestant's verdict without the contest's judge calls, recorded on ``owner``'s."""
    if graded.verdict is not None:
        return replace(graded, calls=(), judged_elsewhere=graded.judges)
    errors = "; ".join(f"{call.judge}: {call.error}" for call in graded.calls)
    why = f"every judge of the contest failed ({errors}; recorded on {_short(owner)})"
    return replace(graded, calls=(), failed_elsewhere=why)


def _unchecked(entry: JudgedEntry, why: str, calls: tuple[JudgeCall, ...] = ()) -> GradedAssertion:
    from ..judging import unchecked

    return unchecked(entry.index, entry.assertion, why, calls)


def _short(nodeid: str) -> str:
    """An item's name without its file."""
    return nodeid.rpartition("::")[2]
