"""A case's fingerprint: :func:`case_hash`, a short digest of everything that decides one case's
outcome (the rendered messages, a conversation's turns, the expected answer, the assertions with
their weights and thresholds, the case's model parameters, tools and solver or agent settings),
and of nothing else (not its id, tags, description or line, not the model under test, not the
run's options). Records carry it as ``case_hash``; the baseline pairs only cases whose hashes
match (:mod:`.results.baseline`).

A shared module: it imports no stage, so the spec stage (whose loader gives each case a
:class:`CaseHasher`; the case digests itself once, when its first record asks) uses it. The run's
sources (git state, file hashes) are :mod:`.provenance`'s.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "CASE_FIELDS",
    "CASE_HASH_CHARS",
    "CaseHasher",
    "case_hash",
]

#: Hex characters of a case hash: 64 bits, plenty to tell the versions of one case apart.
CASE_HASH_CHARS = 16
#: The fields of a resolved case (``spec.schema.EvalCase``) that decide its outcome. Left out on
#: purpose: ``id``, ``tags``, ``line`` (naming and selection), ``prompt_variant`` (part of the
#: model label; its text is in ``messages``), ``template``/``template_vars`` (rendered into
#: ``messages``), ``expected_output_tokens`` (only the cost estimate reads it).
CASE_FIELDS: tuple[str, ...] = (
    "messages",
    "expected",
    "assertions",
    "threshold",
    "model_params",
    "files",
    "vars",
    "task",
    "judge_metrics",
    "include_dirs",
    "images",
    "choices",
    "answer_index",
    "choice_labels",
    "loglikelihood",
)


def case_hash(case: Any, settings: Mapping[str, Any], base: Path) -> str:
    """The ``case_hash`` of a resolved case (an ``EvalCase``): :data:`CASE_HASH_CHARS` hex
    characters of the sha256 of the canonical JSON (sorted keys, the same text in every process:
    no ``hash()``) of its :data:`CASE_FIELDS` and the eval file's ``settings`` that
    change an answer (solver, agent tools and limits). The files it names (images,
    ``include_dirs``) are taken relative to ``base``, the eval file's folder, so that a
    checkout elsewhere hashes alike."""
    return CaseHasher(settings, base)(case)


class CaseHasher:
    """:func:`case_hash` for the cases of one eval file: the file's ``settings`` converted once,
    and the assertions converted without the deep copies of :func:`dataclasses.asdict` (the
    same digests; collecting 10,000 cases spent 0.45 s in those copies)."""

    def __init__(self, settings: Mapping[str, Any], base: Path) -> None:
        self._settings = {key: _fields(value) for key, value in settings.items()}
        self._base = base
        #: each seed's digest, by the seed object the file's cases share (kept, so that its id
        #: is never another's): a large seed is encoded once per file, not once per case
        self._seeds: dict[int, tuple[Any, str]] = {}

    def __call__(self, case: Any) -> str:
        base = self._base
        payload = {name: getattr(case, name) for name in CASE_FIELDS}
        payload["assertions"] = [_plain(item) for item in case.assertions]
        if case.loglikelihood is not None:
            payload["loglikelihood"] = _plain(case.loglikelihood)
        payload["include_dirs"] = [_relative_name(str(path), base) for path in case.include_dirs]
        payload["images"] = [_relative_name(ref, base) for ref in case.images]
        payload["settings"] = self._settings
        turns = getattr(case, "turns", ())
        if turns:  # only when given: the hashes of cases without turns stay what they were
            payload["turns"] = [_plain(turn) for turn in turns]
        user = getattr(case, "simulated_user", None)
        if user is not None:  # as turns: only when given
            payload["simulated_user"] = _plain(user)
        context = getattr(case, "context", None)
        if context is not None:  # as turns: only when given (its text may not be in a prompt)
            payload["context"] = list(context)
        seed = getattr(case, "state_seed", None)
        if seed is not None:  # as turns: only when given (an environment's starting state)
            payload["state_seed"] = self._seed_digest(seed)
        actions = getattr(case, "expected_actions", None)
        if actions is not None:  # as turns; each action's line is naming, not outcome
            payload["expected_actions"] = [
                {"name": action.name, "arguments": action.arguments} for action in actions
            ]
        # Here, not at the top: yamlguard loads yaml, which a run without eval files never needs
        # (this module loads with the plugin); once loaded, the import is a dictionary lookup.
        from .yamlguard import json_text

        try:
            text = json_text(payload, canonical=True)
        except TypeError:  # keys of mixed types (``{1: a, b: c}`` in vars): their written order
            text = repr(payload)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:CASE_HASH_CHARS]

    def _seed_digest(self, seed: Any) -> str:
        """The digest of an environment's seed (a JSON state, or SQL text), once per object."""
        known = self._seeds.get(id(seed))
        if known is None or known[0] is not seed:
            from .yamlguard import json_text

            text = json_text(seed, canonical=True)
            known = self._seeds[id(seed)] = (seed, hashlib.sha256(text.encode()).hexdigest())
        return known[1]


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """``value`` with every dataclass inside it a dict of its fields, as
    :func:`dataclasses.asdict` gives it, without copying the rest (only read, then digested)."""
    if type(value) in _SCALARS:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        plain = {name: _plain(getattr(value, name)) for name in _field_names(type(value))}
        for name, default in _digested_when_set(type(value)):
            if plain[name] == default:  # a newer setting left at its default: as before it was
                del plain[name]
        return plain
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return value


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(field.name for field in dataclasses.fields(cls))


@functools.cache
def _digested_when_set(cls: type) -> tuple[tuple[str, Any], ...]:
    """The fields of ``cls`` marked ``metadata={"digest": "when_set"}``, with their defaults:
    digested only when they differ from the default, so that adding one changes no hash."""
    return tuple(
        (field.name, field.default)
        for field in dataclasses.fields(cls)
        if field.metadata.get("digest") == "when_set"
    )


def _fields(value: Any) -> Any:
    """A dataclass value (``AgentSpec``) as a dict; any other value as it is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def _relative_name(ref: str, base: Path) -> str:
    """A resolved path as it reads from ``base``; a URL as it is."""
    return os.path.relpath(ref, base) if os.path.isabs(ref) else ref
