"""Agent machinery: the tool loop, the tools, their sandbox (after ``models``).

:mod:`.loop` asks the model, runs the tools it calls and feeds back the results until it
answers; :mod:`.shim` carries tool calls as JSON in plain text for models without native tool
calling; :mod:`.tools` are the tools, confined to the item's workdir, whose shell commands run in
:mod:`.sandbox`; :mod:`.post` runs an eval file's ``post_process`` command. What an agent left
behind is checked in :mod:`pytest_llmbench.scoring.agent`.
"""
