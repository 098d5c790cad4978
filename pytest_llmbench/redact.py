"""Keep secrets out of every file, log and report we write.

A secret is the value of an environment variable that a profile names as its key variable, or
whose name looks like a credential (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ...). Values are
replaced by ``[REDACTED:NAME]`` wherever they appear, in any nested record value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# TOKEN only as a whole word at the end (GITHUB_TOKEN, HF_TOKEN), not MAX_TOKENS and the like.
_SECRET_NAME = re.compile(
    r"(API_?KEY|(^|_)TOKEN$|SECRET|PASSWORD|PASSWD|CREDENTIALS?|ACCESS_KEY|PRIVATE_KEY)",
    re.IGNORECASE,
)
#: Shorter values are too likely to occur in ordinary text to be replaced safely.
_MIN_SECRET_LENGTH = 6


@dataclass(frozen=True)
class Redactor:
    """Replaces known secret values with a marker naming their variable."""

    secrets: tuple[tuple[str, str], ...]  # (value, variable name), longest value first

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], key_vars: Iterable[str] = ()) -> Redactor:
        """Collect secrets from ``environ``: the named key variables and credential-like names."""
        names = set(key_vars) | {name for name in environ if _SECRET_NAME.search(name)}
        pairs = {
            environ[name]: name
            for name in sorted(names)
            if len(environ.get(name, "")) >= _MIN_SECRET_LENGTH
        }
        ordered = sorted(pairs.items(), key=lambda pair: -len(pair[0]))
        return cls(tuple(ordered))

    def text(self, value: str) -> str:
        """``value`` with every secret replaced."""
        for secret, name in self.secrets:
            if secret in value:
                value = value.replace(secret, f"[REDACTED:{name}]")
        return value

    def value(self, value: Any) -> Any:
        """Redact strings anywhere inside dicts (keys too), lists and tuples."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.value(key): self.value(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(item) for item in value]
        return value
