"""Scoring: the assertion vocabulary and every check made without a model call.

:mod:`.assertions` parses an ``assert:`` item into an :class:`~.base.Assertion` (at collection)
and evaluates it into a :class:`~.base.Verdict`; the checks live in :mod:`.text`,
:mod:`.structured`, :mod:`.python` (user functions, multiple choice), :mod:`.agent` (files,
commands and tool calls an agent left) and :mod:`.similarity` (ROUGE-L, cosine). The settings of
model-graded assertions are parsed here too (:mod:`.judged`); their calls are made by the engine
and graded by :mod:`pytest_llmbench.judging`. Imports only ``models`` and ``agent``.
"""
