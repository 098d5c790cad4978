"""The config stage: the llmbench options and the resolved :class:`RunConfig` of a run.

- :mod:`.options`: the table of command-line options and ini keys, registered with pytest and
  read back (command line > ini file > default); the ``llmbench`` command takes the flags it
  shares with a run from it.
- :mod:`.run_config`: :class:`RunConfig`, the frozen settings of one run.
- :mod:`.resolve`: the run's :class:`RunConfig` in the stash, which :mod:`.build` builds on
  first use from the options, the ``.env`` file (:mod:`.envfile`) and the profiles; a bad value
  is a ``pytest.UsageError``. Both load only then: a run without eval files never does.
- :mod:`.option_values`: values a run and the ``llmbench`` command both parse (ages, the repeat
  policy).

After ``spec`` in the stage order: it reads profiles (``models``) and judge dimensions
(``scoring``); the engine and every later stage read it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .options import (
    CACHE_MODES,
    CLIENT_CHOICES,
    DEFAULT_CACHE_DIR,
    DEFAULT_MODEL,
    DEFAULT_PATTERN,
    ERRORS_COUNT_AS,
    FLAGS,
    OPTIONS,
    SETTINGS,
    STREAM_MODES,
    Flag,
    Setting,
    add_options,
    eval_nodeid_matcher,
    eval_pattern,
    explicitly_configured,
    option_path,
    setting,
    shard_setting,
)
from .resolve import (
    ALLOWED_PATHS_KEY,
    RUN_CONFIG_KEY,
    allowed_paths,
    get_run_config,
    shadowed_model_notes,
)
from .run_config import RunConfig

if TYPE_CHECKING:
    from .build import build_run_config
    from .envfile import env_text_values
    from .option_values import (
        JudgeGate,
        format_age,
        parse_age,
        parse_judge_gate,
        parse_repeat_policy,
    )
    from .otel import OtelSettings

#: Names loaded on first use (module by name): not needed to start pytest.
_LAZY = {
    "build_run_config": "build",
    "env_text_values": "envfile",
    "format_age": "option_values",
    "JudgeGate": "option_values",
    "parse_judge_gate": "option_values",
    "parse_age": "option_values",
    "parse_repeat_policy": "option_values",
    "OtelSettings": "otel",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ALLOWED_PATHS_KEY",
    "CACHE_MODES",
    "CLIENT_CHOICES",
    "DEFAULT_CACHE_DIR",
    "DEFAULT_MODEL",
    "DEFAULT_PATTERN",
    "ERRORS_COUNT_AS",
    "FLAGS",
    "OPTIONS",
    "RUN_CONFIG_KEY",
    "SETTINGS",
    "STREAM_MODES",
    "Flag",
    "JudgeGate",
    "OtelSettings",
    "RunConfig",
    "Setting",
    "add_options",
    "allowed_paths",
    "build_run_config",
    "env_text_values",
    "eval_nodeid_matcher",
    "eval_pattern",
    "explicitly_configured",
    "format_age",
    "get_run_config",
    "option_path",
    "parse_age",
    "parse_judge_gate",
    "parse_repeat_policy",
    "setting",
    "shadowed_model_notes",
    "shard_setting",
]
