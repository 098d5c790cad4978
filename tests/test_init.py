"""``llmbench init``: the starter project, its refusal to overwrite, and a real run of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
