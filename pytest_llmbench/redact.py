"""Keep secrets out of every file, log and report we write, and out of what models are sent.

A secret is the value of an environment variable that a profile names as its key variable, or
whose name looks like a credential (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ...). Every run of
8 or more consecutive characters of a secret is replaced by ``[REDACTED:NAME]``, in any nested
record value, in whatever shape pytest or a report prints it:

- shortened with ``...`` (pytest's ``saferepr`` keeps a head and a tail: both go, with the
  ``...`` between them, even when each part alone is shorter than 8 characters);
- split across lines (a line break inside the value, with indentation, a ``-``/``+`` diff
  prefix, pytest's ``E`` or quotes closing and reopening the string);
- escaped: JSON (``\\u0041``, ``\\/``), ``repr`` (``\\x41``, ``\\\\``), URL (``%41``) and
  HTML/XML entities (``&#65;``), also nested up to three levels.

Secrets shorter than 8 characters, and values that are file paths (``*_CREDENTIALS`` often
names a file), are replaced only where they appear whole: their fragments are ordinary text.

The text is decoded once into a canonical form (escapes undone, line breaks dropped) that
remembers where each character came from; every 5-character piece of a secret starting at a
multiple of 4 is looked for there with ``str.find`` (any 8-character fragment holds one), a hit
is extended as far as the secret goes on both sides, and the original text of the run is
replaced.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# TOKEN only as a whole word at the end (GITHUB_TOKEN, HF_TOKEN), not MAX_TOKENS and the like.
_SECRET_NAME = re.compile(
    r"(API_?KEY|(^|_)TOKEN$|SECRET|PASSWORD|PASSWD|CREDENTIALS?|ACCESS_KEY|PRIVATE_KEY)",
    re.IGNORECASE,
)
#: Shorter values are too likely to occur in ordinary text to be replaced safely.
_MIN_SECRET_LENGTH = 6
#: The shortest run of a secret's characters that is a leak; shorter runs are ordinary text.
FRAGMENT_LENGTH = 8
#: Every run of 8 holds the 5 characters of the secret that start at some multiple of 4.
_PIECE, _STRIDE = 5, 4
#: pytest's elision between the head and the tail of a shortened repr (and the one-character one).
_ELLIPSES = ("...", "\u2026")
#: Each side of an elision must keep this much for a head...tail pair shorter than 8 per side.
_MIN_ELIDED_SIDE = 4
_MAX_DECODE_LEVELS = 3
_PATH_LIKE = re.compile(r"^(/|~|\.{1,2}[/\\]|[A-Za-z]:[/\\])")
#: ``scheme://user:password@``: the password of a URL (a Pushgateway's, a proxy's, an
#: ``api_base``'s), masked in every output as a secret no variable names.
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+@")

# The rest of a line break that may run through a value: indentation, pytest's ``E`` or a
# diff prefix, a quote reopening a string split in two.
_SPLIT = r"[ \t]*(?:[E>|][ \t]+)?(?:[-+?][ \t]+)?['\"]?"
# One escaped character, or such a line break (dropped). Every alternative starts with a fixed
# character, so that ``re`` skips the text between candidates at C speed.
_TOKEN = re.compile(
    r"\\(?:(?P<hex>u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{2})|(?P<escape>[\\/'\"])"
    r"|(?P<escaped_split>(?:r\\)?n" + _SPLIT + "))"
    r"|%(?P<percent>[0-9a-fA-F]{2})"
    r"|&(?P<entity>\#[0-9]{1,7};|\#[xX][0-9a-fA-F]{1,6};|amp;|lt;|gt;|quot;|apos;)"
    r"|'(?:\r?\n|\\r?\\n)"
    + _SPLIT
    + r"|\"(?:\r?\n|\\r?\\n)"
    + _SPLIT
    + r"|\r\n"
    + _SPLIT
    + r"|\n"
    + _SPLIT
)

#: Characters one of which every match of ``_TOKEN`` holds.
_TOKEN_STARTS = ("\\", "%", "&", "\n", "\r")


class _Layer:
    """One level of decoding: canonical text, and where each of its characters came from."""

    def __init__(self, text: str, matches: Iterable[re.Match[str]]) -> None:
        parts: list[str] = []
        # Pieces in canonical order: where each starts in the canonical and the original text,
        # and the original length of a decoded character (0: a run copied as it is).
        starts: list[int] = []
        pieces: list[tuple[int, int]] = []  # (original start, original length)
        size = pos = 0
        for match in matches:
            begin, finish = match.span()
            if begin > pos:
                starts.append(size)
                pieces.append((pos, 0))
                parts.append(text[pos:begin])
                size += begin - pos
            kind = match.lastgroup
            if kind is not None and kind != "escaped_split":  # else a line break: dropped
                starts.append(size)
                pieces.append((begin, finish - begin))
                parts.append(_decoded(kind, match.group(kind)))
                size += 1
            pos = finish
        if pos < len(text):
            starts.append(size)
            pieces.append((pos, 0))
            parts.append(text[pos:])
        self.text = "".join(parts)
        self._starts, self._pieces = starts, pieces

    def start(self, index: int) -> int:
        """Original offset of canonical character ``index``."""
        at = bisect_right(self._starts, index) - 1
        origin, length = self._pieces[at]
        return origin + (0 if length else index - self._starts[at])

    def end(self, index: int) -> int:
        """Original offset just past canonical character ``index - 1``."""
        at = bisect_right(self._starts, index - 1) - 1
        origin, length = self._pieces[at]
        return origin + (length or index - self._starts[at])


def _decoded(kind: str, group: str) -> str:
    if kind == "entity":
        return html.unescape(f"&{group}")
    if kind == "escape":
        return group
    return chr(min(int(group.lstrip("uUx"), 16), 0x10FFFF))  # hex, percent


def _decode(text: str) -> tuple[str, list[_Layer]]:
    """``text`` with escapes undone and line breaks dropped, and the layers that did it."""
    layers: list[_Layer] = []
    for _ in range(_MAX_DECODE_LEVELS):
        # Every token starts with, or holds, one of these: a scan for each is cheaper than the
        # pattern's search, which stops at every quote.
        if not any(start in text for start in _TOKEN_STARTS) or _TOKEN.search(text) is None:
            break
        layer = _Layer(text, _TOKEN.finditer(text))
        layers.append(layer)
        text = layer.text
    return text, layers


def _original_span(layers: list[_Layer], start: int, end: int) -> tuple[int, int]:
    for layer in reversed(layers):
        start, end = layer.start(start), layer.end(end)
    return start, end


@dataclass(frozen=True)
class _Run:
    """Canonical text ``[start, end)`` that is the secret's ``[first, last)``."""

    start: int
    end: int
    secret: int  # index into the redactor's fragment secrets
    first: int
    last: int


@dataclass(frozen=True)
class Redactor:
    """Replaces known secret values, and every fragment of them, with a marker naming their
    variable."""

    secrets: tuple[tuple[str, str], ...]  # (value, variable name), longest value first
    _whole: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)
    _canonical: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)
    _pieces: dict[str, tuple[tuple[int, int], ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        whole, canonical = [], []
        for secret, name in self.secrets:
            decoded = _decode(secret)[0]
            if len(decoded) < FRAGMENT_LENGTH or _PATH_LIKE.match(secret):
                whole.append((secret, name))
            else:
                canonical.append((decoded, name))
        pieces: dict[str, list[tuple[int, int]]] = {}
        for index, (secret, _) in enumerate(canonical):
            for offset in range(0, len(secret) - _PIECE + 1, _STRIDE):
                pieces.setdefault(secret[offset : offset + _PIECE], []).append((index, offset))
        object.__setattr__(self, "_whole", tuple(whole))
        object.__setattr__(self, "_canonical", tuple(canonical))
        object.__setattr__(self, "_pieces", {k: tuple(v) for k, v in pieces.items()})

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], key_vars: Iterable[str] = ()) -> Redactor:
        """Collect secrets from ``environ``: the named key variables and credential-like names."""
        names = set(key_vars) | {name for name in environ if _SECRET_NAME.search(name)}
        pairs = {
            environ[name]: name
            for name in sorted(names)
            if len(environ.get(name, "")) >= _MIN_SECRET_LENGTH
        }
        ordered = sorted(pairs.items(), key=lambda pair: -len(pair[0]))
        return cls(tuple(ordered))

    def text(self, value: str) -> str:
        """``value`` with every secret and fragment replaced, and the password of any URL
        (``scheme://user:password@host``) masked; ``value`` itself when nothing is."""
        value = self._known(value)
        if "@" in value and "://" in value:
            value = _URL_PASSWORD.sub(r"\1***@", value)
        return value

    def _known(self, value: str) -> str:
        """``value`` with every known secret and fragment of one replaced."""
        if self._canonical:
            value = self._fragments(value)
        for secret, name in self._whole:
            if secret in value:
                value = value.replace(secret, f"[REDACTED:{name}]")
        return value

    def value(self, value: Any) -> Any:
        """Redact strings anywhere inside dicts (keys too), lists and tuples: ``value`` itself
        when nothing in it is, else a copy (tuples become lists)."""
        # One scan of all the text; most records hold no secret, and are returned as they are.
        if self.text(joined := _all_text(value)) is joined:
            return value
        return _rebuild(value, self.text)

    def messages(self, messages: Sequence[dict[str, Any]]) -> Sequence[dict[str, Any]]:
        """Messages about to be sent to a model, redacted: ``messages`` itself when clean."""
        # Known secrets only: a URL written in a prompt is the user's to send as it is.
        if self._known(joined := _all_text(messages)) is joined:
            return messages
        return tuple(_rebuild(message, self._known) for message in messages)

    def _fragments(self, value: str) -> str:
        canonical, layers = _decode(value)
        runs = self._runs(canonical)
        if not runs:
            return value
        parts: list[str] = []
        pos = 0
        for run in self._joined(canonical, runs):
            start, end = _original_span(layers, run.start, run.end)
            parts += [value[pos:start], f"[REDACTED:{self._canonical[run.secret][1]}]"]
            pos = end
        parts.append(value[pos:])
        return "".join(parts)

    def _runs(self, canonical: str) -> list[_Run]:
        """Every maximal run of 8 or more characters of a secret, and head...tail pairs."""
        found: list[_Run] = []
        for piece, places in self._pieces.items():
            at = canonical.find(piece)
            while at != -1:
                for index, offset in places:
                    if not any(_covers(run, index, at, offset) for run in found):
                        run = _extend(canonical, at, self._canonical[index][0], index, offset)
                        if run.end - run.start >= FRAGMENT_LENGTH:
                            found.append(run)
                at = canonical.find(piece, at + 1)
        if any(ellipsis in canonical for ellipsis in _ELLIPSES):
            found += self._elided_pairs(canonical)
        return found

    def _elided_pairs(self, canonical: str) -> list[_Run]:
        """A head and a tail of one secret around an elision, each too short to count alone."""
        pairs = []
        for ellipsis in _ELLIPSES:
            at = canonical.find(ellipsis)
            while at != -1:
                after = at + len(ellipsis)
                for index, (secret, _) in enumerate(self._canonical):
                    head = _common_suffix(canonical[max(0, at - len(secret)) : at], secret)
                    tail = _common_prefix_of_suffix(canonical[after : after + len(secret)], secret)
                    if min(head, tail) >= _MIN_ELIDED_SIDE and head + tail >= FRAGMENT_LENGTH:
                        pairs.append(_Run(at - head, after + tail, index, 0, len(secret)))
                at = canonical.find(ellipsis, after)
        return pairs

    def _joined(self, canonical: str, runs: list[_Run]) -> list[_Run]:
        """Runs in order, overlapping ones merged, each with the elided rest of its secret."""
        merged: list[_Run] = []
        grown = [self._with_elided(canonical, run) for run in runs]
        for run in sorted(grown, key=lambda r: (r.start, -r.end)):
            if merged and run.start <= merged[-1].end:
                last = merged[-1]
                if run.end > last.end:
                    merged[-1] = _Run(last.start, run.end, last.secret, last.first, run.last)
            else:
                merged.append(run)
        return merged

    def _with_elided(self, canonical: str, run: _Run) -> _Run:
        """``run`` grown over an elision next to it and the head or tail of its secret there."""
        secret = self._canonical[run.secret][0]
        start, end = run.start, run.end
        for ellipsis in _ELLIPSES:
            if canonical.startswith(ellipsis, end):
                rest = end + len(ellipsis)
                tail = _common_prefix_of_suffix(canonical[rest : rest + len(secret)], secret)
                if tail and len(secret) - tail >= run.last:
                    end += len(ellipsis) + tail
            if canonical.endswith(ellipsis, 0, start):
                before = start - len(ellipsis)
                head = _common_suffix(canonical[max(0, before - len(secret)) : before], secret)
                if head and head <= run.first:
                    start -= len(ellipsis) + head
        return _Run(start, end, run.secret, run.first, run.last)


def _extend(canonical: str, at: int, secret: str, index: int, offset: int) -> _Run:
    """The run of ``secret`` through its ``offset`` placed at canonical ``at``, made maximal."""
    start, first = at, offset
    while start > 0 and first > 0 and canonical[start - 1] == secret[first - 1]:
        start, first = start - 1, first - 1
    end, last = at + _PIECE, offset + _PIECE
    while end < len(canonical) and last < len(secret) and canonical[end] == secret[last]:
        end, last = end + 1, last + 1
    return _Run(start, end, index, first, last)


def _covers(run: _Run, index: int, at: int, offset: int) -> bool:
    """``run`` already holds the piece of secret ``index`` at ``offset`` found at ``at``."""
    return (
        run.secret == index and run.start - run.first == at - offset and run.start <= at < run.end
    )


def _common_suffix(text: str, secret: str) -> int:
    """Length of the longest head of ``secret`` that ``text`` ends with."""
    for size in range(min(len(text), len(secret) - 1), 0, -1):
        if text.endswith(secret[:size]):
            return size
    return 0


def _common_prefix_of_suffix(text: str, secret: str) -> int:
    """Length of the longest tail of ``secret`` that ``text`` starts with."""
    for size in range(min(len(text), len(secret) - 1), 0, -1):
        if text.startswith(secret[-size:]):
            return size
    return 0


def _all_text(value: Any) -> str:
    """Every string inside ``value``, joined by NULs: one text for the check that nothing in
    it needs redacting (a hit is then redacted string by string)."""
    return "\0".join(_strings(value))


def _strings(value: Any) -> list[str]:
    """Every string inside ``value`` (dict keys too), each container visited once: a value that
    holds itself (a YAML alias that refers to itself) is walked without recursion or end."""
    strings: list[str] = []
    seen: set[int] = set()
    stack = [value]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is str:
            strings.append(node)
        elif kind is dict or (kind is not list and kind is not tuple and isinstance(node, Mapping)):
            if id(node) not in seen:
                seen.add(id(node))
                for key, item in node.items():
                    stack.append(key)
                    stack.append(item)
        elif kind is list or kind is tuple or isinstance(node, (list, tuple)):
            if id(node) not in seen:
                seen.add(id(node))
                stack.extend(node)
        elif isinstance(node, str):  # a str subclass
            strings.append(node)
    return strings


def _rebuild(value: Any, text: Callable[[str], str]) -> Any:
    """``value`` with ``text`` applied to every string (keys too), containers copied (tuples
    become lists); a container met again (shared, or a cycle) maps to its one copy."""
    copies: dict[int, Any] = {}

    def copy(node: Any) -> Any:
        if isinstance(node, str):
            return text(node)
        if not isinstance(node, (Mapping, list, tuple)):
            return node
        done = copies.get(id(node))
        if done is not None:
            return done
        if isinstance(node, Mapping):
            new: dict[Any, Any] = {}
            copies[id(node)] = new
            pending.append((node, new))
            return new
        new_list: list[Any] = []
        copies[id(node)] = new_list
        pending.append((node, new_list))
        return new_list

    pending: list[tuple[Any, Any]] = []
    top = copy(value)
    while pending:
        node, new = pending.pop()
        if isinstance(new, dict):
            for key, item in node.items():
                new[copy(key)] = copy(item)
        else:
            new.extend(copy(item) for item in node)
    return top
