"""``llmbench compare BASELINE NEW``: a new run against a baseline, paired per case; exit 1 on a
significant regression."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..results import (
    compare_runs,
    format_comparison,
    load_labelled,
    load_run_info,
    model_of,
    models_of,
    pairing_note,
    switch_models,
)
from ..spec import UsageFailure
from .merge_command import add_review_options
from .output import emit

#: ``llmbench compare --format``: the terminal's text, or a pull request comment's Markdown.
COMPARE_FORMATS = ("text", "github-comment")


def add_compare_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    compare = commands.add_parser("compare", help="Compare a new run with a baseline run")
    compare.add_argument("baseline", type=Path, metavar="BASELINE", help="Baseline folder")
    compare.add_argument("new", type=Path, metavar="NEW", help="New results folder")
    compare.add_argument(
        "--model",
        metavar="NAME",
        help="Compare this model only; OLD=NEW compares model OLD of the baseline with model "
        "NEW of the new run (a model switch)",
    )
    compare.add_argument(
        "--format", choices=COMPARE_FORMATS, default="text",
        help="text (the default) or github-comment: one Markdown document for a pull request "
        "comment (leaderboard with deltas, paired statistics, flipped cases, gates)",
    )  # fmt: skip
    compare.add_argument("--output", type=Path, metavar="FILE",
                         help="With --format github-comment: write here, not to stdout")  # fmt: skip
    add_review_options(compare)
    compare.set_defaults(command=_compare_command)


def _compare_command(args: argparse.Namespace) -> int:
    # Each run's verdicts as people's labels (its own, --reviews-dir's) decide them.
    baseline = load_labelled(args.baseline, args.reviews_dir, args.ignore_reviews)
    new = load_labelled(args.new, args.reviews_dir, args.ignore_reviews)
    if args.model is not None and "=" in args.model:
        baseline, new, args.model = switch_models(baseline, new, args.model)
    old_models, new_models = models_of(baseline), models_of(new)
    common = [model for model in new_models if model in old_models]
    if args.model is not None and args.model not in common:
        raise UsageFailure(
            f"model {args.model!r} is not in both runs "
            f"(baseline: {', '.join(old_models)}; new: {', '.join(new_models)})"
        )
    if not common:
        raise UsageFailure(f"no model is in both runs ({args.baseline} and {args.new})")
    if args.format == "github-comment":
        return _compare_comment(args, baseline, new)
    if args.output is not None:
        raise UsageFailure("--output needs --format github-comment")
    print(f"baseline: {args.baseline} ({len(baseline)} records)")
    print(f"new:      {args.new} ({len(new)} records)")
    results = compare_runs(baseline, new, None if args.model is None else [args.model])
    note = pairing_note(results)
    if note:
        print(f"llmbench: warning: {note}", file=sys.stderr)
    for result in results:
        print()
        print("\n".join(format_comparison(result, limit=None)))
    if args.model is None:
        _print_unmatched(old_models, new_models)
    regressed = [result.model for result in results if result.significant_regression]
    print()
    if regressed:
        print(f"llmbench: significant regression: {', '.join(regressed)}")
        return 1
    print("llmbench: no significant regression")
    return 0


def _compare_comment(
    args: argparse.Namespace, baseline: list[dict[str, Any]], new: list[dict[str, Any]]
) -> int:
    """``--format github-comment``: the comment's Markdown to stdout or ``--output``; the exit
    status is the text format's (1 on a significant regression)."""
    from ..render import SavedRun, pull_request_comment

    if args.model is not None:
        baseline = [record for record in baseline if model_of(record) == args.model]
        new = [record for record in new if model_of(record) == args.model]
    results = compare_runs(baseline, new, None if args.model is None else [args.model])
    note = pairing_note(results)
    if note:  # in the comment too; on stderr as the text format says it
        print(f"llmbench: warning: {note}", file=sys.stderr)
    old_run = SavedRun(args.baseline, baseline, load_run_info(args.baseline))
    new_run = SavedRun(args.new, new, load_run_info(args.new))
    emit(pull_request_comment(old_run, new_run, results), args.output)
    return 1 if any(result.significant_regression for result in results) else 0


def _print_unmatched(old_models: Sequence[str], new_models: Sequence[str]) -> None:
    only_old = [model for model in old_models if model not in new_models]
    only_new = [model for model in new_models if model not in old_models]
    if only_old:
        print(f"\nonly in the baseline: {', '.join(only_old)}")
    if only_new:
        print(f"\nonly in the new run: {', '.join(only_new)}")
