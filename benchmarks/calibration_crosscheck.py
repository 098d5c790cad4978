"""Our judge calibration figures beside scikit-learn's and statsmodels'.

    .venv/bin/python benchmarks/calibration_crosscheck.py --write benchmarks/calibration-crosscheck.md

Compares, on a few hundred random 2x2 tables and label sets (fixed seed):

- our Cohen's kappa (``results/stats/calibration.py``) with ``sklearn.metrics.cohen_kappa_score``
  on the same label vectors;
- our kappa interval with ``statsmodels.stats.inter_rater.cohens_kappa``'s ``kappa_low`` and
  ``kappa_upp`` (its ``var_kappa``: the large-sample variance of Fleiss, Cohen and Everitt 1969,
  the one we use; ours is clipped to [-1, 1], so theirs is clipped before comparing, and the
  tables where clipping acted are counted);
- our Wilson intervals of the true and false positive rates with
  ``statsmodels.stats.proportion.proportion_confint(method="wilson")``.

Neither library is a dependency of the project: the script makes its own virtual environment
under ``~/.cache/llmbench-crosscheck/`` (``pip install scikit-learn statsmodels`` from PyPI) and
runs the other side there (``--other-side``), reading the tables as JSON on stdin.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import venv
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "llmbench-crosscheck"
SEED = 40
TABLES = 300
LABEL_SETS = 100


def other_python() -> Path:
    """The cache's virtual environment with scikit-learn and statsmodels, made when missing."""
    python = CACHE / "venv" / "bin" / "python"
    if not python.exists():
        venv.create(CACHE / "venv", with_pip=True)
    probe = subprocess.run([python, "-c", "import sklearn, statsmodels"], capture_output=True)
    if probe.returncode:
        subprocess.run([python, "-m", "pip", "install", "-q", "scikit-learn", "statsmodels"],
                       check=True)  # fmt: skip
    return python


def cases() -> list[dict[str, Any]]:
    """Random tables (cells 0..40, some empty) and label sets (20..400 labels, the judge
    agreeing with the person with a random probability), as (human, judge) vectors."""
    rng = random.Random(SEED)
    found = []
    for i in range(TABLES):
        cells = [rng.choice([0, rng.randint(0, 3), rng.randint(0, 40)]) for _ in range(4)]
        if sum(cells) == 0:
            cells[0] = 1
        found.append({"name": f"table {i}", "cells": cells})
    for i in range(LABEL_SETS):
        n, base, agree = rng.randint(20, 400), rng.uniform(0.2, 0.9), rng.uniform(0.4, 1.0)
        human = [rng.random() < base for _ in range(n)]
        judge = [h if rng.random() < agree else rng.random() < 0.5 for h in human]
        tp = sum(h and j for h, j in zip(human, judge, strict=True))
        fp = sum(j and not h for h, j in zip(human, judge, strict=True))
        fn = sum(h and not j for h, j in zip(human, judge, strict=True))
        found.append({"name": f"labels {i}", "cells": [tp, fp, fn, n - tp - fp - fn]})
    return found


def other_side() -> None:
    """Run in the cache's environment: scikit-learn's and statsmodels' figures per case."""
    import warnings

    import numpy as np
    import sklearn
    import statsmodels
    from sklearn.metrics import cohen_kappa_score
    from statsmodels.stats.inter_rater import cohens_kappa
    from statsmodels.stats.proportion import proportion_confint

    warnings.simplefilter("ignore")
    out = []
    for case in json.load(sys.stdin):
        tp, fp, fn, tn = case["cells"]
        human = [1] * tp + [0] * fp + [1] * fn + [0] * tn
        judge = [1] * tp + [1] * fp + [0] * fn + [0] * tn
        kappa = float(cohen_kappa_score(human, judge, labels=[0, 1]))
        # rows: the judge (pass, fail); columns: the person (pass, fail)
        table = np.array([[tp, fp], [fn, tn]], dtype=float)
        result = cohens_kappa(table)
        row: dict[str, Any] = {
            "kappa": None if math.isnan(kappa) else kappa,
            "sm_kappa": None if math.isnan(result.kappa) else float(result.kappa),
            "ci": None
            if math.isnan(result.kappa_low)
            else [float(result.kappa_low), float(result.kappa_upp)],
        }
        if tp + fn:
            row["tpr"] = [float(v) for v in proportion_confint(tp, tp + fn, method="wilson")]
        if fp + tn:
            row["fpr"] = [float(v) for v in proportion_confint(fp, fp + tn, method="wilson")]
        out.append(row)
    versions = {"sklearn": sklearn.__version__, "statsmodels": statsmodels.__version__}
    json.dump({"versions": versions, "python": sys.version.split()[0], "rows": out}, sys.stdout)


def ours(cells: list[int]) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from pytest_llmbench.results.stats.calibration import JudgeGroup, LabelPair, calibrate_group

    group = JudgeGroup(("j",), "t")
    tp, fp, fn, tn = cells
    pairs = [(True, True)] * tp + [(False, True)] * fp + [(True, False)] * fn
    pairs += [(False, False)] * tn
    c = calibrate_group(group, [LabelPair(group, h, j) for h, j in pairs])
    return {"kappa": c.kappa, "ci": c.kappa_ci, "tpr": c.tpr_ci, "fpr": c.fpr_ci}


def compare(found: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> dict[str, Any]:
    diffs: dict[str, float] = {"kappa": 0.0, "ci": 0.0, "tpr": 0.0, "fpr": 0.0}
    counts = {"kappa": 0, "ci": 0, "tpr": 0, "fpr": 0, "undefined": 0, "undefined_agree": 0}
    clipped = nan_ci = 0
    for case, other in zip(found, theirs, strict=True):
        mine = ours(case["cells"])
        if mine["kappa"] is None or other["kappa"] is None:
            counts["undefined"] += 1
            counts["undefined_agree"] += mine["kappa"] is None and other["kappa"] is None
            continue
        counts["kappa"] += 1
        diffs["kappa"] = max(diffs["kappa"], abs(mine["kappa"] - other["kappa"]))
        if other["ci"] is None and mine["ci"] is not None:
            nan_ci += 1  # their variance rounded below 0: sqrt gives NaN, ours takes 0
        if other["ci"] is not None and mine["ci"] is not None:
            low, high = other["ci"]
            if low < -1 or high > 1:
                clipped += 1
            low, high = max(-1.0, low), min(1.0, high)
            counts["ci"] += 1
            diff = max(abs(mine["ci"][0] - low), abs(mine["ci"][1] - high))
            diffs["ci"] = max(diffs["ci"], diff)
        for rate in ("tpr", "fpr"):
            if rate in other:
                counts[rate] += 1
                diff = max(abs(a - b) for a, b in zip(mine[rate], other[rate], strict=True))
                diffs[rate] = max(diffs[rate], diff)
    return {"max_abs_diff": diffs, "compared": counts, "clipped": clipped, "nan_ci": nan_ci}


def markdown(result: dict[str, Any], meta: dict[str, Any], command: str) -> str:
    diffs, counts = result["max_abs_diff"], result["compared"]
    rows = [
        ("Cohen's kappa", "`sklearn.metrics.cohen_kappa_score`", counts["kappa"], diffs["kappa"]),
        ("kappa 95% interval", "`statsmodels.stats.inter_rater.cohens_kappa` (kappa_low, "
         "kappa_upp)", counts["ci"], diffs["ci"]),
        ("TPR Wilson 95% interval", '`proportion_confint(method="wilson")`', counts["tpr"],
         diffs["tpr"]),
        ("FPR Wilson 95% interval", '`proportion_confint(method="wilson")`', counts["fpr"],
         diffs["fpr"]),
    ]  # fmt: skip
    lines = [
        "# Judge calibration beside scikit-learn and statsmodels",
        "",
        "Written by `benchmarks/calibration_crosscheck.py` (see its docstring): "
        f"{TABLES} random 2x2 tables and {LABEL_SETS} random label sets (seed {SEED}), our "
        "figures (`pytest_llmbench/results/stats/calibration.py`) against the libraries'.",
        "",
        "| fact | value |",
        "|---|---|",
        f"| date | {meta['date']} |",
        f"| command | `{command}` |",
        f"| pytest-llmbench revision | {meta['revision']} |",
        f"| other side | python {meta['python']}, scikit-learn {meta['versions']['sklearn']}, "
        f"statsmodels {meta['versions']['statsmodels']} |",
        "",
        "| figure | against | cases compared | max abs difference |",
        "|---|---|---|---|",
        *(f"| {a} | {b} | {n} | {d:.2e} |" for a, b, n, d in rows),
        "",
        f"- Kappa undefined on {counts['undefined']} table(s) (one category only on both "
        "sides: chance agreement 1); scikit-learn gives NaN on "
        f"{counts['undefined_agree']} of them, and ours None: the same verdict.",
        "- The interval: statsmodels' `var_kappa` is the large-sample variance of Fleiss, Cohen "
        "and Everitt (1969), as ours; both use z = 1.959964. Ours is clipped to [-1, 1]: "
        f"statsmodels' reached past it on {result['clipped']} table(s), compared after "
        "clipping. Neither is the null variance (`var_kappa0`, for testing kappa = 0).",
        f"- statsmodels' interval is NaN on {result['nan_ci']} table(s) where kappa is 1 or "
        "-1 (or the table is degenerate) and its variance, 0 in exact arithmetic, rounds "
        "slightly below 0; ours takes the variance as 0 there (a zero-width interval).",
        "- Perfect agreement (or disagreement) gives a zero-width interval in both: the "
        'large-sample variance is 0 there. `llmbench calibrate` says "too few labels" under '
        "50 pairs, where such tables occur.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="Write the Markdown here")
    parser.add_argument("--other-side", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.other_side:
        other_side()
        return
    found = cases()
    python = other_python()
    done = subprocess.run(
        [python, __file__, "--other-side"],
        input=json.dumps(found),
        capture_output=True,
        text=True,
        check=True,
    )
    other = json.loads(done.stdout)
    result = compare(found, other["rows"])
    print(json.dumps(result, indent=2))
    if args.write is not None:
        revision = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        meta = {
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "revision": revision,
            "python": other["python"],
            "versions": other["versions"],
        }
        command = ".venv/bin/python benchmarks/calibration_crosscheck.py --write " + str(args.write)
        args.write.write_text(markdown(result, meta, command), encoding="utf-8")


if __name__ == "__main__":
    main()
