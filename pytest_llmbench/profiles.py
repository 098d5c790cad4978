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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

BUILTIN_PROFILES = Path(__file__).parent / "profiles" / "builtin.yaml"
PROFILE_SUFFIXES = (".yaml", ".yml", ".jsonl")

_Loc = tuple[str | int, ...]
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
# Names are selected in comma lists where a leading `@` means a set.
_PROFILE_NAME = r"^[^,@\s][^,]*$"
_ModelT = TypeVar("_ModelT", bound=BaseModel)


class CostPer1k(BaseModel):
    """Prices in USD per 1,000 tokens; they override litellm's price map."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    input: float = Field(ge=0)
    """USD per 1,000 prompt (input) tokens."""
    output: float = Field(ge=0)
    """USD per 1,000 completion (output) tokens."""


class ModelProfile(BaseModel):
    """One model as the plugin calls it: a litellm model string plus everything around the call."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

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

    @field_validator("params", "litellm")
    @classmethod
    def _no_inline_key(cls, value: dict[str, Any]) -> dict[str, Any]:
        # Profiles are committed to repositories; a key written here would leak.
        if "api_key" in value:
            raise ValueError("do not put 'api_key' in a profile; name its variable in api_key_env")
        return value

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
        return [self.get(name) or ModelProfile(name=name, model=name) for name in unique]

    def get(self, name: str) -> ModelProfile | None:
        """The profile called ``name``, or ``None``."""
        return self.models.get(name)

    def _set_members(self, name: str) -> tuple[str, ...]:
        if name not in self.sets:
            raise ProfileError(_unknown_set(name, self.sets))
        return self.sets[name]


def load_profiles(paths: Sequence[Path]) -> ProfileRegistry:
    """Load ``builtin.yaml``, then each of ``paths`` in order; later definitions win by name.

    A directory contributes its ``*.yaml``, ``*.yml`` and ``*.jsonl`` files sorted by name, and a
    missing path without one of those suffixes is taken as a missing directory and ignored. Set
    members ``@name`` are expanded once everything is loaded, so a set may use sets of any file.
    """
    models: dict[str, ModelProfile] = {}
    sets: dict[str, SetDef] = {}
    groups: set[str] = set()
    for file in [BUILTIN_PROFILES, *(f for path in paths for f in _profile_files(path))]:
        loaded = _load_file(file)
        # A later file's profile replaces an earlier variant group of that name, and back.
        groups.difference_update(loaded.models)
        for name in loaded.groups:
            models.pop(name, None)
        groups.update(loaded.groups)
        models.update(loaded.models)
        sets.update(loaded.sets)
    expanded = {name: _expand_set(name, sets) for name in sets}
    return ProfileRegistry(models=models, sets=expanded, variant_groups=frozenset(groups))


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

    def line_at(self, loc: _Loc) -> int | None:
        """1-based line of the deepest node that ``loc`` reaches (a key's line for mappings)."""
        return self.reach(loc)[1]

    def reach(self, loc: _Loc) -> tuple[int, int | None]:
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


class _YamlDocument(BaseModel):
    """The top level of a YAML profile file; profiles are validated one by one afterwards."""

    model_config = ConfigDict(extra="forbid")

    models: dict[str, dict[str, Any]] | None = None
    sets: dict[str, list[str]] | None = None


def _profile_files(path: Path) -> list[Path]:
    if path.is_dir():
        found = (p for p in path.iterdir() if p.suffix in PROFILE_SUFFIXES and p.is_file())
        return sorted(found, key=lambda p: p.name)
    if path.exists() or path.suffix in PROFILE_SUFFIXES:
        return [path]
    return []


def _load_file(path: Path) -> ProfileFile:
    if path.suffix not in PROFILE_SUFFIXES:
        raise ProfileError(f"not a profile file (expected {', '.join(PROFILE_SUFFIXES)})", path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"cannot read profile file: {exc}", path) from None
    if path.suffix == ".jsonl":
        from .eval360 import load_jsonl  # eval360 builds on this module: imported when used

        return load_jsonl(path, text)
    return _load_yaml(path, text)


def _load_yaml(path: Path, text: str) -> ProfileFile:
    root, data = _parse_yaml(path, text)
    if root is None:
        return ProfileFile()
    source = Source(path, root)
    if not isinstance(data, dict):
        message = "expected a mapping with 'models' and/or 'sets'"
        raise ProfileError(message, path, source.line_at(()))
    doc = validate(_YamlDocument, data, "profile file", source)
    sets = {
        name: SetDef(tuple(members), path, source.line_at(("sets", name)))
        for name, members in (doc.sets or {}).items()
    }
    models: dict[str, ModelProfile] = {}
    groups: list[str] = []
    bodies = doc.models or {}
    for name, body in bodies.items():
        if "variants" not in body:
            models[name] = _yaml_profile(name, body, source)
            continue
        if name in sets:
            message = f"profile {name!r}: its variants make a model set {name!r}; one exists"
            raise ProfileError(message, path, source.line_at(("models", name, "variants")))
        variants = _yaml_variants(name, body, source, taken={*bodies, *models})
        models.update(variants)
        sets[name] = SetDef(tuple(variants), path, source.line_at(("models", name)))
        groups.append(name)
    return ProfileFile(models, sets, frozenset(groups))


def _yaml_profile(name: str, body: dict[str, Any], source: Source) -> ModelProfile:
    what, loc = f"profile {name!r}", ("models", name)
    _refuse_name_key(what, body, source, loc)
    return validate(ModelProfile, {**body, "name": name}, what, source, (loc,))


def _refuse_name_key(what: str, body: Mapping[str, Any], source: Source, loc: _Loc) -> None:
    if "name" in body:
        message = f"{what}: unknown key 'name' (a profile is named by its key)"
        raise ProfileError(message, source.path, source.line_at((*loc, "name")))


#: Profile keys whose mappings a variant merges into the base's instead of replacing them.
_MERGED_KEYS = ("params", "litellm", "tags")


def _yaml_variants(
    name: str, body: dict[str, Any], source: Source, taken: set[str]
) -> dict[str, ModelProfile]:
    """The profiles ``<name>_<variant>`` of a profile with ``variants:``, in file order."""
    what, loc = f"profile {name!r}", ("models", name)
    _refuse_name_key(what, body, source, loc)
    base = {key: value for key, value in body.items() if key != "variants"}
    variants = body["variants"]
    if not isinstance(variants, dict) or not variants:
        message = f"{what}: 'variants' must be a non-empty mapping of variant name to keys"
        raise ProfileError(message, source.path, source.line_at((*loc, "variants")))
    profiles: dict[str, ModelProfile] = {}
    for variant, keys in variants.items():
        vloc = (*loc, "variants", variant)
        full = f"{name}_{variant}"
        if full in taken or full in profiles:
            message = f"{what}: variant {variant!r} makes profile {full!r}, which already exists"
            raise ProfileError(message, source.path, source.line_at(vloc))
        where = f"{what} variant {variant!r}"
        _check_variant_keys(where, keys, source, vloc)
        data = {**_variant_fields(base, keys, str(variant)), "name": full}
        profiles[full] = validate(ModelProfile, data, where, source, (loc, vloc))
    return profiles


def _check_variant_keys(what: str, keys: Any, source: Source, loc: _Loc) -> None:
    if not isinstance(keys, dict):
        message = f"{what}: expected a mapping of profile keys"
        raise ProfileError(message, source.path, source.line_at(loc))
    known = [key for key in ModelProfile.model_fields if key != "name"]
    for key in keys:
        if key not in known:
            message = f"{what}: unknown key {key!r} (known keys: {', '.join(known)})"
            raise ProfileError(message, source.path, source.line_at((*loc, key)))


def _variant_fields(base: Mapping[str, Any], keys: Mapping[str, Any], variant: str) -> dict:
    """``keys`` over ``base``: mappings of :data:`_MERGED_KEYS` merged, tag ``variant`` added."""
    fields = dict(base)
    for key, value in keys.items():
        old = fields.get(key)
        if key in _MERGED_KEYS and isinstance(old, dict) and isinstance(value, dict):
            value = {**old, **value}
        fields[key] = value
    tags = fields.get("tags", {})
    if isinstance(tags, dict):
        fields["tags"] = {**tags, "variant": variant}
    if isinstance(base.get("display_name"), str) and "display_name" not in keys:
        fields["display_name"] = f"{base['display_name']} ({variant})"
    return fields


def _parse_yaml(path: Path, text: str) -> tuple[yaml.Node | None, Any]:
    """The composed tree (for line numbers) and the data built from it, in one pass."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        return node, None if node is None else loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = None if mark is None else mark.line + 1
        raise ProfileError(f"invalid YAML: {exc.problem or exc.context}", path, line) from None
    except yaml.YAMLError as exc:
        raise ProfileError(f"invalid YAML: {exc}", path) from None
    finally:
        loader.dispose()


def _child(node: yaml.Node, part: str | int) -> tuple[yaml.Node, int] | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                return value, key.start_mark.line
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
        return node.value[part], node.value[part].start_mark.line
    return None


def validate(
    cls: type[_ModelT], data: Any, what: str, source: Source, prefixes: Sequence[_Loc] = ((),)
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


def _error_line(source: Source, prefixes: Sequence[_Loc], loc: _Loc) -> int | None:
    reached = [
        (source.reach(prefix + loc)[0] - len(prefix), index)
        for index, prefix in enumerate(prefixes)
    ]
    depth, index = max(reached)  # the deepest; the last of equally deep ones
    return source.line_at((prefixes[index] if depth > 0 else prefixes[0]) + loc)


def _expand_set(
    name: str, sets: Mapping[str, SetDef], trail: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """Members of set ``name`` with ``@other`` sets expanded in place, duplicates removed."""
    definition, trail = sets[name], (*trail, name)
    members: list[str] = []
    for member in definition.members:
        ref = member[1:].strip()
        if not member.startswith("@"):
            members.append(member)
        elif ref in trail:
            cycle = " -> ".join(f"@{n}" for n in (*trail[trail.index(ref) :], ref))
            problem = f"model set '@{name}' is cyclic: {cycle}"
            raise ProfileError(problem, definition.path, definition.line)
        elif ref not in sets:
            problem = f"model set '@{name}': {_unknown_set(ref, sets)}"
            raise ProfileError(problem, definition.path, definition.line)
        else:
            members.extend(_expand_set(ref, sets, trail))
    return tuple(dict.fromkeys(members))


def _unknown_set(name: str, known: Iterable[str]) -> str:
    names = ", ".join(f"@{set_name}" for set_name in sorted(known)) or "none"
    return f"unknown model set '@{name}' (known sets: {names})"
