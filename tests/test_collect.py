"""Eval files as pytest items: ids, selection, collection errors and failure reports."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Bench, Rule

CAPITALS = """\
description: Capitals
tags: [geo]
cases:
  - id: france
    prompt: What is the capital of France?
    expected: Paris
    assert: [contains]
    tags: [europe]
  - id: japan
    prompt: What is the capital of Japan?
    expected: Tokyo
    assert: [contains]
    tags: [asia]
"""

BROKEN = """\
description: Broken
cases:
  - id: ok
    prompt: hi
  - id: bad
    prompt: hi
    threshold: high
"""


def collected(result: pytest.RunResult) -> list[str]:
    """The node ids of a ``--collect-only -q`` run, in order."""
    return [line for line in result.outlines if "::" in line and not line.startswith(" ")]


def assert_no_traceback(result: pytest.RunResult) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text
    assert "pytest_llmbench/" not in text
    assert "pytest_llmbench\\" not in text


# --- collection errors ----------------------------------------------------------------------


def test_malformed_file_is_a_collection_error_without_traceback(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply="Paris Tokyo"))
    bench.eval_file("zz_broken", BROKEN)
    bench.eval_file("capitals", CAPITALS)
    result = bench.run("--models=fake")
    result.stdout.fnmatch_lines(
        [
            "*ERROR collecting zz_broken.eval.yaml*",
            "zz_broken.eval.yaml:7: cases.1.threshold: Input should be a valid number*",
            "*Interrupted: 1 error during collection*",
        ]
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert_no_traceback(result)
    assert bench.server.chat_requests() == []


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("cases:\n  - prompt: hi\n    bogus: 1\n", 3, "cases.0: unknown key 'bogus'"),
        ("cases:\n  - prompt: hi\n  prompt: again\n", 3, "*"),
        ("cases:\n  - prompt: hi\n    assert: [nope]\n", 3, "*unknown assertion type 'nope'*"),
        ("cases:\n  - prompt: !env X\n", 2, "invalid YAML value*"),
        ("cases:\n  - {id: a, prompt: x}\n  - <<: [1]\n", 3, "*merges a mapping*"),
    ],
    ids=["unknown-key", "yaml", "assertion", "tag", "merge"],
)
def test_collection_error_lines(bench: Bench, text: str, line: int, message: str) -> None:
    bench.eval_file("bad", text)
    result = bench.run("--models=fake", "--collect-only")
    result.stdout.fnmatch_lines([f"bad.eval.yaml:{line}: {message}"])
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert_no_traceback(result)


# --- ids and order --------------------------------------------------------------------------


def test_ids_for_two_models_and_repeats(bench: Bench) -> None:
    bench.eval_file("capitals", CAPITALS)
    result = bench.run("--models=fake,fake2", "--repeat", "2", "--collect-only", "-q")
    expected = [
        f"capitals.eval.yaml::{case}[{model}-r{repeat}]"
        for case in ("france", "japan")
        for model in ("fake", "fake2")
        for repeat in (0, 1)
    ]
    assert collected(result) == expected
    again = bench.run("--models=fake,fake2", "--repeat", "2", "--collect-only", "-q")
    assert collected(again) == expected
    assert bench.server.chat_requests() == []


def test_eval_files_with_one_model_each(bench: Bench) -> None:
    bench.eval_file("capitals", CAPITALS)
    bench.eval_file("another", "cases:\n  - {id: only, prompt: hi}\n")
    result = bench.run("--models=fake", "--collect-only", "-q")
    assert collected(result) == [
        "another.eval.yaml::only[fake-r0]",
        "capitals.eval.yaml::france[fake-r0]",
        "capitals.eval.yaml::japan[fake-r0]",
    ]


def test_set_and_comma_lists_expand_in_order(bench: Bench) -> None:
    bench.eval_file("one", "cases:\n  - {id: c, prompt: hi}\n")
    by_set = bench.run("--models=@fakes", "--collect-only", "-q")
    assert collected(by_set) == ["one.eval.yaml::c[fake-r0]", "one.eval.yaml::c[fake2-r0]"]
    mixed = bench.run("--models=fake2, @fakes", "--collect-only", "-q")
    assert collected(mixed) == ["one.eval.yaml::c[fake2-r0]", "one.eval.yaml::c[fake-r0]"]


# --- usage errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--models=fake,@nope", "ERROR: llmbench: unknown model set '@nope'*@fakes*"),
        ("--repeat=0", "ERROR: llmbench: --repeat must be at least 1, got 0"),
        ("--repeat=x", "ERROR: llmbench: --repeat must be a number, got 'x'"),
    ],
    ids=["unknown-set", "repeat-0", "repeat-x"],
)
def test_bad_options_are_usage_errors(bench: Bench, option: str, message: str) -> None:
    bench.eval_file("capitals", CAPITALS)
    result = bench.run(option, "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert_no_traceback(result)
    assert "collected" not in result.stdout.str()


def test_bad_models_in_ini_are_a_usage_error(bench: Bench) -> None:
    bench.eval_file("capitals", CAPITALS)
    bench.pytester.makeini("[pytest]\nllmbench_models = @nope\n")
    result = bench.pytester.runpytest("-p", "no:cacheprovider", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*llmbench: unknown model set '@nope'*"])
    assert_no_traceback(result)


# --- selection ------------------------------------------------------------------------------


def test_k_selects_by_case_and_by_model(bench: Bench) -> None:
    bench.eval_file("capitals", CAPITALS)
    by_case = bench.run("--models=fake,fake2", "--collect-only", "-q", "-k", "japan")
    assert collected(by_case) == [
        "capitals.eval.yaml::japan[fake-r0]",
        "capitals.eval.yaml::japan[fake2-r0]",
    ]
    by_model = bench.run("--models=fake,fake2", "--collect-only", "-q", "-k", "fake2")
    assert collected(by_model) == [
        "capitals.eval.yaml::france[fake2-r0]",
        "capitals.eval.yaml::japan[fake2-r0]",
    ]
    both = bench.run("--models=fake,fake2", "--collect-only", "-q", "-k", "france and not fake2")
    assert collected(both) == ["capitals.eval.yaml::france[fake-r0]"]


@pytest.mark.parametrize("strict", [False, True], ids=["lax", "strict-markers"])
def test_m_selects_tagged_cases(bench: Bench, strict: bool) -> None:
    bench.eval_file("capitals", CAPITALS)
    extra = ["--strict-markers"] if strict else []
    europe = bench.run("--models=fake", "--collect-only", "-q", "-m", "europe", *extra)
    assert europe.ret == pytest.ExitCode.OK
    assert collected(europe) == ["capitals.eval.yaml::france[fake-r0]"]
    geo = bench.run("--models=fake", "--collect-only", "-q", "-m", "geo and not asia", *extra)
    assert collected(geo) == ["capitals.eval.yaml::france[fake-r0]"]
    llmbench = bench.run("--models=fake", "--collect-only", "-q", "-m", "llmbench", *extra)
    assert len(collected(llmbench)) == 2


def test_tags_with_dashes_and_dots_are_markers(bench: Bench) -> None:
    text = "cases:\n  - {id: a, prompt: x, tags: [smoke-test, v1.2]}\n  - {id: b, prompt: y}\n"
    bench.eval_file("tagged", text)
    for expression in ("smoke-test", "v1.2"):
        result = bench.run(
            "--models=fake", "--collect-only", "-q", "--strict-markers", "-m", expression
        )
        assert collected(result) == ["tagged.eval.yaml::a[fake-r0]"], expression


def test_tag_markers_are_declared_once(bench: Bench) -> None:
    bench.eval_file("capitals", CAPITALS)
    bench.pytester.makeconftest(
        """
        def pytest_collection_finish(session):
            lines = session.config.getini("markers")
            print("GEO-LINES", sum(line.startswith("geo:") for line in lines))
        """
    )
    result = bench.run("--models=fake,fake2", "--repeat=2", "--collect-only", "-q", "-s")
    result.stdout.fnmatch_lines(["GEO-LINES 1"])


def test_deselect_one_item(bench: Bench) -> None:
    bench.eval_file("capitals", CAPITALS)
    result = bench.run(
        "--models=fake,fake2",
        "--collect-only",
        "-q",
        "--deselect",
        "capitals.eval.yaml::france[fake2-r0]",
    )
    assert collected(result) == [
        "capitals.eval.yaml::france[fake-r0]",
        "capitals.eval.yaml::japan[fake-r0]",
        "capitals.eval.yaml::japan[fake2-r0]",
    ]


def test_node_id_argument_selects_one_item(bench: Bench) -> None:
    bench.eval_file("capitals", CAPITALS)
    result = bench.run(
        "--models=fake,fake2", "--collect-only", "-q", "capitals.eval.yaml::japan[fake2-r0]"
    )
    assert collected(result) == ["capitals.eval.yaml::japan[fake2-r0]"]


def test_last_failed_reruns_only_the_failed_item(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="France", reply="Paris."))
    bench.server.add_rule(Rule(match="Japan", reply="Kyoto."))
    bench.eval_file("capitals", CAPITALS)
    first = bench.pytester.runpytest("--results-dir=out", "--models=fake")
    first.assert_outcomes(passed=1, failed=1)
    assert len(bench.server.chat_requests()) == 2
    again = bench.pytester.runpytest("--results-dir=out", "--models=fake", "--lf", "-v")
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines(
        ["*rerun previous 1 failure*", "*capitals.eval.yaml::japan[[]fake-r0[]] FAILED*"]
    )
    requests = bench.server.chat_requests()
    assert len(requests) == 3
    assert "Japan" in requests[-1].body["messages"][-1]["content"]


# --- which files ---------------------------------------------------------------------------


def test_other_yaml_files_are_not_collected(bench: Bench) -> None:
    bench.eval_file("capitals", CAPITALS)
    bench.pytester.makefile(".yaml", config="cases:\n  - {prompt: not an eval}\n")
    bench.pytester.makefile(".eval.yml", x="cases:\n  - {prompt: not an eval}\n")
    bench.pytester.makefile(".yaml", **{"eval": "cases:\n  - {prompt: not an eval}\n"})
    result = bench.run("--models=fake", "--collect-only", "-q")
    assert collected(result) == [
        "capitals.eval.yaml::france[fake-r0]",
        "capitals.eval.yaml::japan[fake-r0]",
    ]


def test_pattern_ini_changes_which_files_are_evals(bench: Bench) -> None:
    bench.eval_file("capitals", CAPITALS)
    bench.pytester.makefile(".llm.yaml", other="cases:\n  - {id: one, prompt: hi}\n")
    bench.pytester.makeini("[pytest]\nllmbench_pattern = *.llm.yaml\n")
    result = bench.run("--models=fake", "--collect-only", "-q")
    assert collected(result) == ["other.llm.yaml::one[fake-r0]"]


def test_plain_python_tests_are_collected_beside_evals(bench: Bench) -> None:
    bench.eval_file("capitals", CAPITALS)
    bench.pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    result = bench.run("--models=fake", "--collect-only", "-q")
    assert collected(result) == [
        "capitals.eval.yaml::france[fake-r0]",
        "capitals.eval.yaml::japan[fake-r0]",
        "test_plain.py::test_one",
    ]


# --- failure reports and locations ----------------------------------------------------------


def test_low_score_failure_text(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="France", reply="Paris."))
    bench.server.add_rule(Rule(match="Japan", reply="Kyoto, probably."))
    text = """\
cases:
  - id: france
    prompt: What is the capital of France?
    expected: Paris
    assert: [contains]
  - id: japan
    prompt: What is the capital of Japan?
    expected: Tokyo
    threshold: 0.6
    assert:
      - contains
      - {type: icontains, value: kyoto, weight: 0.5}
"""
    bench.eval_file("capitals", text)
    result = bench.run("--models=fake2")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ japan[[]fake2-r0[]] _*",
            "capitals::japan on fake2 (repeat 0): score 0.333 < threshold 0.6",
            "  prompt:   What is the capital of Japan?",
            "  expected: Tokyo",
            "  got:      Kyoto, probably.",
            "  [[]FAIL[]] contains (weight 1): output does not contain 'Tokyo'",
            "  [[]PASS[]] icontains (weight 0.5): *",
        ]
    )
    assert_no_traceback(result)
    assert "EvalFailure" not in result.stdout.str()


def test_other_failures_in_the_call_phase_still_render(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply="Paris"))
    bench.eval_file("one", "cases:\n  - {id: c, prompt: hi, expected: Paris, assert: [contains]}\n")
    bench.pytester.makeconftest(
        """
        def pytest_runtest_call(item):
            raise RuntimeError("hook trouble")
        """
    )
    result = bench.run("--models=fake")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*RuntimeError: hook trouble*"])
    assert "INTERNALERROR" not in result.stdout.str()


def test_reportinfo_points_at_the_case_line(bench: Bench) -> None:
    bench.eval_file("capitals", CAPITALS)
    items, _ = bench.pytester.inline_genitems("-p", "no:cacheprovider", "--models=fake")
    locations = {item.nodeid: item.location for item in items}
    # location lines are 0-based: `- id: france` is line 4 of the file, `- id: japan` line 9.
    assert locations == {
        "capitals.eval.yaml::france[fake-r0]": ("capitals.eval.yaml", 3, "france[fake-r0]"),
        "capitals.eval.yaml::japan[fake-r0]": ("capitals.eval.yaml", 8, "japan[fake-r0]"),
    }
    path, line, name = items[1].reportinfo()
    assert (Path(path).name, line, name) == ("capitals.eval.yaml", 8, "japan[fake-r0]")


def test_junitxml_names_the_case_line(bench: Bench) -> None:
    bench.server.add_rule(Rule(reply="Paris"))
    bench.eval_file("capitals", CAPITALS)
    result = bench.run(
        "--models=fake", "--junitxml=junit.xml", "-o", "junit_family=xunit1", "-k", "japan"
    )
    result.assert_outcomes(failed=1, deselected=1)
    xml = (bench.pytester.path / "junit.xml").read_text()
    assert 'name="japan[fake-r0]"' in xml
    assert 'line="8"' in xml
