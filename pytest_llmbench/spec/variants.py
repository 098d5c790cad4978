"""The experiment matrix: what varies between the items of one case and model.

An item is one case x model x :class:`Variant` x repeat. A variant names the prompt variant of
the eval file's ``prompts:``, the temperature of ``--temperature-variations``, the reasoning
effort of the file's ``effort:`` (or ``--efforts``) and whether the prompt was rewritten by
``--optimize-prompts``. The variant's :meth:`Variant.label` is the *contestant* that results
group and rank by (the record's ``model`` field): ``smollm2``, ``smollm2:concise``,
``smollm2_optimized``, ``smollm2:concise@t0.2``, ``gpt-5:concise@t0.2@high``: the model, then
the prompt, then the temperature, then the effort.

:func:`warn_unvaried_conversations` warns about a conversation that prompt variants cannot
change (a :class:`PromptVariantWarning`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .resolved import EvalCase

#: Temperature of a model whose profile and case set none: the OpenAI API's default.
DEFAULT_TEMPERATURE = 1.0
#: Providers accept temperatures up to 2 (OpenAI); variations are clipped to [0, 2].
MAX_TEMPERATURE = 2.0
#: A variation step is this share of the base temperature (0.4 -> steps of 0.2).
STEP_SHARE = 0.5
#: Step of the variations of a base temperature of 0 (upwards only).
ZERO_STEP = 0.25
OPTIMIZED_SUFFIX = "_optimized"


@dataclass(frozen=True)
class Variant:
    """The axes of the matrix one item runs under; ``Variant()`` is the plain item."""

    prompt: str | None = None  #: name of the eval file's prompt variant
    temperature: float | None = None  #: set by ``--temperature-variations``
    optimized: bool = False  #: the prompt was rewritten for the model (``--optimize-prompts``)
    #: the reasoning effort (a level or a thinking budget): ``effort:`` or ``--efforts``
    effort: str | int | None = None

    @property
    def prompt_name(self) -> str | None:
        """The prompt variant with the ``_optimized`` suffix (``optimized`` alone without one)."""
        if not self.optimized:
            return self.prompt
        return f"{self.prompt}{OPTIMIZED_SUFFIX}" if self.prompt else OPTIMIZED_SUFFIX[1:]

    def label(self, model: str) -> str:
        """The contestant: ``model``, ``:prompt``, ``_optimized``, ``@t<temperature>`` and
        ``@<effort>``, in that order."""
        text = model
        if self.prompt is not None:
            text += f":{self.prompt}"
        if self.optimized:
            text += OPTIMIZED_SUFFIX
        if self.temperature is not None:
            text += f"@t{format_temperature(self.temperature)}"
        if self.effort is not None:
            text += f"@{self.effort}"
        return text

    def id_parts(self) -> list[str]:
        """The parts of the item id between the model and the repeat, each only when used."""
        parts = []
        if self.prompt_name is not None:
            parts.append(self.prompt_name)
        if self.temperature is not None:
            parts.append(f"t{format_temperature(self.temperature)}")
        if self.effort is not None:
            parts.append(str(self.effort))
        return parts


#: The variant of an item outside any matrix.
PLAIN = Variant()


def format_temperature(value: float) -> str:
    """``0.2``, ``1``, ``0.25``: short and stable (ids and labels use it)."""
    return f"{value:g}"


def temperature_variations(base: float | None, count: int) -> list[float]:
    """``base`` and ``count`` more temperatures, alternately below and above it, sorted.

    The step is half of ``base`` (0.4 with 2 -> 0.2, 0.4, 0.6; with 4 -> 0, 0.2, 0.4, 0.6,
    0.8); values are clipped to [0, 2] and repeats dropped, so fewer may come out near the
    ends. A base of 0 grows upwards in steps of 0.25 (0 with 2 -> 0, 0.25, 0.5). No base
    (nothing configured) means the providers' default, 1.0.
    """
    start = DEFAULT_TEMPERATURE if base is None else float(base)
    if not math.isfinite(start) or start < 0:
        raise ValueError(f"temperature must be a number >= 0, got {base!r}")
    values = [start]
    for index in range(1, count + 1):
        if start == 0:
            values.append(ZERO_STEP * index)
            continue
        distance = STEP_SHARE * start * math.ceil(index / 2)
        values.append(start - distance if index % 2 else start + distance)
    clipped = (min(MAX_TEMPERATURE, max(0.0, round(value, 6))) for value in values)
    return sorted(set(clipped))


def configured_temperature(params: Mapping[str, Any]) -> float | None:
    """The ``temperature`` of merged model parameters, or None when none is set."""
    value = params.get("temperature")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"temperature must be a number, got {value!r}")
    return float(value)


class PromptVariantWarning(UserWarning):
    """A case is the same under every prompt variant: the variants' scores on it differ by
    chance alone."""


def warn_unvaried_conversations(cases: Sequence[EvalCase], path: Path) -> None:
    """Warn at each conversation of ``path`` that is the same under every prompt variant of
    ``cases`` (one per case and variant): its turns or simulated user never use ``{{prompt}}``
    and the variants' ``system`` is the same. "The same" is an equal ``case_hash``, everything that
    decides the case's outcome. Only a conversation may leave the variant's template unused
    (a plain case sends it). A warning, not an error: the file's other cases may use the
    variants, and this one still runs, only to no purpose."""
    from ..fingerprint import CaseHasher

    names = list(dict.fromkeys(case.prompt_variant for case in cases if case.prompt_variant))
    if len(names) < 2:
        return
    hasher = CaseHasher({}, path.parent)  # the file's settings are the same for every variant
    digests: dict[str, set[str]] = {}
    first: dict[str, EvalCase] = {}
    for case in cases:
        if case.conversational:
            digests.setdefault(case.id, set()).add(hasher(case))
            first.setdefault(case.id, case)
    for case_id, found in digests.items():
        if len(found) == 1:
            warnings.warn_explicit(
                PromptVariantWarning(
                    f"llmbench: case {case_id!r} is the same conversation under every prompt "
                    f"variant ({', '.join(names)}): its turns or simulated user never use "
                    "{{prompt}} and every variant gives it the same `system`, so the variants' "
                    "scores on it differ by chance alone; write {{prompt}} where the variant's "
                    "wording belongs, or give each variant its own `system`"
                ),
                PromptVariantWarning,
                filename=str(path),
                lineno=first[case_id].line,
            )
