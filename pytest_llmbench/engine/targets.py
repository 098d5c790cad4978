"""Where and how to call a model profile: its :class:`CallTarget`, keys from the environment,
the embedded server started on first use."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..models import CallTarget, missing_key_error

if TYPE_CHECKING:
    from ..config import RunConfig
    from ..models import EmbeddedServer, ModelProfile

#: The key the embedded server wants; any non-empty string works, it checks none.
_EMBEDDED_KEY = "sk-llmbench-embedded"


class Targets:
    """Resolves the call targets of this process's models."""

    def __init__(self, state_dir: Path, owner_pid: int, client: str = "auto") -> None:
        self._state = (state_dir, owner_pid)
        self._client = client
        self._embedded: dict[bool, EmbeddedServer] = {}

    def target(self, profile: ModelProfile, *, scoring: bool = False) -> CallTarget:
        """Resolve where and how to call ``profile``; raise ProviderError when it cannot be.

        ``scoring``: the target of log-likelihood calls (the embedded model's is a server of
        its own, keeping the prompt's logits).
        """
        api_base, api_key = profile.api_base, None
        if profile.embedded:
            server = self._embedded_server(scoring)
            api_base, api_key = server.ensure_started().base_url, _EMBEDDED_KEY
        elif profile.api_key_env:
            # Here, not at the top: the profiles module loads pydantic and yaml, which a run
            # without eval files never needs (this module loads with the plugin's fixtures).
            from ..models import api_key_missing

            unset = api_key_missing(profile, os.environ)
            if unset:
                raise missing_key_error(profile.name, profile.model, [unset])
            api_key = os.environ[profile.api_key_env]
        target = self.unresolved(profile, api_base, api_key)
        if api_key is None:
            _check_key(target)
        return target

    def unresolved(
        self, profile: ModelProfile, api_base: str | None = None, api_key: str | None = None
    ) -> CallTarget:
        """``profile``'s target as the profile and the run's ``--client`` say, its endpoint
        and key as given (the session header routes these before any server starts)."""
        target = CallTarget(
            name=profile.name,
            model_id=profile.model,
            api_base=api_base if api_base is not None else profile.api_base,
            api_key=api_key,
            params=dict(profile.params),
            extra=dict(profile.litellm),
            client="litellm" if self._client == "litellm" else profile.client,
            embedded=profile.embedded,
            batch=profile.batch,
        )
        return profile.priced(target)

    def _embedded_server(self, scoring: bool) -> EmbeddedServer:
        server = self._embedded.get(scoring)
        if server is None:
            from ..models import EmbeddedServer

            server = self._embedded[scoring] = EmbeddedServer(*self._state, scoring=scoring)
        return server


def clients_line(run: RunConfig, judges: bool) -> str:
    """The session header's line: which client calls each model of the run (and each judge
    when ``judges``: the panel was chosen, not the default)."""
    from ..models import describe

    return f"llmbench: clients: {describe(_header_targets(run, judges))}"


def batch_lines(run: RunConfig, judges: bool) -> list[str]:
    """The session header's lines under ``--batch``: for each model of the run (and each judge
    when ``judges``), through which batch API its batchable calls go, or why they stay live."""
    if not run.batch:
        return []
    from ..models import describe_batch
    from . import batching

    def route(target: CallTarget) -> Any:
        return batching.batch_backend(target, "chat")

    lines = describe_batch(_header_targets(run, judges), route)
    return [f"llmbench: batch: {line}" for line in lines]


def _header_targets(run: RunConfig, judges: bool) -> list[CallTarget]:
    """The run's models (and judges, when ``judges``: the panel was chosen, not the default)
    as the session header shows them, before any endpoint starts: the embedded server's
    address is known once it starts, and any endpoint routes the same."""
    targets = Targets(Path(), 0, run.client)
    chosen = (*run.models, *(run.judges if judges else ()))
    profiles = {profile.name: profile for profile in chosen}
    return [
        targets.unresolved(profile, "http://127.0.0.1" if profile.embedded else None)
        for profile in profiles.values()
    ]


def _check_key(target: CallTarget) -> None:
    """Refuse ``target``, which has no key of its own, before any request when it needs one:
    an OpenAI-protocol model by the clients' one rule (a remote endpoint, its host named), any
    other without an endpoint of its own by the ``*_API_KEY`` variables litellm says it needs."""
    from ..models import check_key, speaks_openai

    if speaks_openai(target):
        check_key(target)
        return
    if target.api_base is not None:
        return  # a provider's own endpoint: its keys may come from where litellm cannot see
    from ..models import missing_api_keys

    missing = missing_api_keys(target.model_id)
    if missing:
        raise missing_key_error(target.name, target.model_id, missing)
