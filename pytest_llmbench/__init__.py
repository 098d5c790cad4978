"""pytest-llmbench: LLM evals as pytest tests.

The package reads in the order a record flows. On top, the pytest shell: :mod:`.plugin` (hooks,
lazy), :mod:`.config` (options into a ``RunConfig``), :mod:`.collect` and :mod:`.item` (eval
files into items), :mod:`.fixtures`, :mod:`.cli` (the ``llmbench`` command), with
:mod:`.redact`, :mod:`.shard`, :mod:`.userimport` and :mod:`.yamlguard` as shared utilities. Then the stages, each importing only
from those before it: :mod:`.models`, :mod:`.agent`, :mod:`.scoring`, :mod:`.judging`,
:mod:`.spec`, :mod:`.engine`, :mod:`.results`, :mod:`.render`, :mod:`.report`. Importing this
package imports nothing.
"""
