"""Eval files become pytest items: one per case x model x variant x repeat.

:class:`EvalFile` loads a ``*.eval.yaml`` file (a bad one is a collection error naming file and
line), resolves the judges of its model-graded assertions, and makes one
:class:`~pytest_llmbench.item.EvalItem` per case, model, variant (prompt, temperature, optimized
prompt) and repeat, with readable ids, the case's tags as markers and its
:class:`~pytest_llmbench.engine.plan.CallPlan`. At collection finish, :func:`stash_plans` hands
the engine the plans of this process's items.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .config import allowed_paths, get_run_config
from .engine import DESELECTED_KEY, PLANS_KEY, CallPlan, CollectedPlans, GradedSpec
from .item import EvalItem, run_eval_case
from .spec import PromptVariantWarning, Variant

if TYPE_CHECKING:
    from .config import RunConfig
    from .engine import JudgeRulings
    from .models import ModelProfile
    from .spec import EvalCase, EvalFileError, LoadedEval

# Tags that can be pytest markers and `-m` words: no ':' or '(' (they end a marker's name in the
# ini `markers` lines) and no leading '_' (pytest refuses those).
_MARKER_NAME = re.compile(r"^[^\W_][\w+.\-/]*$")
_TAG_MARKERS_KEY = pytest.StashKey[set[str]]()


class EvalFile(pytest.File):
    """A ``*.eval.yaml`` file."""

    def collect(self) -> list[EvalItem]:
        from .engine import EVAL_FILES_KEY
        from .spec import EvalFileError, load_spec

        self.config.stash[EVAL_FILES_KEY] = True  # the run's one answer to "any eval file?"

        try:
            roots = (self.config.rootpath, *allowed_paths(self.config))
            with warnings.catch_warnings():
                if not _warns_at_collection(self.config):  # every worker collects; one says it
                    warnings.simplefilter("ignore", PromptVariantWarning)
                loaded = load_spec(self.path, roots)
        except EvalFileError as exc:
            raise self.CollectError(_relative(exc, self.config.rootpath)) from None
        try:
            run = get_run_config(self.config)
        except pytest.UsageError as exc:
            # Only settings from the ini file get here (the command line is checked at configure);
            # a collector cannot end the run as a usage error, but it can spare the traceback.
            raise self.CollectError(str(exc)) from None
        interpreter = self._shim_interpreter(loaded)
        judge_gate = self._judge_gate(loaded, run)
        items = []
        for case in loaded.cases[: run.limit]:  # --limit N: the file's first N cases
            graded = () if run.latency_only else self._graded(loaded, case)
            for model in run.models:
                for variant in self._variants(loaded, case, model, run):
                    for repeat in range(run.repeat):
                        plan = CallPlan(
                            nodeid=self._nodeid(case, model, variant, repeat),
                            suite=loaded.suite,
                            path=self.path,
                            case=case,
                            model=model,
                            repeat=repeat,
                            variant=variant,
                            graded=graded,
                            agent=loaded.agent,
                            solver=loaded.solver,
                            parallel_safe=loaded.parallel_safe,
                            shim_interpreter=interpreter,
                            optimizer=run.optimizer if variant.optimized else None,
                            latency_only=run.latency_only,
                            user_sim=self._user_sim(loaded, case, model),
                            functions=case.functions or loaded.functions,
                            kind=loaded.kind,
                            thinking=loaded.thinking,
                            judge_gate=judge_gate,
                        )
                        items.append(self._item(plan))
        self._check_contests(items)
        return items

    def _judge_gate(self, loaded: LoadedEval, run: RunConfig) -> JudgeRulings | None:
        """The judge gate's rulings for the file's items (``--judge-gate``, its own
        ``judge_gate:`` over it); None without a gate. A broken labels file is a collection
        error naming its line (at configure already, under ``--judge-gate``)."""
        from .results import file_gate, gate_calibrations, rulings

        gate = file_gate(run, loaded.judge_gate)
        if gate is None or run.latency_only:
            return None
        try:
            return rulings(gate_calibrations(self.config), gate)
        except pytest.UsageError as exc:
            raise self.CollectError(str(exc)) from None

    def _check_contests(self, items: Sequence[EvalItem]) -> None:
        """A select-best assertion needs two contestants (models or variants) per case, and
        one answer each: a collection error at the case's line otherwise."""
        from .scoring import SelectBestSpec, check_contestants
        from .spec import EvalFileError

        labels: dict[str, set[str]] = {}
        cases: dict[str, EvalCase] = {}
        for item in items:
            plan = item.plan
            if not any(isinstance(entry.spec, SelectBestSpec) for entry in plan.graded):
                continue
            case = plan.case
            why = None
            if case.conversational:
                why = "select-best compares one answer per contestant, and a conversation has many"
            elif not plan.parallel_safe:
                why = (
                    "select-best answers a case's contestants together, and this file is "
                    "`parallel_safe: false` (its calls one at a time)"
                )
            cases.setdefault(case.id, case)
            labels.setdefault(case.id, set()).add(plan.label)
            if why is not None:
                error = EvalFileError(self.path, case.line, f"case {case.id!r}: {why}")
                raise self.CollectError(_relative(error, self.config.rootpath))
        for case_id, found in labels.items():
            why = check_contestants(len(found))
            if why is not None:
                case = cases[case_id]
                error = EvalFileError(self.path, case.line, f"case {case_id!r}: {why}")
                raise self.CollectError(_relative(error, self.config.rootpath))

    def _variants(
        self, loaded: LoadedEval, case: EvalCase, model: ModelProfile, run: RunConfig
    ) -> list[Variant]:
        """The case's variants on ``model``: temperatures x efforts x original/optimized
        prompt."""
        from .spec import configured_temperature, temperature_variations

        temperatures: list[float | None] = [None]
        if run.temperature_variations:
            try:
                base = configured_temperature({**model.params, **case.model_params})
            except ValueError as exc:
                from .spec import EvalFileError

                error = EvalFileError(
                    self.path, case.line, f"case {case.id!r} on {model.name}: {exc}"
                )
                raise self.CollectError(_relative(error, self.config.rootpath)) from None
            temperatures = list(temperature_variations(base, run.temperature_variations))
            _warn_mixed_bases(self.config, model, base, (self.path, case.line))
        optimized = {None: [False], "only": [True], "both": [False, True]}[run.optimize_prompts]
        efforts = self._efforts(loaded, case, model, run)
        return [
            Variant(case.prompt_variant, temperature, flag, effort)
            for temperature in temperatures
            for effort in efforts
            for flag in optimized
        ]

    def _efforts(
        self, loaded: LoadedEval, case: EvalCase, model: ModelProfile, run: RunConfig
    ) -> list[str | int | None]:
        """The efforts ``case`` runs under on ``model`` (``--efforts``, else the file's
        ``effort:``; ``[None]`` without the axis): one ``model`` cannot be sent is a collection
        error at the case, naming the model and the fix."""
        from .models import EffortError, effort_params

        efforts: list[str | int | None] = list(run.efforts or loaded.efforts) or [None]
        params = {**model.params, **case.model_params}
        for effort in efforts:
            if effort is None:
                continue
            try:
                effort_params(model, effort, params)
            except EffortError as exc:
                from .spec import EvalFileError

                error = EvalFileError(self.path, case.line, f"case {case.id!r}: {exc}")
                raise self.CollectError(_relative(error, self.config.rootpath)) from None
        return efforts

    def _shim_interpreter(self, loaded: LoadedEval) -> ModelProfile | None:
        """An agent file's ``tool_shim_model``, resolved (a bad name fails collection)."""
        from .spec import EvalFileError, shim_model

        try:
            return shim_model(loaded, get_run_config(self.config).profiles)
        except EvalFileError as exc:
            raise self.CollectError(_relative(exc, self.config.rootpath)) from None

    def _user_sim(
        self, loaded: LoadedEval, case: EvalCase, model: ModelProfile
    ) -> ModelProfile | None:
        """The model playing a ``simulated_user:`` case's user (a bad name fails collection)."""
        from .spec import EvalFileError, user_sim_model

        if case.simulated_user is None:
            return None
        run = get_run_config(self.config)
        try:
            return user_sim_model(loaded, case, run.profiles, run.judges, model)
        except EvalFileError as exc:
            raise self.CollectError(_relative(exc, self.config.rootpath)) from None

    def _graded(self, loaded: LoadedEval, case: EvalCase) -> tuple[GradedSpec, ...]:
        """The case's judged assertions with their panels (a bad judge name fails collection)."""
        from .spec import EvalFileError, assertion_panel

        run = get_run_config(self.config)
        graded = []
        for index, assertion in enumerate(case.assertions):
            if assertion.graded is None:
                continue
            try:
                judges = assertion_panel(loaded, case, assertion, run.profiles, run.judges)
            except EvalFileError as exc:
                raise self.CollectError(_relative(exc, self.config.rootpath)) from None
            _warn_self_judging(self.config, run.models, judges, (self.path, case.line))
            graded.append(GradedSpec(index, assertion, assertion.graded, judges))
        return tuple(graded)

    @staticmethod
    def _name(case: EvalCase, model: ModelProfile, variant: Variant, repeat: int) -> str:
        param = "-".join([model.name, *variant.id_parts(), f"r{repeat}"])
        return f"{case.id}[{param}]"

    def _nodeid(self, case: EvalCase, model: ModelProfile, variant: Variant, repeat: int) -> str:
        """The item's node id, as pytest makes it: the file's, then the item's name."""
        return f"{self.nodeid}::{self._name(case, model, variant, repeat)}"

    def _item(self, plan: CallPlan) -> EvalItem:
        """The item of ``plan``, with the case's tags as markers."""
        name = self._name(plan.case, plan.model, plan.variant, plan.repeat)
        item = EvalItem.from_parent(self, name=name, callobj=run_eval_case, plan=plan)
        item.add_marker("llmbench")
        for tag in plan.case.tags:
            if _MARKER_NAME.match(tag):
                _register_marker(self.config, tag)
                item.add_marker(tag)
        return item


def stash_plans(session: pytest.Session) -> None:
    """Stash the plans of this process's items, in run order, for the engine: which calls may
    start before their item runs is decided here, skip markers included."""
    evals = [item for item in session.items if isinstance(item, EvalItem)]
    early = {item.nodeid: item.plan for item in evals if _prefetchable(item)}
    order = tuple(item.nodeid for item in session.items)
    contests, incomplete = _contests(session.config, evals)
    plans = tuple(item.plan for item in evals)
    stash = CollectedPlans(plans, order, early, contests, incomplete)
    session.config.stash[PLANS_KEY] = stash


def _contests(
    config: pytest.Config, evals: Sequence[EvalItem]
) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """The select-best contests of the selected items (those marked to skip left out), and
    the contestants whose contest lost some of its contestants to a deselection (``-k``,
    ``--lf``...): such a contest is not held, its verdicts unchecked."""
    from .engine import contest_groups

    selected = {item.nodeid for item in evals}
    left_out = [item for item in config.stash.get(DESELECTED_KEY, []) if isinstance(item, EvalItem)]
    every = [item.plan for item in (*evals, *left_out) if not _may_be_skipped(item)]
    contests: dict[str, tuple[str, ...]] = {}
    incomplete: dict[str, str] = {}
    for nodeid, members in contest_groups(every).items():
        if nodeid not in selected:
            continue
        missing = [member.rpartition("::")[2] for member in members if member not in selected]
        if missing:
            incomplete[nodeid] = (
                f"its contest is incomplete: {', '.join(missing)} not selected (-k, -m, --lf, "
                "--deselect); select the whole contest"
            )
        else:
            contests[nodeid] = members
    return contests, incomplete


def contest_of(item: pytest.Item) -> str | None:
    """The select-best contest ``item`` is a contestant of, or None: ``--shard`` deals a
    contest's contestants to one shard (their answers are judged together)."""
    from .engine import contest_key, is_contestant

    if isinstance(item, EvalItem) and is_contestant(item.plan):
        return contest_key(item.nodeid, item.plan.repeat)
    return None


def _prefetchable(item: EvalItem) -> bool:
    """Whether the item's call may start before it runs: not serial, not about to be skipped."""
    return item.plan.prefetchable and not _may_be_skipped(item)


def _may_be_skipped(item: EvalItem) -> bool:
    """Whether a ``skip`` marker, or a ``skipif`` marker that may skip, is on the item."""
    if item.get_closest_marker("skip") is not None:
        return True
    return any(_may_skip(mark) for mark in item.iter_markers("skipif"))


def _may_skip(mark: pytest.Mark) -> bool:
    """Whether a ``skipif`` mark may skip: a false condition does not, a string may."""
    conditions = mark.args or ((mark.kwargs["condition"],) if "condition" in mark.kwargs else ())
    return not conditions or any(isinstance(c, str) or bool(c) for c in conditions)


def _warns_at_collection(config: pytest.Config) -> bool:
    """Whether this process warns about what it collects: under xdist every worker collects,
    and only the first one warns, so a warning shows once."""
    workerinput = getattr(config, "workerinput", None)
    return not workerinput or workerinput.get("workerid") == "gw0"


class SelfPreferenceWarning(UserWarning):
    """A judge grades answers of its own model: LLM judges tend to favour their own outputs."""


_SELF_JUDGING_KEY = pytest.StashKey[set[tuple[str, str]]]()


def _warn_self_judging(
    config: pytest.Config,
    models: Sequence[ModelProfile],
    judges: Sequence[ModelProfile],
    where: tuple[Path, int],
) -> None:
    """Warn once per (model, judge) pair that calls the same model id, at the judged case.

    Under xdist every worker collects; only the first one warns, so the warning shows once.
    """
    if not _warns_at_collection(config):
        return
    warned = config.stash.setdefault(_SELF_JUDGING_KEY, set())
    for judge in judges:
        for model in models:
            pair = (model.name, judge.name)
            if judge.model != model.model or pair in warned:
                continue
            warned.add(pair)
            warnings.warn_explicit(
                SelfPreferenceWarning(
                    f"llmbench: self-preference bias: judge {judge.name} ({judge.model}) "
                    f"is also the evaluated model {model.name}; {judge.name} judges its own "
                    "answers. Prefer judges from another model family."
                ),
                SelfPreferenceWarning,
                filename=str(where[0]),
                lineno=where[1],
            )


class TemperatureVariationWarning(UserWarning):
    """Cases of one model vary around different temperatures: a ``@t<temperature>`` contestant
    then holds some cases only."""


#: Per model: the first base temperature seen, and whether mixed bases were warned about.
_BASES_KEY = pytest.StashKey[dict[str, tuple[float | None, bool]]]()


def _warn_mixed_bases(
    config: pytest.Config, model: ModelProfile, base: float | None, where: tuple[Path, int]
) -> None:
    """Warn once per model when a case's base temperature differs from the first one seen."""
    if not _warns_at_collection(config):
        return
    bases = config.stash.setdefault(_BASES_KEY, {})
    first, warned = bases.setdefault(model.name, (base, False))
    if first == base or warned:
        return
    bases[model.name] = (first, True)
    warnings.warn_explicit(
        TemperatureVariationWarning(
            f"llmbench: --temperature-variations: cases of {model.name} vary around different "
            f"temperatures ({_shown(first)} and {_shown(base)} here), so each "
            f"{model.name}@t<temperature> contestant holds only some of them; "
            "by_temperature.csv still groups every item by the temperature sent"
        ),
        TemperatureVariationWarning,
        filename=str(where[0]),
        lineno=where[1],
    )


def _shown(base: float | None) -> str:
    return "unset: 1" if base is None else f"{base:g}"


def _register_marker(config: pytest.Config, tag: str) -> None:
    """Declare ``tag`` as a marker once per run (so ``--strict-markers`` accepts it)."""
    seen = config.stash.setdefault(_TAG_MARKERS_KEY, set())
    if tag in seen:
        return
    seen.add(tag)
    declared = {line.split(":", 1)[0].split("(")[0].strip() for line in config.getini("markers")}
    if tag not in declared:  # keep a description the project gave in its own ini
        config.addinivalue_line("markers", f"{tag}: eval cases tagged {tag}")


def _relative(exc: EvalFileError, root: Path) -> str:
    """The error (and the file's other problems found with it, a line each) with the eval
    file's path relative to the rootdir, as in node ids."""
    return "\n".join(_relative_one(problem, root) for problem in exc.problems())


def _relative_one(exc: EvalFileError, root: Path) -> str:
    if not exc.path.is_relative_to(root):
        return str(exc)
    where = exc.path.relative_to(root).as_posix()
    if exc.line is not None:
        where = f"{where}:{exc.line}"
    return f"{where}: {exc.message}"
