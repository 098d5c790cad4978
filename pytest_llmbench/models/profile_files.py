"""Profile files read into a :class:`~.profiles.ProfileRegistry`: YAML ``models:``/``sets:``
files, 360-eval's JSONL files (:mod:`.eval360`) and the shipped ``builtin.yaml``.

Every error is a :class:`~.profiles.ProfileError` naming the file and line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from ..yamlguard import YamlLimitError, check_yaml_limits
from .profiles import (
    BUILTIN_PROFILES,
    PROFILE_SUFFIXES,
    Loc,
    ModelProfile,
    ProfileError,
    ProfileFile,
    ProfileRegistry,
    SetDef,
    Source,
    unknown_set,
    validate,
)

_MERGED_KEYS = ("params", "litellm", "tags")


def load_profiles(paths: Sequence[Path]) -> ProfileRegistry:
    """Load ``builtin.yaml``, then each of ``paths`` in order; later definitions win by name.

    A directory contributes its ``*.yaml``, ``*.yml`` and ``*.jsonl`` files sorted by name, and a
    missing path without one of those suffixes is taken as a missing directory and ignored. Set
    members ``@name`` are expanded once everything is loaded, so a set may use sets of any file.
    """
    models: dict[str, ModelProfile] = {}
    sets: dict[str, SetDef] = {}
    groups: set[str] = set()
    origins: dict[str, Path] = {}
    for file in [BUILTIN_PROFILES, *(f for path in paths for f in _profile_files(path))]:
        loaded = _load_file(file)
        for name in [*loaded.models, *loaded.groups]:
            origins[name] = file
        # A later file's profile replaces an earlier variant group of that name, and back.
        groups.difference_update(loaded.models)
        for name in loaded.groups:
            models.pop(name, None)
        groups.update(loaded.groups)
        models.update(loaded.models)
        sets.update(loaded.sets)
    expanded = {name: _expand_set(name, sets) for name in sets}
    return ProfileRegistry(
        models=models,
        sets=expanded,
        variant_groups=frozenset(groups),
        origins={name: file for name, file in origins.items() if file != BUILTIN_PROFILES},
    )


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


def _refuse_name_key(what: str, body: Mapping[str, Any], source: Source, loc: Loc) -> None:
    if "name" in body:
        message = f"{what}: unknown key 'name' (a profile is named by its key)"
        raise ProfileError(message, source.path, source.line_at((*loc, "name")))


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


def _check_variant_keys(what: str, keys: Any, source: Source, loc: Loc) -> None:
    if not isinstance(keys, dict):
        message = f"{what}: expected a mapping of profile keys"
        raise ProfileError(message, source.path, source.line_at(loc))
    known = [key for key in ModelProfile.model_fields if key != "name"]
    for key in keys:
        if key not in known:
            message = f"{what}: unknown key {key!r} (known keys: {', '.join(known)})"
            raise ProfileError(message, source.path, source.line_at((*loc, key)))


def _variant_fields(
    base: Mapping[str, Any], keys: Mapping[str, Any], variant: str
) -> dict[str, Any]:
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
    try:
        check_yaml_limits(text)
    except YamlLimitError as exc:
        raise ProfileError(f"invalid YAML: {exc.message}", path, exc.line) from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        return node, None if node is None else loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = None if mark is None else mark.line + 1
        raise ProfileError(f"invalid YAML: {exc.problem or exc.context}", path, line) from None
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: an int past Python's digit limit
        raise ProfileError(f"invalid YAML: {exc}", path) from None
    finally:
        loader.dispose()


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
            problem = f"model set '@{name}': {unknown_set(ref, sets)}"
            raise ProfileError(problem, definition.path, definition.line)
        else:
            members.extend(_expand_set(ref, sets, trail))
    return tuple(dict.fromkeys(members))
