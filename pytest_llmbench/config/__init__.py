"""The config stage: the llmbench options and the resolved :class:`RunConfig` of a run.

- :mod:`.options`: the table of command-line options and ini keys, registered with pytest and
  read back (command line > ini file > default); the ``llmbench`` command takes the flags it
  shares with a run from it.
- :mod:`.run_config`: :class:`RunConfig`, the frozen settings of one run.
- :mod:`.resolve`: reading the options, the ``.env`` file (:mod:`.envfile`) and the profiles
  into the run's :class:`RunConfig`, on first use; a bad value is a ``pytest.UsageError``.
- :mod:`.option_values`: values a run and the ``llmbench`` command both parse (ages, the repeat
  policy).

After ``spec`` in the stage order: it reads profiles (``models``) and judge dimensions
(``scoring``); the engine and every later stage read it.
"""

from __future__ import annotations

from .envfile import env_text_values
from .option_values import format_age, parse_age, parse_repeat_policy
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
    explicitly_configured,
    setting,
    shard_setting,
)
from .resolve import (
    ALLOWED_PATHS_KEY,
    RUN_CONFIG_KEY,
    allowed_paths,
    build_run_config,
    get_run_config,
    option_path,
    shadowed_model_notes,
)
from .run_config import RunConfig

#: The old private name: results.retry and results.recorder import it so.
_path = option_path

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
    "RunConfig",
    "Setting",
    "add_options",
    "allowed_paths",
    "build_run_config",
    "env_text_values",
    "explicitly_configured",
    "format_age",
    "get_run_config",
    "option_path",
    "parse_age",
    "parse_repeat_policy",
    "setting",
    "shadowed_model_notes",
    "shard_setting",
]
