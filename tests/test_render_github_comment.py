"""``llmbench compare --format github-comment``: the pull request comment's Markdown, from two
real results folders (pytester runs against the fake server): its marker, verdict, leaderboard
with deltas, paired statistics, flipped cases, gates and per-case list; user text that cannot
break a table or write HTML; the 65,536-character limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest
from conftest import Bench, Rule

from pytest_llmbench.cli import main
from pytest_llmbench.render.github_comment import (
    COMMENT_LIMIT,
    MARKER,
    SHOWN_FLIPS,
    SavedRun,
    fit,
    md_text,
    pull_request_comment,
)
from pytest_llmbench.results.baseline import BY_ID_NOTE, compare_runs, load_results, load_run_info
from pytest_llmbench.results.record import build_record

#: The gates section of a new run whose run.json lists no gate failures.
UNKNOWN_GATES = (
    "No gate_failures in the new run's run.json (none written, or malformed): its gates are "
    "unknown."
)
#: A case id that tries to end a table cell, open a code span and write HTML.
HOSTILE = "evil|id`code` <img src=x onerror=alert(1)> \\| **bold** [link](http://x)"
#: Eight cases (six differing ones make a paired test significant); the last has HOSTILE's id.
SUITE = "cases:\n" + "".join(
    f"  - {{id: {json.dumps(f'c{index}' if index < 7 else HOSTILE)}, "
    f"prompt: 'Question {index}?', expected: 'Answer{index}', assert: [contains]}}\n"
    for index in range(8)
)


def _answer_all(bench: Bench) -> None:
    for index in range(8):
        bench.server.add_rule(Rule(match=f"Question {index}?", reply=f"Answer{index}"))


def _run(bench: Bench, folder: str, *args: str) -> Path:
    result = bench.pytester.runpytest(
        "-p", "no:cacheprovider", f"--results-dir={folder}", "--models=fake,fake2", *args
    )
    path = bench.pytester.path / folder
    assert (path / "run.json").is_file(), result.stdout.str()[-2000:]
    return path


@pytest.fixture
def runs(bench: Bench) -> tuple[Path, Path]:
    """A baseline where both models answer every case, and a new run where `fake` answers
    seven of eight wrong (c0..c6: a significant regression) and `fake2` still answers all."""
    bench.eval_file("suite", SUITE)
    _answer_all(bench)
    baseline = _run(bench, "base")
    bench.server.reset()
    for index in range(7):
        bench.server.add_rule(Rule(model="fake-model", match=f"Question {index}?", reply="no"))
    _answer_all(bench)
    new = _run(bench, "new", "--min-pass-rate=0.9")
    return baseline, new


def _compare(
    capsys: pytest.CaptureFixture[str], baseline: Path, new: Path, *extra: str, err: str = ""
) -> tuple[int, str]:
    code = main(["compare", str(baseline), str(new), "--format", "github-comment", *extra])
    out, said = capsys.readouterr()
    assert said == err
    return code, out


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table row, split on pipes that no backslash escapes."""
    cells, cell, chars = [], "", iter(line.strip()[1:-1])
    for char in chars:
        if char == "\\":
            cell += char + next(chars, "")
        elif char == "|":
            cells.append(cell.strip())
            cell = ""
        else:
            cell += char
    return [*cells, cell.strip()]


def _section(text: str, title: str) -> list[str]:
    """The lines of the ``### title`` section, up to the next heading or details block."""
    lines = text.splitlines()
    start = lines.index(f"### {title}") + 1
    end = next(
        (i for i in range(start, len(lines)) if lines[i].startswith(("### ", "<details>"))),
        len(lines),
    )
    return [line for line in lines[start:end] if line]


def _table(text: str, title: str) -> list[list[str]]:
    return [_cells(line) for line in _section(text, title) if line.startswith("|")][2:]


def test_the_comment_of_a_regressed_run(
    runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    baseline, new = runs
    code, text = _compare(capsys, baseline, new)
    assert code == 1  # as the text format: a significant regression
    lines = text.splitlines()
    assert lines[0] == MARKER
    assert lines[1] == (
        "## llmbench: ❌ significant regression in fake; 1 failed gate"
    )  # fake2 passed the gate and did not regress
    board = {row[0]: row for row in _table(text, "Leaderboard (baseline → new)")}
    assert set(board) == {"fake", "fake2"}
    assert board["fake"][1] == "1.000 → 0.125 (-0.875)"  # score
    assert board["fake"][2] == "100.0% → 12.5% (-87.5%)"  # pass rate
    assert board["fake2"][2] == "100.0% → 100.0% (+0.0%)"
    assert board["fake"][5] == "0 → 0 (+0)"  # errors
    assert board["fake"][4].startswith("0.0000")  # cost per item, priced by the profile
    stats = _table(text, "Paired comparisons (new - baseline)")
    fake = {row[1]: row for row in stats if row[0] == "fake"}
    assert fake["pass rate"][5] == "**significant regression**"
    assert float(fake["pass rate"][3]) < 0.05 and fake["pass rate"][4] == "8"
    assert all(row[5] == "not significant" for row in stats if row[0] == "fake2")
    flips = _table(text, "Flipped cases")
    assert [row[1] for row in flips] == [f"suite::c{index}" for index in range(7)]
    assert {row[2] for row in flips} == {"regressed"} and flips[0][3] == "1.00 → 0.00"
    gates = _section(text, "Gates")
    assert gates == ["- ❌ fake: pass rate 12.5% \\< --min-pass-rate 90.0%"]
    assert "<summary>All 16 compared case results</summary>" in text
    assert text.rstrip().endswith("</details>")


def test_a_run_without_change_passes(
    runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    baseline, _ = runs
    out = tmp_path / "comment.md"
    code, printed = _compare(capsys, baseline, baseline, "--output", str(out))
    assert code == 0 and printed == f"llmbench: wrote {out}\n"
    text = out.read_text(encoding="utf-8")
    assert text.splitlines()[:2] == [
        MARKER,
        "## llmbench: ✅ pass: no significant regression, all gates passed",
    ]
    assert _section(text, "Flipped cases") == ["No case changed between passing and failing."]
    assert _section(text, "Gates") == ["All gates passed."]


def _split_escapes(text: str) -> tuple[str, str]:
    """``text`` as GFM reads it: (its literal text, the characters no backslash escapes); a
    backslash before ASCII punctuation makes that character literal."""
    literal, plain, chars = "", "", iter(text)
    for char in chars:
        if char == "\\":
            literal += next(chars, "")
        else:
            literal, plain = literal + char, plain + char
    return literal, plain


def _hostile_id(folder: Path) -> str:
    """HOSTILE as the spec made it a case id (spaces and some characters replaced)."""
    (case_id,) = {r["case_id"] for r in load_results(folder) if "evil" in r["case_id"]}
    return str(case_id)


def test_user_text_cannot_break_a_table_or_write_html(
    runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    baseline, new = runs
    case_id = _hostile_id(new)
    assert "<img" in case_id and "|" in case_id and "`" in case_id  # kept by the spec
    _, text = _compare(capsys, new, baseline)  # reversed: the hostile case is compared
    rows = [line for line in text.splitlines() if line.startswith("|")]
    hostile = [line for line in rows if "evil" in line]
    assert len(hostile) == 2  # its row in the per-case list, for each model
    for line in hostile:
        cells = _cells(line)
        assert len(cells) == 5, line  # model, case, baseline, new, change
        literal, plain = _split_escapes(cells[1])
        assert literal == f"suite::{case_id}"  # shown as it is
        assert not set(plain) & set("|`<>*_[]&")  # with no character read as syntax


def test_md_text_escapes_every_syntax_character() -> None:
    assert md_text("a|b") == "a\\|b"
    assert md_text("x\\") == "x\\\\"
    assert md_text("`<b>` *_[]~&!#") == "\\`\\<b\\>\\` \\*\\_\\[\\]\\~\\&\\!\\#"
    assert md_text("two\nlines\tand  spaces") == "two lines and spaces"


def test_a_long_comment_is_cut_to_the_limit_with_a_note(runs: tuple[Path, Path]) -> None:
    baseline, new = runs
    old_run = SavedRun(baseline, load_results(baseline), load_run_info(baseline))
    new_run = SavedRun(new, load_results(new), load_run_info(new))
    results = compare_runs(old_run.records, new_run.records)
    whole = pull_request_comment(old_run, new_run, results)
    limit = whole.index("<summary>") + 300  # inside the per-case list
    cut = pull_request_comment(old_run, new_run, results, limit=limit)
    assert len(cut) <= limit < len(whole)
    assert cut.startswith(MARKER + "\n") and "### Gates" in cut
    assert cut.count("<details>") == cut.count("</details>") == 1  # closed before the note
    left = len(whole.splitlines()) - len(cut.split("\n</details>")[0].splitlines())
    assert cut.rstrip().endswith(
        f"*Cut to GitHub's {limit:,}-character comment limit: {left} more lines not shown. "
        "`llmbench compare` prints every case.*"
    )


def test_fit_keeps_a_text_that_fits_and_cuts_at_a_line() -> None:
    lines = ["a" * 10] * 5
    assert fit(lines, 55) == "\n".join(lines) + "\n"
    many = [f"line {index:04d}" for index in range(100)]
    cut = fit(many, 400)
    assert len(cut) <= 400 and "more lines not shown" in cut
    kept = cut.split("\n\n")[0].splitlines()
    assert kept == many[: len(kept)] and 0 < len(kept) < 100
    assert f"{100 - len(kept)} more lines not shown" in cut


def _record(model: str, case_id: str, passed: bool) -> dict[str, Any]:
    return build_record(
        nodeid=f"qa.eval.yaml::{case_id}[{model}-r0]",
        suite="qa",
        eval_file="qa.eval.yaml",
        case_id=case_id,
        model=model,
        model_id=f"openai/{model}",
        repeat=0,
        outcome="passed" if passed else "failed",
        score=1.0 if passed else 0.0,
        threshold=1.0,
        latency_s=0.5,
        cost_usd=0.001,
    )


def _folder(path: Path, records: list[dict[str, Any]]) -> Path:
    path.mkdir()
    text = "".join(json.dumps(record) + "\n" for record in records)
    (path / "results.jsonl").write_text(text, encoding="utf-8")
    return path


def test_a_suite_of_thousands_of_cases_stays_under_github_s_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = [f"a-rather-long-case-identifier-{index:05d}" for index in range(3000)]
    baseline = _folder(tmp_path / "base", [_record("m", case, True) for case in ids])
    new = _folder(tmp_path / "new", [_record("m", case, index % 3 > 0) for index, case in
                                     enumerate(ids)])  # fmt: skip
    code, text = _compare(capsys, baseline, new)
    assert code == 1
    assert len(text) <= COMMENT_LIMIT and "more lines not shown" in text
    flips = _table(text, "Flipped cases")
    assert len(flips) == SHOWN_FLIPS + 1
    assert flips[-1][1] == f"… and {1000 - SHOWN_FLIPS} more regressed"
    # no run.json: the gates are unknown, not passed
    assert _section(text, "Gates") == [UNKNOWN_GATES]
    assert text.splitlines()[1] == "## llmbench: ❌ significant regression in m"


def test_output_needs_the_github_comment_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = _folder(tmp_path / "base", [_record("m", "c", True)])
    code = main(["compare", str(baseline), str(baseline), "--output", str(tmp_path / "x.md")])
    _, err = capsys.readouterr()
    assert code == 2 and err == "llmbench: --output needs --format github-comment\n"
    assert not (tmp_path / "x.md").exists()


def test_models_in_one_run_only_are_marked_and_a_model_switch_is_one_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = [f"c{index}" for index in range(4)]
    baseline = _folder(
        tmp_path / "base", [_record(m, c, True) for m in ("m", "old") for c in cases]
    )
    new = _folder(tmp_path / "new", [_record(m, c, True) for m in ("m", "next") for c in cases])
    code, text = _compare(capsys, baseline, new)
    board = [row[0] for row in _table(text, "Leaderboard (baseline → new)")]
    assert code == 0 and board == ["m", "next (new model)", "old (not in the new run)"]
    rows = {row[0]: row for row in _table(text, "Leaderboard (baseline → new)")}
    assert rows["next (new model)"][2] == "- → 100.0%"
    assert [row[0] for row in _table(text, "Paired comparisons (new - baseline)")] == ["m", "m"]
    code, text = _compare(capsys, baseline, new, "--model", "old=next")
    board = [row[0] for row in _table(text, "Leaderboard (baseline → new)")]
    assert code == 0 and board == ["old -\\> next"]  # one model, compared with its successor


def _edited_suite() -> str:
    """SUITE's cases c0..c6 with another expected answer (the replies stay), c7 gone, c8 new."""
    cases = [f"  - {{id: c{i}, prompt: 'Question {i}?', expected: 'Other{i}', assert: [contains]}}"
             for i in range(7)]  # fmt: skip
    cases.append("  - {id: c8, prompt: 'Question 8?', expected: 'Answer8', assert: [contains]}")
    return "cases:\n" + "\n".join(cases) + "\n"


def test_edited_added_and_removed_cases_are_listed_not_compared(
    bench: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    bench.eval_file("suite", SUITE)
    _answer_all(bench)
    bench.server.add_rule(Rule(match="Question 8?", reply="Answer8"))
    baseline = _run(bench, "base")
    bench.eval_file("suite", _edited_suite())
    new = _run(bench, "new")  # c0..c6 now fail: their expected answers were edited
    capsys.readouterr()  # the runs' own output
    code, text = _compare(capsys, baseline, new)
    assert code == 0  # no edited case counts as a regression
    assert (
        text.splitlines()[1] == "## llmbench: ✅ pass: no significant regression, all gates passed"
    )
    section = _section(text, "Cases not compared")
    assert section[0] == (
        "7 cases changed since the baseline; 1 case added since the baseline; 1 case not in the "
        "new run (removed or not selected): not compared."
    )
    rows = _table(text, "Cases not compared")
    fake = [(row[1], row[2]) for row in rows if row[0] == "fake"]
    assert fake == [*((f"suite::c{i}", "changed") for i in range(7)), ("suite::c8", "added"),
                    (md_text(f"suite::{_hostile_id(baseline)}"), "removed")]  # fmt: skip
    assert _table(text, "Flipped cases") == []  # nothing compared flipped
    assert "<summary>All 0 compared case results</summary>" in text
    # The same baseline written before records carried case hashes: paired by id, with a warning,
    # and the edited cases are compared as if unchanged (a significant regression).
    lines = (baseline / "results.jsonl").read_text().splitlines()
    stripped = [json.dumps({k: v for k, v in json.loads(line).items() if k != "case_hash"})
                for line in lines]  # fmt: skip
    (baseline / "results.jsonl").write_text("\n".join(stripped) + "\n")
    code, text = _compare(capsys, baseline, new, err=f"llmbench: warning: {BY_ID_NOTE}\n")
    assert code == 1
    assert _section(text, "Cases not compared")[0] == f"⚠️ Paired by id only: {md_text(BY_ID_NOTE)}."


def test_the_runs_are_named_by_folder_and_commit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = _folder(tmp_path / "base", [_record("m", "c", True)])
    new = _folder(tmp_path / "new", [_record("m", "c", True)])
    source = {"git": {"commit": "0123456789abcdef", "dirty": True}, "files": {}}
    (new / "run.json").write_text(json.dumps({"gate_failures": [], "source": source}))
    _, text = _compare(capsys, baseline, new)
    assert text.splitlines()[3] == (
        f"Baseline {md_text(str(baseline))} (1 record), "
        f"new {md_text(str(new))} (1 record, commit 0123456+dirty)."
    )


def test_a_run_json_edited_by_hand_is_read_as_far_as_it_goes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = _folder(tmp_path / "base", [_record("m", "c", True)])
    new = _folder(tmp_path / "new", [_record("m", "c", True)])
    (new / "run.json").write_text(json.dumps({"source": [], "config": "x", "gate_failures": "?"}))
    code, text = _compare(capsys, baseline, new)
    assert code == 0 and text.splitlines()[3].endswith(" (1 record).")
    assert text.splitlines()[1] == (
        "## llmbench: ✅ no significant regression (the new run's gates are unknown)"
    )
    assert _section(text, "Gates") == [UNKNOWN_GATES]  # not "All gates passed"
