"""Telemetry: a run seen from outside, as OpenTelemetry spans (after ``results``).

The controller turns each record into spans as it arrives (the record's ``trace`` field carries
the item's ids and its timed calls, :mod:`pytest_llmbench.engine.call_spans`) and sends them
through the OTLP/HTTP exporter of the ``otel`` extra, with the run's own span around them; the
span attributes follow the OpenTelemetry GenAI semantic conventions. Nothing here is imported
unless ``RunConfig.otel`` is set.

This is the stage's face: the names below are what other stages and the pytest shell import from
it (tests/test_layout.py checks that they import nothing else of it). Each is imported from its
module when first asked for, so that importing the stage loads nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import face_attribute

if TYPE_CHECKING:
    from .run_export import TraceExport, TraceExportWarning, missing_extra

#: Each name of the face, by the module of the stage that defines it.
_FACE: dict[str, str] = {
    "TraceExport": "run_export",
    "TraceExportWarning": "run_export",
    "missing_extra": "run_export",
}


def __getattr__(name: str) -> Any:
    return face_attribute(globals(), _FACE, name)


__all__ = ["TraceExport", "TraceExportWarning", "missing_extra"]
