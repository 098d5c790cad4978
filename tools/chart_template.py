"""Write report.html's chart template: plotly's ``plotly_white`` for the trace types drawn.

    .venv/bin/python tools/chart_template.py

The report builds its figures as plotly.js JSON without plotly.py; this takes the template
from plotly.py (a dev dependency) once, into ``pytest_llmbench/report/assets/``, where a test
checks it against plotly.py's own.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_llmbench.report.charts import TEMPLATE_FILE, TRACE_TYPES  # noqa: E402


def template() -> dict[str, Any]:
    """``plotly_white``'s layout, and its defaults of :data:`TRACE_TYPES` only."""
    import plotly.io as pio

    white = pio.templates["plotly_white"].to_plotly_json()
    data = {name: white["data"][name] for name in TRACE_TYPES if name in white["data"]}
    return {"data": data, "layout": white["layout"]}


def main() -> int:
    TEMPLATE_FILE.write_text(json.dumps(template(), sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {TEMPLATE_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
