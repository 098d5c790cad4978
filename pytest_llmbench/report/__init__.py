"""Report: the self-contained ``report.html`` and the pytest-html columns (the last stage).

:mod:`.standalone` writes the report from the run's summary, with the plotly charts of
:mod:`.charts` and the tables of :mod:`.html_tables`; :mod:`.html_columns` adds model, score,
tokens, latency and cost to a pytest-html report.
"""
