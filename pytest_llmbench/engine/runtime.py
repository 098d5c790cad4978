"""The per-process runtime: engine, embedded server, keys and redaction, created on first use.

Stored in ``config.stash``; the controller (or the only process, without xdist) owns the
embedded server's session directory and stops the server at unconfigure.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..config import RunConfig, get_run_config
from ..models.providers.completion import CallTarget, Completion, ProviderError
from ..redact import Redactor
from .loop import Engine

if TYPE_CHECKING:
    from ..models.profiles import ModelProfile
    from ..models.providers.embedded import EmbeddedServer
    from .scheduler import CallScheduler

RUNTIME_KEY = pytest.StashKey["Runtime"]()
#: The items this process collected, in run order (for the stream sample).
ITEMS_KEY = pytest.StashKey[list[pytest.Item]]()
STATE_DIR_KEY = pytest.StashKey[tuple[str, int]]()
#: The key the embedded server wants; any non-empty string works, it checks none.
_EMBEDDED_KEY = "sk-llmbench-embedded"


def session_state(config: pytest.Config) -> tuple[Path, int]:
    """The shared session directory and the pid of the process that owns the run."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "llmbench_state_dir" in workerinput:
        return Path(workerinput["llmbench_state_dir"]), int(workerinput["llmbench_owner_pid"])
    state = config.stash.get(STATE_DIR_KEY, None)
    if state is None:
        name = f"pytest-llmbench-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        state = (str(Path(tempfile.gettempdir()) / name), os.getpid())
        config.stash[STATE_DIR_KEY] = state
    return Path(state[0]), state[1]


class Runtime:
    """Everything one process needs to call models."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        key_vars = [p.api_key_env for p in self.run.profiles.models.values() if p.api_key_env]
        self.redactor = Redactor.from_environ(os.environ, key_vars)
        self.engine = Engine()
        self._embedded: EmbeddedServer | None = None
        self._scheduler: CallScheduler | None = None

    @property
    def run(self) -> RunConfig:
        """The run's config (``--check-models --skip-unavailable`` may narrow its models)."""
        return get_run_config(self.config)

    def scheduler(self) -> CallScheduler:
        """The call scheduler of this process (created on first use, with the run's items)."""
        if self._scheduler is None:
            from .scheduler import CallScheduler

            workerinput = getattr(self.config, "workerinput", None) or {}
            self._scheduler = CallScheduler(self, int(workerinput.get("workercount", 1)))
            items: list[pytest.Item] = self.config.stash.get(ITEMS_KEY, [])
            self._scheduler.set_items(items)
        return self._scheduler

    def target(self, profile: ModelProfile) -> CallTarget:
        """Resolve where and how to call ``profile``; raise ProviderError when it cannot be."""
        api_base, api_key = profile.api_base, None
        if profile.embedded:
            api_base, api_key = self._embedded_server().ensure_started().base_url, _EMBEDDED_KEY
        elif profile.api_key_env:
            api_key = os.environ.get(profile.api_key_env) or None
            if api_key is None:
                raise _missing_key(profile, [profile.api_key_env])
        elif profile.api_base is None:
            from ..models.providers.litellm_adapter import missing_api_keys

            missing = missing_api_keys(profile.model)
            if missing:
                raise _missing_key(profile, missing)
        cost = profile.cost_per_1k
        return CallTarget(
            name=profile.name,
            model_id=profile.model,
            api_base=api_base,
            api_key=api_key,
            params=dict(profile.params),
            extra=dict(profile.litellm),
            cost_per_1k_input=cost.input if cost else None,
            cost_per_1k_output=cost.output if cost else None,
        )

    def complete(
        self, profile: ModelProfile, messages: Sequence[dict[str, Any]], params: dict[str, Any]
    ) -> Completion:
        """One model call, run on the engine loop."""
        from ..models.providers.litellm_adapter import acomplete

        target = self.target(profile)
        coro = acomplete(
            target,
            messages,
            params,
            timeout_s=self.run.request_timeout_s,
            max_retries=self.run.max_retries,
        )
        return self.engine.run(coro)

    def _embedded_server(self) -> EmbeddedServer:
        if self._embedded is None:
            from ..models.providers.embedded import EmbeddedServer

            state_dir, owner = session_state(self.config)
            self._embedded = EmbeddedServer(state_dir, owner)
        return self._embedded

    def close(self) -> None:
        """Cancel pending calls and stop the engine loop of this process."""
        if self._scheduler is not None:
            self._scheduler.close()
        self.engine.close()


def _missing_key(profile: ModelProfile, names: list[str]) -> ProviderError:
    needed = " or ".join(names)
    verb = "is" if len(names) == 1 else "are"
    message = f"{profile.name}: {needed} {verb} not set (needed for {profile.model})"
    return ProviderError(message, "missing_key")


def get_runtime(config: pytest.Config) -> Runtime:
    """The process's runtime, created on first use."""
    runtime = config.stash.get(RUNTIME_KEY, None)
    if runtime is None:
        runtime = Runtime(config)
        config.stash[RUNTIME_KEY] = runtime
    return runtime


def shutdown(config: pytest.Config) -> None:
    """Close this process's runtime; the owning process also stops the embedded server."""
    runtime = config.stash.get(RUNTIME_KEY, None)
    if runtime is not None:
        runtime.close()
    if hasattr(config, "workerinput"):
        return
    state = config.stash.get(STATE_DIR_KEY, None)
    if state is not None and Path(state[0]).exists():
        from ..models.providers.embedded import EmbeddedServer

        EmbeddedServer(Path(state[0]), state[1]).stop()
