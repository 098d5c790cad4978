"""The embedded scoring server's prompt log-probabilities: computed from the row of logits
before each token (llama-cpp-python 0.3.x takes the row after it), checked on made-up logits and
against the real model, whose logprob of a token it generates must be the same whether read
from the generation or from an echo of the prompt that ends with it."""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pytest_llmbench.models.providers.embedded import EmbeddedServer, ServerInfo
from pytest_llmbench.models.providers.loglikelihood import continuation_logprob
from pytest_llmbench.models.providers.prompt_logprobs import prompt_logprobs

PIECES = {0: b"<s>", 1: b"Caf", 2: b"\xc3\xa9", 3: b" au", 4: b" lait"}


def detokenize(token: int, before: object) -> bytes:
    return PIECES[token]


def test_each_token_is_scored_by_the_row_before_it() -> None:
    logits = np.log(
        np.array(
            [
                [0.1, 0.1, 0.6, 0.1, 0.1],  # after "Caf": "é" likely
                [0.1, 0.1, 0.1, 0.5, 0.2],  # after "é": " au"
                [0.1, 0.1, 0.1, 0.1, 0.6],  # after " au": " lait"
            ],
            dtype=np.single,
        )
    )
    block = prompt_logprobs([1, 2, 3, 4], logits, detokenize, 1)
    assert block["tokens"] == ["Caf", "é", " au", " lait"]
    # Characters, not bytes: "é" is two bytes and one character.
    assert block["text_offset"] == [0, 3, 4, 7]
    assert block["token_logprobs"][0] is None
    assert block["token_logprobs"][1:] == pytest.approx(np.log([0.6, 0.5, 0.6]).tolist())
    assert block["top_logprobs"][1] == {"é": pytest.approx(np.log(0.6))}
    assert block["top_logprobs"][0] is None


def test_a_bos_token_is_left_out_and_scores_from_its_row() -> None:
    logits = np.log(np.array([[0.1, 0.7, 0.1, 0.05, 0.05], [0.1, 0.1, 0.6, 0.1, 0.1]], np.single))
    block = prompt_logprobs([0, 1, 2], logits, detokenize, 2, skip_first=True)
    assert block["tokens"] == ["Caf", "é"]
    assert block["text_offset"] == [0, 3]
    assert block["token_logprobs"][1] == pytest.approx(float(np.log(0.6)))


def test_the_continuation_is_the_tokens_that_start_in_it() -> None:
    block = {
        "text_offset": [0, 6, 9, 15, 20],
        "token_logprobs": [None, -1.0, -2.0, -0.5, -9.0],  # the last one was generated
    }
    # "Hello, world! Paris" + generated: the continuation is chars 15..20.
    assert continuation_logprob(block, 15, 20) == (-0.5, 1)
    assert continuation_logprob(block, 9, 20) == (-2.5, 2)
    # A token straddling the start belongs to the context (lm-eval's API models).
    assert continuation_logprob(block, 12, 20) == (-0.5, 1)


@pytest.mark.parametrize(
    ("block", "reason"),
    [
        ({}, "no per-token offsets"),
        ({"text_offset": [5], "token_logprobs": [-1.0]}, "the prompt was not echoed"),
        ({"text_offset": [0, 9], "token_logprobs": [None, -1.0]}, "no echoed token starts"),
        ({"text_offset": [0, 3, 9], "token_logprobs": [None, None, -1.0]}, "without log-prob"),
    ],
)
def test_answers_without_prompt_logprobs_say_why(
    block: dict[str, list[object]], reason: str
) -> None:
    from pytest_llmbench.models.providers.loglikelihood import NoPromptLogprobs

    with pytest.raises(NoPromptLogprobs, match=reason):
        continuation_logprob(block, 3, 8)


# -- the real model ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scoring_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    server = EmbeddedServer(tmp_path_factory.mktemp("scoring"), os.getpid(), scoring=True)
    try:
        yield server.ensure_started()
    finally:
        server.stop()


def complete(info: ServerInfo, **body: object) -> dict[str, object]:
    request = urllib.request.Request(
        f"{info.base_url}/completions",
        data=json.dumps({"temperature": 0, "max_tokens": 1, **body}).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        choice: dict[str, object] = json.loads(response.read())["choices"][0]
    return choice


@pytest.mark.slow
@pytest.mark.parametrize(
    "prompt", ["The capital of France is", "One, two, three, four,", "Le café au"]
)
def test_an_echoed_token_has_the_logprob_it_was_generated_with(
    scoring_server: ServerInfo, prompt: str
) -> None:
    generated = complete(scoring_server, prompt=prompt, logprobs=1)
    (token,) = generated["logprobs"]["tokens"]  # type: ignore[index]
    (expected,) = generated["logprobs"]["token_logprobs"]  # type: ignore[index]
    echoed = complete(scoring_server, prompt=prompt + token, logprobs=1, echo=True)
    block = echoed["logprobs"]
    assert echoed["text"].startswith(prompt + token)  # type: ignore[union-attr]
    # The prompt's last token, scored from the echo, is the generated one, same logprob.
    value, count = continuation_logprob(block, len(prompt), len(prompt + token))
    assert count == 1
    assert value == pytest.approx(expected, abs=1e-4)
    assert block["tokens"][0] and block["token_logprobs"][0] is None  # type: ignore[index]


@pytest.mark.slow
def test_an_echo_that_stops_at_once_still_ends_with_the_generated_token(
    scoring_server: ServerInfo,
) -> None:
    prompt = "Question: What do fish live in?\nAnswer:"
    plain = complete(scoring_server, prompt=prompt, logprobs=1)
    if plain["text"]:
        pytest.fail(f"the model no longer stops here at once: {plain['text']!r}; pick a prompt")
    block = complete(scoring_server, prompt=prompt, logprobs=1, echo=True)["logprobs"]
    # One entry past the prompt (end of text), as OpenAI's API gives and lm-eval drops.
    assert block["text_offset"][-1] == len(prompt)  # type: ignore[index]
    assert block["text_offset"][-2] < len(prompt)  # type: ignore[index]
    assert block["token_logprobs"][-1] < 0  # type: ignore[index]


@pytest.mark.slow
def test_stock_echo_logprobs_are_off_by_one_and_ours_are_not(
    scoring_server: ServerInfo, tmp_path: Path
) -> None:
    """Why the fix exists: the same request without it gives another value (a guard that the
    library has not been fixed upstream, making ours redundant)."""
    from llama_cpp import Llama

    from pytest_llmbench.models.providers.embedded import find_model_file

    llama = Llama(str(find_model_file()), logits_all=True, n_ctx=256, verbose=False)
    prompt = "The capital of France is Paris"
    stock = llama.create_completion(prompt, max_tokens=1, logprobs=1, echo=True, temperature=0)
    ours = complete(scoring_server, prompt=prompt, logprobs=1, echo=True)
    stock_block = stock["choices"][0]["logprobs"]
    start = len("The capital of France is")
    ours_value, _ = continuation_logprob(ours["logprobs"], start, len(prompt))
    stock_value, _ = continuation_logprob(stock_block, start, len(prompt))
    assert abs(ours_value - stock_value) > 0.1
    generated = complete(scoring_server, prompt="The capital of France is", logprobs=1)
    assert generated["logprobs"]["tokens"] == [" Paris"]  # type: ignore[index]
    assert ours_value == pytest.approx(generated["logprobs"]["token_logprobs"][0], abs=1e-4)  # type: ignore[index]
