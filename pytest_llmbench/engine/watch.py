"""Under xdist, say on the controller's terminal which model has items waiting, and how long.

A worker's own notices (:mod:`.scheduler`) never reach the terminal: xdist keeps workers'
output. The controller learns when a worker starts an item (``pytest_runtest_logstart``) and
when it is done with it (``pytest_runtest_logfinish``); an eval item's model is in its id.
Every ``notice_every_s``, a line names each model whose items have run that long, as the
scheduler does without xdist. Plain tests are left out: what they wait on is not known here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable


class WorkerWatch:
    """Tracks the eval items the workers are running; a thread announces long waits."""

    def __init__(
        self,
        models: Callable[[], Iterable[str]],
        notice: Callable[[str], None],
        notice_every_s: float,
    ) -> None:
        self._load_models = models  # read on the first item: the run's models
        self._models: list[str] | None = None
        self._notice = notice
        self._every_s = notice_every_s
        self._running: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def model_of(self, nodeid: str) -> str | None:
        """The model of an eval item's id (``file::case[model-...-rN]``); None for others."""
        if not nodeid.endswith("]") or "[" not in nodeid:
            return None
        if self._models is None:
            # Longest first: "gpt-4o-mini-r0" must not be read as model "gpt-4o".
            self._models = sorted(set(self._load_models()), key=len, reverse=True)
        param = _param_of(nodeid)
        return next((m for m in self._models if param.startswith(f"{m}-")), None)

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        model = self.model_of(nodeid)
        if model is None:
            return
        with self._lock:
            self._running[nodeid] = (model, time.monotonic())
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="llmbench-watch", daemon=True)
            self._thread.start()

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        with self._lock:
            self._running.pop(nodeid, None)

    def pytest_sessionfinish(self) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def waiting(self, now: float) -> list[str]:
        """One line per model with items running for ``notice_every_s`` or more."""
        longest: dict[str, float] = {}
        count: dict[str, int] = {}
        with self._lock:
            for model, started in self._running.values():
                waited = now - started
                if waited >= self._every_s:
                    longest[model] = max(longest.get(model, 0.0), waited)
                    count[model] = count.get(model, 0) + 1
        lines = []
        for model in sorted(longest):
            items = "item" if count[model] == 1 else "items"
            lines.append(
                f"llmbench: waiting {longest[model]:.0f} s on {model}: "
                f"{count[model]} {items} in progress on the workers"
            )
        return lines

    def _loop(self) -> None:
        while not self._stop.wait(self._every_s):
            for line in self.waiting(time.monotonic()):
                self._notice(line)


def _param_of(nodeid: str) -> str:
    """The ``[...]`` of the last node of ``nodeid`` (which ends with ``]``): after the last
    ``::`` that a ``[`` follows, since a parameter id may hold ``::`` itself (``t[a::b]``)."""
    end = len(nodeid)
    while (sep := nodeid.rfind("::", 0, end)) >= 0:
        bracket = nodeid.find("[", sep)
        if bracket >= 0:
            return nodeid[bracket + 1 : -1]
        end = sep
    return nodeid[nodeid.index("[") + 1 : -1]
