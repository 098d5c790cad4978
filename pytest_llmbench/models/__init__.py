"""Models: who can be called, and how (the first stage; it imports no other).

:mod:`.profiles` holds the profile values (a litellm model string with its endpoint, parameters,
prices, limits and tags) and the registry that ``--models`` selects from; :mod:`.profile_files`
reads YAML profile files, 360-eval's JSONL files (:mod:`.eval360`) and the shipped
``builtin.yaml``. :mod:`.providers` talks to models: the values of a call
(:mod:`.providers.completion`: target, completion, usage, provider error), the calls the
engine makes (:mod:`.providers.calls`), routed (:mod:`.providers.routes`) to the lean
OpenAI-compatible client (:mod:`.providers.openai_compatible`) or to litellm (the only
``import litellm``: :mod:`.providers.litellm_client`), with one retry and error implementation
(:mod:`.providers.retry`, :mod:`.providers.errors`), prices and token counts read as data
(:mod:`.providers.prices`, :mod:`.providers.tokens`), and the embedded default model served
on 127.0.0.1 (:mod:`.providers.embedded`).
"""
