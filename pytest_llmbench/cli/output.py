"""Where a command's text goes: stdout, or the file of its ``--output``."""

from __future__ import annotations

import sys
from pathlib import Path


def emit(text: str, output: Path | None) -> None:
    """``text`` to stdout, or written to ``output`` with a line saying so."""
    if output is None:
        sys.stdout.write(text)
        return
    output.write_text(text, encoding="utf-8")
    print(f"llmbench: wrote {output}")
