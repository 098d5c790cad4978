"""What one eval item asks of the engine: a frozen :class:`CallPlan`, built at collection.

The engine (scheduler, answer, pacing, estimate, stream sample) reads plans, never pytest
items: a plan holds everything an item's call needs (case, model, variant, repeat, its judged
assertions with their panels, the helper models, the file's agent and solver settings), and
nothing of pytest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..spec import PLAIN, Variant

if TYPE_CHECKING:
    from ..models import ModelProfile, ThinkingRule
    from ..scoring import Assertion, EmbeddingSpec, JudgeSpec
    from ..spec import AgentSpec, EvalCase, FunctionTools

#: Answer length assumed when a case gives neither expected_output_tokens nor max_tokens.
DEFAULT_OUTPUT_TOKENS = 256


@dataclass(frozen=True)
class GradedSpec:
    """A judged assertion of a case: its index, the assertion, its settings and its panel."""

    index: int
    assertion: Assertion
    spec: JudgeSpec | EmbeddingSpec
    judges: tuple[ModelProfile, ...]  #: the panel, or the one embedding model


#: A judge group as the judge gate names it: the judges that decided (sorted, failed ones out),
#: the assertion type as written and its criterion (the same as the results' ``JudgeGroup``).
JudgeKey = tuple[tuple[str, ...], str, "str | None"]


@dataclass(frozen=True)
class JudgeRuling:
    """The judge gate's decision on one judge group, for the items of one eval file."""

    decision: str  #: ``ok``, ``demoted``, ``failing``, ``too_few_labels`` or ``kappa_undefined``
    reason: str = ""  #: a demoted verdict's reason (the judge's kappa against the gate)


#: A judge group without labels under a gate: nothing to gate it on.
NO_LABELS = JudgeRuling("too_few_labels")


@dataclass(frozen=True)
class JudgeRulings:
    """The judge gate of one eval file's items, as plain data: the ruling per judge group
    with labels (computed by the results stage at collection); a group without is
    :data:`NO_LABELS`."""

    rulings: Mapping[JudgeKey, JudgeRuling] = field(default_factory=dict)

    def ruling(self, key: JudgeKey) -> JudgeRuling:
        return self.rulings.get(key, NO_LABELS)


@dataclass(frozen=True)
class CallPlan:
    """One item's call: one case x model x variant x repeat of an eval file."""

    nodeid: str  #: the pytest node id of the item
    suite: str  #: the eval file's suite name
    path: Path  #: the eval file
    case: EvalCase
    model: ModelProfile  #: the evaluated model
    repeat: int  #: 0-based
    variant: Variant = PLAIN
    #: the case's model-graded assertions with their judge panels (none under --latency-only)
    graded: tuple[GradedSpec, ...] = ()
    agent: AgentSpec | None = None  #: the file's agent settings (``kind: agent``)
    solver: str | None = None  #: the file's ``module:function`` that answers the case
    parallel_safe: bool = True  #: the file's calls may overlap
    #: a second model reading free-text replies of a shimmed agent (``tool_shim_model``)
    shim_interpreter: ModelProfile | None = None
    #: the model that rewrites the prompt of an optimized variant
    optimizer: ModelProfile | None = None
    latency_only: bool = False  #: ``--latency-only``: the answer is measured, not scored
    #: the model playing the user of a ``simulated_user:`` case
    user_sim: ModelProfile | None = None
    #: the file's function definitions offered to the model (a plain file's ``tools:``)
    functions: FunctionTools | None = None
    #: the case kind that answers, scores and records the item (:mod:`.kinds`): given as the
    #: file's ``kind:`` (or left out), stored as the name :func:`plan_kind` reads from it
    kind: str = ""
    #: the file's ``thinking:`` rule as written (None: not given); :attr:`thinking_rule` is
    #: the one a reply is read by
    thinking: ThinkingRule | None = None
    #: the judge gate's rulings under the file's gate; None: no gate
    judge_gate: JudgeRulings | None = None

    def __post_init__(self) -> None:
        # Frozen: the kind is resolved once, here, at collection.
        object.__setattr__(self, "kind", plan_kind(self.kind, self))

    @property
    def base_dir(self) -> Path:
        """The eval file's folder: relative paths of the case resolve from it."""
        return self.path.parent

    @property
    def label(self) -> str:
        """The contestant results rank: the model name with the variant's suffixes."""
        return self.variant.label(self.model.name)

    @property
    def call_params(self) -> dict[str, Any]:
        """The parameters sent on top of the profile's: the case's, then the variant's (its
        temperature, and its effort as the model takes one: :mod:`~..models.providers.effort`)."""
        params = dict(self.case.model_params)
        if self.variant.temperature is not None:
            params["temperature"] = self.variant.temperature
        if self.variant.effort is not None:
            from ..models import effort_params

            base = {**self.model.params, **params}
            params.update(effort_params(self.model, self.variant.effort, base))
        return params

    @property
    def thinking_rule(self) -> ThinkingRule:
        """How the evaluated model's replies are read: the file's ``thinking:`` keys over its
        profile's, over the defaults."""
        from ..models import merged_rule

        return merged_rule(self.model.thinking, self.thinking)

    @property
    def tool_params(self) -> dict[str, Any]:
        """``tools`` and ``tool_choice`` sent with the call (none without function definitions);
        in the cache key, not in the record's ``params``."""
        return {} if self.functions is None else self.functions.request_params()

    @property
    def params(self) -> dict[str, Any]:
        """The model parameters of this call: the profile's, the case's, the variant's."""
        return {**self.model.params, **self.call_params}

    @property
    def judge_profiles(self) -> tuple[ModelProfile, ...]:
        """Every judge and helper model this call asks, once each."""
        seen = {judge.name: judge for graded in self.graded for judge in graded.judges}
        # Helpers are called like judges: their own lanes and targets.
        optimizer = self.optimizer if self.variant.optimized else None
        for helper in (self.shim_interpreter, optimizer, self.user_sim):
            if helper is not None:
                seen.setdefault(helper.name, helper)
        return tuple(seen.values())

    @property
    def needs_workdir(self) -> bool:
        """Whether the item's setup makes a workdir: seeded files, folders or an agent."""
        return bool(self.case.files or self.case.include_dirs or self.agent is not None)

    @property
    def prefetchable(self) -> bool:
        """Whether the call may start before the item runs: not for parallel_safe: false
        files. An agent's loop may: its workdir is then made ahead (:mod:`.workdirs`)."""
        return self.parallel_safe

    @property
    def answer_token_budget(self) -> int:
        """Tokens the answer may take: ``expected_output_tokens``, else ``max_tokens`` (case
        over profile), else :data:`DEFAULT_OUTPUT_TOKENS`."""
        budget = self.case.expected_output_tokens or self.params.get("max_tokens")
        return int(budget or DEFAULT_OUTPUT_TOKENS)


#: The file-level ``kind:`` values whose case kind the plan's fields decide.
_FIELD_DECIDED = ("", "completion", "agent")


def plan_kind(file_kind: str, plan: CallPlan) -> str:
    """The name of ``plan``'s case kind (a key of :data:`.kinds.CASE_KINDS`): a file ``kind:``
    other than ``completion`` and ``agent`` names it; else the file's agent settings (an
    agent's conversation when the case is one), its ``solver``, the case's ``loglikelihood``,
    ``simulated_user`` or ``turns``, in that order, else ``plain``."""
    if file_kind not in _FIELD_DECIDED:
        return file_kind
    case = plan.case
    if plan.agent is not None:
        return "agent_conversation" if case.conversational else "agent"
    if plan.solver is not None:
        return "solver"
    if case.loglikelihood is not None:
        return "loglikelihood"
    if case.simulated_user is not None:
        return "simulated_user"
    return "turns" if case.turns else "plain"


@dataclass(frozen=True)
class CollectedPlans:
    """The plans of the items this process runs, stashed by the shell at collection finish."""

    #: every eval item's plan, in run order
    plans: tuple[CallPlan, ...] = ()
    #: the node ids of every item of this process (eval or not), in run order
    order: tuple[str, ...] = ()
    #: the plans whose call may start before their item runs, by node id: not serial, no
    #: agent, no ``skip`` marker and no ``skipif`` marker that may skip
    prefetchable: Mapping[str, CallPlan] = field(default_factory=dict)
    #: each select-best contestant's node id -> the contestants of its contest, in run order
    #: (:func:`~pytest_llmbench.engine.contests.contest_groups`; items marked to skip left out)
    contests: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: each contestant whose contest is not held, as some of its contestants were deselected
    #: -> why (its verdict is unchecked, saying so)
    incomplete: Mapping[str, str] = field(default_factory=dict)


PLANS_KEY = pytest.StashKey[CollectedPlans]()
#: The items deselected from the run (``pytest_deselected``), for the select-best contests.
DESELECTED_KEY = pytest.StashKey[list[pytest.Item]]()
