"""Spec: what to run, read from ``*.eval.yaml`` files (after ``models`` and ``scoring``).

:mod:`.load` reads one file with line numbers (:mod:`.yamlsource`), validates it against
:mod:`.schema` (the file as written; ``kind:`` one of the file kinds of :mod:`.file_kinds`) and
expands it (:mod:`.expand`: each case by its kind, dataset rows from :mod:`.datasets`, prompt
variants, prompts rendered by :mod:`.templating`, images checked by :mod:`.images`) into the
resolved values of :mod:`.resolved`: a :class:`LoadedEval` of :class:`EvalCase` values; every
error is an :class:`EvalFileError` naming file and line. :mod:`.variants` is the experiment
matrix of one case and model; :mod:`.helper_models` resolves the judges and shim models a
file names; :mod:`.validate` is ``llmbench validate``.

This is the stage's face: the names below are what other stages and the pytest shell import from
it (tests/test_layout.py checks that they import nothing else of it). Each is imported from its
module when first asked for, so that importing the stage loads nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import face_attribute

if TYPE_CHECKING:
    from .context import ContextError, context_chunks, context_record
    from .file_kinds import FILE_KINDS, FileKind, file_kind
    from .functions import FunctionTools, shim_applies
    from .graders import grader_prompt, needs_context
    from .helper_models import assertion_panel, shim_model, user_sim_model
    from .images import ImageError, attach_images, describe_ref, unsupported_message, vision_support
    from .load import load_spec
    from .paths import workdir_path
    from .resolved import (
        EVAL_SUFFIX,
        AgentSpec,
        Environment,
        EvalCase,
        EvalFileError,
        ExpectedAction,
        LoadedEval,
        McpServer,
        ScoredOptions,
        SimulatedUser,
        Turn,
        suite_name,
    )
    from .templating import TEMPLATE_VAR, last_user_text, message_text, render_template
    from .turns import with_case_checks
    from .validate import UsageFailure, validate_command
    from .variants import (
        PLAIN,
        PromptVariantWarning,
        Variant,
        configured_temperature,
        temperature_variations,
    )

#: Each name of the face, by the module of the stage that defines it.
_FACE: dict[str, str] = {
    "ContextError": "context",
    "context_chunks": "context",
    "context_record": "context",
    "FunctionTools": "functions",
    "shim_applies": "functions",
    "grader_prompt": "graders",
    "needs_context": "graders",
    "assertion_panel": "helper_models",
    "shim_model": "helper_models",
    "user_sim_model": "helper_models",
    "ImageError": "images",
    "attach_images": "images",
    "describe_ref": "images",
    "unsupported_message": "images",
    "vision_support": "images",
    "FILE_KINDS": "file_kinds",
    "FileKind": "file_kinds",
    "file_kind": "file_kinds",
    "load_spec": "load",
    "workdir_path": "paths",
    "AgentSpec": "resolved",
    "EVAL_SUFFIX": "resolved",
    "EvalCase": "resolved",
    "EvalFileError": "resolved",
    "LoadedEval": "resolved",
    "McpServer": "resolved",
    "Environment": "resolved",
    "ExpectedAction": "resolved",
    "ScoredOptions": "resolved",
    "SimulatedUser": "resolved",
    "Turn": "resolved",
    "suite_name": "resolved",
    "TEMPLATE_VAR": "templating",
    "last_user_text": "templating",
    "message_text": "templating",
    "render_template": "templating",
    "with_case_checks": "turns",
    "UsageFailure": "validate",
    "validate_command": "validate",
    "PLAIN": "variants",
    "PromptVariantWarning": "variants",
    "Variant": "variants",
    "configured_temperature": "variants",
    "temperature_variations": "variants",
}

__all__ = [
    "EVAL_SUFFIX",
    "FILE_KINDS",
    "PLAIN",
    "TEMPLATE_VAR",
    "AgentSpec",
    "ContextError",
    "Environment",
    "EvalCase",
    "EvalFileError",
    "ExpectedAction",
    "FileKind",
    "FunctionTools",
    "ImageError",
    "LoadedEval",
    "McpServer",
    "PromptVariantWarning",
    "ScoredOptions",
    "SimulatedUser",
    "Turn",
    "UsageFailure",
    "Variant",
    "assertion_panel",
    "attach_images",
    "configured_temperature",
    "context_chunks",
    "context_record",
    "describe_ref",
    "file_kind",
    "grader_prompt",
    "last_user_text",
    "load_spec",
    "message_text",
    "needs_context",
    "render_template",
    "shim_applies",
    "shim_model",
    "suite_name",
    "temperature_variations",
    "unsupported_message",
    "user_sim_model",
    "validate_command",
    "vision_support",
    "with_case_checks",
    "workdir_path",
]


def __getattr__(name: str) -> Any:
    """A name of the face, imported from its module on first use."""
    return face_attribute(globals(), _FACE, name)
