"""Text and vector similarity for model-free graders: ROUGE-L and cosine similarity."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

_WORD = re.compile(r"\w+")


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F1 (beta = 1) of ``candidate`` against ``reference``, 0..1.

    Texts are compared as lowercase word tokens (``\\w+``), so case and punctuation do not count
    but word order does (longest common subsequence). Two empty texts score 1.0 (they are the
    same); one empty text scores 0.0.
    """
    cand, ref = _tokens(candidate), _tokens(reference)
    if not cand and not ref:
        return 1.0
    common = _lcs_length(cand, ref)
    if common == 0:
        return 0.0
    precision, recall = common / len(cand), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence; one row of the table, as long as the shorter."""
    if len(a) < len(b):
        a, b = b, a
    previous = [0] * (len(b) + 1)
    for token in a:
        current = [0]
        for index, other in enumerate(b):
            if token == other:
                current.append(previous[index] + 1)
            else:
                current.append(max(previous[index + 1], current[index]))
        previous = current
    return previous[-1]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors of the same length, -1..1; 0.0 when one is all zeros.

    Raises :class:`ValueError` when the lengths differ.
    """
    if len(a) != len(b):
        raise ValueError(f"vectors differ in length: {len(a)} != {len(b)}")
    # One square root of the product rounds less than a product of two roots.
    norm = math.sqrt(math.fsum(x * x for x in a) * math.fsum(y * y for y in b))
    if norm == 0.0:
        return 0.0
    # Rounding can land a hair outside [-1, 1] for parallel vectors; callers compare to 1.0.
    return max(-1.0, min(1.0, math.fsum(x * y for x, y in zip(a, b, strict=True)) / norm))
