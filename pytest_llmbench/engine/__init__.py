"""Engine: every model call of a process, from a frozen plan to an answer.

Collection builds one :class:`~.plan.CallPlan` per item. Before each item runs,
:mod:`.prefetch` hands the next plans to the :class:`~.scheduler.CallScheduler` (look-ahead,
take, cancel), which starts their answers on the background loop of :mod:`.event_loop`;
:mod:`.answer` is the one call path (optimizer rewrite, plain call, agent loop or
:mod:`.solver`, then the judges of :mod:`.grading`), and every call waits its turn in
:mod:`.pacing` (lanes and rate limits of :mod:`.ratelimit`, the response :mod:`.cache`, the
budget). :mod:`.runtime` holds the per-process pieces (made and closed by :mod:`.lifetime`),
:mod:`.targets` resolves where a profile is called, :mod:`.xdist_schedule` keeps xdist workers'
queues deep enough, :mod:`.estimate` is ``--estimate-cost`` and :mod:`.preflight` is
``--check-models``. Nothing here imports the pytest
item: the engine takes plans, and gives back :class:`~.request.Answer` values.

This is the stage's face: the names below are what other stages and the pytest shell import from
it (tests/test_layout.py checks that they import nothing else of it). Each is imported from its
module when first asked for, so that importing the stage loads nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import face_attribute

if TYPE_CHECKING:
    from .batching import batch_progress, progress_words
    from .cache import CacheError, EntryInfo, ResponseCache, cache_path
    from .call_spans import item_trace
    from .contests import contest_groups, contest_key, is_contestant
    from .conversation_calls import reply_messages
    from .estimate import CostEstimator
    from .kinds import CaseKind, Checking, Settling, kind_of
    from .kinds.agent_kind import SandboxWarning
    from .kinds.case_kind import call_measures
    from .kinds.talk import conversation_entries, conversation_entry
    from .lifetime import EVAL_FILES_KEY, RUNTIME_KEY, eval_files_collected, get_runtime, shutdown
    from .logger_registry import guard_logger_registry
    from .optimizer import store_path, write_log
    from .pacing import BudgetExceeded
    from .plan import (
        DESELECTED_KEY,
        PLANS_KEY,
        CallPlan,
        CollectedPlans,
        GradedSpec,
        JudgeRuling,
        JudgeRulings,
    )
    from .prefetch import Prefetcher
    from .preflight import (
        ModelChecker,
        check_options,
        check_summary,
        restrict_worker_models,
        worker_input,
    )
    from .request import Answer, ConversationRun, Reply
    from .runtime import Runtime, terminal_notice, wait_notice_s
    from .session import batch_asked, results_dir, session_state
    from .stop_early import STOP_EARLY_KEY, STOPPED_KEY, StopEarly
    from .targets import batch_lines, clients_line
    from .watch import WorkerWatch
    from .workdirs import WorkdirError, seed, take_prepared
    from .xdist_schedule import dist_mode, make_scheduler

#: Each name of the face, by the module of the stage that defines it.
_FACE: dict[str, str] = {
    "batch_progress": "batching",
    "progress_words": "batching",
    "CacheError": "cache",
    "EntryInfo": "cache",
    "ResponseCache": "cache",
    "cache_path": "cache",
    "item_trace": "call_spans",
    "contest_groups": "contests",
    "contest_key": "contests",
    "is_contestant": "contests",
    "reply_messages": "conversation_calls",
    "CostEstimator": "estimate",
    "CaseKind": "kinds",
    "Checking": "kinds",
    "Settling": "kinds",
    "kind_of": "kinds",
    "SandboxWarning": "kinds.agent_kind",
    "call_measures": "kinds.case_kind",
    "conversation_entries": "kinds.talk",
    "conversation_entry": "kinds.talk",
    "store_path": "optimizer",
    "write_log": "optimizer",
    "BudgetExceeded": "pacing",
    "CallPlan": "plan",
    "CollectedPlans": "plan",
    "DESELECTED_KEY": "plan",
    "GradedSpec": "plan",
    "JudgeRuling": "plan",
    "JudgeRulings": "plan",
    "PLANS_KEY": "plan",
    "Prefetcher": "prefetch",
    "ModelChecker": "preflight",
    "check_options": "preflight",
    "check_summary": "preflight",
    "restrict_worker_models": "preflight",
    "worker_input": "preflight",
    "Answer": "request",
    "ConversationRun": "request",
    "Reply": "request",
    "EVAL_FILES_KEY": "lifetime",
    "RUNTIME_KEY": "lifetime",
    "eval_files_collected": "lifetime",
    "Runtime": "runtime",
    "get_runtime": "lifetime",
    "shutdown": "lifetime",
    "guard_logger_registry": "logger_registry",
    "terminal_notice": "runtime",
    "wait_notice_s": "runtime",
    "batch_asked": "session",
    "results_dir": "session",
    "session_state": "session",
    "STOP_EARLY_KEY": "stop_early",
    "STOPPED_KEY": "stop_early",
    "StopEarly": "stop_early",
    "batch_lines": "targets",
    "clients_line": "targets",
    "WorkerWatch": "watch",
    "WorkdirError": "workdirs",
    "seed": "workdirs",
    "take_prepared": "workdirs",
    "dist_mode": "xdist_schedule",
    "make_scheduler": "xdist_schedule",
}

__all__ = [
    "DESELECTED_KEY",
    "EVAL_FILES_KEY",
    "PLANS_KEY",
    "RUNTIME_KEY",
    "STOPPED_KEY",
    "STOP_EARLY_KEY",
    "Answer",
    "BudgetExceeded",
    "CacheError",
    "CallPlan",
    "CaseKind",
    "Checking",
    "CollectedPlans",
    "ConversationRun",
    "CostEstimator",
    "EntryInfo",
    "GradedSpec",
    "JudgeRuling",
    "JudgeRulings",
    "ModelChecker",
    "Prefetcher",
    "Reply",
    "ResponseCache",
    "Runtime",
    "SandboxWarning",
    "Settling",
    "StopEarly",
    "WorkdirError",
    "WorkerWatch",
    "batch_asked",
    "batch_lines",
    "batch_progress",
    "cache_path",
    "call_measures",
    "check_options",
    "check_summary",
    "clients_line",
    "contest_groups",
    "contest_key",
    "conversation_entries",
    "conversation_entry",
    "dist_mode",
    "eval_files_collected",
    "get_runtime",
    "guard_logger_registry",
    "is_contestant",
    "item_trace",
    "kind_of",
    "make_scheduler",
    "progress_words",
    "reply_messages",
    "restrict_worker_models",
    "results_dir",
    "seed",
    "session_state",
    "shutdown",
    "store_path",
    "take_prepared",
    "terminal_notice",
    "wait_notice_s",
    "worker_input",
    "write_log",
]


def __getattr__(name: str) -> Any:
    """A name of the face, imported from its module on first use."""
    return face_attribute(globals(), _FACE, name)
