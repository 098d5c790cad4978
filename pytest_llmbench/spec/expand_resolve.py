"""What every kind of case resolves alike: the file-level settings, assertions and folders.

Each kind's expansion (:mod:`.expand`) gathers a case's own values and hands them to
:func:`resolve`, which adds the file-level assertions, threshold, params, tags and task, parses
and checks the assertions (values, judged prompts, ``json-schema`` files, agent checks, context
metrics), resolves ``include_dirs`` and jury dimensions, and gives the case its options'
log-likelihood pairs in a ``loglikelihood:`` file. Every problem is an error at the line of the
key at fault.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..scoring import Assertion, parse_assertion
from .file_kinds import file_kind, kinds_allowing
from .loglikelihood_options import scored_options
from .paths import PathRefused, check_folder_entries, resolve_eval_path
from .resolved import EvalCase, EvalFileError

if TYPE_CHECKING:
    from .expand_place import Place
    from .schema import EvalSpec, RawAssertion


#: The check of a case that gives `expected` and no assertion: the answer contains it, in any
#: case (`expected: Paris` passes "The capital is paris.").
DEFAULT_CHECK = "icontains"


def resolve(
    spec: EvalSpec,
    place: Place,
    own: list[RawAssertion],
    own_keys: Sequence[tuple[Any, ...]] | None = None,
    **case: Any,
) -> EvalCase:
    """Complete a case with the file-level assertions, threshold, params and tags.

    ``own_keys``: where each of ``own`` is written inside the case (``("assert", n)`` when
    None)."""
    if case["choices"] is not None and not any(_is_choice(raw) for raw in [*own, *spec.assertions]):
        own = [*own, "choice"]  # a multiple choice case is scored by the option it names
    if not own and not spec.assertions and case["expected"] is not None:
        own = [DEFAULT_CHECK]  # an expected answer alone is checked, never an unchecked pass
    keys = list(own_keys or ())
    keys += [("assert", n - len(keys)) for n in range(len(keys), len(own))]
    assertions = _assertions(spec, place, own, case, keys)
    threshold = case.pop("threshold")
    metrics = _judge_metrics(place, [*spec.judge_metrics, *case.pop("judge_metrics")])
    folders = _include_dirs(place, spec.include_dirs, case.pop("include_dirs"))
    if case["task"] is None and spec.task is not None:
        case["task"] = spec.task.model_dump()  # the file's, for a case (or row) without one
    resolved = EvalCase(
        id=case.pop("case_id"),
        assertions=assertions,
        threshold=spec.threshold if threshold is None else threshold,
        model_params={**spec.model_params, **case.pop("model_params")},
        tags=tuple(dict.fromkeys([*spec.tags, *case.pop("tags")])),
        line=place.line,
        judge_metrics=metrics,
        include_dirs=folders,
        **case,
    )
    return scored_options(spec, place, resolved)


def _include_dirs(place: Place, shared: list[str], own: list[str]) -> tuple[Path, ...]:
    """The file's folders then the case's, relative to the eval file, inside the project and
    holding no special file; each must exist (a collection error at its entry otherwise)."""
    folders: dict[Path, None] = {}
    for names, key in ((shared, ("include_dirs",)), (own, (*place.loc, "include_dirs"))):
        for index, name in enumerate(names):
            line = place.document.line_of((*key, index)) or place.line
            try:
                folder = resolve_eval_path(name, place.path.parent, place.roots)
                if not folder.is_dir():
                    raise PathRefused(f"{name!r} is not a folder next to the eval file")
                check_folder_entries(folder)
            except PathRefused as exc:
                raise EvalFileError(place.path, line, f"include_dirs: {exc}") from None
            folders[folder] = None
    return tuple(folders)


def _check_schema_files(
    place: Place, assertions: Sequence[Assertion], keys: Sequence[tuple[Any, ...]]
) -> None:
    """A ``json-schema`` file is read when the answer is scored: its path is checked now."""
    for index, assertion in enumerate(assertions):
        if assertion.base_type != "json-schema" or not isinstance(assertion.value, str):
            continue
        try:
            resolve_eval_path(assertion.value, place.path.parent, place.roots)
        except PathRefused as exc:
            at = keys[index] if index < len(keys) else ()
            raise place.error(f"{assertion.type}: {exc}", *at) from None


def _graders(
    spec: EvalSpec,
    place: Place,
    assertions: tuple[Assertion, ...],
    case: dict[str, Any],
    keys: Sequence[tuple[Any, ...]],
) -> tuple[Assertion, ...]:
    """The case's ``model-graded`` assertions with their prompts read and checked; a bad one
    is an error at its ``prompt`` (a file-level one's, in the file's ``assert:``)."""
    from .graders import GraderError, resolve_graders

    try:
        return resolve_graders(
            assertions,
            folder=place.path.parent,
            roots=place.roots,
            case_vars=case["vars"],
            has_expected=case["expected"] is not None,
            has_context=case["context"] is not None or spec.solver is not None,
        )
    except GraderError as exc:
        message = f"case {case['case_id']!r}: {exc}"
        if exc.index < len(keys):
            raise place.error(message, *keys[exc.index], exc.key) from None
        at = ("assert", exc.index - len(keys), exc.key)
        raise EvalFileError(place.path, place.document.line_of(at) or place.line, message) from None


def _judge_metrics(place: Place, names: list[str]) -> tuple[str, ...]:
    """Jury dimension names as keys (``Brand voice`` -> ``brand_voice``), each once."""
    from ..scoring import dimension_key

    try:
        return tuple(dict.fromkeys(dimension_key(name) for name in names))
    except ValueError as exc:
        raise place.error(f"judge_metrics: {exc}", "judge_metrics") from None


def _assertions(
    spec: EvalSpec,
    place: Place,
    own: list[RawAssertion],
    case: dict[str, Any],
    keys: Sequence[tuple[Any, ...]],
) -> tuple[Assertion, ...]:
    """The case's own assertions, then the file-level ones; each needs a value or expected.
    ``keys``: where each of ``own`` is written inside the case."""
    assertions = tuple(parse_assertion(item) for item in [*own, *spec.assertions])
    _check_schema_files(place, assertions, keys)
    assertions = _graders(spec, place, assertions, case, keys)
    agent_checks = file_kind(spec.kind).agent_checks
    for index, assertion in enumerate(assertions):
        # tool-count also counts a function-calling reply's calls (a plain file's tools:, or
        # a dataset row's)
        offered = bool(spec.tools) or case.get("functions") is not None
        counts_calls = assertion.base_type == "tool-count" and offered
        if assertion.agent_check is not None and not agent_checks and not counts_calls:
            mine = index < len(own)
            at = keys[index] if mine else ()
            needs = kinds_allowing(lambda kind: kind.agent_checks)
            message = f"`{assertion.type}` checks an agent's work: it needs {needs}"
            raise place.error(f"case {case['case_id']!r}: {message}", *at)
        if assertion.type == "choice" and case["choices"] is None:
            mine = index < len(own)
            at = keys[index] if mine else ()
            message = "`choice` scores multiple choice: the case needs `choices` and `answer`"
            raise place.error(f"case {case['case_id']!r}: {message}", *at)
        if assertion.needs_value and case["expected"] is None:
            mine = index < len(own)
            origin = "" if mine else " (from the file-level `assert:`)"
            message = f"`{assertion.type}`{origin} needs a value or `expected`"
            at = keys[index] if mine else ()
            raise place.error(f"case {case['case_id']!r}: {message}", *at)
        if _lacks_context(spec, assertion, case["context"]):
            at = keys[index] if index < len(own) else ()
            raise place.error(f"case {case['case_id']!r}: {no_context(assertion)}", *at)
    return assertions


def _lacks_context(spec: EvalSpec, assertion: Assertion, context: tuple[str, ...] | None) -> bool:
    """Whether ``assertion`` reads a context the case cannot have: none given, no solver (an
    empty retrieval, ``[]``, is a context: its verdicts are unchecked at run time)."""
    from ..scoring import CONTEXT_TYPES

    return assertion.base_type in CONTEXT_TYPES and context is None and spec.solver is None


def no_context(assertion: Assertion) -> str:
    """Why a context metric cannot judge a case that gives no context."""
    return (
        f"`{assertion.type}` judges the answer against its retrieved context: the case needs "
        "`context` (or the file a `solver` that returns it); a retrieval that found nothing "
        "is `context: []`"
    )


def _is_choice(raw: RawAssertion) -> bool:
    return raw == "choice" or (isinstance(raw, dict) and raw.get("type") == "choice")


def case_images(place: Place, refs: Sequence[str], base_dir: Path, case_id: str) -> tuple[str, ...]:
    """Image references checked now (a missing file is a collection error), in order."""
    if not refs:
        return ()
    from .images import ImageError, check_image_ref

    checked = []
    for index, ref in enumerate(refs):
        try:
            checked.append(check_image_ref(ref, base_dir, place.roots))
        except ImageError as exc:
            raise place.error(f"case {case_id!r}: images[{index}]: {exc}", "images") from None
    return tuple(checked)
