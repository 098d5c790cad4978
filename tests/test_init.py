"""``llmbench init``: the starter project, its refusal to overwrite, and a real run of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest
from conftest import Bench, Rule

from pytest_llmbench.cli import SCAFFOLD_FILES, main, scaffold_template
from pytest_llmbench.models.profile_files import load_profiles


def _call(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _files(folder: Path) -> list[str]:
    return sorted(
        path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()
    )


def test_init_writes_the_starter_project(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "new" / "project"  # created, parents too
    code, out, err = _call(capsys, "init", target)
    assert (code, err) == (0, "")
    assert _files(target) == sorted(SCAFFOLD_FILES)
    for name in SCAFFOLD_FILES:
        assert (target / name).read_bytes() == scaffold_template(name)
    lines = out.splitlines()
    assert lines[0] == f"llmbench: wrote a starter project in {target}:"
    assert lines[1 : 1 + len(SCAFFOLD_FILES)] == [f"  {name}" for name in SCAFFOLD_FILES]
    steps = lines[lines.index("Next steps:") + 1 :]
    assert steps[0] == f"  cd {target}"
    assert steps[1].startswith("  pytest evals/ ")
    assert steps[2].startswith("  llmbench validate evals/ profiles/ ")


def test_init_in_the_working_folder_needs_no_cd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = _call(capsys, "init")
    assert code == 0
    assert _files(tmp_path) == sorted(SCAFFOLD_FILES)
    assert "  cd " not in out and "  pytest evals/ " in out


def test_init_refuses_to_overwrite_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _call(capsys, "init", tmp_path)[0] == 0
    example = tmp_path / "evals" / "example.eval.yaml"
    example.write_text("cases: []  # mine\n", encoding="utf-8")
    (tmp_path / "conftest.py").unlink()
    code, out, err = _call(capsys, "init", tmp_path)
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        f"llmbench: not overwriting files in {tmp_path} (--force does):",
        # pytest.ini now exists: it holds pytest settings, which init never touches
        *(f"  {name}" for name in SCAFFOLD_FILES if name not in ("conftest.py", "pytest.ini")),
    ]
    assert example.read_text(encoding="utf-8") == "cases: []  # mine\n"
    assert not (tmp_path / "conftest.py").exists()  # nothing written when refusing
    code, _, err = _call(capsys, "init", tmp_path, "--force")
    assert (code, err) == (0, "")
    assert example.read_bytes() == scaffold_template("evals/example.eval.yaml")
    assert (tmp_path / "conftest.py").is_file()


@pytest.mark.parametrize("config", ["pyproject.toml", "tox.ini", "setup.cfg", "pytest.ini"])
def test_init_keeps_the_project_s_pytest_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str
) -> None:
    (tmp_path / config).write_text("# the project's own\n", encoding="utf-8")
    code, out, err = _call(capsys, "init", tmp_path)  # an existing settings file is no conflict
    assert (code, err) == (0, "")
    assert "  pytest.ini" not in out.splitlines()
    assert (tmp_path / config).read_text(encoding="utf-8") == "# the project's own\n"
    written = sorted(name for name in SCAFFOLD_FILES if name != "pytest.ini")
    assert _files(tmp_path) == sorted([*written, config])
    assert _call(capsys, "init", tmp_path, "--force")[0] == 0
    assert (tmp_path / config).read_text(encoding="utf-8") == "# the project's own\n"


def test_init_into_a_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "taken"
    target.write_text("", encoding="utf-8")
    assert _call(capsys, "init", target) == (2, "", f"llmbench: {target}: not a folder\n")


def test_the_starter_project_validates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _call(capsys, "init", tmp_path)[0] == 0
    monkeypatch.chdir(tmp_path)
    code, out, err = _call(capsys, "validate", ".")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "ok   profiles/models.yaml (0 profiles, 0 sets)",  # every entry is commented out
        "ok   evals/example.eval.yaml (3 cases)",
        "llmbench: 2 files valid",
    ]


def _uncommented(text: str) -> str:
    """What a user gets by removing one ``#`` from each commented line (``##`` notes stay)."""
    lines = []
    for line in text.splitlines():
        if line.startswith("#") and not line.startswith("##"):
            line = line[2:] if line.startswith("# ") else line[1:]
        lines.append(line)
    return "\n".join(lines) + "\n"


def test_the_commented_profiles_load_when_uncommented(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(_uncommented(scaffold_template("profiles/models.yaml").decode()), "utf-8")
    registry = load_profiles([path])
    assert {"gpt-4o-mini", "gpt-4o_default", "gpt-4o_flex"} <= set(registry.models)
    mini, flex = registry.models["gpt-4o-mini"], registry.models["gpt-4o_flex"]
    assert mini.model == "openai/gpt-4o-mini" and mini.api_key_env == "OPENAI_API_KEY"
    assert mini.cost_per_1k is not None and mini.cost_per_1k.output == pytest.approx(0.0006)
    assert flex.litellm == {"service_tier": "flex"} and flex.tags["tier"] == "flex"
    assert flex.cost_per_1k is not None and flex.cost_per_1k.input == pytest.approx(0.00125)
    assert [profile.name for profile in registry.resolve("@openai")] == [
        "gpt-4o-mini",
        "gpt-4o_default",
        "gpt-4o_flex",
    ]


@pytest.mark.slow
def test_the_starter_project_passes_on_the_embedded_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The example answers the real SmolLM2-135M gives pass: ``pytest evals/`` as a user runs it."""
    assert _call(capsys, "init", tmp_path)[0] == 0
    env = {name: value for name, value in os.environ.items() if not name.endswith("_API_KEY")}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "evals/", "-p", "no:cacheprovider", "--results-dir=out"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").open()]
    outcomes = {record["case_id"]: record["outcome"] for record in records}
    assert outcomes == {
        "capital-france": "passed",
        "capital-japan": "passed",
        "copy-sentence": "passed",
        "test_capital_of_italy": "passed",
    }
    assert all(record["model"] == "local/smollm2" for record in records)


# -- the CI templates' response cache --------------------------------------------------------
def _aged_cache(folder: Path) -> Path:
    """A response cache in ``folder/.llmbench-cache``: one answer of today, one 20 days old."""
    import sqlite3
    import time

    from pytest_llmbench.engine.cache import ResponseCache
    from pytest_llmbench.models.providers.completion import Completion

    path = folder / ".llmbench-cache" / "responses.sqlite"
    cache = ResponseCache(path)
    for key in ("fresh", "old"):
        cache.put(key, Completion(key, "openai/m", 1, 1, False, None, 0.1, None, 0, False, "stop"))
    cache.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE responses SET created_at = ? WHERE key = 'old'", (time.time() - 20 * 86400,))
    db.commit()
    db.close()
    return path


def _cache_keys(path: Path) -> set[str]:
    import sqlite3

    db = sqlite3.connect(path)
    try:
        return {row[0] for row in db.execute("SELECT key FROM responses")}
    finally:
        db.close()


def _shell(command: str, cwd: Path, env: dict[str, str]) -> int:
    bin_dir = str(Path(sys.executable).parent)  # llmbench of this environment
    full = {**os.environ, **env, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return subprocess.run(["bash", "-e", "-c", command], cwd=cwd, env=full).returncode


def test_the_github_workflow_keys_its_cache_on_the_eval_files_and_ages_it(tmp_path: Path) -> None:
    import yaml

    from pytest_llmbench.engine.cache import parse_age

    assert main(["init", str(tmp_path), "--ci", "github"]) == 0
    workflow = yaml.safe_load((tmp_path / ".github/workflows/llmbench.yml").read_text())
    ttl = workflow["env"]["CACHE_TTL"]
    assert parse_age(ttl) == 14 * 86400
    steps = workflow["jobs"]["shard"]["steps"]
    (cache,) = [step for step in steps if step.get("uses", "").startswith("actions/cache")]
    suite = "hashFiles('**/*.eval.yaml', 'evals/**', 'profiles/**')"
    assert cache["with"]["path"] == ".llmbench-cache"
    assert cache["with"]["key"].startswith(
        f"llmbench-cache-${{{{ matrix.shard }}}}-${{{{ {suite} }}}}-"
    )
    assert cache["with"]["key"].endswith("-${{ github.run_id }}")  # each run saves its answers
    restore = cache["with"]["restore-keys"].splitlines()
    assert restore == [
        f"llmbench-cache-${{{{ matrix.shard }}}}-${{{{ {suite} }}}}-",
        "llmbench-cache-${{ matrix.shard }}-",
    ]
    runs = [step.get("run", "") for step in steps]
    (pytest_run,) = [run for run in runs if run.startswith("pytest ")]
    assert '--cache=use --cache-ttl "$CACHE_TTL"' in pytest_run
    (prune,) = [run for run in runs if "llmbench cache prune" in run]
    assert runs.index(prune) > runs.index(pytest_run)  # after the run, before the cache is saved
    # The step itself, on a cache holding an answer of today and one 20 days old.
    path = _aged_cache(tmp_path)
    assert _shell(prune, tmp_path, {"CACHE_TTL": ttl}) == 0
    assert _cache_keys(path) == {"fresh"}


def test_the_gitlab_pipeline_ages_its_cache_too(tmp_path: Path) -> None:
    import yaml

    assert main(["init", str(tmp_path), "--ci", "gitlab"]) == 0
    pipeline = yaml.safe_load((tmp_path / ".gitlab-ci.yml").read_text())
    ttl = pipeline["variables"]["CACHE_TTL"]
    script = pipeline["llmbench-shard"]["script"]
    assert any('--cache=use --cache-ttl "$CACHE_TTL"' in line for line in script)
    (prune,) = [line for line in script if line.startswith("llmbench cache prune")]
    path = _aged_cache(tmp_path)
    assert _shell(prune, tmp_path, {"CACHE_TTL": ttl}) == 0
    assert _cache_keys(path) == {"fresh"}


# -- the GitHub workflow's pull request comment ------------------------------------------------

#: A fake ``gh``: records each call in the state file and answers from it (the base branch's
#: runs, their artifacts as folders, the pull request's comments), as GitHub's API would.
FAKE_GH = """
import json, os, shutil, sys
from pathlib import Path

state_file = Path(os.environ["FAKE_GH_STATE"])
state = json.loads(state_file.read_text())
args = sys.argv[1:]
state["calls"].append(args)


def option(name):
    return args[args.index(name) + 1]


def finish(code=0):
    state_file.write_text(json.dumps(state))
    sys.exit(code)


if args[:2] == ["run", "list"]:
    print(json.dumps([{"databaseId": run} for run in state["runs"]][: int(option("-L"))]))
elif args[:2] == ["run", "download"]:
    source = state["artifacts"].get(f"{args[2]}/{option('--name')}")
    if source is None:
        print("no valid artifacts found to download", file=sys.stderr)
        finish(1)
    shutil.copytree(source, option("--dir"))
elif args[0] == "api":
    method = option("--method") if "--method" in args else "GET"
    path = next(arg for arg in args[1:] if arg.startswith("repos/"))
    if method == "GET":  # a page per comment; --paginate prints every page, one after another
        pages = [[comment] for comment in state["comments"]]
        print("".join(json.dumps(page) for page in pages[: None if "--paginate" in args else 1]))
    else:
        body = Path(option("-F").removeprefix("body=@")).read_text()
        if method == "POST":
            state["comments"].append({"id": 100 + len(state["comments"]), "body": body})
        else:  # PATCH repos/OWNER/REPO/issues/comments/ID
            (comment,) = [c for c in state["comments"] if path.endswith(f"/{c['id']}")]
            comment["body"] = body
        print(json.dumps({"ok": True}))
else:
    finish(2)
finish()
"""
#: Eight cases (six differing ones make a paired test significant).
PR_SUITE = "cases:\n" + "".join(
    f"  - {{id: c{index}, prompt: 'Question {index}?', expected: 'Answer{index}', "
    "assert: [contains]}\n"
    for index in range(8)
)


def _pr_runs(bench: Bench) -> tuple[Path, Path]:
    """The base branch's merged results (every case right) and this pull request's (seven
    wrong: a significant regression)."""
    bench.pytester.makefile(".eval.yaml", **{"evals/suite": PR_SUITE})
    folders = []
    for name, wrong in (("base", 0), ("pr", 7)):
        bench.server.reset()
        for index in range(8):
            reply = "no" if index < wrong else f"Answer{index}"
            bench.server.add_rule(Rule(match=f"Question {index}?", reply=reply))
        bench.pytester.runpytest("-p", "no:cacheprovider", f"--results-dir={name}", "--models=fake")
        folders.append(bench.pytester.path / name)
    return folders[0], folders[1]


def _pr_job(tmp_path: Path) -> tuple[dict[str, Any], list[str]]:
    """The workflow's pr-comment job and its shell steps (installing left out)."""
    import yaml

    assert main(["init", str(tmp_path / "project"), "--ci", "github"]) == 0
    workflow = yaml.safe_load((tmp_path / "project/.github/workflows/llmbench.yml").read_text())
    job = workflow["jobs"]["pr-comment"]
    runs = [
        step["run"] for step in job["steps"] if "pip install" not in step.get("run", "pip install")
    ]
    return job, runs


def _run_pr_job(
    runs: list[str], workspace: Path, new: Path, gh_state: Path, marker: str
) -> list[int]:
    """One run of the job in a fresh ``workspace``: this run's merged results downloaded
    (download-artifact), then each shell step with the fake gh first on PATH."""
    import shutil

    shutil.rmtree(workspace, ignore_errors=True)
    workspace.mkdir()
    shutil.copytree(new, workspace / "llmbench-merged")
    fakes = workspace.parent / "fake-bin"
    fakes.mkdir(exist_ok=True)
    gh = fakes / "gh"
    gh.write_text(f"#!{sys.executable}\n{FAKE_GH}")
    gh.chmod(0o755)
    env = {"GH_TOKEN": "fake", "BASE": "main", "PR": "7", "WORKFLOW": "llmbench",
           "MARKER": marker, "GITHUB_REPOSITORY": "owner/repo", "FAKE_GH_STATE": str(gh_state)}  # fmt: skip
    env["PATH"] = f"{fakes}:{Path(sys.executable).parent}:{os.environ['PATH']}"
    return [
        subprocess.run(
            ["bash", "-e", "-c", run], cwd=workspace, env={**os.environ, **env}
        ).returncode
        for run in runs
    ]


def _gh_state(path: Path, runs: list[int], artifacts: dict[str, Path]) -> Path:
    others = [{"id": 1, "body": "Looks good to me"}, {"id": 2, "body": "A question"}]
    state = {"calls": [], "runs": runs, "comments": others,
             "artifacts": {key: str(value) for key, value in artifacts.items()}}  # fmt: skip
    path.write_text(json.dumps(state))
    return path


def test_the_pr_job_posts_one_comment_and_updates_it(bench: Bench, tmp_path: Path) -> None:
    from pytest_llmbench.render.github_comment import MARKER

    base, new = _pr_runs(bench)
    job, runs = _pr_job(tmp_path)
    assert job["permissions"]["pull-requests"] == "write"
    assert job["if"] == "always() && github.event_name == 'pull_request'"
    assert job["env"]["MARKER"] == MARKER and set(job["env"]) == {
        "GH_TOKEN", "BASE", "PR", "WORKFLOW", "MARKER"}  # fmt: skip
    state = _gh_state(tmp_path / "gh.json", [4242], {"4242/llmbench-merged": base})
    workspace = tmp_path / "workspace"
    # download, write, post, then the regression gate fails the job
    assert _run_pr_job(runs, workspace, new, state, MARKER) == [0, 0, 0, 1]
    first = json.loads(state.read_text())
    comment = (workspace / "comment.md").read_text()
    assert comment.startswith(MARKER + "\n## llmbench: ❌ significant regression in fake")
    assert [c["body"] for c in first["comments"][:2]] == ["Looks good to me", "A question"]
    assert first["comments"][2] == {"id": 102, "body": comment}  # on the third page
    posts = [call for call in first["calls"] if "--method" in call]
    assert posts == [["api", "--method", "POST", "repos/owner/repo/issues/7/comments",
                      "-F", "body=@comment.md"]]  # fmt: skip
    assert ["run", "download", "4242", "--repo", "owner/repo", "--name", "llmbench-merged",
            "--dir", "llmbench-baseline"] in first["calls"]  # fmt: skip
    # The next push: the same comment is updated, none added.
    assert _run_pr_job(runs, workspace, new, state, MARKER) == [0, 0, 0, 1]
    second = json.loads(state.read_text())
    assert [comment["id"] for comment in second["comments"]] == [1, 2, 102]
    patches = [call for call in second["calls"][len(first["calls"]) :] if "--method" in call]
    assert patches == [["api", "--method", "PATCH", "repos/owner/repo/issues/comments/102",
                        "-F", "body=@comment.md"]]  # fmt: skip


@pytest.mark.parametrize("why", ["no run of the base branch", "its artifact expired"])
def test_the_pr_job_without_a_baseline_says_so_and_passes(
    bench: Bench, tmp_path: Path, why: str
) -> None:
    from pytest_llmbench.render.github_comment import MARKER

    _, new = _pr_runs(bench)
    _, runs = _pr_job(tmp_path)
    state = _gh_state(tmp_path / "gh.json", [] if why.startswith("no run") else [4242], {})
    workspace = tmp_path / "workspace"
    assert _run_pr_job(runs, workspace, new, state, MARKER) == [0, 0, 0, 0]
    (ours,) = json.loads(state.read_text())["comments"][2:]
    assert ours["body"].startswith(f"{MARKER}\n## llmbench: no baseline yet\n")
    assert "| 1 | fake |" in ours["body"]  # this run's leaderboard
    assert not (workspace / "llmbench-baseline").exists()
