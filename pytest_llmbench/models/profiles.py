"""Model profiles: named litellm model strings with their endpoint, parameters, prices and tags.

Profiles come from ``profiles/*.yaml`` files (``models:`` and ``sets:``), from 360-eval's JSONL
profile files as they are, and from ``builtin.yaml`` shipped next to this module. ``--models``
selects them by name, by ``@set``, or by raw litellm model string (see
:meth:`ProfileRegistry.resolve`). Every loading error is a :class:`ProfileError` that names the
file and line. Nothing here talks to a provider.

Deployment variants: a YAML profile with ``variants: {<v>: {<keys>}}`` becomes one profile
``<name>_<v>`` per variant (the variant's keys over the base's, ``params``/``litellm``/``tags``
merged one level deep, tag ``variant: <v>``), and ``<name>`` becomes a model set of them that
``--models <name>`` and ``--models @<name>`` both select. In a 360-eval file, lines that share a
``model_id`` (one model in several regions) become profiles ``<model_id>_<region>``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .providers.thinking import ThinkingRule

if TYPE_CHECKING:
    from .providers.completion import CallTarget, PricesPer1k

BUILTIN_PROFILES = Path(__file__).parent / "builtin.yaml"
PROFILE_SUFFIXES = (".yaml", ".yml", ".jsonl")

Loc = tuple[str | int, ...]
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
# Names are selected in comma lists where a leading `@` means a set.
_PROFILE_NAME = r"^[^,@\s][^,]*$"
_ModelT = TypeVar("_ModelT", bound=BaseModel)


class CostPer1k(BaseModel):
    """Prices in USD per 1,000 tokens; they override litellm's price map."""

    # The fields' docstrings are for readers and the docs; pydantic is not asked to read them
    # (use_attribute_docstrings): that costs every run about 50 ms in inspect at import.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    input: float = Field(ge=0)
    """USD per 1,000 prompt (input) tokens."""
    output: float = Field(ge=0)
    """USD per 1,000 completion (output) tokens."""
    cached_input: float | None = Field(default=None, ge=0)
    """USD per 1,000 input tokens read from the provider's prompt cache; ``None``: ``input``."""
    cache_write: float | None = Field(default=None, ge=0)
    """USD per 1,000 input tokens written to the provider's prompt cache (Anthropic's cache
    writes); ``None``: ``input``."""
    reasoning: float | None = Field(default=None, ge=0)
    """USD per 1,000 output tokens spent thinking; ``None``: ``output``."""

    def priced(self, target: CallTarget) -> CallTarget:
        """``target`` with these prices (its ``cost_per_1k_*`` fields)."""
        return dataclasses.replace(
            target,
            cost_per_1k_input=self.input,
            cost_per_1k_output=self.output,
            cost_per_1k_cached_input=self.cached_input,
            cost_per_1k_cache_write=self.cache_write,
            cost_per_1k_reasoning=self.reasoning,
        )

    def per_1k(self) -> PricesPer1k:
        """These prices as a call target holds them."""
        from .providers.completion import PricesPer1k

        return PricesPer1k(
            self.input, self.output, self.cached_input, self.cache_write, self.reasoning
        )


class ModelProfile(BaseModel):
    """One model as the plugin calls it: a litellm model string plus everything around the call."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=_PROFILE_NAME)
    """Profile name: the key in ``models:``, used in ``--models`` and in test ids."""
    model: str = Field(min_length=1)
    """The litellm model string, e.g. ``openai/gpt-4o-mini``."""
    display_name: str | None = None
    """Human-readable name for reports; :attr:`label` falls back to :attr:`name`."""
    api_base: str | None = None
    """Endpoint URL, for self-hosted or proxied providers."""
    api_key_env: str | None = Field(default=None, pattern=_ENV_NAME)
    """Name of the environment variable that holds the API key; never the key itself."""
    embedded: bool = False
    """Served by the plugin's embedded local server; its ``api_base`` is known only at run time."""
    params: dict[str, Any] = {}
    """Default litellm completion parameters (``temperature``, ``max_tokens``, ...)."""
    cost_per_1k: CostPer1k | None = None
    """Prices that override litellm's price map; ``None`` uses the map."""
    cost_per_1k_batch: CostPer1k | None = None
    """Prices of a call answered through a provider's batch API; ``None``: the map's batch
    prices (its ``*_batches`` keys), else half the live prices (litellm's rule)."""
    tags: dict[str, str] = {}
    """Free-form labels for grouping in reports (``tier``, ``region``, ``provider``, ...)."""
    rpm: int | None = Field(default=None, gt=0)
    """Requests per minute for this model over the whole run (split between xdist workers)."""
    tpm: int | None = Field(default=None, gt=0)
    """Tokens per minute for this model over the whole run (split between xdist workers)."""
    concurrency: int | None = Field(default=None, gt=0)
    """Calls in flight for this model; overrides ``--concurrency``."""
    parallel_safe: bool = True
    """False: this model takes one call at a time (a single-slot local server, a strict API)."""
    litellm: dict[str, Any] = {}
    """Extra keyword arguments passed to litellm as they are (``aws_region_name``, ...)."""
    vision: bool | None = None
    """Whether the model accepts images; ``None``: unknown (images are sent and may fail)."""
    client: Literal["auto", "litellm"] = "auto"
    """Which client calls the model: ``auto`` (our lean HTTP client when the endpoint speaks
    OpenAI's protocol, litellm otherwise) or ``litellm`` (always)."""
    effort: Literal[
        "auto", "reasoning_effort", "thinking_budget", "enable_thinking", "passthrough"
    ] = "auto"
    """How an effort of the effort axis is sent (:mod:`.providers.effort`): ``auto`` by provider,
    for a model litellm's price map says reasons; or always as ``reasoning_effort``, as a
    ``thinking`` budget, as ``chat_template_kwargs.enable_thinking``, or passed through."""
    batch: bool | None = None
    """Whether this model's calls may go to its provider's batch API under ``--batch``:
    ``None`` (auto: yes where the provider has one, never for a local endpoint), ``true``
    (also a local endpoint that implements OpenAI's ``/files`` and ``/batches``) or ``false``
    (always live)."""
    thinking: ThinkingRule | None = None
    """How this model's replies are read: which leading tags are thinking, and whether the
    answer checks see it (an eval file's ``thinking:`` keys override these); None: the
    defaults."""

    @field_validator("params", "litellm")
    @classmethod
    def _no_inline_key(cls, value: dict[str, Any]) -> dict[str, Any]:
        # Profiles are committed to repositories; a key written here would leak.
        if "api_key" in value:
            raise ValueError("do not put 'api_key' in a profile; name its variable in api_key_env")
        # The endpoint is the profile's own key: the key rule and both clients read it there.
        moved = next((key for key in ("api_base", "base_url") if key in value), None)
        if moved is not None:
            raise ValueError(f"do not put {moved!r} in params or litellm; set the profile's "
                             "api_base")  # fmt: skip
        return value

    def priced(self, target: CallTarget) -> CallTarget:
        """``target`` with this profile's prices, live (``cost_per_1k``) and batch
        (``cost_per_1k_batch``); the price map's where it gives none."""
        if self.cost_per_1k is not None:
            target = self.cost_per_1k.priced(target)
        if self.cost_per_1k_batch is not None:
            target = dataclasses.replace(target, cost_per_1k_batch=self.cost_per_1k_batch.per_1k())
        return target

    @property
    def label(self) -> str:
        """The name shown to people: :attr:`display_name`, else :attr:`name`."""
        return self.display_name or self.name


class ProfileError(Exception):
    """A profile file or a model selection is wrong; ``str()`` is ``path:line: message``."""

    def __init__(self, message: str, path: Path | None = None, line: int | None = None) -> None:
        super().__init__(message, path, line)
        self.message = message
        self.path = path
        self.line = line

    def __str__(self) -> str:
        where = ":".join(str(part) for part in (self.path, self.line) if part is not None)
        return f"{where}: {self.message}" if where else self.message


@dataclass(frozen=True)
class ProfileRegistry:
    """All known profiles and model sets, after overrides.

    Set members are profile names or raw litellm model strings: :func:`load_profiles` has
    already expanded ``@other`` references.
    """

    models: Mapping[str, ModelProfile]
    sets: Mapping[str, tuple[str, ...]]
    #: Names of the sets made of a profile's deployment variants: a plain name selects them.
    variant_groups: frozenset[str] = frozenset()
    #: The file each profile and variant group of the user's came from (not the built-ins).
    origins: Mapping[str, Path] = field(default_factory=dict)

    def shadowed_ids(self, selection: str) -> list[str]:
        """For each entry of ``selection`` written as a litellm id (``provider/model``) that a
        profile file defines as a profile or a group of deployments, a line saying what it
        resolves to and where that comes from: the id is not called as is."""
        notes = []
        for entry in dict.fromkeys(part.strip() for part in selection.split(",")):
            origin = self.origins.get(entry)
            if "/" not in entry or origin is None:
                continue
            chosen = self.resolve(entry)
            parts = [f"{len(chosen)} deployments" if len(chosen) > 1 else "1 profile"]
            models = sorted({profile.model for profile in chosen})
            parts.append("model " + ", ".join(models))
            rpms = sorted({profile.rpm for profile in chosen if profile.rpm})
            if rpms:
                parts.append("rpm " + ", ".join(map(str, rpms)))
            notes.append(
                f"{entry!r} is a profile of {origin}, not the bare litellm id: "
                f"{'; '.join(parts)} ({', '.join(p.name for p in chosen)}); rename or move "
                "that profile to call the id as is"
            )
        return notes

    def resolve(self, selection: str) -> list[ModelProfile]:
        """Turn ``'a,b,@set'`` into profiles, in order, duplicates removed (first wins).

        A name that is not a profile is taken as a raw litellm model string and gets an ad-hoc
        ``ModelProfile(name=s, model=s)``; so is a set member that is not a profile. The name of
        a profile with deployment variants selects all of them, as its ``@set`` does. Empty
        entries are ignored. Raises :class:`ProfileError` for an unknown ``@set`` (listing the
        known ones) and for a selection that names no model at all.
        """
        names: list[str] = []
        for entry in (part.strip() for part in selection.split(",")):
            if entry.startswith("@"):
                names.extend(self._set_members(entry[1:].strip()))
            elif entry in self.variant_groups and entry not in self.models:
                names.extend(self._set_members(entry))
            elif entry:
                names.append(entry)
        if not names:
            raise ProfileError(f"no models selected by {selection!r}")
        unique = dict.fromkeys(names)
        return [self.get(name) or _raw_model(name) for name in unique]

    def get(self, name: str) -> ModelProfile | None:
        """The profile called ``name``, or ``None``."""
        return self.models.get(name)

    def _set_members(self, name: str) -> tuple[str, ...]:
        if name not in self.sets:
            raise ProfileError(unknown_set(name, self.sets))
        return self.sets[name]


def _raw_model(name: str) -> ModelProfile:
    """An ad-hoc profile of the litellm id ``name``; ProfileError when it is no text (a lone
    surrogate that a command line's undecodable bytes became)."""
    try:
        return ModelProfile(name=name, model=name)
    except ValidationError as exc:
        problem = exc.errors(include_url=False)[0]["msg"]
        raise ProfileError(f"{name!r} is no profile and no model id: {problem}") from None


def api_key_missing(profile: ModelProfile, environ: Mapping[str, str]) -> str | None:
    """The variable named by ``profile.api_key_env`` when it is unset or blank, else ``None``."""
    name = profile.api_key_env
    return name if name and not environ.get(name, "").strip() else None


@dataclass(frozen=True)
class SetDef:
    """A set as written: members may be ``@other`` sets; path and line locate its errors."""

    members: tuple[str, ...]
    path: Path
    line: int | None


@dataclass(frozen=True)
class ProfileFile:
    """What one profile file defines: profiles, model sets, and which sets are variant groups."""

    models: dict[str, ModelProfile] = field(default_factory=dict)
    sets: dict[str, SetDef] = field(default_factory=dict)
    #: The names of ``sets`` that are a profile's deployment variants.
    groups: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Source:
    """Where values came from: a composed YAML tree, or one JSONL line."""

    path: Path
    root: yaml.Node | None = None
    line: int | None = None

    def line_at(self, loc: Loc) -> int | None:
        """1-based line of the deepest node that ``loc`` reaches (a key's line for mappings)."""
        return self.reach(loc)[1]

    def reach(self, loc: Loc) -> tuple[int, int | None]:
        """How many parts of ``loc`` exist in the tree, and :meth:`line_at` of ``loc``."""
        if self.root is None:
            return 0, self.line
        node, line, depth = self.root, self.root.start_mark.line, 0
        for part in loc:
            found = _child(node, part)
            if found is None:
                break
            (node, line), depth = found, depth + 1
        return depth, line + 1


def _child(node: yaml.Node, part: str | int) -> tuple[yaml.Node, int] | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                return value, key.start_mark.line
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
        return node.value[part], node.value[part].start_mark.line
    return None


def validate(
    cls: type[_ModelT], data: Any, what: str, source: Source, prefixes: Sequence[Loc] = ((),)
) -> _ModelT:
    """``cls.model_validate(data)``; the first error becomes a ProfileError at its line.

    The line is that of the error's key under the prefix that reaches deepest into the file,
    the last of equally deep ones (a variant's keys override its base's); the first prefix's
    own line when no key of the error is written under any of them (a missing key).
    """
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        # A misspelt key explains the "missing" error that comes with it: report it first.
        error = min(exc.errors(), key=lambda error: error["type"] != "extra_forbidden")
        loc = tuple(error["loc"])
        key = ".".join(str(part) for part in loc)
        if error["type"] == "missing":
            message = f"missing required key {key!r}"
        elif error["type"] == "extra_forbidden":
            # `name` is a field but never a key: YAML takes it from the key, JSONL from model_id.
            known = ", ".join(name for name in cls.model_fields if name != "name")
            message = f"unknown key {key!r}" + (f" (known keys: {known})" if len(loc) == 1 else "")
        else:
            message = f"{key or 'value'}: {error['msg']}"
        line = _error_line(source, prefixes, loc)
        raise ProfileError(f"{what}: {message}", source.path, line) from None


def _error_line(source: Source, prefixes: Sequence[Loc], loc: Loc) -> int | None:
    reached = [
        (source.reach(prefix + loc)[0] - len(prefix), index)
        for index, prefix in enumerate(prefixes)
    ]
    depth, index = max(reached)  # the deepest; the last of equally deep ones
    return source.line_at((prefixes[index] if depth > 0 else prefixes[0]) + loc)


def unknown_set(name: str, known: Iterable[str]) -> str:
    names = ", ".join(f"@{set_name}" for set_name in sorted(known)) or "none"
    return f"unknown model set '@{name}' (known sets: {names})"
