"""The judge gate: judges that disagree with people, on the labels available, are demoted (their
verdicts become unchecked) or fail the run.

At configure (every process alike), the labels that apply to the run (the results folder's and
``--reviews-dir``'s, unless ``--ignore-reviews``) are calibrated per judge group
(:func:`~.stats.calibration.calibrate`). Each eval file's gate (``--judge-gate``, over which its
``judge_gate:`` keys go) rules on every group, as plain data the engine reads
(:class:`~pytest_llmbench.engine.JudgeRulings`): a group with at least ``min_labels`` labels and
a kappa of ``min_kappa`` or more is ``ok``; below it ``demoted``, or ``failing`` under
``on_fail: fail``; with fewer labels ``too_few_labels``; with enough labels but no kappa (people
and the judge each gave one verdict only) ``kappa_undefined``, not gated either. Each judged verdict is marked with its group's ruling at run time
(:func:`pytest_llmbench.engine.kinds.case_kind.gated`); the controller reads the marks back from
the records for run.json's ``judge_gate`` block, the summary's lines and the exit status
(:mod:`.gates`), so that a run with xdist decides as one without.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..config import JudgeGate, RunConfig
    from ..engine import JudgeRuling, JudgeRulings
    from .reviews import Labels, Review
    from .stats.calibration import Calibration, JudgeGroup

#: The calibrations of the labels that apply to the run, made once per process.
CALIBRATIONS_KEY = pytest.StashKey["dict[JudgeGroup, Calibration]"]()
#: The labels the gate counts, read once per process (the controller's handed to the workers).
GATE_REVIEWS_KEY = pytest.StashKey["list[Review]"]()
#: The xdist worker input holding them.
GATE_REVIEWS_INPUT = "llmbench_gate_reviews"
#: The decisions from best to worst: a group ruled two ways (two files' gates) shows the worst.
DECISIONS = ("ok", "kappa_undefined", "too_few_labels", "demoted", "failing")


def gate_calibrations(config: pytest.Config) -> dict[JudgeGroup, Calibration]:
    """The run's labels calibrated per judge group, once per process (none under
    ``--ignore-reviews``); a broken labels file is a ``UsageError`` naming ``path:line``."""
    found = config.stash.get(CALIBRATIONS_KEY, None)
    if found is None:
        from .stats.calibration import calibrate

        found = config.stash[CALIBRATIONS_KEY] = calibrate(gate_reviews(config))
    return found


def gate_reviews(config: pytest.Config) -> list[Review]:
    """The labels the gate counts, each with its machine verdict. The controller reads them
    (at configure, before this run rewrites its folder's records: a label kept without a
    machine verdict takes it from the record of its answer there) and hands them to the xdist
    workers, so every process rules on the same labels."""
    found = config.stash.get(GATE_REVIEWS_KEY, None)
    if found is not None:
        return found
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and GATE_REVIEWS_INPUT in workerinput:
        from .reviews import review_from

        found = [review_from(line) for line in workerinput[GATE_REVIEWS_INPUT]]
    else:
        from ..engine import results_dir
        from .review_run import LABELS_KEY

        # The labels the run read at configure (its results folder's, which --retry-errors DIR
        # makes DIR's, and --reviews-dir's; none under --ignore-reviews): read once.
        loaded = config.stash.get(LABELS_KEY, None)
        found = reviews_of(loaded.labels, results_dir(config)) if loaded is not None else []
    config.stash[GATE_REVIEWS_KEY] = found
    return found


def gate_worker_input(config: pytest.Config) -> dict[str, Any]:
    """What a worker needs to rule on the controller's labels."""
    return {GATE_REVIEWS_INPUT: [review.to_line() for review in gate_reviews(config)]}


def reviews_of(labels: Labels, folder: Path | None) -> list[Review]:
    """``labels`` as calibration counts them: a label that keeps no machine verdict (imported)
    takes it from the record of its answer in ``folder`` (the run it was given on), as
    ``judge_calibration.csv`` and ``llmbench calibrate`` pair it
    (:func:`~.judge_calibration.labelled_reviews`)."""
    from ..results_folder import ResultsFolder
    from .judge_calibration import labelled_reviews

    bare = any(review.machine is None for review in labels.current.values())
    records = ResultsFolder(folder).read_records_so_far() if folder and bare else []
    return labelled_reviews(labels, [("", records)])


def file_gate(run: RunConfig, keys: Mapping[str, Any] | None) -> JudgeGate | None:
    """The gate of an eval file's items: ``--judge-gate`` with the file's ``judge_gate:`` keys
    over it (``--judge-gate-fail`` making ``fail`` the mode the file does not name); None
    when neither sets one."""
    from ..config import JudgeGate

    if keys is None:
        return run.judge_gate
    base = run.judge_gate or JudgeGate(fail=run.judge_gate_fail)
    return base.overridden(keys)


def rulings(calibrations: Mapping[JudgeGroup, Calibration], gate: JudgeGate) -> JudgeRulings:
    """``gate``'s ruling on every calibrated group, as the engine reads it."""
    from ..engine import JudgeRulings

    return JudgeRulings(
        {(g.judges, g.type, g.criterion): rule(c, gate) for g, c in calibrations.items()}
    )


def rule(calibration: Calibration, gate: JudgeGate) -> JudgeRuling:
    """The gate's decision on one group, with a demoted verdict's reason."""
    from ..engine import JudgeRuling

    if calibration.n < gate.min_labels:
        return JudgeRuling("too_few_labels")
    kappa = calibration.kappa
    if kappa is None:
        # People and the judge each gave one verdict only: chance agreement is 1, and kappa
        # says nothing either way (a judge agreeing on every label is no evidence against it).
        return JudgeRuling("kappa_undefined")
    if kappa is not None and kappa >= gate.min_kappa:
        return JudgeRuling("ok")
    decision = "failing" if gate.fail else "demoted"
    return JudgeRuling(decision, f"demoted: {below_gate(calibration, gate.min_kappa)}")


def below_gate(calibration: Calibration, min_kappa: float) -> str:
    """``judge <group> kappa 0.31 [0.12, 0.50] < 0.6 on 57 labels (lenient)``."""
    return f"judge {calibration.group.label()} {kappa_text(calibration)} < {min_kappa:g} on " + (
        f"{calibration.n} labels ({calibration.leaning})"
    )


def kappa_text(calibration: Calibration) -> str:
    """``kappa 0.31 [0.12, 0.50]``; ``kappa undefined`` when people or the judge never
    changed their verdict (chance agreement is 1)."""
    if calibration.kappa is None:
        return "kappa undefined"
    ci = calibration.kappa_ci
    interval = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
    return f"kappa {calibration.kappa:.2f}{interval}"


# -- the controller: the records' marks -------------------------------------------------------
def gated_verdicts(records: Sequence[Mapping[str, Any]]) -> dict[JudgeGroup, dict[str, int]]:
    """Per judge group, how many of the records' judged verdicts each ruling marked."""
    from .reviews import judges_of
    from .stats.calibration import JudgeGroup

    found: dict[JudgeGroup, dict[str, int]] = {}
    for record in records:
        for index, entry in enumerate(record.get("assertions") or []):
            if not isinstance(entry, Mapping) or entry.get("judge_gate") not in DECISIONS:
                continue
            group = JudgeGroup(
                judges_of(record, index), str(entry.get("type")), entry.get("criterion")
            )
            counts = found.setdefault(group, {})
            counts[entry["judge_gate"]] = counts.get(entry["judge_gate"], 0) + 1
    return found


def worst(counts: Mapping[str, int]) -> str:
    """The worst decision among a group's marks."""
    return max(counts, key=DECISIONS.index)


def gate_block(
    run: RunConfig,
    records: Sequence[Mapping[str, Any]],
    calibrations: Mapping[JudgeGroup, Calibration],
) -> dict[str, Any] | None:
    """run.json's ``judge_gate``: the settings and, per judge group that judged in the run
    under a gate, its labels (n), kappa with its interval, decision and verdicts demoted;
    None when no verdict was gated."""
    from .stats.calibration import group_order

    marked = gated_verdicts(records)
    if not marked:
        return None
    groups = []
    for group in sorted(marked, key=group_order):
        counts = marked[group]
        calibration = calibrations.get(group)
        groups.append(
            {
                "judges": list(group.judges),
                "type": group.type,
                "criterion": group.criterion,
                "n": calibration.n if calibration else 0,
                "kappa": calibration.kappa if calibration else None,
                "ci": list(calibration.kappa_ci) if calibration and calibration.kappa_ci else None,
                "leaning": calibration.leaning if calibration else None,
                "agreement": calibration.agreement if calibration else None,
                "decision": worst(counts),
                "verdicts": sum(counts.values()),
                "verdicts_demoted": counts.get("demoted", 0),
            }
        )
    settings = run.judge_gate.to_dict() if run.judge_gate else None
    return {"settings": settings, "fail_mode": run.judge_gate_fail, "groups": groups}


def gate_lines(block: Mapping[str, Any] | None) -> list[str]:
    """The summary's lines of the judge gate: demoted and failing judges, groups with too
    few labels (one line each)."""
    if not block:
        return []
    from .stats.calibration import JudgeGroup

    lines = []
    for entry in block["groups"]:
        group = JudgeGroup(tuple(entry["judges"]), entry["type"], entry["criterion"])
        decision = entry["decision"]
        kappa = _kappa_words(entry)
        if decision == "demoted":
            lines.append(
                f"judge gate: {group.label()}: {kappa} on {entry['n']} labels: "
                f"{entry['verdicts_demoted']} verdict(s) demoted to unchecked"
            )
        elif decision == "failing":
            lines.append(
                f"judge gate: {group.label()}: {kappa} on {entry['n']} labels: below the gate, "
                "fails the run"
            )
        elif decision == "too_few_labels":
            needed = (block.get("settings") or {}).get("min_labels")
            few = f"{entry['n']} labels < {needed}" if needed else f"{entry['n']} labels, too few"
            lines.append(f"judge gate: {group.label()}: {few}, not gated")
        elif decision == "kappa_undefined":
            lines.append(
                f"judge gate: {group.label()}: kappa undefined: people and the judge each gave "
                f"one verdict only on {entry['n']} labels ({_agreement_words(entry)}), not gated"
            )
    return lines


def failing_judges(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The judge groups below the gate under ``on_fail: fail``, one line each (for the exit
    status, :mod:`.gates`)."""
    from .stats.calibration import group_order

    return [
        f"judge gate: {group.label()} disagrees with people ({counts['failing']} verdict(s))"
        for group, counts in sorted(
            gated_verdicts(records).items(), key=lambda i: group_order(i[0])
        )
        if counts.get("failing")
    ]


def _agreement_words(entry: Mapping[str, Any]) -> str:
    agreement = entry.get("agreement")
    return "no agreement" if agreement is None else f"agreement {agreement:.0%}"


def _kappa_words(entry: Mapping[str, Any]) -> str:
    if entry.get("kappa") is None:
        return "kappa undefined"
    ci = entry.get("ci")
    interval = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
    return f"kappa {entry['kappa']:.2f}{interval} ({entry.get('leaning')})"
