"""Judging: what a judge model is asked, how its reply is read, how a panel's verdicts combine.

:mod:`.prompts` builds the judge's messages and the JSON shape it must answer with;
:mod:`.verdicts` parses replies strictly; :mod:`.panel` grades one answer with a panel (calls
given by the engine, a failed judge excluded, scores aggregated). Imports ``models`` and
``scoring``.
"""
