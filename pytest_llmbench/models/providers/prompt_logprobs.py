"""Right prompt log-probabilities from the embedded server's completions endpoint.

Log-likelihood scoring asks ``/v1/completions`` for ``echo: true, logprobs: k``: the prompt's
tokens come back with the log-probability the model gave each one. llama-cpp-python 0.3.x
computes those from the wrong row of logits for a model without a BOS token (SmolLM2): token
``i`` is scored by the distribution *after* it, not before it, and the last prompt token is
dropped. This module, loaded only in the embedded server process (:mod:`.serve`), wraps the
model's ``create_completion``: an echo request is answered without echo (the completion's own
logprobs are right), and the prompt's logprobs are computed here from the logits the model kept
(``logits_all``): token ``i`` from row ``i - 1``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["install", "prompt_logprobs"]

Detokenize = Callable[[int, Sequence[int]], bytes]


def install(llama: Any) -> None:
    """Answer ``llama``'s echo-with-logprobs completions with right prompt logprobs."""
    original = llama.create_completion

    def create_completion(*args: Any, **kwargs: Any) -> Any:
        prompt = kwargs.get("prompt", args[0] if args else None)
        k = kwargs.get("logprobs")
        if (
            not kwargs.get("echo")
            or k is None
            or kwargs.get("stream")
            or not isinstance(prompt, str)
        ):
            return original(*args, **kwargs)
        result = original(*args, **{**kwargs, "echo": False})
        n_prompt = int(result["usage"]["prompt_tokens"])
        ids = [int(token) for token in llama.input_ids[:n_prompt]]
        logits = llama.scores[:n_prompt]

        def detokenize(token: int, before: Sequence[int]) -> bytes:
            return bytes(llama.detokenize([token], prev_tokens=list(before)))

        echoed = prompt_logprobs(
            ids,
            logits[:-1],
            detokenize,
            int(k),
            skip_first=bool(ids) and ids[0] == llama.token_bos(),
        )
        choice = result["choices"][0]
        if not (choice.get("logprobs") or {}).get("tokens") and kwargs.get("stop") is None:
            # It stopped on end-of-text at once: say so, as OpenAI's API does (lm-eval drops
            # the last token of an echo as the generated one).
            eos = _LastToken(llama.token_eos(), len(prompt), logits[-1])
            choice = {**choice, "logprobs": eos.block(int(k), ids, detokenize)}
            result = {**result, "choices": [choice, *result["choices"][1:]]}
        return _with_echo(result, prompt, echoed)

    llama.create_completion = create_completion


def prompt_logprobs(
    ids: Sequence[int],
    logits: npt.NDArray[np.single],
    detokenize: Detokenize,
    top_k: int,
    *,
    skip_first: bool = False,
) -> dict[str, list[Any]]:
    """The OpenAI ``logprobs`` block of a prompt: ``tokens``, ``text_offset`` (characters),
    ``token_logprobs`` and ``top_logprobs``, the first token's None (nothing comes before it).

    ``logits[i]`` is the model's output after token ``i``; ``skip_first`` leaves out a BOS.
    """
    logprobs = _log_softmax(np.asarray(logits, dtype=np.single))
    out: dict[str, list[Any]] = {"tokens": [], "text_offset": [], "token_logprobs": [],
                                 "top_logprobs": []}  # fmt: skip
    text = b""
    start = 1 if skip_first else 0
    for i in range(start, len(ids)):
        piece = detokenize(ids[i], ids[start:i])
        out["tokens"].append(piece.decode("utf-8", errors="ignore"))
        out["text_offset"].append(len(text.decode("utf-8", errors="ignore")))
        text += piece
        if i == start:
            out["token_logprobs"].append(None)
            out["top_logprobs"].append(None)
            continue
        row = logprobs[i - 1]
        value = float(row[ids[i]])
        top = _top(row, top_k, ids[start:i], detokenize)
        top[out["tokens"][-1]] = value  # the prompt's own token, as OpenAI's API lists it
        out["token_logprobs"].append(value)
        out["top_logprobs"].append(top)
    return out


@dataclass(frozen=True)
class _LastToken:
    """The end-of-text token a completion stopped on, with the logits that chose it."""

    token: int
    offset: int
    logits: npt.NDArray[np.single]

    def block(self, top_k: int, ids: Sequence[int], detokenize: Detokenize) -> dict[str, list[Any]]:
        row = _log_softmax(np.asarray(self.logits, dtype=np.single)[None, :])[0]
        value = float(row[self.token])
        top = _top(row, top_k, ids, detokenize)
        text = detokenize(self.token, ids).decode("utf-8", errors="ignore")
        top[text] = value
        return {"tokens": [text], "text_offset": [self.offset], "token_logprobs": [value],
                "top_logprobs": [top]}  # fmt: skip


def _log_softmax(logits: npt.NDArray[np.single]) -> npt.NDArray[np.single]:
    if logits.size == 0:
        return logits
    shifted = logits - logits.max(axis=-1, keepdims=True)
    result: npt.NDArray[np.single] = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return result


def _top(
    row: npt.NDArray[np.single], k: int, before: Sequence[int], detokenize: Detokenize
) -> dict[str, float]:
    if k <= 0:
        return {}
    best = np.argpartition(row, -k)[-k:] if k < row.size else np.arange(row.size)
    ranked = sorted(best.tolist(), key=lambda token: -float(row[token]))
    return {
        detokenize(token, before).decode("utf-8", errors="ignore"): float(row[token])
        for token in ranked
    }


def _with_echo(result: dict[str, Any], prompt: str, echoed: dict[str, list[Any]]) -> Any:
    """``result`` (a completion without echo) with the prompt and its logprobs in front."""
    choice = dict(result["choices"][0])
    generated = choice.get("logprobs") or {}
    block = {key: list(echoed[key]) for key in echoed}
    for key in block:
        block[key].extend(generated.get(key) or [])
    choice["text"] = prompt + str(choice.get("text") or "")
    choice["logprobs"] = block
    return {**result, "choices": [choice, *result["choices"][1:]]}
