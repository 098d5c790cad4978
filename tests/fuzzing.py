"""Seeded malformed inputs for the fuzz tests (tests/test_fuzz.py) and the long fuzzer
(benchmarks/fuzz.py): eval files, profile files, .env files and option values, each a mutation
of a valid seed with values known to break parsers (deep nesting, aliases, NUL, huge numbers,
pathological regexes, paths outside the project); and, since issue 25, the walkers of user data:
aliases inside their own anchor and deep through anchors, JSONL datasets (extra fields, typos of
case keys, deep values), dataset factories (that exit, raise BaseException, or make rows that
hold themselves or nest 10,000 deep), ``files:`` names at and past the filesystem's limits, and
results folders that cannot be made. :data:`CORPUS` holds the inputs that were findings.

Inputs of :data:`RUN_KINDS` run their items (``--cache=replay``: no call is made, each item is
an error record) so that what happens after collection is tried too: records, workdirs, the
results folder. Every input must end as a clean error (a located collection error, a usage
error, an item error) or be accepted; a traceback, an INTERNALERROR, a hang or a crash is a
finding.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

#: The kinds of input, in the order :func:`inputs` cycles through them.
KINDS = (
    "eval", "eval", "eval", "profile", "env", "option",
    "eval", "profile", "dataset", "factory", "files", "results",
)  # fmt: skip
#: Kinds whose items run (from the response cache only), not just collected.
RUN_KINDS = frozenset({"profile", "files", "results"})
#: The environment variable the seed profile reads its key from (set by the runners).
KEY_ENV = "FAKE_API_KEY"

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
#: Aliases inside their own anchor (a value that would hold itself), deep through a chain of
#: anchors, and a list anchor reused under itself: inserted whole, or as a value.
RECURSIVE_ALIASES = (
    "loop: &p {max_tokens: 5, self: *p}",
    "loop: &l [a, [b, *l]]",
    "loop: &m\n  k: 1\n  <<: *m",
    "loop: &q\n  - x\n  - y: {z: *q}",
    "loop: &r [&r [1], *r]",  # no recursion: the alias names the inner (closed) anchor
)
#: Names of files, folders and options at and past the filesystem's limits (255 bytes a name,
#: 4,096 a path), in ASCII and in 2- and 3-byte UTF-8.
LONG_NAMES = (
    "n" * 254, "n" * 255, "n" * 256, "n" * 300, "é" * 127, "é" * 128, "€" * 85, "€" * 86,
    "/".join(["d" * 250] * 12), "/".join(["d" * 255] * 16), "/".join(["d" * 200] * 25),
    "x/" * 1500 + "f", "a" * 4095, "a" * 4096, "a" * 10_000,
)  # fmt: skip


def alias_chain(depth: int, anchors: int) -> str:
    """Anchors ``depth`` levels deep, each around an alias of the one before: a value
    ``depth * anchors`` levels deep from a text that nests ``depth``."""
    opening, closing = "[" * depth, "]" * depth
    first = f"chain0: &c0 {opening}x{closing}\n"
    return first + "".join(
        f"chain{i}: &c{i} {opening}*c{i - 1}{closing}\n" for i in range(1, anchors)
    )


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

    @property
    def runs(self) -> bool:
        """Whether its items run (from the cache), not only collected."""
        return self.kind in RUN_KINDS

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
        elif kind in _MAKERS:
            yield FuzzInput(index, kind, _MAKERS[kind](rng).encode("utf-8", "surrogatepass"))
        else:
            seed_text = {"eval": rng.choice(EVAL_SEEDS), "profile": PROFILE_SEED, "env": ENV_SEED}
            yield FuzzInput(index, kind, mutate(seed_text[kind], rng))


def mutate(text: str, rng: random.Random) -> bytes:
    """``text`` after one to three random mutations, as bytes (some are not UTF-8)."""
    for _ in range(rng.randint(1, 3)):
        if not text:  # truncated to nothing: no line or character left to change
            break
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


def _recursive_alias(text: str, rng: random.Random) -> str:
    """A value that holds itself, as a line of its own or as the value of a line."""
    if rng.random() < 0.5:
        return text + rng.choice(RECURSIVE_ALIASES) + "\n"
    lines = text.splitlines(keepends=True)
    index = rng.randrange(len(lines))
    head, sep, _ = lines[index].partition(": ")
    value = rng.choice(("&p {max_tokens: 5, self: *p}", "&p [1, *p]", "&p {a: [{b: *p}]}"))
    lines[index] = f"{head}{sep or ': '}{value}\n"
    return "".join(lines)


def _deep_alias(text: str, rng: random.Random) -> str:
    """A chain of anchors that nests far deeper than the text does, then used as a value."""
    depth, anchors = rng.choice(((40, 2), (60, 60), (63, 2), (30, 100), (2, 400), (10, 40)))
    lines = text.splitlines(keepends=True)
    index = rng.randrange(len(lines))
    head, sep, _ = lines[index].partition(": ")
    lines[index] = f"{head}{sep or ': '}*c{anchors - 1}\n"
    return alias_chain(depth, anchors) + "".join(lines)


_MUTATIONS: tuple[Callable[[str, random.Random], str], ...] = (
    _replace_value,
    _replace_value,
    _insert_line,
    _drop_or_repeat_line,
    _flip_characters,
    _truncate,
    _append_document,
    _recursive_alias,
    _deep_alias,
)


# -- datasets, factories, workdir files and results folders --------------------------------------

#: The eval file of ``dataset`` inputs (its rows in data.jsonl) and of ``factory`` inputs
#: (``fuzzfactory:rows`` in the module the input is).
DATASET_EVAL = 'dataset: data.jsonl\nprompt: "Q: {{q}}"\nassert: [contains]\n'
FACTORY_EVAL = 'dataset: {factory: "%s:rows"}\nprompt: "Q: {{q}}"\nassert: [contains]\n'
#: Keys a dataset row may carry: case keys, honest metadata, typos of case keys.
ROW_KEYS = (
    "q", "expected", "id", "tags", "vars", "assert", "threshold", "country", "source", "idx",
    "answers", "labels", "meta", "asert", "expcted", "promt", "thresold", "judge_metric",
    "choices", "answer", "images",
)  # fmt: skip
#: JSON values of row cells: deep, huge, odd types, templates, nothing.
ROW_VALUES = (
    '"France"', "3", "-1", "1e309", "9" * 5000, "null", "true", "[]", "{}", '"{{q}}"',
    '"{{ nope }}"', '["a", "b"]', '{"n": {"m": [1]}}', "[" * 100 + "]" * 100,
    "[" * 5000 + "]" * 5000, '"\\u0000"', '"' + "x" * 10_000 + '"', '{"vars": {"q": 1}}',
)  # fmt: skip


def _dataset(rng: random.Random) -> str:
    """A JSONL dataset of a few rows, each with extra, typo'd or odd keys and values."""
    lines = []
    for number in range(rng.randint(1, 4)):
        cells = [f'"q": "question {number}"', f'"expected": "answer {number}"']
        for _ in range(rng.randint(0, 3)):
            cells.append(f'"{rng.choice(ROW_KEYS)}": {rng.choice(ROW_VALUES)}')
        lines.append("{" + ", ".join(cells) + "}")
    if rng.random() < 0.2:
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(("[1]", "{", "nope", "", "{}")))
    return "\n".join(lines) + "\n"


#: Bodies of a ``rows()`` factory: what a user's Python may do.
FACTORY_BODIES = (
    "    sys.exit(3)",
    "    sys.exit('no rows today')",
    "    raise SystemExit",
    "    raise Stop('a BaseException of its own')",
    "    raise GeneratorExit",
    "    yield {'q': 'fine'}\n    sys.exit(1)",
    "    yield {'q': 'fine'}\n    raise Stop('midway')",
    "    row = {'q': 'loop', 'vars': {}}\n    row['vars']['self'] = row\n    return [row]",
    "    row = {'q': 'loop'}\n    row['q2'] = row\n    return [row]",
    "    value = []\n    for _ in range(10_000):\n        value = [value]\n    return [{'q': value}]",
    "    return [{'q': {'when': {1, 2}}}]",
    "    return [{'q': b'bytes'}]",
    "    return [{'q': 'fine', 'country': 'France'}, {'q': 'x', 'asert': ['contains']}]",
    "    return 'not rows'",
    "    return [3]",
    "    return iter(Loop())",
    "    return [{'q': 'fine'}]",
)
FACTORY_MODULE = """\
import sys


class Stop(BaseException):
    pass


class Loop(list):
    def __iter__(self):
        yield {"q": "fine"}
        raise Stop("in __iter__")


@AT_IMPORT@
def rows():
@BODY@
"""


def factory_module(body: str, at_import: str = "") -> str:
    """The source of a factory module whose ``rows()`` is ``body``."""
    return FACTORY_MODULE.replace("@AT_IMPORT@", at_import).replace("@BODY@", body)


def _factory(rng: random.Random) -> str:
    at_import = "sys.exit('at import')" if rng.random() < 0.1 else ""
    return factory_module(rng.choice(FACTORY_BODIES), at_import)


#: Eval files that seed a workdir: a plain case and an agent (whose workdir is made ahead).
FILES_SEEDS = (
    "cases:\n  - id: w\n    prompt: hi\n    expected: x\n    assert: [contains]\n    files:\n",
    "kind: agent\ntools: [read_file]\ncases:\n  - id: w\n    prompt: read\n    assert: "
    "[{type: file-exists, value: out.txt}]\n    files:\n",
)


def _files(rng: random.Random) -> str:
    """A ``files:`` mapping of names at and past the limits (and a few other bad names)."""
    names = [rng.choice((*LONG_NAMES, "ok.txt", "../out", "/abs", "", ".", "a\x00b", "d/"))]
    if rng.random() < 0.3:
        names.append(rng.choice(LONG_NAMES))
    entries = "".join(f'      ? "{name}"\n      : content\n' for name in names)
    return rng.choice(FILES_SEEDS) + entries


#: ``--results-dir`` values that cannot be made (and a few that can); ``taken`` is a file.
RESULTS_DIRS = (
    "/proc/llmbench-results", "/proc/self/no/such", "/sys/llmbench", "/dev/null",
    "/dev/null/sub", "taken", "taken/sub", "n" * 255, "n" * 256, "n" * 300, "é" * 128,
    "/".join(["d" * 200] * 25), "new/deep/out", "out", ".", "~", "-", "nested/" * 100 + "x",
)  # fmt: skip


def _results(rng: random.Random) -> str:
    return rng.choice(RESULTS_DIRS)


_MAKERS: dict[str, Callable[[random.Random], str]] = {
    "dataset": _dataset,
    "factory": _factory,
    "files": _files,
    "results": _results,
}


def write_input(item: FuzzInput, folder: Path) -> list[str]:
    """Write ``item`` into ``folder`` (a project with one good eval file) and return the pytest
    arguments that make a collection read it (or a run, for :data:`RUN_KINDS`: from the cache
    only, results in ``out``)."""
    folder.mkdir(parents=True, exist_ok=True)
    good = folder / "good.eval.yaml"
    good.write_text("cases:\n  - {id: a, prompt: hi, expected: x, assert: [contains]}\n")
    run = ["--cache=replay", f"--results-dir={folder / 'out'}"] if item.runs else []
    if item.kind == "eval":
        (folder / "fuzz.eval.yaml").write_bytes(item.data)
        return [str(folder)]
    if item.kind == "profile":
        (folder / "profiles.yaml").write_bytes(item.data)
        return [*run, f"--profiles={folder / 'profiles.yaml'}", "--models=fast", str(good)]
    if item.kind == "env":
        (folder / "fuzz.env").write_bytes(item.data)
        return [f"--env-file={folder / 'fuzz.env'}", str(good)]
    if item.kind == "dataset":
        (folder / "data.jsonl").write_bytes(item.data)
        (folder / "fuzz.eval.yaml").write_text(DATASET_EVAL)
        return [str(folder / "fuzz.eval.yaml")]
    if item.kind == "factory":
        module = f"fuzzfactory{item.index}"  # a name of its own: imports are cached
        (folder / f"{module}.py").write_bytes(item.data)
        (folder / "fuzz.eval.yaml").write_text(FACTORY_EVAL % module)
        return [str(folder / "fuzz.eval.yaml")]
    if item.kind == "files":
        (folder / "fuzz.eval.yaml").write_bytes(item.data)
        return [*run, str(folder / "fuzz.eval.yaml")]
    value = item.data.decode("utf-8", "surrogateescape")
    if item.kind == "results":
        (folder / "taken").write_text("a file where a folder would go")
        place = value if value.startswith("/") else str(folder / value)
        return ["--cache=replay", f"--results-dir={place}", str(good)]
    return [f"{item.option}={value}", str(good)]


# -- the corpus: inputs that were findings --------------------------------------------------------

_GOOD_CASE = "cases:\n  - {id: a, prompt: hi, expected: x, assert: [contains]}\n"
_LOOPING_PROFILE = """\
models:
  fast:
    model: openai/gpt-4o-mini
    api_base: http://127.0.0.1:9/v1
    api_key_env: FAKE_API_KEY
    params: &p {max_tokens: 5, self: *p}
"""
_PLAIN_FILES, _AGENT_FILES = FILES_SEEDS
_FACTORY_EXITS = factory_module("    sys.exit(3)")
_FACTORY_STOPS = factory_module("    raise Stop('not an Exception')")
_FACTORY_EXITS_AT_IMPORT = factory_module("    return []", "sys.exit('at import')")
_FACTORY_LOOPS = factory_module(FACTORY_BODIES[7])
_FACTORY_DEEP = factory_module(FACTORY_BODIES[9])
_PAST_PATH_MAX = "/".join(["d" * 200] * 25)

#: (kind, input, option, a line the run must print (fnmatch), its exit status): issue 25's
#: findings and their neighbours. Each was an INTERNALERROR, a traceback or a wrong refusal.
_CORPUS: tuple[tuple[str, str, str | None, str, int], ...] = (
    ("profile", _LOOPING_PROFILE, None,
     "ERROR: llmbench: */profiles.yaml:6: invalid YAML: recursive alias: *p is inside the value &p*", 4),
    ("eval", "model_params: &p {max_tokens: 5, self: *p}\n" + _GOOD_CASE, None,
     "*fuzz.eval.yaml:1: invalid YAML: recursive alias: *p is inside the value &p names*", 2),
    ("eval", alias_chain(40, 60) + _GOOD_CASE, None,
     "*fuzz.eval.yaml:2: invalid YAML: nested more than 64 levels deep through *c0", 2),
    ("files", _PLAIN_FILES + f'      ? "{"n" * 300}"\n      : x\n', None,
     "*fuzz.eval.yaml:6: cases.0.files: workdir file * has a name of 300 bytes; the filesystem "
     "allows 255", 2),
    ("files", _AGENT_FILES + f'      ? "{"/".join(["d" * 200] * 16)}"\n      : x\n', None,
     "*fuzz.eval.yaml:*: cases.0.files: workdir file * is a path of 3,215 bytes*", 2),
    ("factory", _FACTORY_EXITS, None,
     "*fuzz.eval.yaml:1: dataset: factory fuzzfactory*:rows raised SystemExit: 3", 2),
    ("factory", _FACTORY_STOPS, None,
     "*fuzz.eval.yaml:1: dataset: factory fuzzfactory*:rows raised Stop: not an Exception", 2),
    ("factory", _FACTORY_EXITS_AT_IMPORT, None,
     "*fuzz.eval.yaml:1: dataset: factory fuzzfactory*:rows raised SystemExit: at import", 2),
    ("factory", _FACTORY_LOOPS, None,
     "*fuzz.eval.yaml:1: dataset: factory row 1: vars.self.vars: the value contains itself", 2),
    ("factory", _FACTORY_DEEP, None,
     "*fuzz.eval.yaml:1: dataset: factory row 1: q.0.0.0.0.0.0.0...: nested more than 64 levels*", 2),
    ("results", "/proc/llmbench-results", None,
     "ERROR: llmbench: --results-dir cannot be made: /proc/llmbench-results (No such file or "
     "directory)", 4),
    ("results", "taken/sub", None, "ERROR: llmbench: --results-dir is inside a file: */taken", 4),
    ("results", "n" * 300, None,
     "ERROR: llmbench: --results-dir cannot be made: *nnn (File name too long)", 4),
    ("results", _PAST_PATH_MAX, None,
     "ERROR: llmbench: --results-dir cannot be made: *ddd (File name too long)", 4),
    ("dataset", '{"q": "Capital?", "expected": "Paris", "country": "France", "source": "atlas"}\n',
     None, "1 test collected*", 0),
    ("dataset", '{"q": "a", "expected": "b"}\n{"q": "c", "expected": "d", "asert": ["contains"]}\n',
     None, "*data.jsonl:2: unknown key 'asert' (did you mean 'assert'?)*", 2),
    ("dataset", '{"q": ' + "[" * 100 + "]" * 100 + ', "expected": "x"}\n', None,
     "*data.jsonl:1: q.0.0.0.0.0.0.0...: nested more than 64 levels deep", 2),
)  # fmt: skip
#: Where the corpus's indices start: apart from those of :func:`inputs`.
CORPUS_START = 1_000_000
CORPUS: tuple[tuple[FuzzInput, str, int], ...] = tuple(
    (FuzzInput(CORPUS_START + n, kind, text.encode("utf-8"), option), expected, status)
    for n, (kind, text, option, expected, status) in enumerate(_CORPUS)
)


def pytest_args(item: FuzzInput, folder: Path) -> list[str]:
    """The whole pytest command line (after ``-m pytest``) of ``item`` written in ``folder``:
    a collection, or a run from the cache for :data:`RUN_KINDS`."""
    args = write_input(item, folder)
    mode = [] if item.runs else ["--collect-only", "-q"]
    return ["-p", "no:cacheprovider", *mode, *args]
