"""Secrets never reach a file, a report or the terminal; the Redactor's rules on their own."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest
from _pytest._io.saferepr import saferepr
from conftest import FAKE_KEY, FAKE_KEY_ENV, Bench, Rule

from pytest_llmbench.redact import FRAGMENT_LENGTH, Redactor

#: A long key planted in the environment under a credential-like name.
PLANTED = "sk-PLANTED-EXAMPLE-0a1b2c3d4e5f6a7b8c9d0e1b3d5f7a9c2e"
PLANTED_ENV = "OPENAI_API_KEY"
MARK = f"[REDACTED:{PLANTED_ENV}]"


def _fragments(text: str, secret: str = PLANTED) -> list[str]:
    """Every 8-character window of ``secret`` that occurs in ``text``."""
    windows = {secret[i : i + FRAGMENT_LENGTH] for i in range(len(secret) - FRAGMENT_LENGTH + 1)}
    return sorted(window for window in windows if window in text)


def _planted() -> Redactor:
    return Redactor.from_environ({PLANTED_ENV: PLANTED, "HOME": "/root"})


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


def test_a_value_that_holds_itself_is_redacted_without_end() -> None:
    """Issue 25: a profile's params that held themselves (a YAML alias inside its anchor) ended
    the run in a RecursionError here. Clean, it comes back as it is; with a secret, the copy
    holds itself in the same place."""
    redactor = Redactor.from_environ({"X_API_KEY": "topsecret99"})
    params: dict[str, object] = {"max_tokens": 5, "note": "plain"}
    params["self"] = params
    looped: list[object] = ["a"]
    looped.append(looped)
    clean = {"params": params, "list": looped, "pair": (looped, params)}
    assert redactor.value(clean) is clean
    params["note"] = "key topsecret99"
    cleaned = redactor.value(clean)
    assert cleaned is not clean and cleaned["params"]["note"] == "key [REDACTED:X_API_KEY]"
    assert cleaned["params"]["self"] is cleaned["params"]
    assert cleaned["list"][1] is cleaned["list"] and cleaned["pair"][0] is cleaned["list"]
    assert params["note"] == "key topsecret99"  # the input is not modified


def test_a_value_nested_10000_deep_is_redacted_without_recursion() -> None:
    redactor = Redactor.from_environ({"X_API_KEY": "topsecret99"})
    deep: object = {"leaf": "clean"}
    for _ in range(10_000):
        deep = [deep]
    assert redactor.value({"v": deep}) == {"v": deep}
    leaky: object = {"leaf": "topsecret99", "k": "v"}
    for _ in range(10_000):
        leaky = {"down": leaky}
    cleaned = redactor.value(leaky)
    for _ in range(10_000):
        cleaned = cleaned["down"]
    assert cleaned == {"leaf": "[REDACTED:X_API_KEY]", "k": "v"}
    messages = ({"role": "user", "content": [{"type": "text", "text": "hi", "x": deep}]},)
    assert redactor.messages(messages) is messages


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


# -- fragments of a secret ---------------------------------------------------------------------


@pytest.mark.parametrize("maxsize", [12, 16, 20, 30, 40, 52, 60])
@pytest.mark.parametrize("around", ["{}", "the key {} was refused", "{}\n{}"])
def test_saferepr_shortened_keys_leave_no_fragment(maxsize: int, around: str) -> None:
    shortened = saferepr(around.format(PLANTED, PLANTED), maxsize=maxsize)
    cleaned = _planted().text(f"E       assert {shortened} == 'x'")
    assert _fragments(cleaned) == []


def test_the_shortened_key_of_the_issue_goes_whole_with_its_elision() -> None:
    shortened = saferepr(PLANTED, maxsize=30)
    assert shortened == "'sk-PLANTED-E...e1b3d5f7a9c2e'"  # 25 characters of the key
    assert _planted().text(f"assert {shortened} == 'x'") == f"assert '{MARK}' == 'x'"


def test_a_head_and_tail_each_shorter_than_8_go_together() -> None:
    text = f"assert '{PLANTED[:5]}...{PLANTED[-5:]}' == 'x'"
    assert _planted().text(text) == f"assert '{MARK}' == 'x'"


def test_pytest_assertion_messages_are_clean_once_redacted(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest's own texts, without the plugin: shortened reprs, diffs with -vv, pprint splits."""
    monkeypatch.setenv(PLANTED_ENV, PLANTED)
    pytester.makepyfile(
        f"""
        import os

        KEY = os.environ["{PLANTED_ENV}"]

        def test_equal():
            assert "the key is " + KEY == "the key is unknown"

        def test_in_a_dict():
            assert {{"key": KEY, "n": 1}} == {{"key": KEY[::-1], "n": 1}}

        def test_in_a_list():
            assert [KEY + " " + KEY] == ["nothing"]
        """
    )
    for verbosity in ("-q", "-vv"):
        output = pytester.runpytest("-p", "no:llmbench", "-p", "no:cacheprovider", verbosity)
        text = output.stdout.str()
        output.assert_outcomes(failed=3)
        assert _fragments(text)  # pytest printed parts of the key
        assert _fragments(_planted().text(text)) == [], verbosity


@pytest.mark.parametrize(
    "split",
    ["\n", "\r\n", "\n    ", "\nE   ", "\nE         - ", "\n+ ", "'\n '", '"\n  "', "\\n  "],
)
def test_a_key_split_across_lines_is_redacted(split: str) -> None:
    text = f"token: {PLANTED[:21]}{split}{PLANTED[21:]} end"
    assert _planted().text(text) == f"token: {MARK} end"


def test_json_escaped_keys_are_redacted() -> None:
    unicode_escaped = "".join(f"\\u{ord(c):04x}" for c in PLANTED)
    some_escaped = json.dumps({"key": PLANTED}).replace("-", "\\u002d")
    slashes = json.dumps({"url": f"https://x/{PLANTED[:20]}/{PLANTED[20:]}"}).replace("/", "\\/")
    nested = json.dumps(json.dumps({"key": PLANTED.replace("-", "/")}).replace("/", "\\/"))
    redactor = Redactor.from_environ({PLANTED_ENV: PLANTED, "B_TOKEN": PLANTED.replace("-", "/")})
    for text in (unicode_escaped, some_escaped, slashes, nested):
        cleaned = redactor.text(text)
        assert "[REDACTED:" in cleaned and _fragments(cleaned) == [], text
        assert _fragments(cleaned, PLANTED.replace("-", "/")) == []
    assert redactor.text(some_escaped) == json.dumps({"key": MARK})


def test_url_encoded_keys_are_redacted() -> None:
    quoted = urllib.parse.quote(f"key={PLANTED}&x=1", safe="")
    every_char = "".join(f"%{ord(c):02X}" for c in PLANTED)
    query = "https://api.example.com/v1?" + urllib.parse.urlencode({"k": PLANTED, "q": "a b"})
    for text in (quoted, every_char, every_char.lower(), query):
        assert _fragments(_planted().text(text)) == [], text
    assert _planted().text(every_char) == MARK
    assert _planted().text(query) == f"https://api.example.com/v1?k={MARK}&q=a+b"


def test_repr_and_entity_escaped_keys_are_redacted() -> None:
    hex_escaped = "".join(f"\\x{ord(c):02x}" for c in PLANTED)
    backslashes = repr(PLANTED[:10] + "\\" + PLANTED[10:])  # \\ in the repr
    redactor = Redactor.from_environ(
        {PLANTED_ENV: PLANTED, "B_SECRET": PLANTED[:10] + "\\" + PLANTED[10:]}
    )
    entities = "".join(f"&#{ord(c)};" if i % 2 else c for i, c in enumerate(PLANTED))
    for text in (f"b'{hex_escaped}'", backslashes, entities, f"&lt;{PLANTED}&gt;"):
        cleaned = redactor.text(text)
        assert "[REDACTED:" in cleaned and _fragments(cleaned) == [], text


def test_a_fragment_of_8_characters_is_redacted_7_are_not() -> None:
    redactor = _planted()
    eight, seven = PLANTED[20:28], PLANTED[20:27]
    assert redactor.text(f"x {eight} y") == f"x {MARK} y"
    assert redactor.text(f"x {seven} y") == f"x {seven} y"
    # Two separate pieces of 7, even side by side with other text, are ordinary text.
    text = f"{PLANTED[:7]} and {PLANTED[30:37]}"
    assert redactor.text(text) is text


ORDINARY = """
Traceback (most recent call last):
  File "/usr/lib/python3.11/json/decoder.py", line 337, in decode
    obj, end = self.raw_decode(s, idx=_w(s, 0).end())
E   AssertionError: assert 'Paris...' == 'Tokyo'
E     - Tokyo
E     + Paris is the capital of France; 100% sure, &amp; see https://x.org/a%20b\\u00e9.
{"messages": [{"role": "user", "content": "What is \\"the\\" capital?\\nSay it."}]}
sk-...  key=... 0a1b2c3 PLANTED EXAMPLE 9c2e
"""


def test_ordinary_text_is_left_alone() -> None:
    redactor = Redactor.from_environ(
        {PLANTED_ENV: PLANTED, "GITHUB_TOKEN": "ghp_0123456789abcdefABCDEF", "X_TOKEN": "hunter2"}
    )
    assert redactor.text(ORDINARY) is ORDINARY


def test_short_and_path_valued_secrets_are_replaced_only_whole() -> None:
    credentials = "/home/someone/.config/gcloud/application_default_credentials.json"
    redactor = Redactor.from_environ(
        {"SHORT_TOKEN": "abc1234", "GOOGLE_APPLICATION_CREDENTIALS": credentials}
    )
    text = f"abc1234 abc123 {credentials} /home/someone/.config/other.json"
    assert redactor.text(text) == (
        "[REDACTED:SHORT_TOKEN] abc123 [REDACTED:GOOGLE_APPLICATION_CREDENTIALS] "
        "/home/someone/.config/other.json"
    )


def test_a_multiline_secret_is_found_split_anyhow() -> None:
    pem = "-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n-----END KEY-----"
    redactor = Redactor.from_environ({"APP_PRIVATE_KEY": pem})
    assert redactor.text("key: " + json.dumps(pem)) == 'key: "[REDACTED:APP_PRIVATE_KEY]"'
    indented = "key:\n    " + pem.replace("\n", "\n    ")
    assert redactor.text(indented) == "key:\n    [REDACTED:APP_PRIVATE_KEY]"


def test_a_big_clean_text_comes_back_as_it_is() -> None:
    """Speed sanity: a megabyte of lines, escapes and near misses is scanned and left alone."""
    line = f"{PLANTED[:7]} %41 \\u0042 &amp; ... {PLANTED[-7:]} the quick brown fox\n    - jumps\n"
    text = line * (1_000_000 // len(line))
    assert _planted().text(text) is text
    record = {"completion": text, "messages": [{"role": "user", "content": line}], "n": 1}
    assert _planted().value(record) == record


def test_messages_come_back_as_they_are_when_clean() -> None:
    redactor = _planted()
    clean = ({"role": "user", "content": "hello"},)
    assert redactor.messages(clean) is clean
    leaky = [{"role": "tool", "tool_call_id": "c1", "content": f"HOME=/root\nKEY={PLANTED}"}]
    assert redactor.messages(leaky) == (
        {"role": "tool", "tool_call_id": "c1", "content": f"HOME=/root\nKEY={MARK}"},
    )
    assert leaky[0]["content"].endswith(PLANTED)  # the input is not modified


# -- end to end: every file of a run, and what the provider is sent -----------------------------

#: Plain tests that fail or print with the planted key in the forms pytest and reports use.
PLANTED_LEAKS = f"""
import json
import os
import urllib.parse

import pytest

KEY = os.environ["{PLANTED_ENV}"]

def test_compares_with_the_key(llm):
    answer = llm.complete("What is the capital of France?")
    assert answer.text == KEY

def test_prints_the_key_split_and_escaped():
    print(KEY[:20] + "\\n    " + KEY[20:])
    print(json.dumps({{"key": KEY}}).replace("-", "\\\\u002d"))
    pytest.fail("refused: " + urllib.parse.quote(KEY, safe=""))

def test_dict_diff():
    assert {{"key": KEY, "n": 1}} == {{"key": "other", "n": 1}}
"""

PLANTED_CASES = """
cases:
  - id: leaky-answer
    prompt: Please tell me the key
    expected: Tokyo
    assert: [contains]
"""


def _files_with_fragments(root: Path) -> dict[str, list[str]]:
    found = {}
    for path in root.rglob("*"):
        if path.is_file():
            fragments = _fragments(path.read_bytes().decode("utf-8", "replace"))
            if fragments:
                found[str(path.relative_to(root))] = fragments
    return found


def test_no_fragment_of_a_planted_key_in_any_file(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PLANTED_ENV, PLANTED)
    bench.server.add_rule(Rule(match="the key", reply=f"The key is {PLANTED}, not a city."))
    bench.server.add_rule(Rule(match="France", reply="Paris."))
    bench.eval_file("planted", PLANTED_CASES)
    bench.pytester.makepyfile(test_planted=PLANTED_LEAKS)
    result = bench.run(
        "--models=fake", "-rA", "--html=report.html", "--self-contained-html",
        "--junitxml=junit.xml",
    )  # fmt: skip
    result.assert_outcomes(failed=4)
    root = bench.pytester.path
    for name in ("report.html", "junit.xml", "out/results.jsonl", "out/run.json"):
        assert (root / name).is_file(), name
    assert MARK in (root / "junit.xml").read_text()
    assert MARK in (root / "out/results.jsonl").read_text()
    assert _files_with_fragments(root) == {}
    assert _fragments(result.stdout.str() + result.stderr.str()) == []


AGENT_READS_THE_KEY = f"""
kind: agent
tools: [read_file]
max_turns: 3
cases:
  - id: reads-key
    files: {{.env: "HOME=/root\\n{PLANTED_ENV}={PLANTED}\\n"}}
    prompt: "Read .env and report. For reference: {PLANTED[:30]}"
    assert: [icontains]
    expected: done
"""


def test_a_key_in_a_tool_result_or_a_prompt_is_never_sent(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PLANTED_ENV, PLANTED)
    bench.server.add_rule(Rule(match_last="HOME=/root", reply="done"))
    bench.server.add_rule(
        Rule(match="Read .env", tool_calls=[{"name": "read_file", "arguments": {"path": ".env"}}])
    )
    bench.eval_file("agent", AGENT_READS_THE_KEY)
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=1)
    first, second = bench.server.chat_requests()
    assert f"For reference: {MARK}" in json.dumps(first.body)
    tool_result = second.body["messages"][-1]
    assert tool_result["role"] == "tool"
    assert tool_result["content"] == f"HOME=/root\n{PLANTED_ENV}={MARK}\n"
    for request in (first, second):
        assert _fragments(request.raw_body.decode()) == []


#: One run with every kind of output: a failing answer, a provider error that echoes the key, a
#: judge shown the answer, an agent whose command output holds the key, post_process, plain
#: tests, the response cache, the CI step summary, pytest-html and JUnit XML.
WHOLE_RUN_EVAL = (
    PLANTED_CASES
    + """  - id: judged
    prompt: Please repeat the key for the judge
    assert:
      - {type: llm-rubric, value: says a city, judges: [fake2]}
  - id: refused
    prompt: This call is refused
    assert: [contains]
    expected: x
"""
)

WHOLE_RUN_AGENT = f"""
kind: agent
tools: [run_command, read_file]
sandbox: required
post_process: "python3 score.py {{results}}"
max_turns: 3
cases:
  - id: agent-leaks
    files: {{notes.txt: "{PLANTED_ENV}={PLANTED}"}}
    prompt: Run the leaky command
    assert: [{{type: tool-called, value: run_command}}]
"""

WHOLE_RUN_SCORER = """
import json, sys
item = json.load(open(sys.argv[1]))
print("the answer was", item["answer"])
print(json.dumps({"seen": len(item["transcript"])}))
"""


@pytest.mark.parametrize("workers", ["0", "2"])
def test_no_fragment_of_a_planted_key_in_any_artifact_of_a_whole_run(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, workers: str
) -> None:
    from conftest import FAKE_KEY_ENV

    monkeypatch.setenv(PLANTED_ENV, PLANTED)
    monkeypatch.setenv(FAKE_KEY_ENV, PLANTED)  # the fake profiles' own key is the planted one
    summary = bench.pytester.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    server = bench.server
    server.add_rule(Rule(match="refused", status=401, error_message="bad key:", echo_auth=True))
    server.add_rule(Rule(match="the key", reply=f"The key is {PLANTED}, not a city."))
    server.add_rule(Rule(match_any="says a city", reply=f'{{"score": 0.1, "reason": "{PLANTED}"}}'))
    server.add_rule(Rule(match="repeat the key", reply=f"Key: {PLANTED[:20]}\n{PLANTED[20:]}"))
    server.add_rule(Rule(match_last="exit code", reply=f"Done, I saw {PLANTED}"))
    command = f"cat notes.txt; echo {PLANTED[:25]}...{PLANTED[-12:]}"
    server.add_rule(
        Rule(
            match="leaky command",
            tool_calls=[{"name": "run_command", "arguments": {"command": command}}],
        )
    )
    server.add_rule(Rule(match="France", reply="Paris."))
    bench.eval_file("planted", WHOLE_RUN_EVAL)
    bench.eval_file("agent", WHOLE_RUN_AGENT)
    bench.pytester.makefile(".py", score=WHOLE_RUN_SCORER)
    bench.pytester.makepyfile(test_planted=PLANTED_LEAKS)
    run = bench.run if workers == "0" else bench.run_subprocess  # xdist in a process of its own
    result = run(
        "-n", workers, "--models=fake", "-rA", "--html=report.html", "--self-contained-html",
        "--junitxml=junit.xml", "--cache=use", "--cache-dir=cache", "--max-retries=0",
    )  # fmt: skip
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 5 and outcomes.get("errors", 0) >= 1, outcomes
    root = bench.pytester.path
    written = [
        "report.html", "junit.xml", "out/results.jsonl", "out/run.json", "out/report.html",
        "step-summary.md",
    ]  # fmt: skip
    for name in written:
        assert (root / name).is_file(), name
    assert any((root / "cache").rglob("*")), "the response cache was written"
    records = {r["case_id"]: r for r in map(json.loads, (root / "out/results.jsonl").open())}
    assert records["refused"]["outcome"] == "error"
    assert set(records["agent-leaks"]["metrics"]) == {"seen"}  # post_process ran
    # Every file the run wrote (the inputs planted beside them left out), and the terminal.
    inputs = {"agent.eval.yaml", "planted.eval.yaml", "score.py", "test_planted.py"}
    leaks = {
        name: fragments
        for name, fragments in _files_with_fragments(root).items()
        if name not in inputs and "/workdir/" not in f"/{name}"
    }
    assert leaks == {}
    assert _fragments(result.stdout.str() + result.stderr.str()) == []
    # What the providers were sent: the agent's tool result and the judge's prompt, redacted.
    for request in server.chat_requests():
        assert _fragments(request.raw_body.decode()) == [], request.body


def test_a_urls_password_is_masked_in_outputs_but_sent_as_written() -> None:
    redactor = Redactor.from_environ({})
    line = "pushed to http://ci:s3cret-pass@127.0.0.1:9091/metrics and https://u:p@x.org/a"
    assert redactor.text(line) == (
        "pushed to http://ci:***@127.0.0.1:9091/metrics and https://u:***@x.org/a"
    )
    assert redactor.value({"args": [f"--prom-push={line}"]})["args"][0].count("***") == 2
    clean = "mail me at a@b.org, or see http://host/path and user@host:22"
    assert redactor.text(clean) is clean
    # A URL the user wrote in a prompt is theirs to send: only known secrets are replaced there.
    messages = ({"role": "user", "content": "Parse http://ann:pw@db.local/x"},)
    assert redactor.messages(messages) is messages
