"""Options, ini keys, .env files and usage errors.

A .env file reads as python-dotenv's ``dotenv_values`` reads it: every file here must give the
same values. Its own cost is quadratic in the number of lines (a copy of every earlier value per
line), so the 50,000-line file is checked against values computed here, and linearity is shown
by counting operations, never by a clock (speed lives in ``benchmarks/envfile.py``).
"""

from __future__ import annotations

import io
import json
import random
from collections.abc import Iterator, Mapping

import pytest
from conftest import FAKE_KEY, FAKE_KEY_ENV, Bench
from dotenv import dotenv_values
from dotenv import parser as dotenv_parser

from pytest_llmbench.config import env_text_values

ONE_CASE = "cases: [{id: one, prompt: hi, expected: ok, assert: [contains]}]"


def test_ini_settings_apply_and_the_command_line_wins(bench: Bench) -> None:
    bench.pytester.makeini(
        """
        [pytest]
        llmbench_models = fake2
        llmbench_repeat = 2
        """
    )
    bench.eval_file("one", ONE_CASE)
    from_ini = bench.run("--collect-only", "-q")
    from_ini.stdout.fnmatch_lines(
        ["one.eval.yaml::one[[]fake2-r0[]]", "one.eval.yaml::one[[]fake2-r1[]]"]
    )
    from_cli = bench.run("--collect-only", "-q", "--models=fake", "--repeat=1")
    from_cli.stdout.fnmatch_lines(["one.eval.yaml::one[[]fake-r0[]]", "*1 test collected*"])


@pytest.mark.parametrize(
    ("name", "args"),
    [("keys.env", ["--env-file=keys.env"]), (".env", [])],
    ids=["named", "default"],
)
def test_env_file_supplies_keys(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, name: str, args: list[str]
) -> None:
    """--env-file names the file; without it, .env in the rootdir is loaded."""
    monkeypatch.delenv(FAKE_KEY_ENV)
    bench.pytester.path.joinpath(name).write_text(f"{FAKE_KEY_ENV}={FAKE_KEY}\n")
    bench.eval_file("one", ONE_CASE)
    result = bench.run("--models=fake", *args)
    result.assert_outcomes(passed=1)
    (request,) = bench.server.chat_requests()
    assert request.headers["authorization"] == f"Bearer {FAKE_KEY}"
    run_json = bench.out("run.json").read_text()
    assert name in run_json and FAKE_KEY not in run_json


def test_real_environment_wins_over_env_file(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAKE_KEY_ENV, "sk-from-environment-123")
    bench.pytester.path.joinpath(".env").write_text(f"{FAKE_KEY_ENV}=sk-from-file-456\n")
    bench.eval_file("one", ONE_CASE)
    bench.run("--models=fake").assert_outcomes(passed=1)
    (request,) = bench.server.chat_requests()
    assert request.headers["authorization"] == "Bearer sk-from-environment-123"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env-file=missing.env"], "*--env-file not found*missing.env*"),
        (["--repeat=0"], "*--repeat must be at least 1*"),
        (["--repeat=two"], "*--repeat must be a number*"),
        (["--limit=0"], "*--limit must be at least 1, got 0*"),
        (["--limit=2.5"], "*--limit must be a number, got '2.5'*"),
        (["--min-pass-rate=1.5"], "*--min-pass-rate must be between 0 and 1*"),
        (["--request-timeout=-1"], "*--request-timeout must be at least*"),
        (["--models=@nope"], "*nope*"),
        (["--profiles=no/such/dir"], "*--profiles path not found*"),
        # Values that silently turned a budget off or divided by zero, or would exhaust memory.
        (["--rpm=0"], "*--rpm must be more than 0, got 0*"),
        (["--rpm=nan"], "*--rpm must be a finite number, got 'nan'*"),
        (["--tpm=inf"], "*--tpm must be a finite number, got 'inf'*"),
        (["--max-cost=nan"], "*--max-cost must be a finite number, got 'nan'*"),
        (["--max-cost=-1"], "*--max-cost must be at least 0, got -1*"),
        (["--request-timeout=nan"], "*--request-timeout must be a finite number*"),
        (["--connect-timeout=0"], "*--connect-timeout must be at least 0.001, got 0*"),
        (["--repeat=1000000000"], "*--repeat must be at most 100,000, got 1000000000*"),
        (["--max-retries=" + "9" * 30], "*--max-retries must be at most 100*"),
        (["--concurrency=1e3"], "*--concurrency must be a number, got '1e3'*"),
        (["--min-pass-rate=nan"], "*--min-pass-rate must be between 0 and 1, got 'nan'*"),
        (["--results-dir=/dev/null"], "*--results-dir is not a folder: /dev/null*"),
        (["--results-dir=/dev/null/sub"], "*--results-dir is inside a file: /dev/null*"),
    ],
)
def test_bad_options_are_usage_errors(bench: Bench, args: list[str], message: str) -> None:
    bench.eval_file("one", ONE_CASE)
    result = bench.run(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()
    assert bench.server.chat_requests() == []


def test_broken_profile_file_is_a_usage_error_with_its_line(bench: Bench) -> None:
    bench.pytester.makefile(".yaml", **{"profiles/broken": "models:\n  x:\n    modle: typo\n"})
    bench.eval_file("one", ONE_CASE)
    result = bench.run("--models=fake")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*profiles/broken.yaml:3:*"])


def test_keys_cannot_be_put_in_eval_files(bench: Bench) -> None:
    bench.eval_file("leaky", f"api_key: {FAKE_KEY}\n" + ONE_CASE)
    result = bench.run("--models=fake")
    result.stdout.fnmatch_lines(["*leaky.eval.yaml:1: *unknown key 'api_key'*"])
    assert FAKE_KEY not in result.stdout.str() + result.stderr.str()
    assert bench.server.chat_requests() == []


@pytest.mark.parametrize(
    ("ini", "message"),
    [
        ("llmbench_rpm = nan", "*--rpm must be a finite number, got 'nan'*"),
        ("llmbench_max_cost = inf", "*--max-cost must be a finite number, got 'inf'*"),
        ("llmbench_repeat = 10000000", "*--repeat must be at most 100,000*"),
    ],
)
def test_bad_ini_values_are_usage_errors(bench: Bench, ini: str, message: str) -> None:
    bench.pytester.makeini(f"[pytest]\n{ini}\n")
    bench.eval_file("one", ONE_CASE)
    result = bench.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert bench.server.chat_requests() == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"A=1\nB=\xff\xfe\n", "*bad.env:2: not UTF-8 text (invalid start byte)*"),
        (b"A=1\n\nB=x\x00y\n", "*bad.env:3: a NUL character (binary file?)*"),
    ],
    ids=["not-utf8", "nul"],
)
def test_an_unreadable_env_file_is_a_usage_error_with_its_line(
    bench: Bench, content: bytes, message: str
) -> None:
    """Both were INTERNALERRORs (UnicodeDecodeError; ValueError: embedded null byte)."""
    bench.pytester.path.joinpath("bad.env").write_bytes(content)
    bench.eval_file("one", ONE_CASE)
    result = bench.run("--env-file=bad.env")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_a_results_dir_that_is_a_file_is_refused_before_the_run(bench: Bench) -> None:
    bench.pytester.path.joinpath("taken").write_text("a file")
    bench.eval_file("one", ONE_CASE)
    result = bench.run("--results-dir=taken")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--results-dir is not a folder: *taken*"])
    assert bench.server.chat_requests() == []


def test_limit_runs_the_first_cases_of_each_file(bench: Bench) -> None:
    cases = "".join(
        f"  - {{id: c{i}, prompt: hi, expected: ok, assert: [contains]}}\n" for i in range(5)
    )
    bench.eval_file("a", f"cases:\n{cases}")
    bench.eval_file("b", f"cases:\n{cases}")
    result = bench.run("--collect-only", "-q", "--models=fake", "--limit=2")
    result.stdout.fnmatch_lines(
        ["a.eval.yaml::c0[[]fake-r0[]]", "a.eval.yaml::c1[[]fake-r0[]]",
         "b.eval.yaml::c0[[]fake-r0[]]", "b.eval.yaml::c1[[]fake-r0[]]", "4 tests collected*"]
    )  # fmt: skip
    bench.pytester.makeini("[pytest]\nllmbench_limit = 1\n")
    bench.run("--models=fake").assert_outcomes(passed=2)
    assert json.loads(bench.out("run.json").read_text())["config"]["limit"] == 1


# --- .env files read as python-dotenv reads them, in one pass ------------------------------

ENVIRON = {"FROM_ENV": "env-value", "BOTH": "env-both"}

#: Statements of every kind python-dotenv reads: plain, exported, quoted (with escapes and
#: expansions), multi-line, commented, without a value, empty, unparsable, repeated, CR ends.
FRAGMENTS = (
    "A=1",
    "export B=2",
    "C=${A}",
    "D=${NOPE:-fallback}",
    "E='single ${A} \\' quote'",
    'F="multi\nG=inside the value\n"',
    "H",
    "I=",
    "J = spaced   ",
    "K=a#b",
    "L=a #comment",
    "# a comment",
    "",
    "   ",
    "M=${FROM_ENV}/x",
    'broken line "',
    "N='unterminated",
    'O="escapes \\n \\t \\" end"',
    "export=9",
    "exportP=3",
    "Q=\\back",
    "'R R'=4",
    "S=x\r",
    "T=y\r\nU=z",
    "V=${A}${B}",
    "  W=leading",
    "X=é€",
    "Y=a=b",
    "A=again",
    "Z=${A}",
    "BOTH=file",
    "\t",
    "K2=#x",
    "K3= #x",
    "export  K4=w",
    "K5=${",
    "K6=}{$",
    'K7="q" # c',
    "K8='s'#c",
    'K9="a\\"b"',
    'K10="x" y',
    "#c",
    'K11= "v"',
    "K12=v # c",
    'K13="v"   ',
    "K14='it''s'",
    'K15="${A}-x"  # c',
    "K16=v\t#c",
    'K17=""',
    "K18=''",
    'K19="unclosed # c',
    "K20=a\\b",
)


def reference(text: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str | None]:
    """What python-dotenv reads (it expands against the process environment)."""
    for name, value in ENVIRON.items():
        monkeypatch.setenv(name, value)
    return dict(dotenv_values(stream=io.StringIO(text)))


def test_every_kind_of_statement_reads_as_python_dotenv_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = "\n".join(FRAGMENTS) + "\n"
    values = env_text_values(text, ENVIRON)
    assert values == reference(text, monkeypatch)
    # What users rely on, spelled out: the file's earlier value wins over the environment's
    # in an expansion, a later line replaces a name, quotes and comments are python-dotenv's.
    assert values["I"] == "" and values["H"] is None and values["BOTH"] == "file"
    assert values["C"] == "1" and values["Z"] == "again" and values["A"] == "again"
    assert values["M"] == "env-value/x" and values["D"] == "fallback"
    assert values["F"] == "multi\nG=inside the value\n" and "G" not in values
    assert values["L"] == "a" and values["K"] == "a#b" and values["J"] == "spaced"


def test_random_files_read_as_python_dotenv_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(36)
    for _ in range(400):
        parts = [rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 12))]
        end = rng.choice(["\n", "\r\n", "\r", "\n\n"])
        text = end.join(parts) + rng.choice(["", "\n", "\r\n"])
        assert env_text_values(text, ENVIRON) == reference(text, monkeypatch), repr(text)


class CountingEnviron(Mapping[str, str]):
    """An environment that counts lookups, and walks over it (a copy walks it whole)."""

    def __init__(self, values: dict[str, str]) -> None:
        self._values = values
        self.lookups = 0
        self.walks = 0

    def __getitem__(self, name: str) -> str:
        self.lookups += 1
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        self.walks += 1
        return iter(self._values)

    def __len__(self) -> int:
        self.walks += 1
        return len(self._values)


def test_fifty_thousand_lines_are_read_in_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 50,000-line file: every value right, each plain line read by one match, each other
    statement by one call of python-dotenv's parser, each reference one lookup or two, and the
    environment never copied (python-dotenv copies it, and every earlier value, per line)."""
    n = 50_000
    lines = []
    for i in range(n):
        if i % 10 == 1:
            lines.append(f"KEY_{i}=v{i}-${{KEY_{i - 1}}}-${{FROM_ENV}}")  # 2 references
        elif i % 10 == 2:
            lines.append(f'KEY_{i}="tab\\there {i}"')  # an escape: python-dotenv's parser
        elif i % 10 == 3:
            lines.append(f'export KEY_{i}="quoted {i}"  # a comment')
        else:
            lines.append(f"KEY_{i}=v{i}")
    calls = 0
    parse_binding = dotenv_parser.parse_binding

    def counted(reader: dotenv_parser.Reader) -> dotenv_parser.Binding:
        nonlocal calls
        calls += 1
        return parse_binding(reader)

    monkeypatch.setattr(dotenv_parser, "parse_binding", counted)
    environ = CountingEnviron({"FROM_ENV": "env"})
    values = env_text_values("\n".join(lines) + "\n", environ)
    assert len(values) == n
    assert values["KEY_0"] == "v0" and values["KEY_2"] == "tab\there 2"
    assert values["KEY_3"] == "quoted 3"
    assert values["KEY_49991"] == "v49991-v49990-env"
    assert all(values[f"KEY_{i}"] == f"v{i}-v{i - 1}-env" for i in range(1, n, 10))
    assert calls == n // 10  # the lines with an escape only
    assert environ.walks == 0
    assert environ.lookups <= 2 * (n // 10)  # ${FROM_ENV}: the file does not set it


# -- the option table, read in process -----------------------------------------------------------


def test_every_option_of_the_table_is_a_flag_and_an_ini_key(pytester: pytest.Pytester) -> None:
    from pytest_llmbench.config import FLAGS, SETTINGS

    config = pytester.parseconfig(*(f"{option.flag}=x" for option in SETTINGS))
    assert [option.dest for option in SETTINGS if config.getoption(option.name) != "x"] == []
    # an ini key that was never registered is a ValueError
    assert [config.getini(flag.name) for flag in FLAGS] == [False] * len(FLAGS)
    assert [
        option.dest for option in SETTINGS if config.getini(option.name) not in ("", None)
    ] == []


def test_a_setting_is_the_command_line_then_the_ini_file_then_its_default(
    pytester: pytest.Pytester,
) -> None:
    from pytest_llmbench.config import setting

    pytester.makeini("[pytest]\nllmbench_repeat = 3\nllmbench_stream = all\n")
    config = pytester.parseconfig("--repeat= 5 ")
    assert [setting(config, dest) for dest in ("repeat", "stream", "cache", "models")] == [
        "5",
        "all",
        "off",
        None,
    ]


def test_ages_and_repeat_policies_read_as_a_run_and_the_command_read_them() -> None:
    from pytest_llmbench.config import format_age, parse_age, parse_repeat_policy

    assert [parse_age(text) for text in ("90s", " 30M", "1.5h", "14d")] == [90, 1800, 5400, 1209600]
    assert [format_age(parse_age(text)) for text in ("90s", "30m", "36h", "14d")] == [
        "90s",
        "30m",
        "36h",
        "14d",
    ]
    assert parse_repeat_policy("At-Least:2") == "at-least:2"
    for bad in ("0s", "3w", "", "-1d"):
        with pytest.raises(ValueError, match="is not an age"):
            parse_age(bad)
    with pytest.raises(ValueError, match="--repeat-policy must be"):
        parse_repeat_policy("at-least:0")


def test_the_merge_limits_are_run_options_and_run_config_fields() -> None:
    from dataclasses import fields

    from pytest_llmbench.cli.merge_command import _MERGE_LIMITS
    from pytest_llmbench.config import OPTIONS, RunConfig

    run_fields = {field.name for field in fields(RunConfig)}
    assert [dest for dest in _MERGE_LIMITS if dest not in OPTIONS or dest not in run_fields] == []
