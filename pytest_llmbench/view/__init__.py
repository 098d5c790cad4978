"""`llmbench view`: the local dashboard over results folders (the ``view`` extra).

:mod:`.runs` finds runs and their state, :mod:`.pages` and :mod:`.compare` render the pages,
:mod:`.queue` runs launched runs one after another, :mod:`.app` serves it all on 127.0.0.1.
Nothing of it is imported by a pytest run.
"""
