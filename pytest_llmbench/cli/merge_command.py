"""``llmbench merge DIR... -o OUT``: the results folders of a run's shards joined into one, its
aggregates, report and gates decided as a run's."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..config import OPTIONS, parse_repeat_policy
from ..render import board_markdown
from ..results import compare_runs, keep_labels, load_labelled, load_results, pairing_note
from ..results_folder import REVIEWS_FILE, ResultsFolder
from ..spec import UsageFailure

#: The merge's per-model limits, a run's options (``--max-latency-p95`` ...): dest -> what it
#: limits. The flag and the RunConfig field (the argparse dest) are the option table's.
_MERGE_LIMITS = {
    "max_latency_p95": "95th percentile latency over its uncached answers is above LIMIT s",
    "max_ttft_p50": "median time to first token over its uncached streamed answers is above "
    "LIMIT s",
    "max_cost_per_item": "mean call cost over its answers with a price is above LIMIT USD",
}


def add_merge_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    merge = commands.add_parser("merge", help="Join the results folders of a run's shards")
    merge.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="Shards' results folders")
    merge.add_argument("-o", "--output", type=Path, required=True, metavar="OUT",
                       help="The merged results folder (created)")  # fmt: skip
    merge.add_argument("--force", action="store_true",
                       help="Merge shards of different options, or with shards missing")  # fmt: skip
    merge.add_argument("--min-pass-rate", type=float, metavar="RATE",
                       help="Fail when a model's pass rate is below RATE (0..1; default: the "
                       "shards' own)")  # fmt: skip
    merge.add_argument("--repeat-policy", metavar="POLICY",
                       help="When a repeated case passes: all, majority, any or at-least:K "
                       "(default: the shards' own)")  # fmt: skip
    for dest, what in _MERGE_LIMITS.items():
        merge.add_argument(OPTIONS[dest].flag, type=float, metavar="LIMIT",
                           help=f"Fail when a model's {what} (default: the shards' own)")  # fmt: skip
    merge.add_argument("--baseline", type=Path, metavar="DIR",
                       help="A saved results folder to compare the merged run with")  # fmt: skip
    merge.add_argument("--fail-on-regression", action="store_true", default=None,
                       help="With --baseline: fail on a significant regression")  # fmt: skip
    add_review_options(merge)
    merge.set_defaults(command=_merge_command)


def add_review_options(parser: argparse.ArgumentParser) -> None:
    """``--reviews-dir`` and ``--ignore-reviews`` of a command reading saved runs."""
    parser.add_argument("--reviews-dir", type=Path, metavar="DIR",
                        help=f"A shared folder of people's labels ({REVIEWS_FILE}), applied with "
                        "each results folder's own")  # fmt: skip
    parser.add_argument("--ignore-reviews", action="store_true",
                        help="Leave people's labels out: every verdict is the machine's")  # fmt: skip


def _merge_command(args: argparse.Namespace) -> int:
    from ..results import (
        differences,
        gate_settings,
        load_shards,
        merged_records,
        read_labels,
        relabel_shards,
    )

    _check_merge_options(args)
    if args.output.resolve() in {folder.resolve() for folder in args.dirs}:
        raise UsageFailure(f"-o {args.output}: a shard's own folder (the merge would replace it)")
    shards = load_shards(args.dirs)
    # Each shard's labels and --reviews-dir's decide its records' verdicts (later line wins).
    labels = read_labels([shard.folder for shard in shards], args.reviews_dir, args.ignore_reviews)
    relabel_shards(shards, labels)
    different = differences(shards)
    if different and not args.force:
        raise UsageFailure(
            "the shards are not of one run (--force merges them anyway):\n  "
            + "\n  ".join(different)
        )
    given = {
        "min_pass_rate": args.min_pass_rate,
        "repeat_policy": args.repeat_policy,
        # as a run takes it: from the folder it runs in (named so in the gate's note)
        "baseline": None if args.baseline is None else Path.cwd() / args.baseline,
        "fail_on_regression": args.fail_on_regression,
        "reviews_dir": args.reviews_dir,
        "ignore_reviews": bool(args.ignore_reviews),
        **{dest: getattr(args, dest) for dest in _MERGE_LIMITS},
    }
    settings = gate_settings(shards, given)
    if settings.fail_on_regression and settings.baseline is None:
        raise UsageFailure("--fail-on-regression needs --baseline DIR")
    records, coverage = merged_records(shards)
    for problem in coverage.problems():
        print(f"llmbench merge: {problem}")
    if coverage.missing and not args.force:
        print(
            "llmbench merge: a shard is missing: the merged run is incomplete (--force to accept)"
        )
    summary, info = _write_merged(records, coverage, shards, args.output, settings)
    info["reviews"] = labels.apply(records).block()
    keep_labels(labels, args.output)
    status, notes = _merge_gates(summary, info, shards, settings)
    if coverage.missing and not args.force:
        status = max(status, 1)
    info.update(exitstatus=status, gate_failures=notes)
    ResultsFolder(args.output).write_run_info(info)
    print(board_markdown(summary.board))
    print(f"llmbench merge: {len(shards)} shards, {len(records)} records in {args.output}")
    for note in notes:
        print(f"llmbench merge: {note}")
    return status


def _check_merge_options(args: argparse.Namespace) -> None:
    """The merge's gate options, checked as a run checks them."""
    for dest in _MERGE_LIMITS:
        limit = getattr(args, dest)
        if limit is not None and not limit > 0:
            raise UsageFailure(f"{OPTIONS[dest].flag} must be a positive number, got {limit}")
    if args.min_pass_rate is not None and not 0 <= args.min_pass_rate <= 1:
        raise UsageFailure(f"--min-pass-rate must be from 0 to 1, got {args.min_pass_rate}")
    if args.repeat_policy is not None:
        try:
            args.repeat_policy = parse_repeat_policy(args.repeat_policy)
        except ValueError as exc:
            raise UsageFailure(str(exc)) from None
    if args.baseline is not None:
        load_results(args.baseline)  # a baseline that is no results folder: before any write


def _write_merged(
    records: list[dict[str, Any]], coverage: Any, shards: Any, out: Path, settings: Any
) -> Any:
    from ..report import write_report
    from ..results import merged_info, summarize, write_aggregates

    summary = summarize(records, settings.errors_count_as)
    ordered = list(summary.records)
    ResultsFolder(out).write_records(ordered)
    write_aggregates(ordered, out, summary)
    info = merged_info(shards, coverage, len(ordered))
    write_report(ordered, out, run_info=info, summary=summary)
    return summary, info


def _merge_gates(
    summary: Any, info: dict[str, Any], shards: Any, settings: Any
) -> tuple[int, list[str]]:
    """The merged run's exit status and failed gates, decided as a run's (see
    :func:`..results.merge.merged_decision`); the regressions are shown whether they gate or not."""
    from ..results import GATE_INPUTS, gate_inputs, merged_decision, merged_state

    decision, repeats = merged_decision(shards, summary, settings)
    info[GATE_INPUTS] = gate_inputs(merged_state(shards, list(summary.records)))
    info["repeat_policy"] = repeats.summary()
    if settings.baseline is not None:
        baseline = load_labelled(settings.baseline, settings.reviews_dir, settings.ignore_reviews)
        results = compare_runs(baseline, list(summary.records))
        note = pairing_note(results)
        if note:
            print(f"llmbench merge: warning: {note}", file=sys.stderr)
        regressed = [result.model for result in results if result.significant_regression]
        if regressed and not settings.fail_on_regression:
            names = ", ".join(regressed)
            print(f"llmbench merge: significant regression against {settings.baseline}: {names}")
    return decision.exitstatus, [failure.describe() for failure in decision.failures]
