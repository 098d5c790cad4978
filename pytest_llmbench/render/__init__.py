"""Render: the run's summary as text for people and CI (after ``results``).

:mod:`.terminal` prints the leaderboard, judges, flaky cases and gate lines at session end;
:mod:`.markup` draws a leaderboard as Markdown or HTML cells; :mod:`.ci` writes the GitHub step
summary and the Prometheus textfile ``metrics.prom``.
"""
