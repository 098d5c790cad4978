"""360-eval's JSONL profile files (``models_profiles.jsonl``, ``judge_profiles.jsonl``), as they are.

Each line is one :class:`Eval360Profile`, turned into a :class:`~.profiles.ModelProfile`; lines
that share a ``model_id`` (one model in several regions) become profiles
``<model_id>_<region>``, and the file doubles as a model set named after it. Errors are
:class:`~.profiles.ProfileError` at the line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..yamlguard import ValueLimitError, json_value
from .profiles import ModelProfile, ProfileError, ProfileFile, SetDef, Source, validate


class Eval360Profile(BaseModel):
    """One line of a 360-eval profile file (``models_profiles.jsonl``, ``judge_profiles.jsonl``).

    ``model_id`` is the litellm model string and the profile name; ``region`` becomes litellm's
    ``aws_region_name`` and tag ``region``; ``target_rpm`` becomes ``rpm``. Prices are USD per
    1,000 tokens, spelt ``input_token_cost``/``output_token_cost`` in model files and
    ``input_cost_per_1k``/``output_cost_per_1k`` in judge files. The other fields mean what they
    mean in :class:`ModelProfile`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_id: str
    region: str | None = None
    input_token_cost: float | None = None
    output_token_cost: float | None = None
    input_cost_per_1k: float | None = None
    output_cost_per_1k: float | None = None
    target_rpm: int | None = None
    display_name: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None

    def profile_fields(self) -> dict[str, Any]:
        """The fields of the equivalent :class:`ModelProfile`, to be validated by it."""
        cost_in = _first_set(self.input_token_cost, self.input_cost_per_1k)
        cost_out = _first_set(self.output_token_cost, self.output_cost_per_1k)
        fields = self.model_dump(include={"display_name", "api_base", "api_key_env"})
        fields.update(name=self.model_id, model=self.model_id, rpm=self.target_rpm)
        if cost_in is not None or cost_out is not None:
            fields["cost_per_1k"] = {"input": cost_in, "output": cost_out}
        if self.region:
            fields.update(litellm={"aws_region_name": self.region}, tags={"region": self.region})
        return fields


def load_jsonl(path: Path, text: str) -> ProfileFile:
    """The profiles of the 360-eval file ``path`` (its ``text``); the file is also a set of them."""
    rows: list[tuple[Source, Eval360Profile]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        source = Source(path, line=number)
        rows.append(
            (source, validate(Eval360Profile, _json_object(line, source), "profile", source))
        )
    shared = _shared_model_ids(row for _, row in rows)
    models: dict[str, ModelProfile] = {}
    for source, row in rows:
        fields = row.profile_fields()
        if row.model_id in shared:  # one model in several regions: one profile per region
            fields = _regional_fields(fields, row, source, models)
        profile = validate(ModelProfile, fields, f"profile {row.model_id!r}", source)
        models[profile.name] = profile
    # A 360-eval file is a list of models to run together: it doubles as a set. A model in
    # several regions is also the variant group of its regional profiles: its model_id selects
    # them all, as a YAML profile's name selects its deployment variants.
    sets = {path.stem: SetDef(tuple(models), path, None)}
    for model_id in sorted(shared):
        regional = tuple(name for name, profile in models.items() if profile.model == model_id)
        sets[model_id] = SetDef(regional, path, None)
    return ProfileFile(models, sets, frozenset(shared))


def _shared_model_ids(rows: Iterable[Eval360Profile]) -> set[str]:
    seen: set[str] = set()
    shared: set[str] = set()
    for row in rows:
        (shared if row.model_id in seen else seen).add(row.model_id)
    return shared


def _regional_fields(
    fields: dict[str, Any], row: Eval360Profile, source: Source, models: Mapping[str, Any]
) -> dict[str, Any]:
    """``fields`` named ``<model_id>_<region>``; an error for a second line of one region."""
    name = f"{row.model_id}_{row.region}" if row.region else row.model_id
    if name in models:
        problem = (
            f"profile {row.model_id!r}: model_id repeated with the same region "
            f"({row.region or 'none'}); lines of one model_id need distinct regions"
        )
        raise ProfileError(problem, source.path, source.line)
    fields = {**fields, "name": name}
    if row.display_name and row.region:
        fields["display_name"] = f"{row.display_name} ({row.region})"
    return fields


def _json_object(line: str, source: Source) -> Any:
    try:
        value = json_value(line)
    except json.JSONDecodeError as exc:
        raise ProfileError(f"invalid JSON: {exc.msg}", source.path, source.line) from None
    except ValueLimitError as exc:
        raise ProfileError(f"invalid JSON: {exc.message}", source.path, source.line) from None
    except ValueError as exc:  # an integer past Python's 4,300 digits
        problem = str(exc).split(";")[0]
        raise ProfileError(f"invalid JSON: {problem}", source.path, source.line) from None
    if not isinstance(value, dict):
        message = f"expected a JSON object, got {type(value).__name__}"
        raise ProfileError(message, source.path, source.line)
    return value


def _first_set(*values: float | None) -> float | None:
    return next((value for value in values if value is not None), None)
