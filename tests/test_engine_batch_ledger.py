"""The batch ledger (engine/batch_ledger.py): a call's key is claimed by one batch only, across
processes and runs, and the journal reads back into it."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

from pytest_llmbench.engine.batch_ledger import (
    DONE,
    PENDING,
    BatchJournal,
    BatchLedger,
    input_sha256,
    load_journal,
    read_journal,
)

KEYS = [f"{n:064x}" for n in range(6)]
WHERE = {"backend": "fakebatch", "endpoint": "http://127.0.0.1:1/v1", "kind": "chat"}


def test_free_keys_are_claimed_and_held_keys_name_their_batch(tmp_path: Path) -> None:
    one, other = BatchLedger(tmp_path / "b.sqlite"), BatchLedger(tmp_path / "b.sqlite")
    first = one.claim(KEYS[:4], run_id="r1", **WHERE)
    assert first.claimed == tuple(KEYS[:4]) and first.held == {}
    assert first.pending_id is not None and first.pending_id.startswith(PENDING)
    row = one.batch(first.pending_id)
    assert row is not None and row.pending and row.lines == 4
    assert row.input_sha256 == input_sha256(KEYS[:4], first.pending_id)
    # the same calls in another attempt are another input: a look-up by hash never mixes them
    assert input_sha256(KEYS[:4], "pending-other") != row.input_sha256
    # Another process: the keys held by the pending batch are not its to send.
    second = other.claim(KEYS[2:], run_id="r1", **WHERE)
    assert second.claimed == tuple(KEYS[4:])
    assert second.held == {KEYS[2]: first.pending_id, KEYS[3]: first.pending_id}
    one.created(first.pending_id, "batch_abc")
    assert other.holder(KEYS[0]) == "batch_abc" and one.batch(first.pending_id) is None
    assert other.keys("batch_abc") == KEYS[:4]
    again = other.claim(KEYS[:2], run_id="r2", **WHERE)
    assert again.pending_id is None and again.held == {KEYS[0]: "batch_abc", KEYS[1]: "batch_abc"}
    one.close()
    other.close()


def test_a_released_or_unanswered_key_is_free_again(tmp_path: Path) -> None:
    ledger = BatchLedger(tmp_path / "b.sqlite")
    claim = ledger.claim(KEYS[:3], run_id="r1", **WHERE)
    assert claim.pending_id is not None
    assert ledger.release(claim.pending_id) == KEYS[:3]
    claim = ledger.claim(KEYS[:3], run_id="r1", **WHERE)
    assert claim.claimed == tuple(KEYS[:3]) and claim.pending_id is not None
    ledger.created(claim.pending_id, "batch_x")
    ledger.mark(KEYS[:2], DONE)
    ledger.forget_lines("batch_x", KEYS[2:3])  # expired: never answered
    ledger.ended("batch_x", "expired", 2)
    assert ledger.lines_done(["batch_x"]) == 2
    assert ledger.holder(KEYS[2]) is None and ledger.holder(KEYS[0]) == "batch_x"
    row = ledger.batch("batch_x")
    assert row is not None and row.status == "expired" and row.ended_at is not None


def test_a_killed_runs_pending_batch_is_adopted_once(tmp_path: Path) -> None:
    ledger = BatchLedger(tmp_path / "b.sqlite")
    claim = ledger.claim(KEYS[:2], run_id="killed", **WHERE)
    assert claim.pending_id is not None
    assert ledger.adopt(claim.pending_id, "killed") is None  # its own run: not adopted
    adopted = ledger.adopt(claim.pending_id, "resumed")
    assert adopted is not None and adopted.input_sha256 == input_sha256(KEYS[:2], claim.pending_id)
    assert ledger.adopt(claim.pending_id, "resumed") is None  # a second worker: not again
    ledger.disown(claim.pending_id, "resumed")  # its recovery failed: another may try
    again = ledger.adopt(claim.pending_id, "resumed")
    assert again is not None and again.batch_id == claim.pending_id


def _claim_in_a_process(path: str, keys: list[str], out: str) -> None:
    ledger = BatchLedger(Path(path))
    claim = ledger.claim(keys, run_id="r", **WHERE)
    Path(out).write_text(json.dumps(list(claim.claimed)))


def test_processes_claiming_at_once_never_share_a_key(tmp_path: Path) -> None:
    keys = [f"{n:064x}" for n in range(200)]
    context = multiprocessing.get_context("spawn")
    jobs = []
    for index in range(4):
        mine = keys[index * 30 : index * 30 + 100]  # overlapping ranges
        out = str(tmp_path / f"claimed-{index}.json")
        jobs.append(
            context.Process(
                target=_claim_in_a_process, args=(str(tmp_path / "b.sqlite"), mine, out)
            )
        )
    for job in jobs:
        job.start()
    for job in jobs:
        job.join(60)
        assert job.exitcode == 0
    claimed = [
        key
        for index in range(4)
        for key in json.loads((tmp_path / f"claimed-{index}.json").read_text())
    ]
    assert len(claimed) == len(set(claimed)) == 190  # keys 0..189, each claimed once


def test_the_journal_reads_back_into_a_new_ledger(tmp_path: Path) -> None:
    journal = BatchJournal(tmp_path / "out" / "batches.jsonl")
    for pending, batch_id, keys in (
        ("pending-1", "batch_1", KEYS[:2]),
        ("pending-2", None, KEYS[2:4]),
    ):
        journal.write(
            "creating", pending_id=pending, input_sha256=input_sha256(keys, pending), custom_ids=keys,
            backend="fakebatch", endpoint="e", kind="chat",
        )  # fmt: skip
        if batch_id:
            journal.write("created", pending_id=pending, batch_id=batch_id)
    with open(journal.path, "a") as stream:
        stream.write('{"event": "cre')  # a line cut by a kill
    assert [event["event"] for event in read_journal(journal.path)] == [
        "creating",
        "created",
        "creating",
    ]
    ledger = BatchLedger(tmp_path / "cache" / "batches.sqlite")
    assert load_journal(journal.path, ledger) == 2
    assert ledger.holder(KEYS[0]) == "batch_1" and ledger.keys("batch_1") == KEYS[:2]
    pending = ledger.batch("pending-2")
    assert pending is not None and pending.pending and pending.run_id is None
    assert pending.input_sha256 == input_sha256(KEYS[2:4], "pending-2")
    assert load_journal(journal.path, ledger) == 2  # read twice: nothing doubled
    assert ledger.keys("batch_1") == KEYS[:2]


def test_a_key_another_runs_batch_answered_is_claimed_anew(tmp_path: Path) -> None:
    ledger = BatchLedger(tmp_path / "b.sqlite")
    claim = ledger.claim(KEYS[:2], run_id="r1", **WHERE)
    assert claim.pending_id is not None
    ledger.created(claim.pending_id, "batch_1")
    ledger.mark(KEYS[:1], DONE)
    again = ledger.claim(KEYS[:2], run_id="r2", **WHERE)
    # The answered key is sampled again; the one still running is still that batch's.
    assert again.claimed == (KEYS[0],) and again.held == {KEYS[1]: "batch_1"}
    same_run = ledger.claim(KEYS[:1], run_id="r2", **WHERE)
    assert same_run.pending_id is None and again.pending_id in same_run.held.values()


def test_a_call_sent_again_is_the_newer_batchs_on_resume(tmp_path: Path) -> None:
    # batch_1 expired without KEYS[1]'s answer; a retry sent it again in batch_2, then died
    journal = BatchJournal(tmp_path / "out" / "batches.jsonl")
    for pending, batch_id, keys in (
        ("pending-1", "batch_1", KEYS[:2]),
        ("pending-2", "batch_2", KEYS[1:2]),
    ):
        journal.write(
            "creating", pending_id=pending, input_sha256=input_sha256(keys, pending),
            custom_ids=keys, backend="fakebatch", endpoint="e", kind="chat",
        )  # fmt: skip
        journal.write("created", pending_id=pending, batch_id=batch_id)
    journal.write("ended", batch_id="batch_1", status="expired")
    ledger = BatchLedger(tmp_path / "cache" / "batches.sqlite")
    assert load_journal(journal.path, ledger) == 2
    assert ledger.holder(KEYS[1]) == "batch_2" and ledger.holder(KEYS[0]) == "batch_1"
