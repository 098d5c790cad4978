"""A provider batch API for the engine's tests: a :class:`~pytest_llmbench.models.BatchBackend`
whose batches live in a JSON file (shared by xdist workers and by a run killed and resumed),
with counters of every create and every line sent, and a script of how batches end.

The engine's batch path (engine/batching.py) is tested against it before the OpenAI-protocol
backend and its fake server endpoints exist; ``install(folder)`` in a project's conftest points
the engine's route at it in every process of the run.

Script (``script.json`` in the folder, all keys optional): ``hold`` (true: batches stay in
progress), ``polls`` (polls before a batch ends, default 1), ``status`` (how it ends:
``completed``, ``expired``, ``failed``, ``cancelled``), ``answer`` (how many lines of each batch
are answered when it ends other than completed), ``malformed`` (a prompt substring: that line's
output is not JSON), ``fail_polls`` (the first N polls raise), ``live`` (model names whose calls
stay live, with this reason).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_llmbench.models import BatchError, BatchLine, BatchState, CallTarget, Completion

STATE = "state.json"
SCRIPT = "script.json"


class FileBatches:
    """Batches kept in ``folder/state.json``."""

    name = "fakebatch"
    max_lines = 1000
    max_bytes = 100_000_000

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    # -- the protocol ------------------------------------------------------------------------
    async def create(self, lines: Sequence[BatchLine], metadata: Mapping[str, str]) -> str:
        script = self.script()
        if script.get("kill_before_create"):  # the run dies before the request leaves
            os.kill(os.getpid(), signal.SIGKILL)
        batch_id = self._created(lines, metadata)
        if script.get("kill_after_create"):  # the provider has it; the run never hears back
            os.kill(os.getpid(), signal.SIGKILL)
        return batch_id

    def _created(self, lines: Sequence[BatchLine], metadata: Mapping[str, str]) -> str:
        with self._state() as state:
            batch_id = f"batch_{len(state['batches']) + 1}"
            state["creates"] += 1
            for line in lines:
                state["sent"][line.custom_id] = state["sent"].get(line.custom_id, 0) + 1
            state["batches"][batch_id] = {
                "metadata": dict(metadata),
                "lines": {line.custom_id: _prompt(line.messages) for line in lines},
                "kind": lines[0].kind,
                "polls": 0,
                "created_at": time.time(),
                "status": "in_progress",
            }
        return batch_id

    async def find(self, input_sha256: str) -> str | None:
        with self._state() as state:
            state["finds"] += 1
            for batch_id, batch in state["batches"].items():
                if batch["metadata"].get("llmbench_input_sha256") == input_sha256:
                    return str(batch_id)
        return None

    async def poll(self, batch_id: str) -> BatchState:
        script = self.script()
        with self._state() as state:
            state["polls"] += 1
            if state["polls"] <= int(script.get("fail_polls", 0)):
                raise ConnectionError("fake: connection reset by peer")
            batch = state["batches"][batch_id]
            batch["polls"] += 1
            if batch["status"] == "in_progress" and not script.get("hold"):
                if batch["polls"] >= int(script.get("polls", 1)):
                    batch["status"] = script.get("status", "completed")
            total = len(batch["lines"])
            done = _answered(batch, script) if batch["status"] != "in_progress" else 0
            return BatchState(
                batch_id,
                batch["status"],
                batch["status"],
                total=total,
                done=done,
                failed=total - done if batch["status"] != "in_progress" else 0,
                created_at=batch["created_at"],
                errors=("fake: the input was refused",) if batch["status"] == "failed" else (),
            )

    async def results(self, state: BatchState, sent: Mapping[str, BatchLine]) -> dict[str, Any]:
        script = self.script()
        with self._state() as shared:
            shared["reads"] += 1
            batch = shared["batches"][state.batch_id]
        answered = list(batch["lines"])[: _answered(batch, script)]
        found: dict[str, Completion | BatchError] = {}
        for number, (custom_id, line) in enumerate(sent.items(), 1):
            prompt = batch["lines"].get(custom_id)
            if prompt is None:
                continue
            bad = script.get("malformed")
            if bad and bad in prompt:
                found[custom_id] = BatchError(
                    f"batch {state.batch_id}, output line {number}: not JSON"
                )
            elif custom_id in answered:
                found[custom_id] = _completion(line.target, prompt, state.batch_id)
            else:
                found[custom_id] = BatchError(
                    f"batch {state.batch_id}: {state.status} before call {custom_id} was answered"
                )
        return found

    async def cancel(self, batch_id: str) -> None:
        with self._state() as state:
            state["batches"][batch_id]["status"] = "cancelled"

    # -- for the tests -----------------------------------------------------------------------
    def script(self) -> dict[str, Any]:
        path = self.folder / SCRIPT
        return json.loads(path.read_text()) if path.exists() else {}

    def set_script(self, **script: Any) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / SCRIPT).write_text(json.dumps(script))

    def snapshot(self) -> dict[str, Any]:
        with self._state() as state:
            return json.loads(json.dumps(state))

    @contextlib.contextmanager
    def _state(self) -> Iterator[dict[str, Any]]:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            path = self.folder / STATE
            state = json.loads(path.read_text()) if path.exists() else _empty()
            yield state
            partial = path.with_suffix(".tmp")
            partial.write_text(json.dumps(state))
            partial.replace(path)


def _empty() -> dict[str, Any]:
    return {"batches": {}, "sent": {}, "creates": 0, "polls": 0, "reads": 0, "finds": 0}


def _answered(batch: Mapping[str, Any], script: Mapping[str, Any]) -> int:
    total = len(batch["lines"])
    if batch["status"] == "completed":
        return total
    if batch["status"] == "failed":
        return 0
    return min(total, int(script.get("answer", 0)))


def _prompt(messages: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(str(message.get("content")) for message in messages)


def reply(prompt: str) -> str:
    """The fake model's answer: a judge's verdict to a grading prompt, a capital else."""
    if "rubric" in prompt.lower():
        return '{"score": 0.9, "reason": "fake judge: fine"}'
    for country, capital in (("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome")):
        if country in prompt:
            return capital
    return "I do not know"


def _completion(target: CallTarget, prompt: str, batch_id: str) -> Completion:
    text = reply(prompt)
    return Completion(
        text=text,
        model_id=target.model_id,
        input_tokens=len(prompt.split()),
        output_tokens=len(text.split()),
        tokens_estimated=False,
        ttft_s=None,
        latency_s=0.0,
        cost_usd=0.0005,
        retries=0,
        streamed=False,
        finish_reason="stop",
        batched=True,
        batch_id=batch_id,
    )


def install(folder: Path) -> None:
    """Route every model's batchable calls of this process to the batches in ``folder``
    (models named in the script's ``live`` stay live, with the reason given there)."""
    from pytest_llmbench.engine import batching

    backend = FileBatches(folder)

    def route(target: CallTarget, kind: str) -> FileBatches | str:
        live = backend.script().get("live", {})
        if target.name in live:
            return f"{target.name}: live ({live[target.name]})"
        return backend

    batching.ROUTE_FOR_TESTS = route
