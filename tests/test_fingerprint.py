"""Case and suite fingerprints: ``case_hash`` on every record, ``source`` in run.json."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import Bench, Rule

from pytest_llmbench.fingerprint import CASE_HASH_CHARS
from pytest_llmbench.provenance import file_hash, git_info, source_info
from pytest_llmbench.spec.load import load_spec

CASE = """description: {description}
model_params: {{temperature: 0, max_tokens: {max_tokens}}}
cases:
  - id: {case_id}
    prompt: "{prompt}"
    expected: {expected}
    tags: [{tag}]
    assert: [contains, {{type: icontains, value: capital, weight: {weight}}}]
"""
BASE = {
    "description": "Capitals",
    "max_tokens": 16,
    "case_id": "france",
    "prompt": "What is the capital of France?",
    "expected": "Paris",
    "tag": "geo",
    "weight": 1,
}


def _hash_of(tmp_path: Path, **changes: object) -> str:
    """The case hash of CASE written with ``changes``, in its own folder."""
    folder = tmp_path / f"p{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    path = folder / "capitals.eval.yaml"
    path.write_text(CASE.format(**{**BASE, **changes}))
    (case,) = load_spec(path).cases
    assert case.case_hash is not None
    return case.case_hash


def test_the_case_hash_is_short_hex_and_the_same_for_the_same_case(tmp_path: Path) -> None:
    first, second = _hash_of(tmp_path), _hash_of(tmp_path)
    assert first == second
    assert len(first) == CASE_HASH_CHARS and int(first, 16) >= 0


@pytest.mark.parametrize(
    "change",
    [
        {"prompt": "What is the capital of Spain?"},
        {"expected": "Lyon"},
        {"weight": 2},
        {"max_tokens": 32},
    ],
    ids=["prompt", "expected", "weight", "model-params"],
)
def test_what_decides_the_outcome_changes_the_hash(
    tmp_path: Path, change: dict[str, object]
) -> None:
    assert _hash_of(tmp_path, **change) != _hash_of(tmp_path)


@pytest.mark.parametrize(
    "change",
    [{"case_id": "fr"}, {"tag": "europe"}, {"description": "Other words"}],
    ids=["id", "tags", "description"],
)
def test_names_and_tags_leave_the_hash_alone(tmp_path: Path, change: dict[str, object]) -> None:
    assert _hash_of(tmp_path, **change) == _hash_of(tmp_path)


def test_a_threshold_and_a_system_prompt_change_the_hash(tmp_path: Path) -> None:
    plain = _hash_of(tmp_path)
    path = tmp_path / "other.eval.yaml"
    text = CASE.format(**BASE)
    path.write_text("threshold: 0.5\n" + text)
    assert load_spec(path).cases[0].case_hash != plain
    path.write_text("system: Be brief.\n" + text)
    assert load_spec(path).cases[0].case_hash != plain


# -- records and run.json -----------------------------------------------------------------------

DATASET_EVAL = """prompt: "Q: {{question}}"
dataset: {path: qa.jsonl, expected: answer}
"""
CSV_EVAL = """dataset: {path: data/extra.csv, prompt: question, expected: answer}
"""
VARIANT_EVAL = """prompts: ["file://ask.txt"]
cases:
  - {id: v1, vars: {question: "Capital of France?"}, expected: Paris}
"""


def _project(bench: Bench) -> None:
    bench.eval_file("capitals", CASE.format(**BASE))
    bench.eval_file("qa", DATASET_EVAL)
    bench.eval_file("extra", CSV_EVAL)
    bench.eval_file("variants", VARIANT_EVAL)
    root = bench.pytester.path
    (root / "qa.jsonl").write_text(
        '{"id": "q1", "question": "Capital of France?", "answer": "Paris"}\n'
        '{"id": "q2", "question": "Capital of Italy?", "answer": "Rome"}\n'
    )
    (root / "data").mkdir()
    (root / "data" / "extra.csv").write_text("id,question,answer\nc1,Capital of France?,Paris\n")
    (root / "ask.txt").write_text("Answer: {{question}}")
    bench.server.add_rule(Rule(match="France", reply="Paris is the capital."))
    bench.server.add_rule(Rule(match="Italy", reply="Rome."))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run_json(bench: Bench) -> dict[str, object]:
    data: dict[str, object] = json.loads(bench.out("run.json").read_text())
    return data


def test_records_carry_the_case_hash_and_run_json_the_files(bench: Bench) -> None:
    _project(bench)
    bench.run("--models=fake,fake2").assert_outcomes(passed=10)
    records = bench.records()
    hashes = {(r["suite"], r["case_id"]): r["case_hash"] for r in records if r["model"] == "fake"}
    # The model under test is no part of the case: both models' records carry the same hash.
    assert hashes == {
        (r["suite"], r["case_id"]): r["case_hash"] for r in records if r["model"] == "fake2"
    }
    assert all(len(value) == CASE_HASH_CHARS for value in hashes.values())
    assert len(set(hashes.values())) == len(hashes)  # five different cases
    source = _run_json(bench)["source"]
    assert isinstance(source, dict)
    root = bench.pytester.path
    names = [
        "ask.txt",
        "capitals.eval.yaml",
        "data/extra.csv",
        "extra.eval.yaml",
        "qa.eval.yaml",
        "qa.jsonl",
        "variants.eval.yaml",
    ]
    assert source["files"] == {name: _sha(root / name) for name in names}
    assert source["git"] is None  # pytester's folder is in no repository


def test_a_plain_test_has_no_case_hash(bench: Bench) -> None:
    bench.pytester.makepyfile(
        test_plain="""
def test_capital(llm):
    assert "Paris" in llm.complete("What is the capital of France?").text
"""
    )
    bench.server.add_rule(Rule(match="France", reply="Paris"))
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["case_hash"] is None
    assert _run_json(bench)["source"] == {"git": None, "files": {}}


@pytest.mark.slow
def test_hashes_and_files_are_the_same_under_xdist(bench: Bench) -> None:
    _project(bench)
    bench.run("--models=fake", "-p", "no:xdist").assert_outcomes(passed=5)
    alone = {r["nodeid"]: r["case_hash"] for r in bench.records()}
    files = _run_json(bench)["source"]
    bench.run_subprocess("--models=fake", "-n", "2").assert_outcomes(passed=5)
    assert {r["worker"] for r in bench.records()} <= {"gw0", "gw1"}
    assert {r["nodeid"]: r["case_hash"] for r in bench.records()} == alone
    assert _run_json(bench)["source"] == files


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_run_json_has_the_commit_and_the_dirty_flag(bench: Bench) -> None:
    root = bench.pytester.path
    _project(bench)

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    git("init", "-q")
    git("add", "capitals.eval.yaml")
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "suite")
    commit = git("rev-parse", "HEAD")
    bench.run("--models=fake").assert_outcomes(passed=5)
    # Untracked files (the other eval files, the results folder) do not make it dirty.
    assert _run_json(bench)["source"]["git"] == {"commit": commit, "dirty": False}  # type: ignore[index]
    (root / "capitals.eval.yaml").write_text(CASE.format(**{**BASE, "weight": 2}))
    bench.run("--models=fake").assert_outcomes(passed=5)
    assert _run_json(bench)["source"]["git"] == {"commit": commit, "dirty": True}  # type: ignore[index]


def test_git_info_is_none_outside_a_repository_or_without_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert git_info(tmp_path) is None
    monkeypatch.setenv("PATH", str(tmp_path))  # no git to run: no information, no error
    assert git_info(Path.cwd()) is None


def test_source_info_names_files_from_the_rootdir(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    inside, outside = tmp_path / "a" / "x.eval.yaml", tmp_path.parent / "gone.jsonl"
    inside.write_text("cases: []\n")
    found = source_info(tmp_path / "a", [inside, outside])
    assert found["files"] == {"x.eval.yaml": _sha(inside), str(outside): None}
    assert file_hash(inside) == _sha(inside)


# -- llmbench merge ------------------------------------------------------------------------------


def _merge(*args: str) -> int:
    from pytest_llmbench.cli import main

    return main(["merge", *args])


def test_a_merge_carries_the_shards_sources_and_refuses_other_files(
    bench: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    _project(bench)
    root = bench.pytester.path
    bench.run("--models=fake", "--results-dir=whole").assert_outcomes(passed=5)
    for number in (1, 2):
        bench.run("--models=fake", "--shard", f"{number}/2", f"--results-dir=s{number}")
    shard_files = [json.loads((root / f"s{n}" / "run.json").read_text())["source"]["files"]
                   for n in (1, 2)]  # fmt: skip
    assert shard_files[0] and shard_files[1] and shard_files[0] != shard_files[1]  # each its own
    assert _merge(str(root / "s1"), str(root / "s2"), "-o", str(root / "merged")) == 0
    whole = json.loads((root / "whole" / "run.json").read_text())["source"]
    merged = json.loads((root / "merged" / "run.json").read_text())["source"]
    assert merged == whole  # every file of the suite, hashed alike
    # A shard run on an edited eval file is no shard of the same run.
    info = json.loads((root / "s2" / "run.json").read_text())
    name = next(iter(info["source"]["files"]))
    info["source"]["files"][name] = "0" * 64
    shard_files[0][name] = whole["files"][name]  # make sure shard 1 read it too
    first = json.loads((root / "s1" / "run.json").read_text())
    first["source"]["files"] = shard_files[0]
    (root / "s1" / "run.json").write_text(json.dumps(first))
    (root / "s2" / "run.json").write_text(json.dumps(info))
    capsys.readouterr()
    assert _merge(str(root / "s1"), str(root / "s2"), "-o", str(root / "refused")) == 2
    error = capsys.readouterr().err
    assert "the shards are not of one run" in error
    assert f"file {name}: {whole['files'][name]} in {root / 's1'}, {'0' * 64} in" in error
    assert not (root / "refused").exists()


def test_merged_source_and_its_differences() -> None:
    from pytest_llmbench.provenance import merged_source, source_differences

    one = {"git": {"commit": "a" * 40, "dirty": False}, "files": {"x": "1", "y": "2"}}
    two = {"git": {"commit": "b" * 40, "dirty": True}, "files": {"y": "3", "z": "4"}}
    assert source_differences(one, two) == [
        ("git commit", "a" * 40, "b" * 40),
        ("file y", "2", "3"),
    ]
    assert source_differences(one, None) == [] and source_differences(one, one) == []
    assert merged_source([one, None, two]) == {
        "git": {"commit": "a" * 40, "dirty": True},
        "files": {"x": "1", "y": "2", "z": "4"},
    }
    assert merged_source([None, {}]) is None


# -- the run's sources: gathered by the plugin, read from the stash ----------------------------


def test_run_source_reads_the_files_the_plugin_gathered(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    from pytest_llmbench.plugin import CollectedSources
    from pytest_llmbench.provenance import run_source

    config = pytester.parseconfig()
    assert run_source(config)["files"] == {}  # nothing gathered: no files, no error
    collected = CollectedSources(config)
    read = pytester.path / "x.eval.yaml"
    read.write_text("cases: []\n")
    collected.paths.add(read)
    assert run_source(config)["files"] == {"x.eval.yaml": _sha(read)}


def test_an_environment_seed_is_hashed_by_its_content_once_per_object(tmp_path: Path) -> None:
    """The cases of a file share their environment's seed object: its digest is computed once,
    and an equal seed (another object) hashes alike; a different one does not."""
    from dataclasses import replace

    from pytest_llmbench.fingerprint import CaseHasher

    path = tmp_path / "capitals.eval.yaml"
    path.write_text(CASE.format(**BASE))
    (case,) = load_spec(path).cases
    seed = {"orders": {"W1": {"status": "pending"}}}
    hasher = CaseHasher({}, tmp_path)
    first = hasher(replace(case, state_seed=seed))
    assert hasher(replace(case, state_seed=json.loads(json.dumps(seed)))) == first
    assert CaseHasher({}, tmp_path)(replace(case, state_seed=seed)) == first
    other = {"orders": {"W1": {"status": "cancelled"}}}
    assert hasher(replace(case, state_seed=other)) != first
    assert hasher(case) != first  # no seed: the payload as before environments
