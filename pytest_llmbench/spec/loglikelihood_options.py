"""Multiple choice scored by log-likelihood, as lm-eval's ``multiple_choice`` tasks are.

A file with ``loglikelihood:`` sends no question to answer: each option is appended to the
case's prompt (after ``target_delimiter``, a space by default) and the model's log-probability
of it is read (:mod:`pytest_llmbench.engine.loglikelihood_scores`). The option scored is the
option's text, or its letter when the prompt lists the lettered options itself (``{{choices}}``,
MMLU's style). With ``blank`` (Winogrande), each option fills the blank instead and the rest of the
prompt after the blank is what is scored. :func:`scored_case` turns a case into its
(context, continuation) pairs at collection; :func:`scored_options` does it for each case of a
``loglikelihood:`` file as :mod:`.expand` resolves it, a problem an error at its line.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .file_kinds import file_kind
from .resolved import EvalCase, EvalFileError, ScoredOptions
from .templating import placeholders, render_template

if TYPE_CHECKING:
    from .expand_place import Place
    from .schema import EvalSpec, LoglikelihoodSpec

__all__ = ["ScoringError", "scored_case", "scored_options"]


class ScoringError(ValueError):
    """A case a log-likelihood file cannot score; ``key`` is the case key at fault."""

    def __init__(self, message: str, *key: Any) -> None:
        super().__init__(message)
        self.key = key


def scored_options(spec: EvalSpec, place: Place, case: EvalCase) -> EvalCase:
    """A ``loglikelihood:`` file's case with its options' (context, continuation) pairs; any
    other file's as it is. The options are scored with the model itself: a file kind that
    answers otherwise (an agent) or a ``solver`` is refused at ``loglikelihood:``."""
    settings = spec.loglikelihood
    if settings is None:
        return case
    kind = file_kind(spec.kind)
    if not kind.loglikelihood or spec.solver is not None:
        other = kind.written if not kind.loglikelihood else "`solver`"
        message = f"`loglikelihood` scores the options with the model itself: not with {other}"
        raise place.file_error(message, "loglikelihood")
    try:
        return scored_case(case, settings)
    except ScoringError as exc:
        line = place.document.line_of((*place.loc, *exc.key)) or place.line
        raise EvalFileError(place.path, line, f"case {case.id!r}: {exc}") from None


def scored_case(case: EvalCase, settings: LoglikelihoodSpec) -> EvalCase:
    """``case`` with its options' (context, continuation) pairs, its prompt without the lettered
    options a generated answer would get; :class:`ScoringError` when it cannot be scored so."""
    from ..scoring import LETTERS

    _check_case(case)
    assert case.choices is not None
    prompt, lettered = _prompt(case)
    if settings.blank is not None:
        before, found, after = prompt.partition(settings.blank)
        if not found:
            raise ScoringError(f"the prompt has no blank {settings.blank!r} for the options")
        rest = after.strip()
        pairs = [(before + option, settings.target_delimiter + rest) for option in case.choices]
        lengths = [len(rest)] * len(pairs)
    else:
        options = list(LETTERS[: len(case.choices)]) if lettered else list(case.choices)
        pairs = [(prompt, settings.target_delimiter + option) for option in options]
        lengths = [len(option) for option in options]
    scored = ScoredOptions(
        pairs=tuple(_space_moved(context, continuation) for context, continuation in pairs),
        lengths=tuple(lengths),
        verdict=settings.verdict,
    )
    return replace(case, messages=({"role": "user", "content": prompt},), loglikelihood=scored)


def _check_case(case: EvalCase) -> None:
    if case.choices is None or case.answer_index is None:
        raise ScoringError(
            "`loglikelihood` scores multiple choice: the case needs `choices` and `answer`",
            "choices",
        )
    generated = [assertion.type for assertion in case.assertions if assertion.type != "choice"]
    if generated:
        raise ScoringError(
            f"`{generated[0]}` checks a generated answer; a `loglikelihood` file generates "
            "none (it scores the options)",
            "assert",
        )
    if case.images:
        raise ScoringError("`loglikelihood` scores a text prompt: images are not sent", "images")
    roles = [message["role"] for message in case.template]
    if roles != ["user"]:
        key = "system" if "system" in roles else "messages"
        raise ScoringError(
            "`loglikelihood` scores one text prompt: `system` and multi-turn `messages` have "
            "no place in it",
            key,
        )


def _prompt(case: EvalCase) -> tuple[str, bool]:
    """The case's prompt as a plain text, and whether it lists the lettered options."""
    from ..scoring import format_choices

    assert case.choices is not None
    text = case.template[0]["content"]
    if case.template_vars is None:  # a dataset row's own prompt, sent verbatim
        return text, False
    lettered = "choices" in placeholders(text)
    variables = {**case.template_vars, "choices": format_choices(case.choices)}
    return render_template(text, variables), lettered


def _space_moved(context: str, continuation: str) -> tuple[str, str]:
    """Trailing spaces of the context belong to the continuation (as lm-eval splits a pair):
    ``"Answer: "`` + ``"Paris"`` is scored as ``"Answer:"`` + ``" Paris"``."""
    kept = context.rstrip()
    return kept, context[len(kept) :] + continuation
