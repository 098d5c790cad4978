"""--shard K/N and `llmbench merge`: three shards of one suite, run as separate processes with
-n 0 and -n 2 mixed and merged, give the records, verdicts, intervals and leaderboard of the
unsharded run; a shard missing or given twice is reported; shards of other options refused."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Bench, Rule

from pytest_llmbench.shard import parse_shard

#: Six cases: four answered right, two wrong (Kyoto, 5).
SUITE = """
cases:
  - {id: france, prompt: "Capital of France?", expected: Paris, assert: [contains]}
  - {id: japan, prompt: "Capital of Japan?", expected: Tokyo, assert: [contains]}
  - {id: italy, prompt: "Capital of Italy?", expected: Rome, assert: [contains]}
  - {id: spain, prompt: "Capital of Spain?", expected: Madrid, assert: [contains]}
  - {id: add, prompt: "2 + 2?", expected: "4", assert: [contains]}
  - {id: mul, prompt: "3 * 4?", expected: "12", assert: [contains]}
"""
#: Fields that measure the run, not its results: they differ between any two runs.
TIMINGS = {"latency_s", "ttft_s", "tokens_per_s", "started_at", "worker", "rate_limit_wait_s",
           "streamed", "workdir"}  # fmt: skip


def answers(bench: Bench) -> None:
    for word, reply in (("France", "Paris"), ("Japan", "Kyoto"), ("Italy", "Rome"),
                        ("Spain", "Madrid"), ("2 + 2", "4"), ("3 * 4", "5")):  # fmt: skip
        bench.server.add_rule(Rule(match=word, reply=reply))


def run(bench: Bench, folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = bench.pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--results-dir={folder}", "--models=fake,fake2", "--repeat=2",
        *args,
    )  # fmt: skip
    assert (folder / "run.json").is_file(), result.stdout.str()[-2000:]
    return result  # type: ignore[return-value]


def merge(bench: Bench, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest_llmbench.cli", "merge", *args]
    return subprocess.run(command, cwd=bench.pytester.path, capture_output=True, text=True)


def records(folder: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    return {row["nodeid"]: {k: v for k, v in row.items() if k not in TIMINGS} for row in rows}


def table(path: Path, drop: tuple[str, ...] = ()) -> list[dict[str, str]]:
    rows = list(csv.DictReader(path.open()))
    timing = ("latency", "ttft", "tokens_per_s", "rate_limit")
    return [
        {k: v for k, v in row.items() if not k.startswith(timing) and k not in drop} for row in rows
    ]


@pytest.fixture
def sharded(bench: Bench) -> tuple[Bench, Path]:
    """The suite run whole (-n 0) and as three shards (-n 0, -n 2, -n 0), then merged."""
    answers(bench)
    bench.eval_file("suite", SUITE)
    root = bench.pytester.path
    run(bench, root / "full", "-n", "0")
    for number, workers in ((1, "0"), (2, "2"), (3, "0")):
        run(bench, root / f"s{number}", "--shard", f"{number}/3", "-n", workers)
    return bench, root


def test_shard_takes_k_of_n() -> None:
    assert parse_shard("2/3") == (2, 3) and parse_shard(None) is None
    for bad in ("0/3", "4/3", "2", "a/b", "1/0"):
        with pytest.raises(pytest.UsageError):
            parse_shard(bad)


def test_the_options_a_shard_may_differ_in_are_not_compared() -> None:
    from pytest_llmbench.results.merge import _arguments

    args = ["evals/", "-n", "2", "--shard", "1/3", "-nauto", "--results-dir=out/1",
            "--basetemp", "/tmp/b", "-k", "a or b", "--lf", "--junitxml=s1.xml"]  # fmt: skip
    assert _arguments(args) == ["evals/", "-k", "a or b"]


def test_shards_split_the_selection_and_compose_with_k(bench: Bench) -> None:
    bench.eval_file("suite", SUITE)
    ids = {}
    for number in (1, 2, 3):
        result = bench.run("--collect-only", "-q", "--models=fake", "--shard", f"{number}/3")
        ids[number] = [line for line in result.outlines if "::" in line]
    assert [len(ids[n]) for n in (1, 2, 3)] == [2, 2, 2]
    every = bench.run("--collect-only", "-q", "--models=fake").outlines
    assert sorted(ids[1] + ids[2] + ids[3]) == sorted(line for line in every if "::" in line)
    # -k first, then the split of what it selected.
    result = bench.run("--collect-only", "-q", "--models=fake", "-k", "not add", "--shard", "1/2")
    assert len([line for line in result.outlines if "::" in line]) == 3
    bad = bench.run("--models=fake", "--shard", "4/3")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR


def test_run_wide_budgets_are_split_between_shards(bench: Bench) -> None:
    answers(bench)
    bench.eval_file("suite", SUITE)
    folder = bench.pytester.path / "one"
    run(bench, folder, "--shard", "1/2", "--rpm", "60", "--concurrency", "8", "--max-cost", "1")
    shard = json.loads((folder / "run.json").read_text())["config"]["shard"]
    assert (shard["index"], shard["count"]) == (1, 2)
    assert shard["split"]["rpm"] == {"run": 60.0, "shard": 30.0}
    assert shard["split"]["concurrency"] == {"run": 8, "shard": 4}
    assert shard["split"]["max_cost"] == {"run": 1.0, "shard": 0.5}


@pytest.mark.slow
def test_merged_shards_equal_the_unsharded_run(sharded: tuple[Bench, Path]) -> None:
    bench, root = sharded
    result = merge(bench, "s1", "s2", "s3", "-o", "merged")
    assert result.returncode == 1, result.stdout + result.stderr  # Kyoto and 5 fail, as whole
    full, merged = records(root / "full"), records(root / "merged")
    assert len(full) == 24 and set(merged) == set(full)
    differing = [nodeid for nodeid in full if full[nodeid] != merged[nodeid]]
    assert differing == []
    for name in ("leaderboard.csv", "case_verdicts.csv", "comparisons.csv", "all_metrics.csv"):
        assert table(root / "merged" / name) == table(root / "full" / name), name
    info = json.loads((root / "merged" / "run.json").read_text())
    assert info["coverage"]["missing"] == [] and info["exitstatus"] == 1
    assert [m["shard"]["index"] for m in info["merged_from"]] == [1, 2, 3]
    assert (root / "merged" / "report.html").is_file()
    # What the unsharded run decided, the merge decides: the same exit status.
    assert json.loads((root / "full" / "run.json").read_text())["exitstatus"] == 1


@pytest.mark.slow
def test_a_missing_or_repeated_shard_is_reported(sharded: tuple[Bench, Path]) -> None:
    bench, _ = sharded
    missing = merge(bench, "s1", "s3", "-o", "partial")
    assert missing.returncode == 1
    assert "shard(s) 2 of 3 missing" in missing.stdout
    twice = merge(bench, "s1", "s1", "s2", "s3", "-o", "twice")
    assert "shard(s) 1 given more than once" in twice.stdout
    assert "8 item(s) recorded twice (kept once)" in twice.stdout
    assert len(records(bench.pytester.path / "twice")) == 24


@pytest.mark.slow
def test_shards_of_other_options_are_refused_unless_forced(sharded: tuple[Bench, Path]) -> None:
    bench, root = sharded
    other = root / "other"
    run(bench, other, "--shard", "2/3", "--max-retries", "5")
    refused = merge(bench, "s1", "other", "s3", "-o", "no")
    assert refused.returncode == 2
    assert "max_retries: 2 in s1, 5 in other" in refused.stderr
    assert not (root / "no").exists()
    forced = merge(bench, "s1", "other", "s3", "-o", "yes", "--force")
    assert forced.returncode == 1 and (root / "yes" / "results.jsonl").is_file()


@pytest.mark.slow
def test_the_merge_gates_on_pass_rate_and_regressions(sharded: tuple[Bench, Path]) -> None:
    bench, _root = sharded
    gated = merge(bench, "s1", "s2", "s3", "-o", "gated", "--min-pass-rate", "0.5")
    assert gated.returncode == 0, gated.stdout  # 4 of 6 cases pass for each model
    strict = merge(bench, "s1", "s2", "s3", "-o", "strict", "--min-pass-rate", "0.9")
    assert strict.returncode == 1 and "pass rate 66.7% < --min-pass-rate 90.0%" in strict.stdout
    same = merge(bench, "s1", "s2", "s3", "-o", "same", "--min-pass-rate", "0.5",
                 "--baseline", "full", "--fail-on-regression")  # fmt: skip
    assert same.returncode == 0, same.stdout


# -- the CI templates --------------------------------------------------------------------------


def ci_project(bench: Bench) -> Path:
    """The bench project with its suite under evals/ and the fake model as the default."""
    answers(bench)
    bench.pytester.makefile(".eval.yaml", **{"evals/suite": SUITE})
    bench.pytester.makeini("[pytest]\nllmbench_models = fake\n")
    return bench.pytester.path


def steps(job: dict[str, Any]) -> list[str]:
    """A job's shell steps in order; installing is left out (the package is installed here)."""
    found = job.get("steps") or [{"run": line} for line in job.get("script", [])]
    return [step["run"] for step in found if "run" in step and "pip install" not in step["run"]]


def shell(command: str, cwd: Path, env: dict[str, str]) -> int:
    bin_dir = str(Path(sys.executable).parent)  # pytest and llmbench of this environment
    full = {**os.environ, **env, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return subprocess.run(["bash", "-e", "-c", command], cwd=cwd, env=full).returncode


@pytest.mark.slow
def test_the_github_workflow_runs_its_shards_and_gates_the_merge(bench: Bench) -> None:
    import shutil

    import yaml

    project = ci_project(bench)
    from pytest_llmbench.cli import main

    assert main(["init", str(project), "--ci", "github"]) == 0
    workflow = yaml.safe_load((project / ".github/workflows/llmbench.yml").read_text())
    assert set(workflow[True]) >= {"push", "pull_request", "schedule"}  # YAML's `on` is True
    shard_job, merge_job = workflow["jobs"]["shard"], workflow["jobs"]["merge"]
    shards = shard_job["strategy"]["matrix"]["shard"]
    assert str(len(shards)) == workflow["env"]["SHARDS"] and merge_job["needs"] == "shard"
    uses = [step.get("uses", "") for step in shard_job["steps"]]
    assert any(use.startswith("actions/cache") for use in uses)
    assert any(use.startswith("actions/upload-artifact") for use in uses)
    env = {name: workflow["env"][name] for name in ("SHARDS", "MIN_PASS_RATE", "CACHE_TTL")}
    for shard in shards:  # each runner: the matrix value filled in
        for command in steps(shard_job):
            assert shell(command.replace("${{ matrix.shard }}", str(shard)), project, env) == 0
    merged = project / "merge-runner"
    merged.mkdir()
    for shard in shards:  # upload-artifact, then download-artifact into the merge job
        shutil.copytree(project / f"shard-results/shard-{shard}",
                        merged / f"shard-results/llmbench-shard-{shard}")  # fmt: skip
    summary = project / "step-summary.md"
    codes = [
        shell(c, merged, {**env, "GITHUB_STEP_SUMMARY": str(summary)}) for c in steps(merge_job)
    ]
    # Four of six cases pass (66.7% < 0.8): the merge gate fails the job; the summary is written.
    assert codes == [1, 0], codes
    assert "fake" in summary.read_text() and "66.7%" in summary.read_text()
    info = json.loads((merged / "llmbench-merged/run.json").read_text())
    assert info["coverage"]["missing"] == [] and info["records"] == 6


@pytest.mark.slow
def test_the_gitlab_pipeline_runs_its_shards_and_gates_the_merge(bench: Bench) -> None:
    import yaml

    project = ci_project(bench)
    from pytest_llmbench.cli import main

    assert main(["init", str(project), "--ci", "gitlab"]) == 0
    pipeline = yaml.safe_load((project / ".gitlab-ci.yml").read_text())
    shard_job, merge_job = pipeline["llmbench-shard"], pipeline["llmbench-merge"]
    total = shard_job["parallel"]
    env = {name: pipeline["variables"][name] for name in ("MIN_PASS_RATE", "CACHE_TTL")}
    env["CI_NODE_TOTAL"] = str(total)
    for index in range(1, total + 1):
        for command in steps(shard_job):
            assert shell(command, project, {**env, "CI_NODE_INDEX": str(index)}) == 0
    codes = [shell(command, project, env) for command in steps(merge_job)]
    assert codes[0] == 1  # the gate: 66.7% < 0.8
    assert json.loads((project / "llmbench-merged/run.json").read_text())["records"] == 6


def test_init_ci_never_overwrites_a_workflow(tmp_path: Path) -> None:
    from pytest_llmbench.cli import main

    assert main(["init", str(tmp_path), "--ci", "github"]) == 0
    assert main(["init", str(tmp_path), "--ci", "github"]) == 1
    assert main(["init", str(tmp_path), "--ci", "github", "--force"]) == 0
    assert not (tmp_path / "evals").exists()  # only the workflow


@pytest.mark.slow
def test_xdist_tx_popen_still_records_each_item_once(bench: Bench) -> None:
    answers(bench)
    bench.eval_file("suite", SUITE)
    folder = bench.pytester.path / "tx"
    run(bench, folder, "--dist", "load", "--tx", "2*popen", "--shard", "1/2")
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and len({row["nodeid"] for row in rows}) == 12  # 24 items, half
    assert {row["worker"] for row in rows} == {"gw0", "gw1"}


# -- one gate for a run and a merge --------------------------------------------------------------

#: A second eval file that does not load: a collection error in every shard, as in the whole run.
BROKEN = "cases:\n  - {id: x, prompt: 'Hi', assert: [no-such-check]}\n"


def regressed_baseline(bench: Bench, folder: Path) -> None:
    """A baseline of the suite, after which every call about France fails: each model answers
    that case no more (every repeat an error), a lost case, a significant regression. (A case
    gone from the suite is removed, not lost: it does not gate.)"""
    run(bench, folder, "-n", "0")
    bench.server.reset()
    bench.server.add_rule(Rule(match="France", status=401))
    answers(bench)


def records_of(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]


def gate_options(options: tuple[str, ...]) -> list[str]:
    """The gate options of a run's ``options``: what `llmbench merge` takes too."""
    return [o for o in options if o not in ("-x", "--continue-on-collection-errors")]


def gate_of(folder: Path) -> tuple[int, list[str]]:
    info = json.loads((folder / "run.json").read_text())
    return info["exitstatus"], info["gate_failures"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "options",
    [
        pytest.param((), id="no-gate"),
        pytest.param(("--min-pass-rate", "0.5"), id="pass-rate-met"),
        pytest.param(("--min-pass-rate", "0.9"), id="pass-rate-missed"),
        pytest.param(("--repeat-policy", "any"), id="repeat-policy"),
        pytest.param(("--max-cost-per-item", "0.00001"), id="cost-limit"),
        pytest.param(("--baseline", "base", "--fail-on-regression"), id="regression"),
        pytest.param(("--min-pass-rate", "0", "-x"), id="cut-short"),
        pytest.param(
            ("--min-pass-rate", "0", "--continue-on-collection-errors"), id="collection-error"
        ),
    ],
)
def test_a_merge_gates_as_the_whole_run_did(bench: Bench, options: tuple[str, ...]) -> None:
    """The suite run whole and as three shards with the same gate options, merged without
    repeating them (the merge takes the shards' own): the same exit status and gate_failures."""
    answers(bench)
    bench.eval_file("suite", SUITE)
    if "--continue-on-collection-errors" in options:
        bench.eval_file("broken", BROKEN)
    root = bench.pytester.path
    if "--baseline" in options:
        regressed_baseline(bench, root / "base")
    whole = run(bench, root / "full", "-n", "0", *options)
    for number in (1, 2, 3):
        run(bench, root / f"s{number}", "--shard", f"{number}/3", "-n", "0", *options)
    merged = merge(bench, "s1", "s2", "s3", "-o", "merged")
    assert merged.returncode == whole.ret, merged.stdout + merged.stderr
    assert gate_of(root / "merged") == gate_of(root / "full")
    if "--fail-on-regression" in options:  # the gate did judge: both models regressed
        assert gate_of(root / "full")[1] == ["--fail-on-regression: fake, fake2 regressed "
                                             f"against {root / 'base'}"]  # fmt: skip
    # Given to the merge, the same options decide the same (they replace the shards' own).
    again = merge(bench, "s1", "s2", "s3", "-o", "again", *gate_options(options))
    assert again.returncode == whole.ret and gate_of(root / "again") == gate_of(root / "full")


@pytest.mark.slow
def test_a_merge_option_replaces_the_shards_own(sharded: tuple[Bench, Path]) -> None:
    bench, root = sharded
    policy = merge(bench, "s1", "s2", "s3", "-o", "policy", "--repeat-policy", "ANY")
    assert policy.returncode == 1
    assert gate_of(root / "policy")[1] == ["4 case(s) fail --repeat-policy=any"]
    bad = merge(bench, "s1", "s2", "s3", "-o", "bad", "--repeat-policy", "most")
    assert bad.returncode == 2 and "--repeat-policy must be all, majority" in bad.stderr
    assert not (root / "bad").exists()


def test_a_folder_that_is_not_a_results_folder_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_llmbench.cli import main

    (tmp_path / "empty").mkdir()
    for name in ("empty", "gone"):
        folder = tmp_path / name
        assert main(["merge", str(folder), "-o", str(tmp_path / "out")]) == 2
        assert (
            f"llmbench: {folder}: not a results folder (no results.jsonl)"
            in capsys.readouterr().err
        )
    assert not (tmp_path / "out").exists()
    results = tmp_path / "shard"
    results.mkdir()
    (results / "results.jsonl").write_text("kept\n")
    assert main(["merge", str(results), "-o", str(results)]) == 2
    assert "a shard's own folder (the merge would replace it)" in capsys.readouterr().err
    assert (results / "results.jsonl").read_text() == "kept\n"
