"""Secrets never reach a file, a report or the terminal; the Redactor's rules on their own."""

from __future__ import annotations

import json
from pathlib import Path

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest
from conftest import FAKE_KEY, FAKE_KEY_ENV, Bench, Rule

from pytest_llmbench.redact import Redactor

CASES = """
cases:
  - id: leaky
    prompt: Please leak the key
    expected: nothing
    assert: [contains]
  - id: fine
    prompt: What is the capital of France?
    expected: Paris
    assert: [contains]
"""

#: A plain test that prints the key and fails with it in the assertion message.
PLAIN_LEAK = f"""
import os

def test_prints_key(llm):
    key = os.environ["{FAKE_KEY_ENV}"]
    print("the key is", key)
    answer = llm.complete("What is the capital of France?")
    assert answer.text == key, f"answer differs from {{key}}"
"""


def _files_with_key(root: Path) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and FAKE_KEY.encode() in path.read_bytes():
            found.append(str(path.relative_to(root)))
    return found


@pytest.fixture
def leaky(bench: Bench) -> Bench:
    """A 401 that echoes the Bearer key, a passing case and a plain test that prints the key."""
    bench.server.add_rule(Rule(match="leak", status=401, echo_auth=True))
    bench.server.add_rule(Rule(match="France", reply="Paris."))
    bench.eval_file("secrets", CASES)
    bench.pytester.makepyfile(test_leak=PLAIN_LEAK)
    return bench


@pytest.mark.parametrize("workers", ["0", pytest.param("2", marks=pytest.mark.slow)])
def test_key_is_in_no_file_and_not_in_the_output(leaky: Bench, workers: str) -> None:
    args = (
        "-n", workers, "--models=fake", "-rA", "--html=report.html", "--self-contained-html",
        "--junitxml=junit.xml",
    )  # fmt: skip
    if workers == "0":
        result = leaky.run(*args)
    else:
        result = leaky.run_subprocess(*args)
    result.assert_outcomes(passed=1, failed=1, errors=1)
    root = leaky.pytester.path
    # The server did receive the key, and the error text did carry it, redacted.
    assert all(
        r.headers["authorization"] == f"Bearer {FAKE_KEY}" for r in leaky.server.chat_requests()
    )
    records = {r["case_id"]: r for r in leaky.records()}
    assert records["leaky"]["outcome"] == "error"
    assert "Authorization: Bearer [REDACTED" in records["leaky"]["error"]
    assert records["fine"]["outcome"] == "passed"
    assert f"[REDACTED:{FAKE_KEY_ENV}]" in records["test_prints_key"]["error"]
    for name in (
        "report.html",
        "junit.xml",
        "out/results.jsonl",
        "out/all_metrics.csv",
        "out/run.json",
        "out/leaderboard.csv",
        "out/fake/aggregate_metrics.csv",
    ):
        assert (root / name).is_file(), name
    assert "[REDACTED" in (root / "junit.xml").read_text()
    assert "[REDACTED" in (root / "report.html").read_text()
    output = result.stdout.str() + result.stderr.str()
    assert "Authorization: Bearer [REDACTED" in output
    assert "the key is [REDACTED" in output  # captured stdout of the plain test, shown by -rA
    assert FAKE_KEY not in output
    assert _files_with_key(root) == []


def test_other_secrets_in_a_provider_error_are_redacted_everywhere(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = "tok-proxy-7f3a9c1e55"
    monkeypatch.setenv("CORP_PROXY_TOKEN", other)
    bench.server.add_rule(Rule(status=403, error_message=f"proxy refused token {other}"))
    bench.eval_file("secrets", CASES)
    result = bench.run("--models=fake", "-k", "fine", "--junitxml=junit.xml")
    result.assert_outcomes(errors=1)
    output = result.stdout.str()
    assert "proxy refused token [REDACTED:CORP_PROXY_TOKEN]" in output
    assert other not in output
    (record,) = bench.records()
    assert record["error"].endswith("proxy refused token [REDACTED:CORP_PROXY_TOKEN]")
    assert not [
        p
        for p in bench.pytester.path.rglob("*")
        if p.is_file() and other.encode() in p.read_bytes()
    ]


def test_skip_reason_is_redacted_and_still_a_skip(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply="ok"))
    bench.pytester.makepyfile(
        test_skipper=f"""
        import os
        import pytest

        def test_skips(llm):
            llm.complete("hello")
            pytest.skip("no luck with " + os.environ["{FAKE_KEY_ENV}"])
        """
    )
    result = bench.run("--models=fake", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        [f"SKIPPED ?1? test_skipper.py:*: no luck with ?REDACTED:{FAKE_KEY_ENV}?"]
    )
    assert FAKE_KEY not in result.stdout.str()
    (record,) = bench.records()
    assert record["outcome"] == "skipped"


# -- Redactor ----------------------------------------------------------------------------------


def test_credential_like_names_are_secrets() -> None:
    environ = {
        "OPENAI_API_KEY": "sk-openai-123456",
        "ANTHROPIC_APIKEY": "sk-ant-123456",
        "GITHUB_TOKEN": "ghp_abcdef",
        "APP_SECRET": "s3cr3t-value",
        "DB_PASSWORD": "hunter2hunter2",
        "GCP_CREDENTIALS": "{json creds}",
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
        "aws_secret_access_key": "lowercase-secret",
        "HOME": "/home/someone",
        "EDITOR": "vim-editor",
    }
    redactor = Redactor.from_environ(environ)
    names = {name for _, name in redactor.secrets}
    assert names == set(environ) - {"HOME", "EDITOR"}
    text = " ".join(environ.values())
    cleaned = redactor.text(text)
    assert "/home/someone" in cleaned and "vim-editor" in cleaned
    for name, value in environ.items():
        if name not in ("HOME", "EDITOR"):
            assert value not in cleaned
            assert f"[REDACTED:{name}]" in cleaned


def test_named_key_variables_are_secrets_whatever_their_name() -> None:
    environ = {"MY_LLM_AUTH": "abcdefgh12", "OTHER_SETTING": "keep-this-one"}
    redactor = Redactor.from_environ(environ, key_vars=["MY_LLM_AUTH", "NOT_SET_AT_ALL"])
    assert redactor.secrets == (("abcdefgh12", "MY_LLM_AUTH"),)
    assert redactor.text("x abcdefgh12 keep-this-one") == "x [REDACTED:MY_LLM_AUTH] keep-this-one"


def test_short_values_are_not_secrets() -> None:
    redactor = Redactor.from_environ({"A_TOKEN": "12345", "B_TOKEN": "123456", "C_TOKEN": ""})
    assert redactor.secrets == (("123456", "B_TOKEN"),)
    assert redactor.text("12345 and 123456") == "12345 and [REDACTED:B_TOKEN]"


def test_nested_values_are_redacted_and_other_values_kept() -> None:
    redactor = Redactor.from_environ({"X_API_KEY": "topsecret99"})
    value = {
        "error": "bad key topsecret99",
        "messages": [{"role": "user", "content": "use topsecret99 twice: topsecret99"}],
        "pair": ("topsecret99", 3),
        "metrics": {"topsecret99": 1.0},
        "score": 0.5,
        "passed": True,
        "none": None,
    }
    cleaned = redactor.value(value)
    assert cleaned == {
        "error": "bad key [REDACTED:X_API_KEY]",
        "messages": [
            {"role": "user", "content": "use [REDACTED:X_API_KEY] twice: [REDACTED:X_API_KEY]"}
        ],
        "pair": ["[REDACTED:X_API_KEY]", 3],
        "metrics": {"[REDACTED:X_API_KEY]": 1.0},
        "score": 0.5,
        "passed": True,
        "none": None,
    }
    assert "topsecret99" not in json.dumps(cleaned)
    assert value["error"] == "bad key topsecret99"  # the input is not modified


def test_longest_secret_is_replaced_first() -> None:
    environ = {"SHORT_TOKEN": "abcdef", "LONG_TOKEN": "abcdef-0123456789"}
    redactor = Redactor.from_environ(environ)
    assert [name for _, name in redactor.secrets] == ["LONG_TOKEN", "SHORT_TOKEN"]
    assert (
        redactor.text("abcdef-0123456789 abcdef") == "[REDACTED:LONG_TOKEN] [REDACTED:SHORT_TOKEN]"
    )


def test_no_secrets_leaves_text_alone() -> None:
    redactor = Redactor.from_environ({"PATH": "/usr/bin:/bin"})
    assert redactor.secrets == ()
    assert redactor.text("/usr/bin:/bin") == "/usr/bin:/bin"


def test_token_limits_are_not_mistaken_for_credentials() -> None:
    environ = {
        "LLM_MAX_TOKENS": "100000",
        "MAX_TOKENS_PER_MIN": "2000000",
        "HF_TOKEN": "hf_abcdefgh",
    }
    redactor = Redactor.from_environ(environ)
    assert redactor.text("limit 100000 / 2000000") == "limit 100000 / 2000000"
    assert redactor.text("hf_abcdefgh") == "[REDACTED:HF_TOKEN]"
