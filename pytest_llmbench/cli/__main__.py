"""``python -m pytest_llmbench.cli``: the ``llmbench`` command without its console script."""

from __future__ import annotations

import sys

from . import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
