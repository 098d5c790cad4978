"""``llmbench cache stats | list | prune | clear`` on real SQLite cache files, in-process, and a
prune in its own process while another process writes the same file: a writer of the cache's
own, and a real pytest run under ``--cache=use``."""

from __future__ import annotations

import multiprocessing
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Bench, Rule

from pytest_llmbench.cli import main
from pytest_llmbench.engine.cache import ResponseCache
from pytest_llmbench.models.providers.completion import Completion

DAY = 86400.0


def completion(text: str = "Paris", model_id: str = "openai/a") -> Completion:
    return Completion(
        text=text,
        model_id=model_id,
        input_tokens=3,
        output_tokens=1,
        tokens_estimated=False,
        ttft_s=None,
        latency_s=0.5,
        cost_usd=None,
        retries=0,
        streamed=False,
        finish_reason="stop",
    )


def fill(folder: Path, entries: dict[str, tuple[str, float]]) -> Path:
    """A cache in ``folder`` holding ``{key: (model, age in days)}``; its file."""
    path = folder / "responses.sqlite"
    cache = ResponseCache(path)
    for key, (model, _) in entries.items():
        cache.put(key, completion(f"answer of {key}", model), model=model)
    cache.close()
    db = sqlite3.connect(path)
    now = time.time()
    ages = [(now - age * DAY, key) for key, (_, age) in entries.items()]
    db.executemany("UPDATE responses SET created_at = ? WHERE key = ?", ages)
    db.commit()
    db.close()
    return path


def keys(path: Path) -> set[str]:
    cache = ResponseCache(path)
    try:
        return {info.key for info in cache.entries()}
    finally:
        cache.close()


#: Two models, entries of every stats bucket: today, 3 days, 20 days and 40 days old.
ENTRIES = {
    "a" * 64: ("openai/a", 0.0),
    "b" * 64: ("openai/a", 3.0),
    "c" * 64: ("openai/a", 20.0),
    "d" * 64: ("openai/b", 40.0),
    "e" * 64: ("openai/b", 0.5),
}


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    fill(tmp_path / "c", ENTRIES)
    return tmp_path / "c"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_stats_counts_and_sizes_per_model_and_age(
    cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "cache", "stats", "--cache-dir", str(cache_dir))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"{cache_dir / 'responses.sqlite'}: 5 entries"
    assert lines[1].split() == ["model", "entries", "size", "<1d", "1-7d", "7-30d", "older"]
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert set(rows) == {"openai/a", "openai/b", "all"}
    # entries, then the buckets <1d, 1-7d, 7-30d, older (the size is two words: "813 B").
    assert [rows["openai/a"][1], *rows["openai/a"][4:]] == ["3", "1", "1", "1", "0"]
    assert [rows["openai/b"][1], *rows["openai/b"][4:]] == ["2", "1", "0", "0", "1"]
    assert [rows["all"][1], *rows["all"][4:]] == ["5", "2", "1", "1", "1"]
    db = sqlite3.connect(cache_dir / "responses.sqlite")
    (total,) = db.execute("SELECT sum(length(CAST(value AS BLOB))) FROM responses").fetchone()
    db.close()
    assert 1000 < total < 10_000 and rows["all"][2:4] == [f"{total / 1000:.1f}", "KB"]


def test_list_shows_key_prefix_model_age_and_size_newest_first(
    cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "cache", "list", "--cache-dir", str(cache_dir))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["key", "model", "age", "size"]
    rows = [line.split() for line in lines[1:-1]]
    assert [row[:3] for row in rows] == [
        ["a" * 12, "openai/a", "0s"],
        ["e" * 12, "openai/b", "12h"],
        ["b" * 12, "openai/a", "3d"],
        ["c" * 12, "openai/a", "20d"],
        ["d" * 12, "openai/b", "40d"],
    ]
    assert all(row[4] == "B" and int(row[3]) > 64 for row in rows)
    assert lines[-1] == "5 entries"
    code, out, _ = run(
        capsys, "cache", "list", "--cache-dir", str(cache_dir), "--model", "openai/b"
    )
    assert [line.split()[0] for line in out.splitlines()[1:-1]] == ["e" * 12, "d" * 12]


def test_prune_deletes_only_entries_older_than_the_age(
    cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = cache_dir / "responses.sqlite"
    argv = ("cache", "prune", "--cache-dir", str(cache_dir), "--older-than")
    code, out, _ = run(capsys, *argv, "30d", "--model", "openai/a")
    assert (code, keys(path)) == (0, set(ENTRIES))  # openai/a has none that old
    assert "pruned 0 entries of openai/a older than 30d" in out
    code, out, _ = run(capsys, *argv, "14d")
    assert code == 0
    assert out.strip() == f"llmbench: pruned 2 entries older than 14d from {path}; 3 left"
    assert keys(path) == {"a" * 64, "b" * 64, "e" * 64}
    cache = ResponseCache(path)
    assert cache.get("b" * 64) == completion(f"answer of {'b' * 64}")  # the rest untouched
    cache.close()


def test_clear_deletes_every_entry_or_one_model_s(
    cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = cache_dir / "responses.sqlite"
    code, out, _ = run(
        capsys, "cache", "clear", "--cache-dir", str(cache_dir), "--model", "openai/b"
    )
    assert code == 0 and "cleared 2 entries of openai/b" in out and out.strip().endswith("3 left")
    assert keys(path) == {"a" * 64, "b" * 64, "c" * 64}
    code, out, _ = run(capsys, "cache", "clear", "--cache-dir", str(cache_dir))
    assert code == 0 and out.strip() == f"llmbench: cleared 3 entries from {path}; 0 left"
    assert keys(path) == set()


def test_the_default_folder_is_the_plugin_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(tmp_path / ".llmbench-cache", {"f" * 64: ("openai/a", 0.0)})
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "cache", "list")
    assert code == 0 and out.splitlines()[1].startswith("f" * 12)


@pytest.mark.parametrize(
    "action", [["stats"], ["list"], ["prune", "--older-than", "1d"], ["clear"]]
)
def test_a_folder_without_a_cache_is_said_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], action: list[str]
) -> None:
    code, out, err = run(capsys, "cache", *action, "--cache-dir", str(tmp_path / "none"))
    assert code == 0 and err == ""
    assert out.strip() == f"llmbench: no response cache at {tmp_path / 'none' / 'responses.sqlite'}"
    assert not (tmp_path / "none").exists()


def test_a_file_that_is_no_cache_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "responses.sqlite").write_bytes(b"not a database at all" * 400)
    code, out, err = run(capsys, "cache", "stats", "--cache-dir", str(tmp_path))
    assert code == 2 and out == ""
    assert err.startswith(f"llmbench: {tmp_path / 'responses.sqlite'}: cannot use this file")
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("age", ["14", "two weeks", "0d"])
def test_a_malformed_age_is_a_usage_error_naming_it(
    cache_dir: Path, capsys: pytest.CaptureFixture[str], age: str
) -> None:
    argv = ("cache", "prune", "--cache-dir", str(cache_dir), "--older-than", age)
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert f"argument --older-than: {age!r} is not an age" in err
    assert keys(cache_dir / "responses.sqlite") == set(ENTRIES)


# -- prune beside a writer -------------------------------------------------------------------
#: Fresh entries the writer makes at least, before and while the prunes run.
WRITES = 300


def _write(path: str, started: Any, stop: Any, written: Any) -> None:
    """A run's writer: fresh entries one at a time, until told to stop (and WRITES at least)."""
    cache = ResponseCache(Path(path))
    index = 0
    while index < WRITES or not stop.is_set():
        cache.put(f"fresh-{index}", completion(f"fresh {index}"), model="openai/a")
        index += 1
        started.set()
    written.value = index
    cache.close()


def test_prune_while_a_writer_process_writes_loses_nothing_fresh(tmp_path: Path) -> None:
    old = {f"old-{index}": ("openai/a", 20.0) for index in range(200)}
    path = fill(tmp_path / "c", old)
    context = multiprocessing.get_context("spawn")
    started, stop, written = context.Event(), context.Event(), context.Value("i", 0)
    writer = context.Process(target=_write, args=(str(path), started, stop, written))
    writer.start()
    try:
        assert started.wait(timeout=60), "the writer never wrote"
        prune = [sys.executable, "-m", "pytest_llmbench.cli", "cache", "prune"]
        pruned = subprocess.run(
            [*prune, "--cache-dir", str(path.parent), "--older-than", "14d"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        stop.set()
        writer.join(timeout=60)
    assert writer.exitcode == 0
    assert pruned.returncode == 0, pruned.stderr
    assert "pruned 200 entries older than 14d" in pruned.stdout
    count = written.value
    assert count >= WRITES
    assert keys(path) == {f"fresh-{index}" for index in range(count)}
    cache = ResponseCache(path)
    assert cache.get(f"fresh-{count - 1}") == completion(f"fresh {count - 1}")
    cache.close()


def _fresh_entries(path: Path) -> int:
    if not path.is_file():
        return 0
    db = sqlite3.connect(path, timeout=30)
    try:
        return int(
            db.execute("SELECT COUNT(*) FROM responses WHERE key NOT LIKE 'old-%'").fetchone()[0]
        )
    except sqlite3.OperationalError:  # the run has not made the table yet
        return 0
    finally:
        db.close()


@pytest.mark.slow
def test_prune_while_a_pytest_run_writes_keeps_every_answer_of_the_run(bench: Bench) -> None:
    """A real run under --cache=use, its answers slowed by the fake server, pruned mid-run."""
    cases = 30  # two at a time, 0.2 s each: the run writes for about 3 s
    bench.server.add_rule(Rule(reply="ok", delay_s=0.2))
    lines = ["cases:"]
    for index in range(cases):
        lines += [f"  - id: c{index:02d}", f"    prompt: Question {index:02d}", "    expected: ok"]
    bench.eval_file("many", "\n".join(lines) + "\n")
    path = fill(bench.pytester.path / "c", {f"old-{i}": ("openai/old", 20.0) for i in range(50)})
    run = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--results-dir=out",
           "--models=fake", "--cache=use", "--cache-dir=c", "--concurrency=2"]  # fmt: skip
    writer = subprocess.Popen(run, cwd=bench.pytester.path, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while _fresh_entries(path) == 0 and writer.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        prune = [sys.executable, "-m", "pytest_llmbench.cli", "cache", "prune", "--cache-dir"]
        pruned = subprocess.run(
            [*prune, str(path.parent), "--older-than", "14d"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert writer.poll() is None, "the run ended before the prune: nothing was concurrent"
    finally:
        out, _ = writer.communicate(timeout=300)
    assert writer.returncode == 0, out
    assert pruned.returncode == 0 and "pruned 50 entries older than 14d" in pruned.stdout
    assert len(bench.server.chat_requests()) == cases
    assert _fresh_entries(path) == cases and len(keys(path)) == cases
    bench.server.reset()
    bench.run("--models=fake", "--cache=replay", "--cache-dir=c").assert_outcomes(passed=cases)
    assert bench.server.chat_requests() == []
