"""The run's OpenTelemetry export settings: ``--otel``, ``--otel-content`` and the standard
``OTEL_*`` variables, read and checked once on every process (no OpenTelemetry import).

Export is on when ``--otel`` is given or an OTLP endpoint variable is set
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), unless
``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``. A malformed variable is a
``pytest.UsageError`` naming it (never echoing a header's value: headers carry API keys).
"""

from __future__ import annotations

from collections.abc import Mapping
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

    @property
    def shown_endpoint(self) -> str:
        """The endpoint as messages and run.json show it: without a user and password or a
        query (credentials live there too)."""
        return shown_url(self.endpoint)

    def to_dict(self) -> dict[str, object]:
        """run.json's summary: the endpoint and the header names, never their values."""
        return {
            "endpoint": self.shown_endpoint,
            "headers": sorted(name for name, _ in self.headers),
            "timeout_s": self.timeout_s,
            "compression": self.compression,
            "protocol": self.protocol,
            "service_name": self.service_name,
            "content": self.content,
        }


#: The OTLP protocols: the HTTP exporter of the ``otel`` extra speaks protobuf over HTTP only.
_PROTOCOLS = ("http/protobuf",)
_COMPRESSIONS = ("none", "gzip", "deflate")
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_DEFAULT_ENDPOINT = "http://localhost:4318"
_TRACES_PATH = "/v1/traces"


def otel_settings(on: bool, content: bool, environ: Mapping[str, str]) -> OtelSettings | None:
    """The run's export settings, or None when it exports nothing.

    ``on`` is ``--otel``; an endpoint variable turns export on too. The traces variables win
    over the general ones, as the OpenTelemetry specification says; a general endpoint gets
    ``/v1/traces`` appended, a traces endpoint is taken as it is. Raises ``ValueError`` naming
    the variable (or ``--otel-content``) when one is malformed.
    """
    endpoint_var = next((name for name in _ENDPOINTS if environ.get(name, "").strip()), None)
    if _disabled(environ) or not (on or endpoint_var):
        if content and not on:
            raise ValueError("--otel-content needs --otel (or an OTEL_EXPORTER_OTLP_ENDPOINT)")
        return None
    return OtelSettings(
        endpoint=_endpoint(endpoint_var, environ),
        headers=_headers(environ),
        timeout_s=_timeout(environ),
        compression=_choice(environ, "COMPRESSION", _COMPRESSIONS, "none"),
        protocol=_choice(environ, "PROTOCOL", _PROTOCOLS, "http/protobuf"),
        service_name=environ.get("OTEL_SERVICE_NAME", "").strip() or "pytest-llmbench",
        content=content,
    )


def _disabled(environ: Mapping[str, str]) -> bool:
    sdk_off = environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
    return sdk_off or environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none"


def _specific(environ: Mapping[str, str], suffix: str) -> tuple[str, str] | None:
    """The traces variable ``OTEL_EXPORTER_OTLP_TRACES_<suffix>``, else the general one, as
    (name, value), or None when neither is set."""
    for name in (f"OTEL_EXPORTER_OTLP_TRACES_{suffix}", f"OTEL_EXPORTER_OTLP_{suffix}"):
        value = environ.get(name, "").strip()
        if value:
            return name, value
    return None


def shown_url(url: str) -> str:
    """``url`` without its user, password, query and fragment: what a message may show."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "<a malformed URL>"
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _endpoint(name: str | None, environ: Mapping[str, str]) -> str:
    from urllib.parse import urlsplit

    raw = environ[name].strip() if name else _DEFAULT_ENDPOINT
    try:
        parts = urlsplit(raw)
    except ValueError:
        raise ValueError(f"{name} is not a URL: {shown_url(raw)!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        where = name or "the default endpoint"
        shown = shown_url(raw)
        raise ValueError(f"{where} must be an http:// or https:// URL with a host, got {shown!r}")
    try:
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        raise ValueError(f"{name} has a bad port: {shown_url(raw)!r}") from None
    if name == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT":
        return raw
    return parts._replace(path=parts.path.rstrip("/") + _TRACES_PATH).geturl()


def _headers(environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``key=value`` pairs, comma-separated, values percent-encoded (W3C Baggage's format).
    A malformed pair is named by its position, never by its value (it may hold a key)."""
    from urllib.parse import unquote

    found = _specific(environ, "HEADERS")
    if found is None:
        return ()
    name, raw = found
    pairs = []
    for number, item in enumerate(raw.split(","), 1):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or any(c.isspace() for c in key.strip()):
            raise ValueError(f"{name}: entry {number} is not key=value (values are not shown)")
        pairs.append((key.strip().lower(), unquote(value.strip())))
    return tuple(pairs)


def _timeout(environ: Mapping[str, str]) -> float:
    """The export timeout in seconds (the variables give milliseconds)."""
    found = _specific(environ, "TIMEOUT")
    if found is None:
        return 10.0
    name, raw = found
    try:
        millis = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of milliseconds, got {raw!r}") from None
    if not 0 < millis < float("inf"):
        raise ValueError(f"{name} must be a positive number of milliseconds, got {raw!r}")
    return millis / 1000.0


def _choice(environ: Mapping[str, str], suffix: str, allowed: tuple[str, ...], default: str) -> str:
    found = _specific(environ, suffix)
    if found is None:
        return default
    name, raw = found
    if raw.lower() not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {raw!r}")
    return raw.lower()
