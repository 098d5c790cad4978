"""A batch's lines in OpenAI's protocol: each call as one line of the input file, and the lines
of the output and error files read back into each call's answer or error. Pure: no I/O.

A call's line carries the body the live call would send (:func:`.openai_compatible.chat_body`,
not streamed), and its answer is read into a :class:`Completion` by the live call's own code
(:func:`.openai_compatible.reply_completion`, :func:`.openai_compatible.embedding_completion`),
so a batched answer differs from a live one only where it must: ``batched``, its batch id and
wait, no latency or TTFT of its own, the batch price.

Reading is strict, because an answer attached to the wrong call is the worst outcome: a line
that is not JSON, names no ``custom_id``, names one not sent, or is one of two lines for the
same ``custom_id`` (both are discarded: that call's error names the lines) never becomes an
answer; each error names the batch and the file's line. A call sent with no line in either
file gets its own error (:func:`collected`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..item_errors import BatchError
from .batch_backend import BatchLine, BatchResults
from .completion import Completion
from .openai_compatible import (
    AnswerError,
    chat_body,
    embedding_completion,
    read_whole,
    reply_completion,
)

if TYPE_CHECKING:
    from .routes import Endpoint

#: The endpoint (each line's ``url``) of a batch of each kind of call.
URLS: Mapping[str, str] = {"chat": "/v1/chat/completions", "embed": "/v1/embeddings"}
#: Fields of a live request that a batch line leaves out (a batch answers whole).
_LIVE_ONLY = ("stream", "stream_options")
#: The most lines a message names when it lists several.
_SHOWN = 5


class UnbatchableError(ValueError):
    """A call that a batch line cannot carry (headers of its own, a kind with no endpoint)."""


def url_of(kind: str) -> str:
    """The batch endpoint of a kind of call (``chat``, ``embed``)."""
    try:
        return URLS[kind]
    except KeyError:
        raise UnbatchableError(f"no batch endpoint for {kind!r} calls") from None


def texts_of(line: BatchLine) -> list[str]:
    """The texts an embedding call embeds: its messages' contents, as the live call sends."""
    return [str(message["content"]) for message in line.messages]


def line_body(line: BatchLine, model: str) -> dict[str, Any]:
    """The request body of ``line`` for ``model`` (the name the server knows): the live
    call's body, not streamed; :class:`UnbatchableError` when the call needs headers."""
    if line.kind == "embed":
        return {"model": model, "input": texts_of(line)}
    url_of(line.kind)
    body, headers = chat_body(line.target, model, line.messages, line.params)
    if headers:
        names = ", ".join(sorted(headers))
        raise UnbatchableError(
            f"{line.target.name}: its call sends headers ({names}), which a batch line cannot carry"
        )
    for key in _LIVE_ONLY:
        body.pop(key, None)
    return body


def input_line(line: BatchLine, endpoint: Endpoint) -> bytes:
    """``line`` as one line of a batch input file (JSON and a newline)."""
    entry = {
        "custom_id": line.custom_id,
        "method": "POST",
        "url": url_of(line.kind),
        "body": line_body(line, endpoint.model),
    }
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def input_sha256(data: bytes) -> str:
    """The hash of a batch input file, as its metadata's ``llmbench_input_sha256`` names it."""
    return hashlib.sha256(data).hexdigest()


def input_ids(data: bytes) -> list[str | None]:
    """The custom_id of each line of an input file, in order (None for a line without one):
    a failed batch's errors name input lines by number."""
    found: list[str | None] = []
    for raw in data.splitlines():
        if not raw.strip():
            continue
        try:
            entry = json.loads(raw)
        except ValueError:
            found.append(None)
            continue
        custom_id = entry.get("custom_id") if isinstance(entry, dict) else None
        found.append(custom_id if isinstance(custom_id, str) else None)
    return found


@dataclass
class FileAnswers:
    """What one output or error file says: each call's answer or error with the line that
    gave it, the lines of calls answered more than once, and the lines that belong to no
    call sent (each named)."""

    file: str
    answers: dict[str, tuple[int, Completion | BatchError]] = field(default_factory=dict)
    repeated: dict[str, list[int]] = field(default_factory=dict)
    stray: list[str] = field(default_factory=list)


def parse_output(
    batch_id: str,
    data: bytes,
    sent: Mapping[str, BatchLine],
    *,
    file: str = "output",
    created_at: float | None = None,
    now: float | None = None,
) -> FileAnswers:
    """Read a batch's ``file`` (``output`` or ``error``): each line's call and its answer or
    error. ``created_at`` (the batch's creation, Unix seconds) gives each answer its
    ``batch_wait_s``, up to ``now`` (the time it was read)."""
    read = FileAnswers(file)
    wait = (
        None if created_at is None else max(0.0, (time.time() if now is None else now) - created_at)
    )
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        where = f"batch {batch_id}, {file} file line {number}"
        try:
            entry = json.loads(raw)
        except ValueError as exc:
            read.stray.append(f"{where}: not JSON ({exc})")
            continue
        custom_id = entry.get("custom_id") if isinstance(entry, dict) else None
        if not isinstance(custom_id, str) or not custom_id:
            read.stray.append(f"{where}: no custom_id")
            continue
        if custom_id not in sent:
            read.stray.append(f"{where}: custom_id {custom_id} was not sent in this batch")
            continue
        if custom_id in read.answers or custom_id in read.repeated:
            first = read.answers.pop(custom_id, None)
            lines = read.repeated.setdefault(custom_id, [first[0]] if first else [])
            lines.append(number)
            continue
        answer = _answer(entry, sent[custom_id], where, batch_id, wait)
        read.answers[custom_id] = (number, answer)
    return read


def _answer(
    entry: dict[str, Any], line: BatchLine, where: str, batch_id: str, wait: float | None
) -> Completion | BatchError:
    """One line's call's answer, or its error naming ``where``."""
    response = entry.get("response")
    status = response.get("status_code") if isinstance(response, dict) else None
    body = response.get("body") if isinstance(response, dict) else None
    if status == 200 and entry.get("error") is None:
        try:
            if line.kind == "embed":
                texts = texts_of(line)
                return embedding_completion(
                    line.target, texts, body, 0.0, 0, batch=(batch_id, wait)
                )
            reply = read_whole(body)
        except (AnswerError, ValueError, TypeError, AttributeError) as exc:
            return BatchError(f"{where}: {exc}")
        return reply_completion(
            line.target, line.messages, reply, 0.0, 0, streamed=False, batch=(batch_id, wait)
        )
    error = entry.get("error")
    if isinstance(error, dict) and (error.get("code") or error.get("message")):
        return BatchError(f"{where}: {_said(error)}")
    if isinstance(status, int) and status >= 400:
        nested = body.get("error") if isinstance(body, dict) else None
        said = _said(nested) if isinstance(nested, dict) else json.dumps(body)[:200]
        return BatchError(f"{where}: HTTP {status}: {said}")
    if isinstance(status, int):
        return BatchError(f"{where}: HTTP {status} with no answer")
    return BatchError(f"{where}: neither a response nor an error")


def _said(error: Mapping[str, Any]) -> str:
    """An error object's words: ``code: message`` (its type when it has no code)."""
    code = error.get("code") or error.get("type")
    message = str(error.get("message") or "").strip()
    if code and message:
        return f"{code}: {message}"
    return str(code or message)


def collected(
    batch_id: str, status: str, sent: Mapping[str, BatchLine], files: Sequence[FileAnswers]
) -> BatchResults:
    """Each call of ``sent``, answered or not, from the batch's files read: a call answered by
    more than one line (in one file or across both) gets an error naming them all and none of
    their answers; a call with no line gets "batch <id>: no answer line for this call
    (<status>)", which also names the lines that belonged to no call."""
    places: dict[str, list[str]] = {}
    found: dict[str, Completion | BatchError] = {}
    for read in files:
        for custom_id, (number, answer) in read.answers.items():
            places.setdefault(custom_id, []).append(f"{read.file} file line {number}")
            found[custom_id] = answer
        for custom_id, numbers in read.repeated.items():
            places.setdefault(custom_id, []).extend(f"{read.file} file line {n}" for n in numbers)
    problems = tuple(problem for read in files for problem in read.stray)
    results = BatchResults()
    results.problems = problems
    for custom_id in sent:
        seen = places.get(custom_id, [])
        if len(seen) > 1:
            results[custom_id] = BatchError(
                f"batch {batch_id}: custom_id {custom_id} has {len(seen)} answer lines "
                f"({', '.join(seen)}): none is used"
            )
        elif custom_id in found:
            results[custom_id] = found[custom_id]
        else:
            results[custom_id] = BatchError(
                f"batch {batch_id}: no answer line for this call ({status}){_noted(problems)}"
            )
    return results


def _noted(problems: Sequence[str]) -> str:
    """The lines that belonged to no call, as a missing call's error mentions them."""
    if not problems:
        return ""
    shown = "; ".join(problems[:_SHOWN])
    more = f"; and {len(problems) - _SHOWN} more" if len(problems) > _SHOWN else ""
    return f"; lines the batch's files hold for no call sent: {shown}{more}"


def failed_results(
    batch_id: str,
    sent: Mapping[str, BatchLine],
    errors: Sequence[Mapping[str, Any]],
    order: Sequence[str | None] | None = None,
) -> BatchResults:
    """Each call's error when the batch failed as a whole (it was refused at validation):
    ``errors`` are the batch's ``errors.data`` (``code``, ``message``, ``line``: an input line,
    1-based). ``order``: the custom_id of each input line, which lets a call whose own line
    was refused be told so; every other call is given all the batch's errors."""
    by_line: dict[str, list[str]] = {}
    said = []
    for error in errors:
        number = error.get("line")
        text = _said(error) or "no reason given"
        if isinstance(number, int):
            text = f"input line {number}: {text}"
            if order is not None and 1 <= number <= len(order):
                custom_id = order[number - 1]
                if custom_id is not None:
                    by_line.setdefault(custom_id, []).append(text)
        said.append(text)
    shown = "; ".join(said[:_SHOWN]) or "no reason given"
    if len(said) > _SHOWN:
        shown += f"; and {len(said) - _SHOWN} more"
    results = BatchResults()
    for custom_id in sent:
        own = by_line.get(custom_id)
        reason = "; ".join(own) if own else shown
        results[custom_id] = BatchError(f"batch {batch_id} failed: {reason}")
    return results
