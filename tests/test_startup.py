"""Start-up: pytest loads the plugin's modules as plain modules, not through assertion rewriting,
and a plain run (no eval file) loads none of the modules that only evals and records need.

pytest marks the modules of every ``pytest11`` distribution for rewriting; without bytecode
written (``PYTHONDONTWRITEBYTECODE=1``) that reparsed and recompiled the whole plugin on every
start. The package's ``__init__`` takes itself off the hook's list (issue 37, point 8).
"""

from __future__ import annotations

import sys

import pytest
from conftest import REPO_ROOT

#: Run inside the pytester project: which of the plugin's modules the rewriting hook loaded.
_PROBE = """
import sys

from _pytest.assertion.rewrite import AssertionRewritingHook


def _by_hook(name):
    return isinstance(getattr(sys.modules[name], "__loader__", None), AssertionRewritingHook)


def test_probe():
    loaded = sorted(name for name in sys.modules if name.startswith("pytest_llmbench"))
    print("LOADED", " ".join(loaded))
    print("BY-HOOK", " ".join(name for name in loaded if _by_hook(name)))


def test_user_assertion():
    answer = 3
    assert answer == 4
"""


def _names(lines: list[str], tag: str) -> list[str]:
    # pytest's progress may start the line ("test_probe.py LOADED ..."): the words after the tag.
    line = next(line for line in lines if f"{tag} " in f"{line} ")
    return line.partition(tag)[2].split()


def test_plugin_modules_are_not_rewritten_without_bytecode(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On sys.path, the checkout is what pytest marks for rewriting, as an installed wheel is.
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    pytester.makepyfile(test_probe=_PROBE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    result.assert_outcomes(passed=1, failed=1)
    lines = result.stdout.lines
    loaded = _names(lines, "LOADED")
    assert "pytest_llmbench.plugin" in loaded and "pytest_llmbench.config" in loaded
    # Only the package's __init__, which pytest had marked and which unmarks the rest.
    assert _names(lines, "BY-HOOK") == ["pytest_llmbench"]
    # The user's own test files are still rewritten: the failure explains itself.
    result.stdout.fnmatch_lines(["*assert 3 == 4*"])


#: What a plain run (no eval file, no fixture of ours) never loads: the heavy libraries, and the
#: plugin's modules that only a run with eval items or records needs (a name covers its
#: submodules). The plugin registers its hooks in every run; their modules import these inside
#: the hooks, once the run has something to do with them (issue 37, point 8).
PLAIN_RUN_NEVER_LOADS = (
    "pandas",
    "pydantic",
    "yaml",
    "aiohttp",
    "litellm",
    "pytest_llmbench.results.stats",
    "pytest_llmbench.results.aggregation",
    "pytest_llmbench.results.column_families",
    "pytest_llmbench.results.grouping",
    "pytest_llmbench.render.terminal",  # the leaderboard's and judges' tables
    "pytest_llmbench.render.prometheus",
    "pytest_llmbench.report.standalone",
    "pytest_llmbench.report.charts",
    "pytest_llmbench.engine.runtime",
    "pytest_llmbench.engine.plan",
    "pytest_llmbench.scoring.judged",
)

#: A whole plain run in one process, then every module it loaded (unconfigure's included).
_PLAIN_RUN = """
import sys

import pytest

status = pytest.main(["-q", "-p", "no:cacheprovider", "test_plain.py"])
print("LOADED", " ".join(sorted(sys.modules)))
sys.exit(status)
"""


def test_a_plain_run_loads_none_of_the_modules_of_evals_and_records(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_plain="def test_x():\n    pass\n")
    pytester.makepyfile(plain_run=_PLAIN_RUN)
    result = pytester.run(sys.executable, "plain_run.py")
    assert result.ret == 0, result.stderr.str()
    loaded = _names(result.outlines, "LOADED")
    assert "pytest_llmbench.plugin" in loaded  # the plugin was there, its hooks registered
    heavy = [
        name
        for name in loaded
        if any(name == never or name.startswith(f"{never}.") for never in PLAIN_RUN_NEVER_LOADS)
    ]
    assert heavy == []
