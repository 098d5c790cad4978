"""The run's OpenTelemetry export settings: ``--otel``, ``--otel-content`` and the standard
``OTEL_*`` variables, read and checked once on every process (no OpenTelemetry import).

Export is on when ``--otel`` is given or an OTLP endpoint variable is set
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), unless
``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``. A malformed variable is a
``pytest.UsageError`` naming it (never echoing a header's value: headers carry API keys).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OtelSettings:
    """Where and how a run's spans are sent; present on :class:`RunConfig` only when on."""

    endpoint: str  #: the traces URL the OTLP/HTTP exporter posts to (``.../v1/traces``)
    headers: tuple[tuple[str, str], ...] = ()  #: sent with each export (values are secrets)
    timeout_s: float = 10.0  #: per export request
    compression: str = "none"  #: ``none``, ``gzip`` or ``deflate``
    protocol: str = "http/protobuf"  #: the only protocol the exporter speaks here
    service_name: str = "pytest-llmbench"  #: the resource's ``service.name``
    content: bool = False  #: ``--otel-content``: prompts and answers (redacted) on spans

    def to_dict(self) -> dict[str, object]:
        """run.json's summary: the endpoint and the header names, never their values."""
        return {
            "endpoint": self.endpoint,
            "headers": sorted(name for name, _ in self.headers),
            "timeout_s": self.timeout_s,
            "compression": self.compression,
            "protocol": self.protocol,
            "service_name": self.service_name,
            "content": self.content,
        }
