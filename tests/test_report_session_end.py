"""The report's session-end hooks (pytest_llmbench/report/session_end.py)."""

from __future__ import annotations

import sys
import threading

import pytest

from pytest_llmbench.report import session_end


def test_the_warm_up_thread_is_joined_started_and_never_starts_after_the_session_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The engine's thread starts the imports while the main thread may be ending the session:
    the session end never sees a thread not yet started (CI once failed on 'cannot join thread
    before it is started'), and none starts once the session end began."""
    ran: list[str] = []
    monkeypatch.setattr(session_end, "_warm_up", lambda: ran.append("warm-up"))
    monkeypatch.setattr(session_end, "_import_session_end", lambda: ran.append("at the end"))
    started = session_end.SessionEndWarmUp()
    starter = threading.Thread(target=started._start)
    starter.start()
    starter.join()
    started.pytest_sessionfinish()
    assert ran == ["warm-up"]

    late = session_end.SessionEndWarmUp()
    late._records = True
    late.pytest_sessionfinish()
    late._start()  # the engine's first call came after the session end began
    assert ran == ["warm-up", "at the end"] and late._thread is None


def test_importing_the_hooks_loads_none_of_the_page() -> None:
    """The plugin registers these hooks in every run: their module loads neither the page's
    modules (charts, tables) nor pandas."""
    import subprocess

    code = (
        "import sys; import pytest_llmbench.report.session_end; "
        "print(sorted(m for m in sys.modules if m.startswith(('pandas', "
        "'pytest_llmbench.report.standalone', 'pytest_llmbench.report.charts'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
