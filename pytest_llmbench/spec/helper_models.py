"""The models an eval file names besides the evaluated ones: judge panels and shim models.

Collection (``EvalFile``) and ``llmbench validate`` resolve them the same way, against the
profiles, so an unknown ``@set`` is the same :class:`~pytest_llmbench.spec.resolved.EvalFileError` at
the same line in both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..models import ModelProfile, ProfileRegistry
    from ..scoring import Assertion, RelevanceSpec
    from .resolved import EvalCase, LoadedEval


def shim_model(loaded: LoadedEval, registry: ProfileRegistry) -> ModelProfile | None:
    """An agent file's ``tool_shim_model``, resolved; ``None`` when it names none."""
    from ..models import ProfileError
    from .resolved import EvalFileError

    name = loaded.agent.shim_model if loaded.agent is not None else None
    if name is None:
        return None
    try:
        return registry.resolve(name)[0]
    except (ProfileError, IndexError) as exc:
        raise EvalFileError(loaded.path, None, f"tool_shim_model: {exc}") from None


def assertion_panel(
    loaded: LoadedEval,
    case: EvalCase,
    assertion: Assertion,
    registry: ProfileRegistry,
    default: Sequence[ModelProfile],
) -> tuple[ModelProfile, ...]:
    """The judges of a model-graded assertion: its own ``judges``, else ``default`` (the run's
    ``--judges``); the one embedding model of a similarity by embedding; the first judge only
    for an ``llm-rubric``. ``()`` for an assertion that is not model-graded."""
    from ..models import ProfileError
    from ..scoring import JudgeSpec, RelevanceSpec
    from .resolved import EvalFileError

    spec = assertion.graded
    if spec is None:
        return ()
    try:
        if not isinstance(spec, JudgeSpec):  # similarity by embedding: one model
            judges = tuple(registry.resolve(spec.model))[:1]
        elif spec.judges:
            judges = tuple(registry.resolve(",".join(spec.judges)))
        else:
            judges = tuple(default)
    except ProfileError as exc:
        message = f"case {case.id!r}: {assertion.type} judges: {exc}"
        raise EvalFileError(loaded.path, case.line, message) from None
    if isinstance(spec, RelevanceSpec):  # the embedding model goes last, after the panel
        return (*judges, _embedder(loaded, case, spec, registry))
    return judges[:1] if assertion.base_type == "llm-rubric" else judges


def _embedder(
    loaded: LoadedEval, case: EvalCase, spec: RelevanceSpec, registry: ProfileRegistry
) -> ModelProfile:
    """``answer-relevance``'s ``embedding_model``, resolved: one model."""
    from ..models import ProfileError
    from .resolved import EvalFileError

    try:
        return registry.resolve(spec.embedding_model)[0]
    except (ProfileError, IndexError) as exc:
        message = f"case {case.id!r}: answer-relevance embedding_model: {exc}"
        raise EvalFileError(loaded.path, case.line, message) from None


def user_sim_model(
    loaded: LoadedEval,
    case: EvalCase,
    registry: ProfileRegistry,
    judges: Sequence[ModelProfile],
    model: ModelProfile,
) -> ModelProfile:
    """The model playing a ``simulated_user:`` case's user: its own ``model``, else the first
    of ``judges`` (the run's ``--judges``), else ``model`` (the one under test)."""
    from ..models import ProfileError
    from .resolved import EvalFileError

    user = case.simulated_user
    assert user is not None
    if user.model is None:
        return judges[0] if judges else model
    try:
        return registry.resolve(user.model)[0]
    except (ProfileError, IndexError) as exc:
        message = f"case {case.id!r}: simulated_user model: {exc}"
        raise EvalFileError(loaded.path, case.line, message) from None
