"""Prompt optimization: validation of rewrites, fallbacks, one call per key across tasks and
processes, stale and released claims, and the log written at session end."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_llmbench.engine.optimizer import PromptOptimizer, Rewrite, rewrite_key
from pytest_llmbench.engine.optimizer_store import LOG_FILE, RewriteStore, write_log
from pytest_llmbench.models.item_errors import ProviderError
from pytest_llmbench.models.profiles import ModelProfile
from pytest_llmbench.models.providers.completion import Completion
from pytest_llmbench.models.providers.thinking import ThinkingRule

OPTIMIZER = ModelProfile(name="local/smollm2", model="openai/smollm2", embedded=True)
REMOTE_OPTIMIZER = ModelProfile(name="gpt", model="openai/gpt-4o-mini")
TARGET = ModelProfile(name="nova", model="bedrock/amazon.nova-pro-v1:0", display_name="Nova Pro")
OTHER_TARGET = ModelProfile(name="haiku", model="anthropic/claude-3-haiku")
TEMPLATE = (
    {"role": "system", "content": "You answer quiz questions."},
    {"role": "user", "content": "Question: {{question}}\nAnswer briefly."},
)
GOOD = {
    "system": "You are a precise quiz assistant. Reply with the answer only.",
    "prompt": "Answer this question in a few words.\n\nQuestion: {{ question }}",
}


def _completion(text: str) -> Completion:
    return Completion(
        text=text,
        model_id="openai/smollm2",
        input_tokens=120,
        output_tokens=40,
        tokens_estimated=False,
        ttft_s=None,
        latency_s=0.5,
        cost_usd=0.001,
        retries=0,
        streamed=False,
        finish_reason="stop",
    )


class FakeOptimizer:
    """A ``complete`` coroutine that answers ``reply`` (text, or a dict sent as JSON) and keeps
    every call's messages and params."""

    def __init__(self, reply: Any, delay: float = 0.0) -> None:
        self.reply = reply
        self.delay = delay
        self.calls: list[tuple[list[dict[str, str]], dict[str, Any]]] = []

    async def __call__(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Completion:
        self.calls.append((messages, params))
        await asyncio.sleep(self.delay)
        if isinstance(self.reply, Exception):
            raise self.reply
        text = self.reply if isinstance(self.reply, str) else json.dumps(self.reply)
        return _completion(text)


def _rewrite(
    tmp_path: Path,
    reply: Any,
    template: Any = TEMPLATE,
    optimizer: ModelProfile = OPTIMIZER,
) -> tuple[Rewrite, FakeOptimizer]:
    fake = FakeOptimizer(reply)
    store = PromptOptimizer(tmp_path / "store.sqlite", optimizer)
    try:
        result = asyncio.run(store.rewrite(template, TARGET, fake))
    finally:
        store.close()
    return result, fake


def test_a_good_rewrite_is_used_and_the_optimizer_is_told_the_target(tmp_path: Path) -> None:
    result, fake = _rewrite(tmp_path, GOOD)
    assert result.status == "rewritten"
    assert result.messages == (
        {"role": "system", "content": GOOD["system"]},
        {"role": "user", "content": GOOD["prompt"]},
    )
    assert (result.optimizer, result.target, result.cached) == ("local/smollm2", "nova", False)
    assert result.to_record() == {"status": "rewritten", "reason": "rewritten"}
    (messages, params), *more = fake.calls
    assert not more
    asked = messages[-1]["content"]
    assert "Target model: Nova Pro (litellm model id: bedrock/amazon.nova-pro-v1:0)" in asked
    assert "placeholders exactly as written, at least once: {{question}}." in asked
    assert "<prompt>\nQuestion: {{question}}\nAnswer briefly.\n</prompt>" in asked
    # The embedded server gets the schema as a llama.cpp grammar, in json_object form.
    assert params["response_format"]["type"] == "json_object"
    assert params["response_format"]["schema"]["required"] == ["system", "prompt"]
    assert params["temperature"] == 0 and params["max_tokens"] > 0


def test_a_remote_optimizer_gets_a_strict_json_schema(tmp_path: Path) -> None:
    result, fake = _rewrite(tmp_path, GOOD, optimizer=REMOTE_OPTIMIZER)
    assert result.status == "rewritten"
    response_format = fake.calls[0][1]["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["strict"] is True


def test_a_rewrite_may_drop_the_system_prompt(tmp_path: Path) -> None:
    result, _ = _rewrite(tmp_path, {"system": None, "prompt": "Q: {{question}}. Be brief."})
    assert result.status == "rewritten"
    assert result.messages == ({"role": "user", "content": "Q: {{question}}. Be brief."},)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ({"system": None, "prompt": "Answer the question briefly."}, "lost {{question}}"),
        ({"system": "{{topic}} expert", "prompt": "Q: {{question}}"}, "added {{topic}}"),
        ({"system": None, "prompt": "Q: {{query}}"}, "lost {{question}}; added {{query}}"),
        ("Sure! Here is a better prompt: Question: {{question}}", "not the JSON asked for"),
        ({"prompt": "Q: {{question}}"}, '"system"'),
        ({"system": None, "prompt": 7}, '"prompt"'),
        ({"system": "Be brief.", "prompt": "   "}, "the rewritten prompt is empty"),
        (
            {"system": None, "prompt": "{{question}} " + "x" * 700},
            "713 characters, over the limit of 656",
        ),
    ],
)
def test_an_invalid_rewrite_fails_and_falls_back_to_the_original(
    tmp_path: Path, reply: Any, reason: str
) -> None:
    result, fake = _rewrite(tmp_path, reply)
    assert result.status == "failed"
    assert reason in result.reason
    assert result.messages == TEMPLATE
    assert len(fake.calls) == 1


def test_a_fenced_json_reply_is_accepted(tmp_path: Path) -> None:
    result, _ = _rewrite(tmp_path, "```json\n" + json.dumps(GOOD) + "\n```")
    assert result.status == "rewritten"


def test_a_reasoning_optimizers_thinking_is_no_part_of_the_rewrite(tmp_path: Path) -> None:
    """Thinking in the optimizer profile's own tag (which the clients do not know) is read apart
    by its thinking rule: the rewrite is the answer after it."""
    thinker = OPTIMIZER.model_copy(
        update={"thinking": ThinkingRule(tags=(("<reason>", "</reason>"),))}
    )
    reply = '<reason>Keep {{question}}; say "briefly".</reason>' + json.dumps(GOOD)
    result, _ = _rewrite(tmp_path, reply, optimizer=thinker)
    assert result.status == "rewritten"
    assert result.messages[1] == {"role": "user", "content": GOOD["prompt"]}
    # Without the rule the same reply is no rewrite.
    assert _rewrite(tmp_path / "plain", reply)[0].status == "failed"


def test_an_unchanged_rewrite_is_skipped(tmp_path: Path) -> None:
    same = {
        "system": "  You answer quiz\nquestions. ",
        "prompt": "Question:  {{question}} Answer briefly.",
    }
    result, _ = _rewrite(tmp_path, same)
    assert result.status == "skipped"
    assert result.reason == "the optimizer returned the prompt unchanged"
    assert result.messages == TEMPLATE


def test_a_provider_error_fails_without_raising(tmp_path: Path) -> None:
    outage = ProviderError("local/smollm2: --max-cost 1 USD reached", "budget")
    result, _ = _rewrite(tmp_path, outage)
    assert result.status == "failed"
    assert result.reason == "optimizer call failed: local/smollm2: --max-cost 1 USD reached"
    assert result.messages == TEMPLATE


def test_a_multi_turn_chat_is_skipped_without_a_call(tmp_path: Path) -> None:
    chat = (
        *TEMPLATE,
        {"role": "assistant", "content": "Paris"},
        {"role": "user", "content": "Why?"},
    )
    result, fake = _rewrite(tmp_path, GOOD, template=chat)
    assert (result.status, result.reason) == ("skipped", "multi-turn chats are not rewritten")
    assert result.messages == chat
    assert fake.calls == []


def test_an_unusable_store_fails_without_a_call(tmp_path: Path) -> None:
    (tmp_path / "store.sqlite").write_text("not a database " * 100)
    result, fake = _rewrite(tmp_path, GOOD)
    assert result.status == "failed"
    assert result.reason.startswith(f"prompt store {tmp_path / 'store.sqlite'}:")
    assert fake.calls == []


def test_twenty_concurrent_tasks_make_one_call_per_target(tmp_path: Path) -> None:
    fake = FakeOptimizer(GOOD, delay=0.2)
    optimizer = PromptOptimizer(tmp_path / "store.sqlite", OPTIMIZER)

    async def run_all() -> list[Rewrite]:
        jobs = [optimizer.rewrite(TEMPLATE, TARGET, fake) for _ in range(20)]
        jobs.append(optimizer.rewrite(TEMPLATE, OTHER_TARGET, fake))
        return await asyncio.gather(*jobs)

    results = asyncio.run(run_all())
    # A later call in the same process is answered from memory.
    again = asyncio.run(optimizer.rewrite(TEMPLATE, TARGET, fake))
    optimizer.close()
    assert len(fake.calls) == 2
    assert {result.status for result in results} == {"rewritten"}
    assert sum(not result.cached for result in results[:20]) == 1
    assert [result.target for result in results] == ["nova"] * 20 + ["haiku"]
    assert again.cached and again.messages == results[0].messages


_WORKER = """
import asyncio, json, sys, time
from pathlib import Path
from pytest_llmbench.engine.optimizer import PromptOptimizer
from pytest_llmbench.models.profiles import ModelProfile
from pytest_llmbench.models.providers.completion import Completion

store, counter, go = map(Path, sys.argv[1:4])
template = json.loads(sys.argv[4])
optimizer = ModelProfile(name="local/smollm2", model="openai/smollm2", embedded=True)
target = ModelProfile(name="nova", model="bedrock/amazon.nova-pro-v1:0")

async def complete(messages, params):
    with counter.open("a") as out:
        out.write("call\\n")
    await asyncio.sleep(1.0)
    text = json.dumps({"system": None, "prompt": "Q: {{question}}"})
    return Completion(text, "openai/smollm2", 1, 1, False, None, 1.0, 0.0, 0, False, "stop")

async def main():
    print("ready", flush=True)
    while not go.exists():
        await asyncio.sleep(0.01)
    result = await PromptOptimizer(store, optimizer).rewrite(template, target, complete)
    print(json.dumps({"status": result.status, "cached": result.cached,
                      "messages": result.messages}), flush=True)

asyncio.run(main())
"""


@pytest.mark.slow
def test_two_processes_sharing_the_store_make_one_call(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(_WORKER))
    counter, go = tmp_path / "calls.txt", tmp_path / "go"
    args = [str(tmp_path / "store.sqlite"), str(counter), str(go), json.dumps(TEMPLATE)]
    workers = [
        subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None
            assert worker.stdout.readline().strip() == "ready"
        go.touch()  # both are up: they race for the claim
        outputs = [worker.communicate(timeout=60)[0] for worker in workers]
    finally:
        for worker in workers:
            worker.kill()
    assert [worker.returncode for worker in workers] == [0, 0]
    results = [json.loads(output) for output in outputs]
    assert counter.read_text() == "call\n"
    assert sorted(result["cached"] for result in results) == [False, True]
    assert {result["status"] for result in results} == {"rewritten"}
    assert results[0]["messages"] == results[1]["messages"]


def _claim_stale(path: Path, age_s: float = 0.0) -> None:
    """Leave a pending claim in the store, as a worker that died during its call would."""
    store = RewriteStore(path)
    key = rewrite_key(OPTIMIZER.model, TARGET.model, TEMPLATE)
    claimed, _ = store.claim(key, "dead-worker", {"target": "nova", "template_hash": "x"}, 60)
    assert claimed
    store.close()


def test_a_stale_claim_is_taken_over(tmp_path: Path) -> None:
    _claim_stale(tmp_path / "store.sqlite")
    fake = FakeOptimizer(GOOD)
    optimizer = PromptOptimizer(tmp_path / "store.sqlite", OPTIMIZER, claim_timeout_s=0.3)
    started = time.monotonic()
    result = asyncio.run(optimizer.rewrite(TEMPLATE, TARGET, fake))
    optimizer.close()
    assert time.monotonic() - started >= 0.3  # it waited for the claim to go stale
    assert result.status == "rewritten" and not result.cached
    assert len(fake.calls) == 1


@pytest.mark.slow
def test_a_slow_owner_keeps_its_claim_fresh(tmp_path: Path) -> None:
    fake = FakeOptimizer(GOOD, delay=0.6)
    optimizer = PromptOptimizer(tmp_path / "store.sqlite", OPTIMIZER, claim_timeout_s=0.15)

    async def run_both() -> tuple[Rewrite, Rewrite]:
        first = asyncio.ensure_future(optimizer.rewrite(TEMPLATE, TARGET, fake))
        await asyncio.sleep(0.05)
        return await asyncio.gather(first, optimizer.rewrite(TEMPLATE, TARGET, fake))

    results = asyncio.run(run_both())
    optimizer.close()
    assert len(fake.calls) == 1  # the waiter never saw the claim go stale
    assert [result.cached for result in results] == [False, True]


def test_a_cancelled_owner_releases_its_claim(tmp_path: Path) -> None:
    hanging = FakeOptimizer(GOOD, delay=3600)
    answering = FakeOptimizer(GOOD)
    optimizer = PromptOptimizer(tmp_path / "store.sqlite", OPTIMIZER)

    async def run() -> Rewrite:
        owner = asyncio.ensure_future(optimizer.rewrite(TEMPLATE, TARGET, hanging))
        while not hanging.calls:
            await asyncio.sleep(0.01)
        waiter = asyncio.ensure_future(optimizer.rewrite(TEMPLATE, TARGET, answering))
        await asyncio.sleep(0.1)
        owner.cancel()
        # A hang guard, not a speed bound: waiting out the default claim timeout takes 360 s.
        return await asyncio.wait_for(waiter, 60)

    result = asyncio.run(run())
    optimizer.close()
    assert result.status == "rewritten" and not result.cached
    assert len(answering.calls) == 1


# -- the log ----------------------------------------------------------------------------------


def _log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_log_has_one_sorted_line_per_entry(tmp_path: Path) -> None:
    store = tmp_path / "state" / "store.sqlite"
    optimizer = PromptOptimizer(store, OPTIMIZER)
    lost = FakeOptimizer({"system": None, "prompt": "Answer briefly."})
    chat = (*TEMPLATE, {"role": "assistant", "content": "Paris"})

    async def run() -> None:
        await optimizer.rewrite(TEMPLATE, TARGET, FakeOptimizer(GOOD))
        await optimizer.rewrite(TEMPLATE, OTHER_TARGET, lost)
        await optimizer.rewrite(chat, TARGET, FakeOptimizer(GOOD))
        await optimizer.rewrite(chat, TARGET, FakeOptimizer(GOOD))  # the same entry again

    asyncio.run(run())
    optimizer.close()
    out = tmp_path / "results"
    path = write_log(store, out, redact=lambda entry: {**entry, "redacted": True})
    assert path == out / LOG_FILE
    entries = _log(path)
    assert [entry["target"] for entry in entries] == ["haiku", "nova", "nova"]
    assert entries[1]["template_hash"] < entries[2]["template_hash"]
    by_status = {entry["status"]: entry for entry in entries}
    assert set(by_status) == {"failed", "rewritten", "skipped"}
    done = by_status["rewritten"]
    assert done["original"] == list(TEMPLATE)
    assert done["rewritten"] == [
        {"role": "system", "content": GOOD["system"]},
        {"role": "user", "content": GOOD["prompt"]},
    ]
    assert (done["optimizer"], done["optimizer_model"]) == ("local/smollm2", "openai/smollm2")
    assert done["target_model"] == "bedrock/amazon.nova-pro-v1:0"
    assert (done["input_tokens"], done["output_tokens"], done["cost_usd"]) == (120, 40, 0.001)
    assert done["latency_s"] == 0.5 and done["response_cached"] is False
    assert done["started_at"].endswith("+00:00") and done["finished_at"]
    assert json.loads(done["reply"]) == GOOD
    failed = by_status["failed"]
    assert failed["rewritten"] is None and "lost {{question}}" in failed["reason"]
    skipped = by_status["skipped"]
    assert skipped["reason"] == "multi-turn chats are not rewritten"
    assert skipped["reply"] is None and skipped["input_tokens"] is None
    assert all(entry["redacted"] for entry in entries)
    assert sorted(p.name for p in out.iterdir()) == [LOG_FILE]  # no temporary file left


def test_the_log_shows_an_unfinished_claim_as_pending(tmp_path: Path) -> None:
    _claim_stale(tmp_path / "store.sqlite")
    path = write_log(tmp_path / "store.sqlite", tmp_path)
    assert path is not None
    (entry,) = _log(path)
    assert entry["status"] == "pending" and entry["rewritten"] is None


def test_no_log_without_entries(tmp_path: Path) -> None:
    assert write_log(tmp_path / "missing.sqlite", tmp_path / "out") is None
    empty = RewriteStore(tmp_path / "empty.sqlite")
    assert empty.rows() == []  # the file and its table exist, with nothing in them
    empty.close()
    assert write_log(tmp_path / "empty.sqlite", tmp_path / "out") is None
    assert not (tmp_path / "out").exists()
