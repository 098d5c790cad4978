"""From a validated eval file to its cases: prompt variants, inline cases, dataset rows.

:func:`prompt_variants` reads ``prompts:``; :func:`expand_cases` turns the file into
:class:`~.resolved.EvalCase` values per variant. Each case is expanded by its kind, looked up in
:data:`CASE_EXPANSIONS` by the key it gives (``simulated_user``, ``turns``; a plain case gives
neither): :mod:`.expand_plain`, :mod:`.expand_turns`, :mod:`.expand_simulated`, a dataset row's
by :mod:`.expand_rows`. Each kind hands its case to :mod:`.expand_resolve`, which applies the
file-level assertions, threshold, params and tags (and the log-likelihood scoring of
:mod:`.loglikelihood_options`); multiple choice is :mod:`.expand_choices`. Every problem is an
:class:`~.resolved.EvalFileError` at the line of the key at fault (:mod:`.expand_place`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from .expand_choices import Choices, case_choices
from .expand_environment import with_case_state, with_row_state
from .expand_place import Place, inline_id, safe_id
from .expand_plain import plain_case
from .expand_rows import dataset_files, dataset_rows, row_case
from .expand_simulated import simulated_case
from .expand_turns import row_turns_case, turns_case
from .paths import resolve_eval_path
from .resolved import Environment, EvalCase, EvalFileError
from .schema import PromptVariantSpec
from .variants import warn_unvaried_conversations

if TYPE_CHECKING:
    from .datasets import DatasetRow
    from .schema import CaseSpec, EvalSpec
    from .yamlsource import LocatedDocument

#: Expands an inline case of a kind: (file, case, place, case id, its choices) -> case.
InlineExpander = Callable[["EvalSpec", "CaseSpec", Place, str, Choices], EvalCase]
#: Expands a dataset row of a kind: (file, row, place, where the row is) -> case.
RowExpander = Callable[["EvalSpec", "DatasetRow", Place, str], EvalCase]


@dataclass(frozen=True)
class CaseExpansion:
    """How one kind of case is expanded, from an inline case and from a dataset row."""

    name: str  #: as the engine's table of case kinds names it
    #: the key of an inline case (or a row) that makes it this kind; None: the kind of a case
    #: that gives none of the other kinds' keys (the last entry)
    key: str | None
    inline: InlineExpander
    row: RowExpander | None = None  #: None: a dataset row cannot be of this kind


#: The case kinds, looked up in order: the first whose key the case gives (a new kind is one
#: module and one line here).
CASE_EXPANSIONS: tuple[CaseExpansion, ...] = (
    CaseExpansion("simulated_user", "simulated_user", simulated_case),
    CaseExpansion("turns", "turns", turns_case, row_turns_case),
    CaseExpansion("plain", None, plain_case, row_case),
)


def case_expansion(source: CaseSpec | DatasetRow) -> CaseExpansion:
    """The kind of an inline case or a dataset row: the first that its key names."""
    return next(
        kind
        for kind in CASE_EXPANSIONS
        if kind.key is None or getattr(source, kind.key, None) is not None
    )


@dataclass(frozen=True)
class PromptVariant:
    """One entry of ``prompts:``: a name and the template that replaces the file's ``prompt``."""

    name: str | None
    template: str | None
    system: str | None
    #: the ``file://`` the template was read from, if any
    file: Path | None = None


def prompt_variants(
    spec: EvalSpec, path: Path, document: LocatedDocument, roots: Sequence[Path] = ()
) -> list[PromptVariant]:
    """The file's prompt variants; one unnamed variant (the file as written) without any.

    A ``file://`` variant's file must be inside the eval file's folder or ``roots``."""
    if not spec.prompts:
        return [PromptVariant(None, spec.prompt, spec.system)]
    if spec.prompt is not None:
        line = document.line_of(("prompt",))
        raise EvalFileError(path, line, "give either `prompt` or `prompts`, not both")
    variants: list[PromptVariant] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(spec.prompts):
        line = document.line_of(("prompts", index)) or 1
        try:
            variant = _prompt_variant(entry, index, path.parent, roots)
        except ValueError as exc:
            raise EvalFileError(path, line, f"prompts[{index}]: {exc}") from None
        assert variant.name is not None
        if variant.name in seen:
            message = f"prompts[{index}]: duplicate variant name {variant.name!r}"
            raise EvalFileError(path, line, f"{message} (first at line {seen[variant.name]})")
        seen[variant.name] = line
        variants.append(variant)
    return variants


def _prompt_variant(
    entry: str | PromptVariantSpec, index: int, folder: Path, roots: Sequence[Path]
) -> PromptVariant:
    """A variant from a template string, ``file://path`` or a mapping; ValueError when bad."""
    if isinstance(entry, str):
        key = "file" if entry.startswith("file://") else "prompt"
        entry = PromptVariantSpec.model_validate({key: entry.removeprefix("file://")})
    if (entry.prompt is None) == (entry.file is None):
        raise ValueError("give either `prompt` or `file`")
    template = entry.prompt
    name = entry.name
    file: Path | None = None
    if entry.file is not None:
        file = resolve_eval_path(entry.file, folder, roots)  # PathRefused is a ValueError
        try:
            template = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read prompt file {entry.file!r}: {exc}") from None
        name = name or Path(entry.file).stem
    name = safe_id(str(name)) if name is not None and str(name).strip() else f"p{index + 1}"
    if not (template or "").strip():
        raise ValueError("the prompt template is empty")
    return PromptVariant(name, template, entry.system, file)


def expand_cases(
    spec: EvalSpec,
    path: Path,
    document: LocatedDocument,
    variants: list[PromptVariant],
    roots: Sequence[Path] = (),
    environment: Environment | None = None,
) -> list[EvalCase]:
    """The file's cases, per prompt variant; the paths it names must lead inside the eval file's
    folder or ``roots`` (see :mod:`.paths`). With an ``environment``, each case starts from its
    ``state:`` (else the environment's seed) and carries its ``expected_actions``."""
    cases: list[EvalCase] = []
    for variant in variants:
        # Each variant is the file with its own `prompt` (and `system`) template.
        shaped = spec.model_copy(
            update={"prompt": variant.template, "system": variant.system or spec.system}
        )
        own: list[EvalCase] = []
        sources = () if variant.file is None else (variant.file,)
        if spec.dataset is not None:
            place = Place(path, document, ("dataset",), tuple(roots))
            rows = [
                _row_case(shaped, row, place, environment) for row in dataset_rows(shaped, place)
            ]
            own.extend(
                replace(row, sources=(*sources, *dataset_files(spec, place))) for row in rows
            )
        for index, case in enumerate(spec.cases):
            place = Place(path, document, ("cases", index), tuple(roots))
            _check_variant_case(variant, case, place)
            own.append(_inline_case(shaped, case, place, environment))
        if not own:
            raise EvalFileError(path, 1, "no cases: give a `cases:` list or a `dataset:`")
        _check_unique_ids(own, path)
        cases.extend(
            replace(case, prompt_variant=variant.name, sources=case.sources or sources)
            for case in own
        )
    warn_unvaried_conversations(cases, path)
    return cases


def _check_variant_case(variant: PromptVariant, case: CaseSpec, place: Place) -> None:
    """Under named prompt variants, the variant gives the prompt (and its system prompt)."""
    if variant.name is not None and variant.system is not None and case.system is not None:
        raise place.error(
            f"case {inline_id(case, place)!r}: its `system` would replace the `system` "
            f"of prompt variant {variant.name!r}; give it in one place",
            "system",
        )
    if variant.name is not None and (case.prompt is not None or case.messages):
        key = "prompt" if case.prompt is not None else "messages"
        raise place.error(
            f"case {inline_id(case, place)!r}: the file's `prompts:` give the prompt; "
            "give the case `vars:` instead",
            key,
        )


def _inline_case(
    spec: EvalSpec, case: CaseSpec, place: Place, environment: Environment | None = None
) -> EvalCase:
    """An inline case, expanded by its kind (its ``choices`` checked first, whatever it is),
    with its environment's starting state and expected actions."""
    case_id = inline_id(case, place)
    if case.prompt is not None and case.messages is not None:
        message = f"case {case_id!r}: give either `prompt` or `messages`, not both"
        raise place.error(message, "messages")
    choices = case_choices(spec, case, place, case_id)
    expanded = case_expansion(case).inline(spec, case, place, case_id, choices)
    return with_case_state(expanded, environment, case, place)


def _row_case(
    spec: EvalSpec, row: DatasetRow, place: Place, environment: Environment | None = None
) -> EvalCase:
    """A dataset row, expanded by its kind (its ``state`` and ``expected_actions`` columns
    read with an environment)."""
    where = f"dataset row {row.id!r} ({row.where})"
    kind = case_expansion(row)
    if kind.row is None:  # pragma: no cover - a row has no key of such a kind
        raise place.error(f"{where}: a dataset row cannot give `{kind.key}`")
    return with_row_state(kind.row(spec, row, place, where), environment, row, place, where)


def _check_unique_ids(cases: list[EvalCase], path: Path) -> None:
    seen: dict[str, int] = {}
    for case in cases:
        if case.id in seen:
            message = f"duplicate case id {case.id!r} (first at line {seen[case.id]})"
            raise EvalFileError(path, case.line, message)
        seen[case.id] = case.line
