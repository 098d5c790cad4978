"""Seeded malformed inputs for the fuzz tests (tests/test_fuzz.py) and the long fuzzer
(benchmarks/fuzz.py): eval files, profile files, .env files and option values, each a mutation
of a valid seed with values known to break parsers (deep nesting, aliases, NUL, huge numbers,
pathological regexes, paths outside the project).

Every input must end as a clean error (a located collection error, a usage error, an item
error) or be accepted; a traceback, an INTERNALERROR, a hang or a crash is a finding.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

#: The kinds of input, in the order :func:`inputs` cycles through them.
KINDS = ("eval", "eval", "eval", "profile", "env", "option")

EVAL_SEEDS = (
    """\
description: Capitals
model_params: {temperature: 0, max_tokens: 16}
threshold: 0.5
system: Answer with one word.
tags: [geo]
cases:
  - id: france
    prompt: What is the capital of {{country}}?
    vars: {country: France}
    expected: Paris
    assert:
      - contains
      - {type: regex, value: "^[A-Z]"}
      - {type: numeric, value: 3, tolerance: 1, position: last}
  - id: japan
    messages:
      - {role: system, content: Be brief.}
      - {role: user, content: Capital of Japan?}
    expected: Tokyo
    assert: [{type: not-icontains, value: Kyoto, weight: 2}]
""",
    """\
kind: agent
tools: [read_file, write_file, list_dir]
max_turns: 4
limits: {seconds: 30, tokens: 2000}
cases:
  - id: write
    prompt: Write hello to out.txt
    files: {seed.txt: hello}
    assert:
      - {type: file-exists, value: out.txt}
      - {type: file-contains, path: out.txt, value: hello}
""",
    """\
prompts:
  - "{{q}} One word."
  - {name: long, prompt: "Explain {{q}}", system: Be thorough.}
cases:
  - {id: q1, vars: {q: "Capital of Peru?"}, expected: Lima, assert: [icontains]}
""",
)
PROFILE_SEED = """\
models:
  fast:
    model: openai/gpt-4o-mini
    api_base: http://127.0.0.1:9/v1
    api_key_env: FAKE_API_KEY
    rpm: 60
    tpm: 10000
    concurrency: 4
    cost_per_1k: {input: 0.001, output: 0.002}
    params: {temperature: 0}
    variants:
      cold: {params: {temperature: 0.0}}
sets:
  all: [fast_cold, '@more']
  more: [local/smollm2]
"""
ENV_SEED = "FAKE_API_KEY=sk-test-123\nOTHER='quoted value'\nexport THIRD=3\n"
OPTIONS = (
    "--rpm", "--tpm", "--max-cost", "--concurrency", "--repeat", "--request-timeout",
    "--connect-timeout", "--max-retries", "--min-pass-rate", "--temperature-variations",
    "--stream", "--cache", "--repeat-policy", "--errors-count-as", "--models", "--judges",
    "--results-dir", "--judge-metrics", "--optimize-prompts",
)  # fmt: skip
#: Values that broke parsers and numbers before: sizes, depths, encodings, special paths.
NASTY = (
    "", "~", "null", "nan", ".nan", "inf", "-.inf", "-1", "0", "1e309", "9" * 5000, "1e3",
    "\x00", "\x07", "\x1b[31m", "\ud800", "{{", "}}", "{{ nope }}", "[", "]", "{", ": :", "- -",
    "&a [x, x]", "*a", "*missing", "<<: *a", "!!python/object/apply:os.system ['true']",
    "!!binary AAAA", "a{4294967296}", "(a|aa)+$", "(" * 300, "[" * 2000, "'", '"', "\t",
    "../../etc/passwd", "/etc/shadow", "/dev/zero", "/proc/self/environ", "file:///etc/passwd",
    "@nope", "@", ",,,", "x" * 10_000, "é" * 50, "0x10", "yes", "2026-01-01", "3.10",
)  # fmt: skip
#: A billion-laughs document and a deeply nested one, inserted whole.
BOMB = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)
DEEP = "deep: " + "[" * 100_000 + "]" * 100_000 + "\n"


@dataclass(frozen=True)
class FuzzInput:
    """One malformed input: what it is for and its bytes (an option's value for ``option``)."""

    index: int
    kind: str  #: one of :data:`KINDS`
    data: bytes
    option: str | None = None  #: the option an ``option`` input gives a value to

    def label(self) -> str:
        """A short description for reports."""
        what = self.option or self.kind
        return f"#{self.index} {what}: {self.data[:60]!r}"


def inputs(seed: int, count: int) -> Iterator[FuzzInput]:
    """``count`` inputs, the same for the same ``seed``."""
    rng = random.Random(seed)
    for index in range(count):
        kind = KINDS[index % len(KINDS)]
        if kind == "option":
            option = rng.choice(OPTIONS)
            yield FuzzInput(index, kind, rng.choice(NASTY).encode("utf-8", "surrogatepass"), option)
        else:
            seed_text = {"eval": rng.choice(EVAL_SEEDS), "profile": PROFILE_SEED, "env": ENV_SEED}
            yield FuzzInput(index, kind, mutate(seed_text[kind], rng))


def mutate(text: str, rng: random.Random) -> bytes:
    """``text`` after one to three random mutations, as bytes (some are not UTF-8)."""
    for _ in range(rng.randint(1, 3)):
        text = rng.choice(_MUTATIONS)(text, rng)
    if rng.random() < 0.05:
        return text.encode("utf-8", "surrogatepass")[: rng.randint(0, len(text))] + b"\xff\xfe"
    return text.encode("utf-8", "surrogatepass")


def _replace_value(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True)
    index = rng.randrange(len(lines))
    head, sep, _ = lines[index].partition(": ")
    lines[index] = f"{head}{sep or ': '}{rng.choice(NASTY)}\n"
    return "".join(lines)


def _insert_line(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True)
    indent = " " * rng.choice((0, 2, 4, 6))
    lines.insert(rng.randrange(len(lines) + 1), f"{indent}{rng.choice(NASTY)}\n")
    return "".join(lines)


def _drop_or_repeat_line(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True)
    index = rng.randrange(len(lines))
    lines[index] = "" if rng.random() < 0.5 else lines[index] * rng.randint(2, 50)
    return "".join(lines)


def _flip_characters(text: str, rng: random.Random) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 5)):
        chars[rng.randrange(len(chars))] = rng.choice(":-[]{}&*!|>'\"#\t\n \x00")
    return "".join(chars)


def _truncate(text: str, rng: random.Random) -> str:
    return text[: rng.randrange(len(text))]


def _append_document(text: str, rng: random.Random) -> str:
    return text + rng.choice((BOMB, DEEP, "---\nsecond: doc\n", "cases: 3\n", "cases:\n" * 3))


_MUTATIONS: tuple[Callable[[str, random.Random], str], ...] = (
    _replace_value,
    _replace_value,
    _insert_line,
    _drop_or_repeat_line,
    _flip_characters,
    _truncate,
    _append_document,
)


def write_input(item: FuzzInput, folder: Path) -> list[str]:
    """Write ``item`` into ``folder`` (a project with one good eval file) and return the pytest
    arguments that make a collection read it."""
    folder.mkdir(parents=True, exist_ok=True)
    good = folder / "good.eval.yaml"
    good.write_text("cases:\n  - {id: a, prompt: hi, expected: x, assert: [contains]}\n")
    if item.kind == "eval":
        (folder / "fuzz.eval.yaml").write_bytes(item.data)
        return [str(folder)]
    if item.kind == "profile":
        (folder / "profiles.yaml").write_bytes(item.data)
        return [f"--profiles={folder / 'profiles.yaml'}", str(good)]
    if item.kind == "env":
        (folder / "fuzz.env").write_bytes(item.data)
        return [f"--env-file={folder / 'fuzz.env'}", str(good)]
    value = item.data.decode("utf-8", "surrogateescape")
    return [f"{item.option}={value}", str(good)]
