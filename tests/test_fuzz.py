"""A seeded fuzz test: a few hundred malformed eval files, profile files, .env files, option
values, JSONL datasets, dataset factories, workdir file names and results folders
(tests/fuzzing.py) each end as a clean error or are accepted, within seconds, and never as a
traceback, an INTERNALERROR or a hang; so does every input of the corpus of earlier findings,
with the message it must give. benchmarks/fuzz.py runs the long version, each input in its own
process (crashes included)."""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fuzzing import CORPUS, KEY_ENV, FuzzInput, inputs, pytest_args, write_input

from pytest_llmbench.models.profile_files import load_profiles
from pytest_llmbench.models.profiles import ProfileError
from pytest_llmbench.spec.load import load_spec
from pytest_llmbench.spec.resolved import EvalFileError

SEED, COUNT = 20261124, 300
#: Seconds one input may take before it counts as a hang.
HANG_S = 20
#: A frame of a traceback, as pytest prints one (``path.py:12: in function``).
FRAME = re.compile(r"\.py:\d+: in |Traceback \(most recent call last\)")


class Hang(Exception):
    """An input ran past :data:`HANG_S`."""


@contextmanager
def deadline() -> Iterator[None]:
    def expire(*_: Any) -> None:
        raise Hang

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(HANG_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def outcome(load: Callable[[], object], clean: type[Exception]) -> str:
    """``accepted``, ``clean`` (the loader's own error), ``hang`` or the exception's name."""
    try:
        with deadline():
            load()
    except clean:
        return "clean"
    except Hang:
        return "hang"
    except Exception as exc:  # a finding: the test names it
        return f"{type(exc).__name__}: {exc}"[:200]
    return "accepted"


ALL = list(inputs(SEED, COUNT))


def of_kind(*kinds: str) -> list[FuzzInput]:
    return [item for item in ALL if item.kind in kinds]


def test_the_inputs_are_seeded_and_varied() -> None:
    assert [item.data for item in inputs(SEED, 20)] == [item.data for item in ALL[:20]]
    kinds = {"eval", "profile", "env", "option", "dataset", "factory", "files", "results"}
    assert {item.kind for item in ALL} == kinds
    for kind in sorted(kinds):
        distinct = len({(item.option, item.data) for item in of_kind(kind)})
        if kind in ("option", "results", "factory"):  # a pick from short lists
            assert distinct >= 10, kind
        else:
            assert distinct > 0.6 * len(of_kind(kind)), kind
    texts = b"".join(item.data for item in of_kind("eval", "profile"))
    assert b"self: *p}" in texts and b"&c0 [[" in texts  # aliases: recursive, deep chains


def test_malformed_eval_files_are_clean_errors(tmp_path: Path) -> None:
    findings = []
    for item in of_kind("eval"):
        path = tmp_path / f"f{item.index}.eval.yaml"
        path.write_bytes(item.data)
        result = outcome(lambda path=path: load_spec(path), EvalFileError)
        if result not in ("clean", "accepted"):
            findings.append(f"{item.label()} -> {result}")
    assert findings == []


def test_malformed_profile_files_are_clean_errors(tmp_path: Path) -> None:
    findings = []
    for item in of_kind("profile"):
        path = tmp_path / f"p{item.index}.yaml"
        path.write_bytes(item.data)
        result = outcome(lambda path=path: load_profiles([path]), ProfileError)
        if result not in ("clean", "accepted"):
            findings.append(f"{item.label()} -> {result}")
    assert findings == []


@pytest.mark.parametrize("kind", ["dataset", "factory", "files"])
def test_datasets_factories_and_workdir_files_are_clean_errors(tmp_path: Path, kind: str) -> None:
    """Loaded in this process: a factory's sys.exit() or BaseException would end the test run,
    a row that holds itself or a name past the limits would be a traceback."""
    findings = []
    for item in of_kind(kind):
        write_input(item, tmp_path / f"i{item.index}")
        path = tmp_path / f"i{item.index}" / "fuzz.eval.yaml"
        result = outcome(lambda path=path: load_spec(path), EvalFileError)
        if result not in ("clean", "accepted"):
            findings.append(f"{item.label()} -> {result}")
    assert findings == []


@pytest.mark.parametrize(
    ("item", "expected", "status"), CORPUS, ids=[item.label()[:50] for item, *_ in CORPUS]
)
def test_the_corpus_of_findings_ends_in_its_clean_error(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    item: FuzzInput,
    expected: str,
    status: int,
) -> None:
    """Issue 25's hostile inputs, each as pytest gets it (run, when its trouble came after
    collection): the message it must give and its exit status (2: a collection error, 4: a
    usage error), no INTERNALERROR, no traceback."""
    monkeypatch.setenv(KEY_ENV, "sk-fuzz-0000000000")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with deadline():
        result = pytester.runpytest(*pytest_args(item, pytester.path / "case"))
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text
    assert not FRAME.search(text), text[-3000:]
    pytest.LineMatcher(text.splitlines()).fnmatch_lines([expected])
    assert result.ret == status


def test_a_collection_of_malformed_eval_files_has_no_traceback(
    pytester: pytest.Pytester,
) -> None:
    """Collection past the loader (items, plans, markers): each file collects or is one error."""
    for item in of_kind("eval"):
        pytester.path.joinpath(f"f{item.index:03d}.eval.yaml").write_bytes(item.data)
    with deadline():
        result = pytester.runpytest("-p", "no:cacheprovider", "--collect-only", "-q")
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text
    assert not FRAME.search(text), text[:3000]
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.INTERRUPTED)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["env", "option", "profile", "files", "results"])
def test_malformed_env_files_option_values_and_runs_are_clean_errors(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """Given to pytest as the long fuzzer gives them: profiles, workdir files and results
    folders run their items from the cache (records, workdirs and the folder are made)."""
    monkeypatch.setenv(KEY_ENV, "sk-fuzz-0000000000")
    findings = []
    for item in of_kind(kind):
        args = pytest_args(item, pytester.path / f"case{item.index}")
        try:
            with deadline():
                result = pytester.runpytest(*args)
        except Hang:
            findings.append(f"{item.label()} -> hang")
            continue
        text = result.stdout.str() + result.stderr.str()
        if "INTERNALERROR" in text or FRAME.search(text):
            findings.append(f"{item.label()} -> {text[-300:]}")
    assert findings == []
