"""Whether two runs gave the same records: two ``results.jsonl`` files compared record by record.

    python benchmarks/same_records.py BEFORE/results.jsonl AFTER/results.jsonl [--renamed OLD=NEW ...]
        [--upgrade]

Records are matched by node id. What differs between any two runs of the same code is left out:
times (every ``*_s`` field, ``started_at``, a tool step's ``seconds``), the item's folder
(``workdir``, numbered by pytest per session) and the xdist ``worker``. ``--renamed OLD=NEW`` reads
field ``OLD`` of the first file as ``NEW`` (a field renamed between the two revisions);
``--upgrade`` reads both files' records as the viewer and ``llmbench merge`` do, an older schema's
with the current names (``pytest_llmbench.results_folder.upgrade_record``). The exit
status is 0 when every record of both files is in the other and equal, else 1; the differing
records are listed with their fields.

Issue 37 compared the revision before its restructure with the one after it this way: both ran
``evals/`` against one llama-cpp-python server at a fixed address, the new revision with
``--cache=use`` and the old one with ``--cache=replay`` on the same cache, so that both read the
same answers and a changed request shows as a cache miss (see benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

#: pytest's numbered folder of a session's temporary paths.
_BASETEMP = re.compile(r"(pytest-of-[^/]+/)pytest-[0-9]+/")
#: Fields that differ between two runs of the same code.
VOLATILE = frozenset({"started_at", "finished_at", "worker", "workdir", "seconds", "run_id"})


def load(path: Path, renamed: dict[str, str], upgrade: bool = False) -> dict[str, dict[str, Any]]:
    """The records of ``path`` by node id, with ``renamed`` fields under their new names (and
    an older schema's records in the current one, with ``upgrade``)."""
    records: dict[str, dict[str, Any]] = {}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if upgrade:
                from pytest_llmbench.results_folder import upgrade_record

                record = upgrade_record(record)
            records[record["nodeid"]] = {
                renamed.get(key, key): value for key, value in record.items()
            }
    return records


def stable(value: Any, ignored: frozenset[str] = frozenset()) -> Any:
    """``value`` without the fields that differ between runs (and the ``ignored`` ones), at any
    depth, with pytest's numbered temporary folder (``pytest-of-root/pytest-408``) unnumbered
    in its strings."""
    if isinstance(value, dict):
        return {
            key: stable(item, ignored)
            for key, item in value.items()
            if key not in VOLATILE and key not in ignored and not key.endswith("_s")
        }
    if isinstance(value, list):
        return [stable(item, ignored) for item in value]
    if isinstance(value, str):
        return _BASETEMP.sub(r"\1pytest-N/", value)
    return value


def differing_fields(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The top-level fields whose stable values differ (a missing field counts)."""
    missing = object()
    keys = sorted(set(before) | set(after))
    return [key for key in keys if before.get(key, missing) != after.get(key, missing)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--renamed", action="append", default=[], metavar="OLD=NEW")
    parser.add_argument("--upgrade", action="store_true", help="read older schemas' records "
                        "with the current field names")  # fmt: skip
    parser.add_argument(
        "--ignore", action="append", default=[], metavar="FIELD",
        help="a field expected to differ, at any depth (cached: a replay against the run it "
        "replays)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    ignored = frozenset(args.ignore)
    renamed = dict(pair.split("=", 1) for pair in args.renamed)
    before = load(args.before, renamed, args.upgrade)
    after = load(args.after, {}, args.upgrade)
    common = sorted(before.keys() & after.keys())
    only = (len(before.keys() - after.keys()), len(after.keys() - before.keys()))
    fields: Counter[str] = Counter()
    lines: list[str] = []
    for nodeid in common:
        changed = differing_fields(stable(before[nodeid], ignored), stable(after[nodeid], ignored))
        if changed:
            fields.update(changed)
            lines.append(f"- {nodeid}: {', '.join(changed)}")
    print(f"records: {len(before)} before, {len(after)} after, {len(common)} in both")
    print(f"only before: {only[0]}; only after: {only[1]}")
    print(f"identical: {len(common) - len(lines)}; differing: {len(lines)}")
    print("\n".join(lines))
    if fields:
        print("fields differing (records):", ", ".join(f"{k} {n}" for k, n in fields.most_common()))
    return 0 if not lines and only == (0, 0) else 1


if __name__ == "__main__":
    sys.exit(main())
