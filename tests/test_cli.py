"""The ``llmbench`` console command, called in-process on hand-written results folders."""

from __future__ import annotations

import csv
import fnmatch
import io
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_llmbench.cli import main
from pytest_llmbench.results.record import build_record

CASES = [f"c{index}" for index in range(8)]


def _record(model: str | None, case_id: str, passed: bool, **extra: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "nodeid": f"qa.eval.yaml::{case_id}[{model}-r0]",
        "suite": "qa",
        "eval_file": "qa.eval.yaml",
        "case_id": case_id,
        "model": model,
        "model_id": f"openai/{model}",
        "repeat": 0,
        "outcome": "passed" if passed else "failed",
        "score": 1.0 if passed else 0.0,
        "threshold": 1.0,
        "latency_s": 0.5,
        "cost_usd": 0.001,
    }
    values.update(extra)
    return build_record(**values)


def _run(folder: Path, records: Sequence[dict[str, Any]], run_info: Any = None) -> Path:
    folder.mkdir(parents=True)
    lines = [json.dumps(record) for record in records]
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    if run_info is not None:
        (folder / "run.json").write_text(json.dumps(run_info), encoding="utf-8")
    return folder


def _passing(model: str, passed: int) -> list[dict[str, Any]]:
    """A run of ``model`` over CASES where the first ``passed`` cases pass."""
    return [_record(model, case, index < passed) for index, case in enumerate(CASES)]


def _call(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _md_rows(text: str) -> list[list[str]]:
    rows = [line.strip("|").split(" | ") for line in text.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row] for row in rows]


# -- leaderboard ---------------------------------------------------------------------------------


def test_leaderboard_of_a_latency_only_run_shows_timings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def measured(model: str, latency: float) -> list[dict[str, Any]]:
        return [
            _record(model, case, True, score=None, eval_type="latency", latency_s=latency,
                    ttft_s=latency / 4, streamed=True)
            for case in CASES
        ]  # fmt: skip

    run = _run(tmp_path / "run", measured("slow", 2.0) + measured("fast", 0.5))
    code, out, _ = _call(capsys, "leaderboard", run)
    assert code == 0
    rows = _md_rows(out)
    assert rows[0][2:5] == ["ttft p50 s (n)", "latency p50 s", "latency p95 s"]
    assert "score [95% CI]" not in rows[0]
    assert [row[1] for row in rows[2:]] == ["fast", "slow"]
    assert rows[2][2] == f"0.12 ({len(CASES)})" and rows[2][3] == "0.50"


def test_leaderboard_markdown_ranks_models_of_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path / "run1", _passing("weak", 2) + _passing("strong", 6))
    code, out, err = _call(capsys, "leaderboard", run)
    assert (code, err) == (0, "")
    header, rule, first, second = _md_rows(out)
    assert header[:4] == ["rank", "model", "score [95% CI]", "pass rate [95% CI]"]
    assert rule[1] == ":---" and set(rule) - {rule[1]} == {"---:"}  # numbers right-aligned
    assert first[:2] == ["1", "strong"] and first[2].startswith("0.750")
    assert first[3].startswith("75.0%") and (first[4], first[5]) == ("8/8", "8")
    assert second[:2] == ["2", "weak"] and second[3].startswith("25.0%")


def test_leaderboard_merges_runs_and_keeps_a_shared_model_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _run(tmp_path / "monday", _passing("m", 2) + _passing("only-monday", 8))
    second = _run(tmp_path / "tuesday", _passing("m", 5))
    code, out, _ = _call(capsys, "leaderboard", first, second)
    assert code == 0
    models = [row[1] for row in _md_rows(out)[2:]]
    assert models == ["only-monday", "m@tuesday", "m@monday"]


def test_leaderboard_labels_runs_by_path_when_folder_names_clash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _run(tmp_path / "a" / "out", _passing("m", 2))
    second = _run(tmp_path / "b" / "out", _passing("m", 4))
    code, out, _ = _call(capsys, "leaderboard", first, second)
    assert code == 0
    models = [row[1] for row in _md_rows(out)[2:]]
    assert models == [f"m@{second}", f"m@{first}"]


def test_leaderboard_refuses_a_folder_given_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path / "run", _passing("m", 2))
    code, out, err = _call(capsys, "leaderboard", run, run)
    assert (code, out) == (2, "")
    assert err == f"llmbench: {run}: results folder given twice\n"


def test_leaderboard_csv_has_every_leaderboard_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path / "run", _passing("a", 3) + _passing("b", 7))
    code, out, _ = _call(capsys, "leaderboard", run, "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(row["rank"], row["model"]) for row in rows] == [("1", "b"), ("2", "a")]
    assert float(rows[0]["score_mean"]) == pytest.approx(7 / 8)
    assert float(rows[1]["pass_rate"]) == pytest.approx(3 / 8)
    assert float(rows[0]["cost_usd_total"]) == pytest.approx(0.008)
    assert {"n_cases", "latency_s_p50", "n_errors"} <= set(rows[0])


def test_leaderboard_html_to_a_file_escapes_everything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path / "run", _passing("<script>alert(1)</script>", 4))
    target = tmp_path / "board.html"
    code, out, _ = _call(capsys, "leaderboard", run, "--format", "html", "--output", target)
    assert code == 0
    assert out == f"llmbench: wrote {target}\n"
    page = target.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "</table>" in page
    assert "<script" not in page and "http" not in page
    assert "<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>" in page
    assert "<td>50.0%" in page


def test_leaderboard_counts_errors_apart_and_names_plain_tests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [
        _record("m", "c0", True),
        _record("m", "c1", False, outcome="error", score=None, error_kind="provider"),
        _record(None, "plain", True),
    ]
    run = _run(tmp_path / "run", records)
    code, out, _ = _call(capsys, "leaderboard", run)
    assert code == 0
    rows = {row[1]: row for row in _md_rows(out) if len(row) > 5}
    # The error counts as a failure: 1 of 2; 1 answered of 2 is shown and marked incomplete.
    assert rows["m"][3].startswith("50.0%") and rows["m"][4:7] == ["1/2 !", "2", "1"]
    assert "(no model)" in rows and "! incomplete" in out
    code, out, _ = _call(capsys, "leaderboard", run, "--errors-count-as", "skip")
    rows = {row[1]: row for row in _md_rows(out) if len(row) > 5}
    assert rows["m"][3].startswith("100.0%") and rows["m"][4] == "1/2 !"


# -- bad input -----------------------------------------------------------------------------------


def test_missing_folder_is_a_one_line_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope"
    code, out, err = _call(capsys, "leaderboard", missing)
    assert (code, out) == (2, "")
    assert err == f"llmbench: {missing}: no such results folder\n"


def test_folder_without_results_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = _call(capsys, "compare", empty, empty)
    assert code == 2
    assert err == f"llmbench: {empty / 'results.jsonl'}: no such file (not a results folder?)\n"


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"model": "m"}', "not a record (no suite, case_id, outcome)"),
    ],
)
def test_corrupt_line_names_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, why: str
) -> None:
    run = _run(tmp_path / "run", _passing("m", 2))
    path = run / "results.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines.insert(2, line)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, err = _call(capsys, "leaderboard", run)
    assert (code, out) == (2, "")
    assert err.startswith(f"llmbench: {path}:3: {why}")
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["leaderboard"],
        ["leaderboard", "x", "--format", "xml"],
        ["compare", "x"],
        ["frobnicate"],
    ],
)
def test_bad_arguments_exit_2_with_usage(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert "usage: llmbench" in capsys.readouterr().err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "leaderboard" in out and "compare" in out and "report" in out


# -- compare -------------------------------------------------------------------------------------


def test_compare_significant_regression_exits_1_and_lists_regressions_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # c0 improves, c1..c11 regress: McNemar p = 2 * (1 + 12) / 2**12 = 0.006, and every
    # bootstrap resample of the case differences is negative or nearly so.
    cases = [f"c{index}" for index in range(12)]
    old = [_record("m", case, case != "c0") for case in cases]
    new = [_record("m", case, case == "c0") for case in cases]
    base, fresh = _run(tmp_path / "base", old), _run(tmp_path / "new", new)
    code, out, err = _call(capsys, "compare", base, fresh)
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[0] == f"baseline: {base} (12 records)"
    assert "m: 12 cases: 11 regressed, 1 improved" in lines
    score, pass_rate = (line for line in lines if line.startswith(("  score", "  pass rate")))
    assert score.startswith("  score      -0.833 [") and score.endswith(" significant (n=12)")
    assert pass_rate.startswith("  pass rate  -0.833 [")
    assert pass_rate.endswith(" p=0.00635 significant (n=12)")  # 2 * (1 + 12) / 2**12
    changed = [line for line in lines if line.startswith(("  regressed:", "  improved:"))]
    assert [line.split(":")[0].strip() for line in changed] == ["regressed"] * 11 + ["improved"]
    assert "  regressed: qa::c1 score 1.00 -> 0.00" in changed
    assert changed[-1] == "  improved: qa::c0 score 0.00 -> 1.00"
    assert lines[-1] == "llmbench: significant regression: m"


def test_compare_same_results_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _run(tmp_path / "base", _passing("m", 5))
    fresh = _run(tmp_path / "new", _passing("m", 5))
    code, out, _ = _call(capsys, "compare", base, fresh)
    assert code == 0
    assert "m: 8 cases: 0 regressed, 0 improved" in out
    assert out.splitlines()[-1] == "llmbench: no significant regression"


def test_compare_one_flipped_case_is_listed_but_not_significant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _run(tmp_path / "base", _passing("m", 5))
    fresh = _run(tmp_path / "new", _passing("m", 4))
    code, out, _ = _call(capsys, "compare", base, fresh)
    assert code == 0
    assert "  regressed: qa::c4 score 1.00 -> 0.00" in out
    assert "n.s." in out and "significant" not in out.replace("no significant", "")


def test_compare_improvement_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _run(tmp_path / "base", _passing("m", 0))
    fresh = _run(tmp_path / "new", _passing("m", 8))
    code, out, _ = _call(capsys, "compare", base, fresh)
    assert code == 0
    assert "m: 8 cases: 0 regressed, 8 improved" in out
    assert "  score      +1.000" in out


def test_compare_each_common_model_and_names_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _run(tmp_path / "base", _passing("a", 8) + _passing("b", 4) + _passing("old", 1))
    fresh = _run(tmp_path / "new", _passing("a", 0) + _passing("b", 4) + _passing("new", 1))
    code, out, _ = _call(capsys, "compare", base, fresh)
    assert code == 1
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith(("a:", "b:"))] == [
        "a",
        "b",
    ]
    assert "only in the baseline: old" in out and "only in the new run: new" in out
    assert out.splitlines()[-1] == "llmbench: significant regression: a"


def test_compare_one_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _run(tmp_path / "base", _passing("a", 8) + _passing("b", 4))
    fresh = _run(tmp_path / "new", _passing("a", 0) + _passing("b", 4))
    code, out, _ = _call(capsys, "compare", base, fresh, "--model", "b")
    assert code == 0
    assert "\nb: " in out and "\na: " not in out


@pytest.mark.parametrize(
    ("new_run", "args", "message"),
    [
        (
            [("a", 8), ("b", 1)],
            ("--model", "b"),
            "model 'b' is not in both runs (baseline: a; new: a, b)",
        ),
        ([("b", 8)], (), "no model is in both runs ({base} and {fresh})"),
    ],
    ids=["unknown-model", "no-common-model"],
)
def test_compare_usage_errors(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    new_run: list[tuple[str, int]],
    args: tuple[str, ...],
    message: str,
) -> None:
    base = _run(tmp_path / "base", _passing("a", 8))
    fresh = _run(
        tmp_path / "new", [r for model, passed in new_run for r in _passing(model, passed)]
    )
    code, out, err = _call(capsys, "compare", base, fresh, *args)
    assert (code, out) == (2, "")
    assert err == f"llmbench: {message.format(base=base, fresh=fresh)}\n"


# -- report --------------------------------------------------------------------------------------


def _report_run(tmp_path: Path) -> Path:
    script = _record("m", "c9", True, response="<script>alert(1)</script>")
    records = [*_passing("m", 6), script]
    info = {"started_at": "2025-01-02T03:04:05+00:00", "args": ["--models=m"], "versions": {}}
    return _run(tmp_path / "run", records, run_info=info)


def test_report_rebuilds_report_html_in_the_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _report_run(tmp_path)
    code, out, err = _call(capsys, "report", run)
    assert (code, err) == (0, "")
    assert out == f"llmbench: report {run / 'report.html'}\n"
    page = (run / "report.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)</script>" not in page
    assert "2025-01-02" in page


def test_report_to_another_file_leaves_the_folder_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _report_run(tmp_path)
    target = tmp_path / "elsewhere" / "r.html"
    target.parent.mkdir()
    code, out, _ = _call(capsys, "report", run, "--output", target)
    assert code == 0
    assert out == f"llmbench: report {target}\n"
    assert target.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")
    assert not (run / "report.html").exists()


def test_report_of_a_corrupt_run_json_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _report_run(tmp_path)
    (run / "run.json").write_text("{oops", encoding="utf-8")
    code, _, err = _call(capsys, "report", run)
    assert code == 2
    assert err.startswith(f"llmbench: {run / 'run.json'}: not a JSON file")
    assert not (run / "report.html").exists()


def test_compare_a_model_switch_old_equals_new(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = _run(tmp_path / "base", _passing("gpt-x", len(CASES)))
    new = _run(tmp_path / "new", _passing("gpt-y", 0))
    code, out, err = _call(capsys, "compare", baseline, new, "--model", "gpt-x=gpt-y")
    assert err == "" and code == 1  # every case regressed: significant
    assert f"gpt-x -> gpt-y: {len(CASES)} cases: {len(CASES)} regressed, 0 improved" in out
    code, out, err = _call(capsys, "compare", baseline, new, "--model", "gpt-x=gpt-z")
    assert code == 2 and "model 'gpt-z' is not in the new run (it has: gpt-y)" in err


# -- leaderboard --group-by ----------------------------------------------------------------------


def _matrix_records() -> list[dict[str, Any]]:
    """Two deployment variants of one model, at two temperatures, in two regions."""
    records = []
    for profile, region, passed in (("nova_priority", "us", 6), ("nova_flex", "eu", 2)):
        for temperature in (0.2, 0.4):
            for index, case in enumerate(CASES):
                extra = {"profile": profile, "temperature": temperature}
                extra["model_tags"] = {"region": region, "tier": profile.split("_")[1]}
                label = f"{profile}@t{temperature}"
                records.append(_record(label, case, index < passed, **extra))
    return records


def test_leaderboard_group_by_profile_ranks_profiles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path / "run", _matrix_records())
    code, out, err = _call(capsys, "leaderboard", run, "--group-by", "profile")
    assert (code, err) == (0, "")
    header, _, first, second = _md_rows(out)
    assert header[:3] == ["rank", "profile", "score [95% CI]"]
    assert first[:2] == ["1", "nova_priority"] and first[3].startswith("75.0%")
    assert second[:2] == ["2", "nova_flex"] and second[3].startswith("25.0%")
    assert first[5] == "8"  # cases, each run at two temperatures


def test_leaderboard_group_by_tag_and_temperature(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path / "run", _matrix_records())
    code, out, _ = _call(capsys, "leaderboard", run, "--group-by", "tag:region", "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(row["rank"], row["tag_region"]) for row in rows] == [("1", "us"), ("2", "eu")]
    assert float(rows[0]["pass_rate"]) == pytest.approx(6 / 8)
    code, out, _ = _call(
        capsys, "leaderboard", run, "--group-by", "temperature", "--format", "html"
    )
    assert code == 0
    assert "<th>temperature</th>" in out and "<th>model</th>" not in out
    assert "<td>0.2</td>" in out and "<td>0.4</td>" in out
    code, _, err = _call(capsys, "leaderboard", run, "--group-by", "tag:zone")
    assert code == 2
    assert "no record has the tag 'zone' (tags: region, tier)" in err


def test_leaderboard_group_by_an_axis_older_runs_lack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path / "run", _passing("m", 3))
    code, out, _ = _call(capsys, "leaderboard", run, "--group-by", "prompt_variant")
    assert code == 0
    (row,) = _md_rows(out)[2:]
    assert row[:2] == ["1", "(none)"] and row[3].startswith("37.5%")


def test_leaderboard_group_by_an_unknown_axis_lists_the_known_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path / "run", _passing("m", 3))
    code, out, err = _call(capsys, "leaderboard", run, "--group-by", "region")
    assert (code, out) == (2, "")
    assert err.startswith("llmbench: --group-by: unknown group axis 'region'")
    for axis in ("model", "profile", "prompt_variant", "temperature", "eval_type", "tag:<name>"):
        assert axis in err
    assert err.count("\n") == 1


# -- validate ------------------------------------------------------------------------------------

GOOD_EVAL = """
cases:
  - id: france
    prompt: What is the capital of France?
    expected: Paris
    assert: [icontains]
  - id: judged
    prompt: Say something kind.
    assert:
      - {type: llm-rubric, value: Kind, judges: ["@panel"]}
"""
PROFILES = """
models:
  judge-a: {model: openai/a}
  judge-b: {model: openai/b}
sets:
  panel: [judge-a, "@more"]
"""
MORE_PROFILES = "sets:\n  more: [judge-b]\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder (the working folder) with profiles whose sets span two files."""
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "models.yaml").write_text(PROFILES, encoding="utf-8")
    (tmp_path / "profiles" / "more.yml").write_text(MORE_PROFILES, encoding="utf-8")
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "qa.eval.yaml").write_text(GOOD_EVAL, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_validate_a_folder_checks_eval_and_profile_files(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "evals" / "data").mkdir()
    (project / "evals" / "data" / "rows.yaml").write_text("not: [a profile", encoding="utf-8")
    for skipped in (".git", "node_modules", "env"):
        (project / skipped).mkdir()
        (project / skipped / "x.eval.yaml").write_text("{", encoding="utf-8")
    (project / "env" / "pyvenv.cfg").write_text("home = /usr\n", encoding="utf-8")  # a venv
    code, out, err = _call(capsys, "validate", ".")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "ok   profiles/models.yaml",  # its set needs more.yml's: no count for the file alone
        "ok   profiles/more.yml (0 profiles, 1 set)",
        "ok   evals/qa.eval.yaml (2 cases)",
        "llmbench: 3 files valid",
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("cases:\n  - prompt: [unclosed\n", "evals/bad.eval.yaml:3: invalid YAML: *"),
        (
            "cases:\n  - prompt: hi\n    bogus: 1\n",
            "evals/bad.eval.yaml:3: cases.0: unknown key 'bogus'",
        ),
        ("dataset: {path: rows.csv}\n", "evals/bad.eval.yaml:1: dataset: *rows.csv*"),
        (
            "cases:\n  - prompt: hi\n    assert:\n      - {type: jury, judges: ['@nope']}\n",
            "evals/bad.eval.yaml:2: case 'case-1': jury judges: unknown model set '@nope' *",
        ),
        (
            "cases:\n  - prompt: hi\n    expected: hello\n    assert:\n"
            "      - {type: similarity, method: embedding, embedding_model: '@vectors'}\n",
            "evals/bad.eval.yaml:2: case 'case-1': similarity judges: unknown model set '@vectors' *",
        ),
        (
            "kind: agent\ntools: [read_file]\ntool_shim_model: '@nope'\ncases:\n  - prompt: hi\n",
            "evals/bad.eval.yaml: tool_shim_model: unknown model set '@nope' *",
        ),
    ],
    ids=["malformed-yaml", "unknown-key", "bad-dataset", "judge-set", "embedding-set", "shim-set"],
)
def test_validate_names_the_problem_as_collection_does(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], text: str, problem: str
) -> None:
    pytester.makefile(".eval.yaml", **{"evals/bad": text, "evals/good": FRANCE_EVAL})
    code, out, err = _call(capsys, "validate", "evals")
    assert (code, err) == (1, "")
    bad, good, total = out.splitlines()
    assert fnmatch.fnmatchcase(bad, problem), bad
    assert good == "ok   evals/good.eval.yaml (1 case)"
    assert total == "llmbench: 1 of 2 files invalid"
    assert "Traceback" not in out
    # A run reports the same line when it collects the file.
    result = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "evals/bad.eval.yaml")
    assert bad in result.stdout.lines


FRANCE_EVAL = "cases:\n  - {prompt: Capital of France?, expected: Paris, assert: [icontains]}\n"


FOUR_PROBLEMS = """\
descripton: typo
cases:
  - id: a
    prompt: hi
    threshold: 3
    assert: [{type: containz}]
  - id: b
    promt: hi
"""


def test_validate_lists_every_problem_of_a_file_in_one_run(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file with 4 problems needed 3 runs: only the first was named each time."""
    pytester.makefile(".eval.yaml", **{"evals/four": FOUR_PROBLEMS})
    code, out, _ = _call(capsys, "validate", "evals")
    assert code == 1
    lines = out.splitlines()
    assert lines[:4] == [
        "evals/four.eval.yaml:1: top level: unknown key 'descripton'",
        "evals/four.eval.yaml:5: cases.0.threshold: Input should be less than or equal to 1",
        lines[2],
        "evals/four.eval.yaml:8: cases.1: unknown key 'promt'",
    ]
    assert lines[2].startswith("evals/four.eval.yaml:6: cases.0.assert.0.type: unknown assertion")
    assert lines[4] == "llmbench: 1 of 1 file invalid"
    # Collection shows the same four lines in its error.
    result = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "evals")
    result.stdout.fnmatch_lines([lines[0], lines[1], lines[2], lines[3]])


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("models: {a: {model: x}\n", "profiles/bad.yaml:2: invalid YAML: *"),
        (
            "models:\n  a:\n    model: x\n    modle: y\n",
            "profiles/bad.yaml:4: profile 'a': unknown key 'modle'*",
        ),
        (
            "sets:\n  s: ['@ghost']\n",
            "profiles/bad.yaml:2: model set '@s': unknown model set '@ghost'*",
        ),
        (
            '{"model_id": "a", "colour": 1}\n',
            "profiles/bad.jsonl:1: profile: unknown key 'colour'*",
        ),
    ],
    ids=["malformed-yaml", "unknown-key", "set-reference", "jsonl"],
)
def test_validate_a_bad_profile_file_and_the_others(
    project: Path, capsys: pytest.CaptureFixture[str], text: str, problem: str
) -> None:
    suffix = ".jsonl" if problem.startswith("profiles/bad.jsonl") else ".yaml"
    (project / "profiles" / f"bad{suffix}").write_text(text, encoding="utf-8")
    code, out, err = _call(capsys, "validate", "profiles", "evals/qa.eval.yaml")
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert len(lines) == 5 and "Traceback" not in out
    (bad,) = [line for line in lines if not line.startswith(("ok   ", "llmbench: "))]
    assert fnmatch.fnmatchcase(bad, problem), bad
    assert "ok   profiles/more.yml (0 profiles, 1 set)" in lines
    assert "ok   evals/qa.eval.yaml (2 cases)" in lines  # the valid files still resolve @panel
    assert lines[-1] == "llmbench: 1 of 4 files invalid"


def test_validate_resolves_model_names_against_the_profiles_given(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = project / "other-profiles"
    elsewhere.mkdir()
    (elsewhere / "judges.yaml").write_text("sets:\n  team: [openai/x]\n", encoding="utf-8")
    code, out, _ = _call(capsys, "validate", "evals", "--profiles", elsewhere)
    assert code == 1  # @panel is in profiles/, not in the profiles given
    assert out.splitlines()[0] == "ok   other-profiles/judges.yaml (0 profiles, 1 set)"
    assert (
        "evals/qa.eval.yaml:7: case 'judged': llm-rubric judges: unknown model set '@panel'" in out
    )
    code, out, _ = _call(
        capsys, "validate", "evals", "--profiles", elsewhere, "--profiles", "profiles"
    )
    assert code == 0 and out.splitlines()[-1] == "llmbench: 4 files valid"


def test_validate_quiet_prints_problems_only(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _call(capsys, "validate", "-q", ".") == (0, "", "")
    (project / "evals" / "bad.eval.yaml").write_text("cases: 3\n", encoding="utf-8")
    code, out, err = _call(capsys, "validate", ".", "--quiet")
    assert (code, err) == (1, "")
    assert out == "evals/bad.eval.yaml:1: cases: Input should be a valid list\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["validate", "nope"], "llmbench: nope: no such file or folder\n"),
        (["validate", "notes.txt"], "llmbench: notes.txt: not an eval file (*.eval.yaml) *\n"),
        (
            ["validate", "empty"],
            "llmbench: no eval file (*.eval.yaml) or profile file found in empty\n",
        ),
        (
            ["validate", "evals", "--profiles", "gone"],
            "llmbench: --profiles: no such file or folder: gone\n",
        ),
        (["validate"], "usage: llmbench validate *"),
    ],
    ids=["missing", "other-file", "empty-folder", "missing-profiles", "no-path"],
)
def test_validate_bad_usage_exits_2(
    project: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    (project / "notes.txt").write_text("hi", encoding="utf-8")
    (project / "empty").mkdir()
    code, out, err = _call(capsys, *argv)
    assert (code, out) == (2, "")
    assert fnmatch.fnmatchcase(err, message), err


def test_validate_imports_no_litellm(project: Path) -> None:
    script = (
        "import sys\n"
        "from pytest_llmbench.cli import main\n"
        "code = main(['validate', '.'])\n"
        "print('litellm loaded' if 'litellm' in sys.modules else 'no litellm')\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=project, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == ["llmbench: 3 files valid", "no litellm"]


def test_validate_counts_cases_and_prompt_variants(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = 'prompts: ["Q: {{q}}", {name: terse, prompt: "{{q}}?"}]\ncases:\n'
    text += "".join(f"  - vars: {{q: {letter}}}\n" for letter in "abc")
    (project / "evals" / "variants.eval.yaml").write_text(text, encoding="utf-8")
    code, out, _ = _call(capsys, "validate", "evals/variants.eval.yaml")
    assert code == 0
    assert "ok   evals/variants.eval.yaml (3 cases x 2 prompts)" in out.splitlines()


def test_validate_reports_an_unexpected_error_in_one_line(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import pytest_llmbench.spec.load

    def failing_user_code(path: Path, roots: object = ()) -> None:
        raise ImportError("No module named 'helpers'")

    monkeypatch.setattr(pytest_llmbench.spec.load, "load_spec", failing_user_code)
    code, out, err = _call(capsys, "validate", ".")
    assert (code, err) == (1, "")
    assert "evals/qa.eval.yaml: ImportError: No module named 'helpers'" in out.splitlines()


def test_version_names_the_plugin_and_what_it_runs_on(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib import metadata

    assert main(["--version"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"llmbench {metadata.version('pytest-llmbench')} (")
    assert f"litellm {metadata.version('litellm')}" in line
    assert f"pytest {metadata.version('pytest')}" in line
    assert line.endswith(
        f"; openai/custom_openai/hosted_vllm/lm_studio endpoints: the lean client on aiohttp "
        f"{metadata.version('aiohttp')}; other providers: litellm {metadata.version('litellm')})"
    )
    assert "\n" not in line
