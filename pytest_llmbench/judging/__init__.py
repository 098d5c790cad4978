"""Judging: what a judge model is asked, how its reply is read, how a panel's verdicts combine.

:mod:`.kinds` is the table of judge kinds: each judged assertion type registered once, with
how an answer is graded and its panel's form (prompt, parser, aggregation); the engine looks
a kind up there and hands it an :class:`~.answer_view.AnswerView`. :mod:`.prompts` (with
:mod:`.rag_metrics` and :mod:`.tagging`) builds the judge's messages and the JSON shape it must
answer with; :mod:`.verdicts` parses replies strictly; :mod:`.panel` grades one answer with a
panel (calls given by the engine, a failed judge excluded, scores aggregated). Imports
``models`` and ``scoring``.
"""
