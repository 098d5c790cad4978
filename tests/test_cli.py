"""The ``llmbench`` console command, called in-process on hand-written results folders."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_llmbench.cli import main
from pytest_llmbench.record import build_record

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
    assert first[3].startswith("75.0%") and first[4] == "8"
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
    code, out, _ = _call(capsys, "leaderboard", _run(tmp_path / "run", records))
    assert code == 0
    rows = {row[1]: row for row in _md_rows(out)[2:]}
    assert rows["m"][3].startswith("100.0%") and rows["m"][5] == "1"
    assert "(no model)" in rows


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


def test_compare_unknown_model_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _run(tmp_path / "base", _passing("a", 8))
    fresh = _run(tmp_path / "new", _passing("a", 8) + _passing("b", 1))
    code, out, err = _call(capsys, "compare", base, fresh, "--model", "b")
    assert (code, out) == (2, "")
    assert err == "llmbench: model 'b' is not in both runs (baseline: a; new: a, b)\n"


def test_compare_without_a_common_model_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _run(tmp_path / "base", _passing("a", 8))
    fresh = _run(tmp_path / "new", _passing("b", 8))
    code, _, err = _call(capsys, "compare", base, fresh)
    assert code == 2
    assert err == f"llmbench: no model is in both runs ({base} and {fresh})\n"


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
