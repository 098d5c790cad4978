"""The plugin as a whole: a basic run through the fake provider, and inertness."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from conftest import TWO_CAPITALS, Bench, Rule

CAPITALS = "\ndescription: Capitals\nmodel_params: {temperature: 0, max_tokens: 16}" + TWO_CAPITALS


def test_eval_file_runs_through_provider_and_records(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="France", reply="Paris."))
    bench.server.add_rule(Rule(match="Japan", reply="Kyoto."))
    bench.eval_file("capitals", CAPITALS)
    result = bench.run("--models=fake", "-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*capitals.eval.yaml::france?fake-r0? PASSED*",
            "*capitals.eval.yaml::japan?fake-r0? FAILED*",
            "*llmbench leaderboard*",
            "*1  fake*0.50 [[]0.00, 1.00[]]*50.0%*",
        ]
    )
    rows = {r["case_id"]: r for r in bench.records()}
    assert rows["france"]["response"] == "Paris."
    assert rows["france"]["outcome"] == "passed"
    assert rows["japan"]["outcome"] == "failed"
    assert rows["japan"]["score"] == 0.0
    assert rows["france"]["input_tokens"] > 0 and rows["france"]["output_tokens"] == 1
    assert rows["france"]["cost_usd"] == pytest.approx(
        (rows["france"]["input_tokens"] * 0.001 + 1 * 0.002) / 1000
    )


def test_plain_run_without_eval_files_is_inert(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import sys
        def test_plain():
            assert "litellm" not in sys.modules
            assert "pandas" not in sys.modules
        """
    )
    tmp_root = Path(tempfile.gettempdir())
    state_before = set(tmp_root.glob("pytest-llmbench-*"))
    before = _listing(pytester.path)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "llmbench" not in result.stdout.str().replace("plugins: llmbench", "")
    assert _listing(pytester.path) == before
    assert set(tmp_root.glob("pytest-llmbench-*")) == state_before


def _listing(root: Path) -> list[str]:
    """Every path below ``root`` except pytester's own basetemp and Python's bytecode caches
    (pytest writes them for the test files unless PYTHONDONTWRITEBYTECODE is set)."""
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if not _pytester_own(p.relative_to(root).parts[0]) and "__pycache__" not in p.parts
    )


def _pytester_own(name: str) -> bool:
    return name.startswith("runpytest") or name in ("stdout", "stderr")


def test_a_run_without_pytest_html_writes_everything_else(bench: Bench) -> None:
    """pytest-html is the `html` extra: absent (here: not loaded), a run records, aggregates
    and reports as ever, and only --html is unknown."""
    bench.server.add_rule(Rule(match="France", reply="Paris"))
    bench.server.add_rule(Rule(match="Japan", reply="Tokyo"))
    bench.eval_file("capitals", TWO_CAPITALS)
    result = bench.run("-p", "no:html", "--models=fake")
    result.assert_outcomes(passed=2)
    assert len(bench.records()) == 2
    assert bench.out("report.html").is_file() and bench.out("leaderboard.csv").is_file()


def test_whether_eval_files_were_collected_is_asked_of_the_run_not_of_loaded_modules(
    bench: Bench,
) -> None:
    """One answer: the flag an eval file sets when it is collected, on the run's
    own config; a plain run after an eval run in the same process is a plain run."""
    from pytest_llmbench.engine import eval_files_collected

    bench.eval_file("capitals", CAPITALS)
    items, _ = bench.pytester.inline_genitems("--models=fake", "-p", "no:cacheprovider")
    assert [item.name for item in items] == ["france[fake-r0]", "japan[fake-r0]"]
    assert eval_files_collected(items[0].config)
    bench.pytester.makepyfile(test_plain="def test_x():\n    pass\n")
    items, _ = bench.pytester.inline_genitems("test_plain.py", "-p", "no:cacheprovider")
    assert [item.name for item in items] == ["test_x"]
    assert not eval_files_collected(items[0].config)
