"""--retry-errors DIR: a run whose provider failed on some items is completed in place by a
second run against the healthy provider; every item recorded once, the aggregates those of a run
that never failed; refused (DIR untouched) on other options or changed eval files; DIR left as
it was when the retry is interrupted or crashes; a merged folder and -n 2 completed alike."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Bench, Rule
from test_shard import SUITE, TIMINGS, answers, merge, table

#: The cases the provider fails on in the first run (500, no retry).
BROKEN = ("Japan", "Spain")
#: run.json fields that describe how the run went, equal for a completed and a clean run.
RUN_NUMBERS = ("records", "exitstatus", "gate_failures", "repeat_policy", "items_selected",
               "gate_inputs", "judge_agreement")  # fmt: skip

Runner = Callable[..., pytest.RunResult]


def _outage(bench: Bench) -> None:
    """The provider fails the BROKEN cases with a 500, answers the others."""
    bench.server.reset()
    for word in BROKEN:
        bench.server.add_rule(Rule(match=word, status=500, error_message="overloaded"))
    answers(bench)


def _healthy(bench: Bench) -> None:
    bench.server.reset()
    answers(bench)


def _runner(bench: Bench, workers: str) -> Runner:
    """pytest in-process with -n 0, in a subprocess (real xdist) with -n 2."""
    if workers == "0":
        return lambda *args: bench.pytester.runpytest("-p", "no:cacheprovider", *args)
    return lambda *args: bench.pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-n", workers, *args
    )


def _options(folder: str) -> tuple[str, ...]:
    return (f"--results-dir={folder}", "--models=fake,fake2", "--repeat=2", "--max-retries=0")


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by its relative path, with its bytes."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def _records(folder: Path) -> list[dict[str, Any]]:
    lines = (folder / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _comparable(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in TIMINGS and k != "attempts"}


def _csvs(folder: Path) -> dict[str, list[dict[str, str]]]:
    return {name: table(folder / name) for name in _files(folder) if name.endswith(".csv")}


def _numbers(folder: Path) -> dict[str, Any]:
    info = json.loads((folder / "run.json").read_text())
    return {key: info.get(key) for key in RUN_NUMBERS}


def _siblings(bench: Bench, name: str) -> list[str]:
    return sorted(p.name for p in bench.pytester.path.iterdir() if p.name.startswith(f".{name}."))


def _broken_run(bench: Bench, run: Runner, folder: str = "out") -> pytest.RunResult:
    _outage(bench)
    result = run(*_options(folder))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    errors = [r for r in _records(bench.pytester.path / folder) if r["outcome"] == "error"]
    assert len(errors) == 2 * 2 * len(BROKEN)  # two models, two repeats
    return result


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_run_with_errors_is_completed_in_place(bench: Bench, workers: str) -> None:
    bench.eval_file("suite", SUITE)
    root, run = bench.pytester.path, _runner(bench, workers)
    _healthy(bench)
    clean = run(*_options("clean"))
    assert clean.ret == pytest.ExitCode.TESTS_FAILED  # Kyoto and 5 are wrong answers
    _broken_run(bench, run)
    before = _records(root / "out")
    report_before = (root / "out" / "report.html").read_text()
    (root / "out" / "notes.txt").write_text("kept")  # a file no run writes
    _healthy(bench)

    retry = run(*_options("out"), "--retry-errors=out")

    retry.stdout.fnmatch_lines([f"llmbench: retrying 8 errored items of {root / 'out'}"])
    if workers == "0":
        retry.stdout.fnmatch_lines(["collected 24 items / 16 deselected / 8 selected"])
    retry.stdout.fnmatch_lines(
        [f"llmbench: 24 records in {root / 'out'}",
         "llmbench: * completed in place: 8 errored records replaced (0 items still errored)",
         f"llmbench: report {root / 'out'}/report.html"]
    )  # fmt: skip
    assert retry.ret == clean.ret
    # Only the errored items were called again: not the failures (Kyoto, 5), not the passes.
    prompts = {r.body["messages"][-1]["content"] for r in bench.server.chat_requests()}
    assert prompts == {"Capital of Japan?", "Capital of Spain?"}
    after = _records(root / "out")
    assert [r["nodeid"] for r in after] == [r["nodeid"] for r in before]  # once each, in place
    reference = {r["nodeid"]: _comparable(r) for r in _records(root / "clean")}
    assert {r["nodeid"]: _comparable(r) for r in after} == reference
    for old, new in zip(before, after, strict=True):
        if old["outcome"] == "error":
            assert [a["outcome"] for a in new["attempts"]] == ["error"]
            assert new["attempts"][0]["error"] == old["error"]
            assert new["attempts"][0]["error_kind"] == "provider"
        else:
            assert new == old
    assert _csvs(root / "out") == _csvs(root / "clean")
    assert _numbers(root / "out") == _numbers(root / "clean")
    info = json.loads((root / "out" / "run.json").read_text())
    assert [entry["replaced"] for entry in info["retried_errors"]] == [8]
    # The report is the completed run's: the provider's error message is gone from it.
    report = (root / "out" / "report.html").read_text()
    assert "overloaded" in report_before and "overloaded" not in report
    assert _siblings(bench, "out") == []  # the work folder took DIR's place
    assert (root / "out" / "notes.txt").read_text() == "kept"


def test_a_completed_run_passes_the_gate_its_errors_failed(bench: Bench) -> None:
    """Errors fail a run whatever --min-pass-rate says; once retried, the gate decides alone."""
    bench.eval_file("suite", SUITE)
    root, run = bench.pytester.path, _runner(bench, "0")
    gate = "--min-pass-rate=0.6"  # 4 of 6 cases pass: 66.7%
    _healthy(bench)
    assert run(*_options("clean"), gate).ret == pytest.ExitCode.OK
    _outage(bench)
    assert run(*_options("out"), gate).ret == pytest.ExitCode.TESTS_FAILED
    assert _numbers(root / "out")["gate_inputs"]["other_failures"] == 8
    _healthy(bench)
    retry = run(*_options("out"), gate, "--retry-errors=out")
    assert retry.ret == pytest.ExitCode.OK
    assert _numbers(root / "out") == _numbers(root / "clean")
    assert json.loads((root / "out" / "run.json").read_text())["exitstatus"] == 0


def test_a_retry_that_errors_again_keeps_every_attempt(bench: Bench) -> None:
    bench.eval_file("suite", SUITE)
    run = _runner(bench, "0")
    _broken_run(bench, run)
    _outage(bench)  # still down
    retry = run(*_options("out"), "--retry-errors=out")
    assert retry.ret == pytest.ExitCode.TESTS_FAILED
    again = run(*_options("out"), "--retry-errors=out")  # the third attempt
    assert again.ret == pytest.ExitCode.TESTS_FAILED
    errors = [r for r in _records(bench.pytester.path / "out") if r["outcome"] == "error"]
    assert len(errors) == 8
    assert all([a["outcome"] for a in r["attempts"]] == ["error", "error"] for r in errors)
    info = json.loads((bench.out("run.json")).read_text())
    assert [entry["replaced"] for entry in info["retried_errors"]] == [8, 8]


def test_a_folder_without_errors_is_left_alone(bench: Bench) -> None:
    bench.eval_file("suite", SUITE)
    _healthy(bench)
    run = _runner(bench, "0")
    run(*_options("out"))
    saved = _files(bench.out(""))
    requests = len(bench.server.chat_requests())
    result = run(*_options("out"), "--retry-errors=out")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["llmbench: no errored items in *out: nothing to retry*"])
    assert len(bench.server.chat_requests()) == requests
    assert _files(bench.out("")) == saved and _siblings(bench, "out") == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("--repeat=3",), "*option repeat: 2 in *out, 3 now*"),
        (("--models=fake",), "*option models: *"),
        (("--max-retries=0", "-k", "japan"), "*option arguments: *"),
        (("--shard=1/2",), "*--shard: --retry-errors runs every errored item*"),
        (("--results-dir=elsewhere",), "*--results-dir */elsewhere: --retry-errors writes into*"),
    ],
)
def test_a_retry_with_other_options_is_refused(
    bench: Bench, change: tuple[str, ...], expected: str
) -> None:
    bench.eval_file("suite", SUITE)
    run = _runner(bench, "0")
    _broken_run(bench, run)
    saved = _files(bench.out(""))
    _healthy(bench)
    options = [
        o for o in _options("out") if o.split("=")[0] not in {c.split("=")[0] for c in change}
    ]
    result = run(*options, *change, "--retry-errors=out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--retry-errors * refused, nothing was changed:*", expected])
    assert _files(bench.out("")) == saved and _siblings(bench, "out") == []
    assert bench.server.chat_requests() == []


def test_a_folder_that_is_no_results_folder_is_refused(bench: Bench) -> None:
    bench.eval_file("suite", SUITE)
    (bench.pytester.path / "empty").mkdir()
    result = bench.pytester.runpytest("--models=fake", "--retry-errors=empty")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--retry-errors *empty is not a results folder (no results.jsonl)"]
    )
    unfinished = bench.pytester.path / "unfinished"
    unfinished.mkdir()
    (unfinished / "results.jsonl").write_text(
        '{"suite": "s", "case_id": "c", "outcome": "error"}\n'
    )
    result = bench.pytester.runpytest("--models=fake", "--retry-errors=unfinished")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unfinished: no run.json: that run did not finish*"])


#: Stops the retry at its first item's teardown: as Ctrl-C, or as a process killed outright.
STOPS = {
    "interrupted": "def pytest_runtest_teardown(item):\n    raise KeyboardInterrupt\n",
    "crashed": "import os\n\ndef pytest_runtest_teardown(item):\n    os._exit(3)\n",
}


@pytest.mark.parametrize("stop", sorted(STOPS))
def test_an_interrupted_retry_leaves_the_folder_as_it_was(bench: Bench, stop: str) -> None:
    bench.eval_file("suite", SUITE)
    run = _runner(bench, "0")
    _broken_run(bench, run)
    saved = _files(bench.out(""))
    _healthy(bench)
    bench.pytester.makeconftest(STOPS[stop])
    options = (*_options("out"), "--retry-errors=out")
    if stop == "crashed":
        result = bench.pytester.runpytest_subprocess("-p", "no:cacheprovider", *options)
        assert result.ret == 3
    else:
        result = bench.pytester.runpytest("-p", "no:cacheprovider", *options, no_reraise_ctrlc=True)
        assert result.ret == pytest.ExitCode.INTERRUPTED
        result.stdout.fnmatch_lines(["llmbench: *out left as it was (the retry was interrupted)*"])
    assert _files(bench.out("")) == saved
    # The retry's first record (Kyoto: a failure now, no longer an error) is kept beside it.
    (work,) = _siblings(bench, "out")
    kept = _records(bench.pytester.path / work)
    assert ("japan", "failed") in [(r["case_id"], r["outcome"]) for r in kept]


def test_a_merged_folder_is_completed_in_place(bench: Bench) -> None:
    bench.eval_file("suite", SUITE)
    root, run = bench.pytester.path, _runner(bench, "0")
    _healthy(bench)
    run(*_options("clean"))
    _outage(bench)
    for number in (1, 2):
        run(*_options(f"s{number}"), f"--shard={number}/2")
    merged = merge(bench, "s1", "s2", "-o", "merged")
    assert merged.returncode == 1, merged.stdout + merged.stderr
    _healthy(bench)
    retry = run(*_options("merged"), "--retry-errors=merged")
    retry.stdout.fnmatch_lines(["llmbench: retrying 8 errored items of *merged"])
    assert retry.ret == pytest.ExitCode.TESTS_FAILED
    after = _records(root / "merged")
    assert sorted(r["nodeid"] for r in after) == sorted(
        r["nodeid"] for r in _records(root / "clean")
    )
    assert sum(1 for r in after if r["attempts"]) == 8
    assert _csvs(root / "merged") == _csvs(root / "clean")
    info = json.loads((root / "merged" / "run.json").read_text())
    assert [m["folder"] for m in info["merged_from"]] == ["s1", "s2"]  # the merge's facts kept
    assert info["gate_failures"] == _numbers(root / "clean")["gate_failures"]


def test_a_retry_after_an_eval_file_changed_is_refused(bench: Bench) -> None:
    bench.eval_file("suite", SUITE)
    run = _runner(bench, "0")
    _broken_run(bench, run)
    saved = _files(bench.out(""))
    _healthy(bench)
    bench.eval_file("suite", SUITE.replace("expected: Tokyo", "expected: Kyoto"))
    result = run(*_options("out"), "--retry-errors=out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*refused*", "  file suite.eval.yaml changed since that run: sha256 * then, * now"]
    )
    assert _files(bench.out("")) == saved and _siblings(bench, "out") == []
    assert bench.server.chat_requests() == []


def test_an_older_run_without_file_hashes_is_retried_with_a_warning(bench: Bench) -> None:
    bench.eval_file("suite", SUITE)
    run = _runner(bench, "0")
    _broken_run(bench, run)
    info = json.loads(bench.out("run.json").read_text())
    del info["source"]  # as run.json was written before it had one
    bench.out("run.json").write_text(json.dumps(info))
    _healthy(bench)
    result = run(*_options("out"), "--retry-errors=out")
    result.stdout.fnmatch_lines(
        ["llmbench: warning: *out/run.json has no file hashes (an older run): the eval files "
         "could not be compared with that run's",
         "*completed in place: 8 errored records replaced*"]
    )  # fmt: skip
    assert not [r for r in _records(bench.out("")) if r["outcome"] == "error"]
    assert json.loads(bench.out("run.json").read_text())["source"]["files"]  # hashed now


def test_the_completed_run_lists_every_file_its_runs_read(bench: Bench) -> None:
    """The retry collects the errored items' files only; run.json keeps the first run's too."""
    bench.eval_file("suite", SUITE)
    bench.eval_file("extra", 'cases:\n  - {id: it, prompt: "Italy?", expected: Rome}\n')
    root, run = bench.pytester.path, _runner(bench, "0")
    _healthy(bench)
    run(*_options("clean"))
    _broken_run(bench, run)
    _healthy(bench)
    run(*_options("out"), "--retry-errors=out")
    sources = [json.loads((root / f / "run.json").read_text())["source"] for f in ("clean", "out")]
    assert sorted(sources[1]["files"]) == ["extra.eval.yaml", "suite.eval.yaml"]
    assert sources[1]["files"] == sources[0]["files"]


def test_a_retry_on_another_commit_with_the_same_files_warns(bench: Bench) -> None:
    bench.eval_file("suite", SUITE)
    root, run = bench.pytester.path, _runner(bench, "0")

    def git(*args: str) -> None:
        identity = ("-c", "user.email=dev@example.com", "-c", "user.name=dev")
        subprocess.run(["git", *identity, *args], cwd=root, check=True, capture_output=True)

    git("init", "-q")
    git("add", "suite.eval.yaml")
    git("commit", "-qm", "the suite")
    _broken_run(bench, run)
    (root / "NOTES.md").write_text("not an eval file")
    git("add", "NOTES.md")
    git("commit", "-qm", "notes")
    _healthy(bench)
    result = run(*_options("out"), "--retry-errors=out")
    result.stdout.fnmatch_lines(
        ["llmbench: warning: git commit * now, * in *out's run (the eval and dataset files are "
         "the same)",
         "*completed in place: 8 errored records replaced*"]
    )  # fmt: skip


# -- the swap, on folders alone ------------------------------------------------------------------


def _folder(path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    return path


def test_copy_others_carries_what_no_run_writes(tmp_path: Path) -> None:
    from pytest_llmbench.results_folder import ResultsFolder

    old = _folder(tmp_path / "out", {
        "results.jsonl": "old", "run.json": "old", "leaderboard.csv": "old", "by_tag.csv": "old",
        "fake/aggregate_metrics.csv": "old", "junit.xml": "mine", "notes/a.txt": "mine",
    })  # fmt: skip
    done = _folder(tmp_path / "done", {"results.jsonl": "new", "run.json": "new"})
    ResultsFolder(old).copy_others(ResultsFolder(done))
    assert _files(done) == {
        "results.jsonl": b"new", "run.json": b"new", "junit.xml": b"mine", "notes/a.txt": b"mine"
    }  # fmt: skip


def test_replace_with_swaps_or_leaves_the_folder_whole(tmp_path: Path) -> None:
    from pytest_llmbench.results_folder import ResultsFolder

    out = ResultsFolder(_folder(tmp_path / "out", {"results.jsonl": "old"}))
    done = ResultsFolder(_folder(tmp_path / ".out.retry-1", {"results.jsonl": "new"}))
    out.replace_with(done)
    assert _files(out.path) == {"results.jsonl": b"new"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing left aside
    with pytest.raises(OSError):
        out.replace_with(ResultsFolder(tmp_path / ".out.retry-gone"))  # the second rename fails
    assert _files(out.path) == {"results.jsonl": b"new"}  # moved back
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
