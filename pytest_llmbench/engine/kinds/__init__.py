"""Case kinds as one protocol: each kind is one module that owns, for its items, how they are
answered, how their verdicts are made and which record fields they fill.

:class:`CaseKind` (:mod:`.case_kind`) is the protocol; :data:`CASE_KINDS` is the one table, by the
name a plan carries (:attr:`~..plan.CallPlan.kind`, read by :func:`~..plan.plan_kind` at
collection). The :class:`~..answer.Answerer`, the ``EvalItem`` and the record look the kind up
here (:func:`kind_of`) and never branch on it: a new kind is one module and one line below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plan import plan_kind
from .agent_conversation_kind import AgentConversationKind
from .agent_kind import AgentKind
from .case_kind import CaseKind, Checking, Engine, KindCall, KindResult, Settling
from .loglikelihood_kind import LoglikelihoodKind
from .plain_kind import PlainKind
from .simulated_user_kind import SimulatedUserKind
from .solver_kind import SolverKind
from .turns_kind import TurnsKind

if TYPE_CHECKING:
    from ..plan import CallPlan

__all__ = [
    "CASE_KINDS",
    "CaseKind",
    "Checking",
    "Engine",
    "KindCall",
    "KindResult",
    "Settling",
    "kind_of",
    "plan_kind",
]

#: Every case kind, by name.
CASE_KINDS: dict[str, CaseKind] = {
    "plain": PlainKind(),
    "turns": TurnsKind(),
    "simulated_user": SimulatedUserKind(),
    "agent": AgentKind(),
    "agent_conversation": AgentConversationKind(),
    "solver": SolverKind(),
    "loglikelihood": LoglikelihoodKind(),
}


def kind_of(plan: CallPlan) -> CaseKind:
    """``plan``'s case kind."""
    return CASE_KINDS[plan.kind]
