"""``-n auto`` on an eval run starts no worker, and says so; ``-n N`` and mixed runs are xdist's.

Real xdist runs (subprocesses) against the fake server.
"""

from __future__ import annotations

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported in pytester runs)
import pytest
from conftest import TWO_CAPITALS, Bench, Rule

from pytest_llmbench.workers import _kinds

pytestmark = pytest.mark.slow
NOTE = "llmbench: -n auto starts no worker: model calls run concurrently in one process*"


@pytest.fixture
def capitals(bench: Bench) -> Bench:
    bench.server.add_rule(Rule(match="France", reply="Paris"))
    bench.server.add_rule(Rule(match="Japan", reply="Tokyo"))
    bench.eval_file("capitals", TWO_CAPITALS)
    return bench


def test_auto_on_eval_files_runs_in_one_process(capitals: Bench) -> None:
    result = capitals.run_subprocess("--models=fake", "-n", "auto")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([NOTE])
    assert "created:" not in result.stdout.str()
    assert {record["worker"] for record in capitals.records()} == {"main"}


def test_an_explicit_count_still_starts_workers(capitals: Bench) -> None:
    result = capitals.run_subprocess("--models=fake", "-n", "2")
    result.assert_outcomes(passed=2)
    assert "starts no worker" not in result.stdout.str()
    assert {record["worker"] for record in capitals.records()} <= {"gw0", "gw1"}


def test_auto_with_python_tests_too_is_xdists_count(capitals: Bench) -> None:
    capitals.pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = capitals.run_subprocess("--models=fake", "-n", "auto")
    result.assert_outcomes(passed=3)
    assert "starts no worker" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*created: * workers*"])


def test_what_a_folder_holds(tmp_path: pytest.TempPathFactory) -> None:
    root = tmp_path  # type: ignore[assignment]
    (root / "evals").mkdir()
    (root / "evals" / "a.eval.yaml").write_text("cases: []\n")
    (root / "node_modules").mkdir()
    (root / "node_modules" / "test_x.py").write_text("")
    (root / ".venv").mkdir()
    (root / ".venv" / "test_y.py").write_text("")
    assert _kinds([root], "*.eval.yaml") == {"eval"}
    (root / "tests").mkdir()
    (root / "tests" / "test_z.py").write_text("")
    assert _kinds([root], "*.eval.yaml") == {"eval", "python"}
    assert _kinds([root / "evals" / "a.eval.yaml"], "*.eval.yaml") == {"eval"}
