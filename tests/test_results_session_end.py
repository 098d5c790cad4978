"""The session end computes the run's summary once and writes run.json once, with the final
exit status decided by every gate before it."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest
from conftest import Bench, Rule

from pytest_llmbench.results import aggregation
from pytest_llmbench.results.stats import repeats

N_CASES = 6
# Two assertions, threshold 0.5: "Paris." scores 0.5 and passes, so the score can regress
# significantly while every test passes.
CAPITALS = "threshold: 0.5\ncases:\n" + "".join(
    f"""  - id: q{index}
    prompt: "Question {index}: what is the capital of France?"
    expected: Paris
    assert: [contains, {{type: icontains, value: capital}}]
"""
    for index in range(N_CASES)
)
# Two repeats, so that repeat verdicts and pass@k have something to say.
REPEAT = "--repeat=2"
SPIED = {
    "aggregate": aggregation.aggregate,
    "summarize_repeats": repeats.summarize_repeats,
    "case_verdicts": repeats.case_verdicts,
}


def _spy(monkeypatch: pytest.MonkeyPatch, calls: Counter[str]) -> None:
    """Wrap each spied function in every module of ours that holds it, so that a call counts
    wherever the name is looked up."""
    for name, original in SPIED.items():
        spy = _counting(name, original, calls)
        for module_name, module in list(sys.modules.items()):
            if (
                module_name.startswith("pytest_llmbench")
                and getattr(module, name, None) is original
            ):
                monkeypatch.setattr(module, name, spy)


def _counting(name: str, original: Callable[..., Any], calls: Counter[str]) -> Callable[..., Any]:
    def spy(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return original(*args, **kwargs)

    return spy


def _spy_run_json(monkeypatch: pytest.MonkeyPatch, writes: list[Path]) -> None:
    original = Path.write_text

    def write_text(self: Path, *args: Any, **kwargs: Any) -> int:
        if self.name == "run.json":
            writes.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)


@pytest.fixture
def baseline(bench: Bench) -> Bench:
    """A saved run whose cases all scored 1."""
    bench.eval_file("capitals", CAPITALS)
    bench.server.add_rule(Rule(match="France", reply="Paris is the capital."))
    bench.run("--models=fake", REPEAT, "--results-dir=base").assert_outcomes(passed=2 * N_CASES)
    return bench


def test_session_end_summarizes_once_and_writes_run_json_once_with_the_final_status(
    baseline: Bench, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    step_summary = tmp_path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    # Import every session-end module now, so that the spies replace what they will call.
    from pytest_llmbench.render import ci, markup, terminal  # noqa: F401
    from pytest_llmbench.report import charts, html_tables, standalone  # noqa: F401
    from pytest_llmbench.results import baseline as baseline_module  # noqa: F401
    from pytest_llmbench.results import recorder, summary  # noqa: F401

    calls: Counter[str] = Counter()
    writes: list[Path] = []
    _spy(monkeypatch, calls)
    _spy_run_json(monkeypatch, writes)
    baseline.server.reset()
    baseline.server.add_rule(Rule(match="France", reply="Paris."))
    result = baseline.run("--models=fake", REPEAT, "--baseline=base", "--fail-on-regression")

    # Every item passed: only the baseline gate fails the run, at the very end.
    result.assert_outcomes(passed=2 * N_CASES)
    assert calls == {"aggregate": 1, "summarize_repeats": 1, "case_verdicts": 1}
    assert writes == [baseline.out("run.json")]
    run = json.loads(baseline.out("run.json").read_text())
    assert run["exitstatus"] == result.ret == pytest.ExitCode.TESTS_FAILED
    assert baseline.out("report.html").is_file()
    assert baseline.out("metrics.prom").is_file()
    assert "## llmbench leaderboard" in step_summary.read_text()
