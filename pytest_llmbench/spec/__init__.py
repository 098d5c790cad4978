"""Spec: what to run, read from ``*.eval.yaml`` files (after ``models`` and ``scoring``).

:mod:`.load` reads one file with line numbers (:mod:`.yamlsource`), validates it against
:mod:`.schema` and expands it (:mod:`.expand`: inline cases, dataset rows from
:mod:`.datasets`, prompt variants, prompts rendered by :mod:`.templating`, images checked by
:mod:`.images`) into a :class:`~.schema.LoadedEval`; every error is an
:class:`~.schema.EvalFileError` naming file and line. :mod:`.variants` is the experiment
matrix of one case and model; :mod:`.helper_models` resolves the judges and shim models a
file names; :mod:`.validate` is ``llmbench validate``.
"""
