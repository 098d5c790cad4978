"""The ``--baseline DIR`` plugin: this run compared with a saved one, model by model.

The plugin registers :class:`BaselineGate` in every run; it reads and compares saved runs
(:mod:`.baseline`, with its statistics) only under ``--baseline``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..config import explicitly_configured, get_run_config
from ..results_folder import ResultsError
from .gates import GATES_KEY

if TYPE_CHECKING:
    from .baseline import ModelComparison


#: The ``--baseline`` plugin, for the recorder that asks it at session end.
BASELINE_KEY = pytest.StashKey["BaselineGate"]()


class BaselineGate:
    """``--baseline DIR`` [``--fail-on-regression``]: compare this run with a saved one.

    Registered on the controller only. The baseline is read at configure time, so a bad folder
    is a usage error before any model is called. At session end the recorder asks it which
    models regressed (:meth:`compare`); whether that fails the run is decided in
    :mod:`.gates`, before run.json is written.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.baseline_dir: Path | None = None
        self.baseline: list[dict[str, Any]] = []
        self.results: list[ModelComparison] = []
        self.unmatched: list[str] = []
        self.error: str | None = None

    def pytest_configure(self, config: pytest.Config) -> None:
        """Read the baseline; a missing or unreadable one is a usage error naming the path."""
        if not explicitly_configured(config):
            return
        run = get_run_config(config)
        self.baseline_dir = run.baseline
        if self.baseline_dir is None:
            return
        from .effective import load_labelled

        try:
            # People's labels decide the baseline's verdicts as they do the run's.
            self.baseline = load_labelled(self.baseline_dir, run.reviews_dir, run.ignore_reviews)
        except ResultsError as exc:
            raise pytest.UsageError(f"llmbench: --baseline: {exc}") from None
        config.stash[BASELINE_KEY] = self

    def compare(self, records: Sequence[Mapping[str, Any]]) -> list[str]:
        """Compare the run's ``records`` model by model; return the models that regressed
        significantly (none when the comparison fails: the error is shown, the status kept)."""
        from .baseline import compare_runs, models_of

        try:
            self.results = compare_runs(self.baseline, records)
        except Exception as exc:  # a broken comparison must not lose the run's exit status
            self.error = f"{type(exc).__name__}: {exc}"
            return []
        compared = {result.model for result in self.results}
        self.unmatched = [model for model in models_of(records) if model not in compared]
        return self.regressed

    @property
    def regressed(self) -> list[str]:
        """The models whose score or pass rate went down significantly."""
        return [result.model for result in self.results if result.significant_regression]

    @pytest.hookimpl(trylast=True)  # after the leaderboard it compares with
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """The ``llmbench baseline`` section: per model the statistics and changed cases."""
        if self.baseline_dir is None or not (self.results or self.unmatched or self.error):
            return
        from .baseline import format_comparison, pairing_note

        write = terminalreporter.write_line
        terminalreporter.write_sep("=", "llmbench baseline")
        write(f"baseline: {self.baseline_dir} ({len(self.baseline)} records)")
        note = pairing_note(self.results)
        if note:
            write(f"llmbench: warning: {note}", yellow=True)
        if self.error:
            write(f"llmbench: baseline comparison failed: {self.error}", red=True)
        for result in self.results:
            for line in format_comparison(result):
                write(line, red=result.significant_regression)
        for model in self.unmatched:
            write(f"{model}: not in the baseline")
        regressed = self.regressed
        decision = self.config.stash.get(GATES_KEY, None)
        if decision is not None and decision.regression_failed:
            names = ", ".join(regressed)
            write(f"llmbench baseline FAILED: significant regression: {names}", red=True, bold=True)
        elif regressed:
            write(f"llmbench: significant regression: {', '.join(regressed)}", yellow=True)
