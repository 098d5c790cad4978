"""CI outputs: JUnit XML properties, the GitHub step summary, metrics.prom (Prometheus text)."""

from __future__ import annotations

import math
import re
import stat
import time
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest
from conftest import FAKE_KEY, TWO_CAPITALS, Bench, Rule

from pytest_llmbench.render.ci import step_summary
from pytest_llmbench.render.prometheus import (
    LATENCY_BUCKETS,
    escape_label_value,
    format_value,
    metric_families,
    render_metrics,
)
from pytest_llmbench.results.attach import PROPERTY_FIELDS, record_properties

#: Two answered cases and one a 401 turns into an error (401 is not retried).
CASES = (
    TWO_CAPITALS
    + """  - id: down
    prompt: Is the service down?
    expected: no
    assert: [contains]
"""
)

PLAIN = """
def test_scored(record_score):
    record_score(0.5)

def test_untouched():
    pass
"""


@pytest.fixture
def ci(bench: Bench) -> Bench:
    """The bench project (CIOutputs is registered by the plugin on the controller)."""
    return bench


def _fake_right_fake2_wrong(bench: Bench) -> None:
    bench.server.add_rule(Rule(match="down", status=401))
    bench.server.add_rule(Rule(model="fake-model", reply="Paris. Tokyo."))
    bench.server.add_rule(Rule(model="fake-model-2", reply="I do not know"))


# -- JUnit XML -----------------------------------------------------------------------------------


def _junit_properties(path: Path) -> dict[str, list[tuple[str, str]]]:
    """Test case name -> its properties, in document order (duplicates kept)."""
    root = ET.parse(path).getroot()
    return {
        case.attrib["name"]: [(p.attrib["name"], p.attrib["value"]) for p in case.iter("property")]
        for case in root.iter("testcase")
    }


def _as_property(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


@pytest.mark.parametrize("workers", ["0", pytest.param("2", marks=pytest.mark.slow)])
def test_junit_xml_carries_the_record_as_testcase_properties(ci: Bench, workers: str) -> None:
    _fake_right_fake2_wrong(ci)
    ci.eval_file("capitals", CASES)
    ci.pytester.makepyfile(test_plain=PLAIN)
    args = ("-n", workers, "--models=fake", "--stream=all", "--junitxml=junit.xml")
    result = ci.run(*args) if workers == "0" else ci.run_subprocess(*args)
    result.assert_outcomes(passed=4, errors=1)
    cases = _junit_properties(ci.pytester.path / "junit.xml")
    records = {record["nodeid"].split("::")[-1]: record for record in ci.records()}
    assert set(records) <= set(cases)
    for name, record in records.items():
        expected = [
            (f"llmbench_{key}", _as_property(record[key]))
            for key in PROPERTY_FIELDS
            if record[key] is not None
        ]
        assert cases[name] == expected, name  # each once, in order: not doubled by two phases
    france = dict(cases["france[fake-r0]"])
    assert france["llmbench_model"] == "fake"
    assert float(france["llmbench_score"]) == 1.0
    assert float(france["llmbench_threshold"]) == records["france[fake-r0]"]["threshold"]
    assert int(france["llmbench_input_tokens"]) > 0 and int(france["llmbench_output_tokens"]) > 0
    assert float(france["llmbench_cost_usd"]) > 0
    assert float(france["llmbench_latency_s"]) >= float(france["llmbench_ttft_s"]) > 0
    assert (france["llmbench_transport_retries"], france["llmbench_cached"]) == ("0", "false")
    assert "llmbench_judge_cost_usd" not in france  # no judge ran: no value, no property
    down = dict(cases["down[fake-r0]"])  # a setup error still gets its properties
    assert down["llmbench_model"] == "fake" and "llmbench_score" not in down
    assert dict(cases["test_scored"]) == {
        "llmbench_score": "0.5",
        "llmbench_transport_retries": "0",
        "llmbench_cached": "false",
        "llmbench_batched": "false",
    }
    assert cases["test_untouched"] == []


def test_record_properties_leave_out_empty_fields_and_write_lowercase_booleans() -> None:
    record = {"model": "m", "score": None, "threshold": 0.5, "transport_retries": 2, "cached": True}
    assert record_properties(record) == [
        ("llmbench_model", "m"),
        ("llmbench_threshold", 0.5),
        ("llmbench_transport_retries", 2),
        ("llmbench_cached", "true"),
    ]


# -- GitHub step summary -------------------------------------------------------------------------


def _table(section: str) -> list[list[str]]:
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def _leaderboard_columns(bench: Bench) -> list[str]:
    return bench.out("leaderboard.csv").read_text().splitlines()[0].split(",")


def test_step_summary_appends_a_leaderboard_section_per_run(
    ci: Bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "step_summary.md"
    summary.write_text("# An earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    _fake_right_fake2_wrong(ci)
    ci.eval_file("capitals", TWO_CAPITALS)
    first = ci.run("--models=@fakes")
    first.assert_outcomes(passed=2, failed=2)
    assert first.ret == pytest.ExitCode.TESTS_FAILED  # the summary does not change the verdict
    once = summary.read_text(encoding="utf-8")
    ci.run("--models=@fakes").assert_outcomes(passed=2, failed=2)
    text = summary.read_text(encoding="utf-8")
    assert text.startswith(once) and text.startswith("# An earlier step\n")
    assert text.count("## llmbench leaderboard") == 2
    assert [row[:4] for row in _table(text[len(once) :])] == [row[:4] for row in _table(once)]
    header, align, *rows = _table(once)
    assert header == [
        "rank", "model", "score [95% CI]", "pass rate [95% CI]", "answered", "cases", "errors",
        "cost USD", "latency p50 s",
    ]  # fmt: skip
    assert align[1] == ":---" and set(align) - {align[1]} == {"---:"}
    assert [row[:2] for row in rows] == [["1", "fake"], ["2", "fake2"]]
    assert rows[0][2].startswith("1.000") and rows[1][2].startswith("0.000")
    assert rows[0][3].startswith("100.0%") and rows[1][3].startswith("0.0%")
    assert [row[4] for row in rows] == ["2/2", "2/2"]
    assert [row[5] for row in rows] == ["2", "2"]
    assert [row[6] for row in rows] == ["0", "0"]
    costs = {
        m: sum(r["cost_usd"] for r in ci.records() if r["model"] == m) for m in ("fake", "fake2")
    }
    assert [float(row[7]) for row in rows] == [round(costs["fake"], 4), round(costs["fake2"], 4)]
    assert all(float(row[8]) >= 0 for row in rows)
    if "score_ci_low" in _leaderboard_columns(ci):
        assert re.fullmatch(r"1\.000 \[\d\.\d{3}, \d\.\d{3}\]", rows[0][2])
    assert "4 items, 2 model(s): 2 passed, 2 failed" in once
    assert "Failed gates" not in once
    assert FAKE_KEY not in text


def test_step_summary_lists_failed_gates(
    ci: Bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    _fake_right_fake2_wrong(ci)
    ci.eval_file("capitals", TWO_CAPITALS)
    result = ci.run("--models=@fakes", "--min-pass-rate=0.9")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = summary.read_text(encoding="utf-8")
    assert "**Failed gates**\n\n- fake2: pass rate 0.0% < --min-pass-rate 90.0%\n" in text
    assert "fake: pass rate" not in text


def test_a_run_without_records_writes_no_ci_output(
    ci: Bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    ci.pytester.makepyfile(test_plain="def test_untouched():\n    pass\n")
    ci.run().assert_outcomes(passed=1)
    assert not summary.exists()
    assert not ci.out("metrics.prom").exists()


def test_without_the_variable_only_metrics_are_written(
    ci: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    _fake_right_fake2_wrong(ci)
    ci.eval_file("capitals", TWO_CAPITALS)
    result = ci.run("--models=fake")
    assert result.ret == pytest.ExitCode.OK
    assert ci.out("metrics.prom").is_file()
    assert "not written" not in result.stdout.str()


def test_a_failing_writer_keeps_the_exit_status_and_says_so_in_red(
    ci: Bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path))  # a folder: cannot be appended to
    (ci.pytester.path / "out" / "metrics.prom").mkdir(parents=True)  # cannot be replaced
    _fake_right_fake2_wrong(ci)
    ci.eval_file("capitals", TWO_CAPITALS)
    result = ci.run("--models=fake", "--color=yes")
    assert result.ret == pytest.ExitCode.OK
    output = result.stdout.str()
    red = "\x1b[31m"
    assert f"{red}llmbench: GitHub step summary not written: IsADirectoryError" in output
    assert re.search(re.escape(red) + r"llmbench: metrics\.prom not written: \w+Error", output)
    assert sorted(p.name for p in ci.out("").iterdir() if p.name.endswith(".tmp")) == []


def test_step_summary_escapes_table_cells_and_shows_missing_values_as_dashes() -> None:
    records = [
        {
            "model": "evil|model\nname",
            "suite": "s",
            "case_id": "c",
            "repeat": 0,
            "outcome": "error",
            "cached": False,
        }
    ]
    text = step_summary(records, ["evil|model: pass rate 0.0% < 90.0%"])
    header, _, row, *_ = _table(text)
    assert len(row) == len(header) == 9
    assert row[1] == "evil\\|model name"
    # The error counts as a failure scored 0; nothing was answered, so the row is incomplete.
    assert row[2].startswith("0.000 [") and row[3].startswith("0.0% [")
    assert row[4:] == ["0/1 !", "1", "1", "-", "-"]  # one case, one error
    assert "! incomplete: more than 10% of the items errored" in text
    assert "- evil\\|model: pass rate 0.0% < 90.0%" in text
    assert "1 items, 1 model(s): 1 errors." in text


# -- metrics.prom --------------------------------------------------------------------------------

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"'
_VALUE = r"[-+]?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|Inf)|NaN"
_SAMPLE = re.compile(rf"({_NAME})(?:\{{({_LABEL}(?:,{_LABEL})*)?\}})? ({_VALUE})")
_HELP = re.compile(rf"# HELP ({_NAME}) ((?:[^\\\n]|\\[\\n])*)")
_TYPE = re.compile(rf"# TYPE ({_NAME}) (counter|gauge|histogram|summary|untyped)")


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], value)


@dataclass
class Family:
    type: str
    help: str | None = None
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    def value(self, name: str, **labels: str) -> float:
        (found,) = [v for n, got, v in self.samples if n == name and got == labels]
        return found


def parse_exposition(text: str) -> dict[str, Family]:
    """A strict little parser: every line is HELP, TYPE or a sample of the family declared last."""
    assert text.endswith("\n")
    families: dict[str, Family] = {}
    current: str | None = None
    for line in text[:-1].split("\n"):
        if help_line := _HELP.fullmatch(line):
            name = help_line[1]
            assert name not in families, f"{name} declared twice"
            families[name], current = Family(type="untyped", help=_unescape(help_line[2])), name
        elif type_line := _TYPE.fullmatch(line):
            assert current is not None and type_line[1] == current, line
            assert not families[current].samples, f"TYPE after samples: {line}"
            families[current].type = type_line[2]
        else:
            sample = _SAMPLE.fullmatch(line)
            assert sample is not None, f"not a sample line: {line!r}"
            assert current is not None and _belongs(sample[1], current, families[current].type)
            labels = {key: _unescape(value) for key, value in re.findall(_LABEL, sample[2] or "")}
            families[current].samples.append((sample[1], labels, float(sample[7])))
    return families


def _belongs(sample: str, family: str, kind: str) -> bool:
    if kind == "histogram":
        return sample in (f"{family}_bucket", f"{family}_sum", f"{family}_count")
    return sample == family and (kind != "counter" or family.endswith("_total"))


def _check_histogram(family: Family, model: str, values: list[float]) -> None:
    buckets = [
        (s[1]["le"], s[2]) for s in family.samples if s[1]["model"] == model and "le" in s[1]
    ]
    bounds = [float(le) for le, _ in buckets]
    counts = [count for _, count in buckets]
    assert bounds == [*LATENCY_BUCKETS, math.inf] and buckets[-1][0] == "+Inf"
    assert counts == sorted(counts)  # cumulative
    assert counts == [sum(1 for v in values if v <= bound) for bound in bounds]
    name = next(iter(family.samples))[0].removesuffix("_bucket")
    assert family.value(f"{name}_count", model=model) == counts[-1] == len(values)
    assert family.value(f"{name}_sum", model=model) == pytest.approx(sum(values))


def test_metrics_prom_is_valid_exposition_text_that_matches_the_records(ci: Bench) -> None:
    _fake_right_fake2_wrong(ci)
    ci.eval_file("capitals", CASES)
    before = time.time()
    result = ci.run("--models=@fakes", "--repeat=2", "--stream=all")
    after = time.time()
    result.assert_outcomes(passed=2 * 2, failed=2 * 2, errors=2 * 2)
    path = ci.out("metrics.prom")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in ci.out("").iterdir() if p.name.startswith(".")] == []
    families = parse_exposition(path.read_text(encoding="utf-8"))
    assert {name: family.type for name, family in families.items()} == {
        "llmbench_requests_total": "counter",
        "llmbench_errors_total": "counter",
        "llmbench_tokens_total": "counter",
        "llmbench_cost_usd_total": "counter",
        "llmbench_transport_retries_total": "counter",
        "llmbench_latency_seconds": "histogram",
        "llmbench_ttft_seconds": "histogram",
        "llmbench_run_info": "gauge",
        "llmbench_last_run_timestamp_seconds": "gauge",
    }
    assert all(family.help for family in families.values())
    records = ci.records()
    for model in ("fake", "fake2"):
        own = [r for r in records if r["model"] == model]
        outcomes = Counter(r["outcome"] for r in own)
        answers = {"passed": 4} if model == "fake" else {"failed": 4}
        assert outcomes == {**answers, "error": 2}
        for outcome in ("passed", "failed", "error", "skipped"):
            requests = families["llmbench_requests_total"]
            assert (
                requests.value("llmbench_requests_total", model=model, outcome=outcome)
                == (outcomes[outcome])
            )
        kinds = Counter(r["error_kind"] for r in own if r["outcome"] == "error")
        errors = families["llmbench_errors_total"]
        assert {s[1]["kind"]: s[2] for s in errors.samples if s[1]["model"] == model} == kinds
        tokens = families["llmbench_tokens_total"]
        for direction, key in (("input", "input_tokens"), ("output", "output_tokens")):
            total = sum(r[key] or 0 for r in own)
            assert total > 0
            assert tokens.value("llmbench_tokens_total", model=model, direction=direction) == total
        assert tokens.value("llmbench_tokens_total", model=model, direction="judge") == 0
        cost = families["llmbench_cost_usd_total"]
        assert cost.value("llmbench_cost_usd_total", model=model, source="model") == (
            pytest.approx(sum(r["cost_usd"] or 0 for r in own))
        )
        assert cost.value("llmbench_cost_usd_total", model=model, source="judge") == 0
        retries = families["llmbench_transport_retries_total"]
        assert retries.value("llmbench_transport_retries_total", model=model) == sum(
            r["transport_retries"] for r in own
        )
        answered = [r for r in own if r["outcome"] in ("passed", "failed")]
        _check_histogram(
            families["llmbench_latency_seconds"], model, [r["latency_s"] for r in answered]
        )
        _check_histogram(families["llmbench_ttft_seconds"], model, [r["ttft_s"] for r in answered])
    ((_, info, value),) = families["llmbench_run_info"].samples
    assert value == 1 and set(info) == {"version", "python", "pytest"} and info["version"]
    (stamp,) = families["llmbench_last_run_timestamp_seconds"].samples
    assert before <= stamp[2] <= after


def _record(model: str | None, outcome: str = "passed", **values: Any) -> dict[str, Any]:
    return {"model": model, "outcome": outcome, "transport_retries": 0, "judge_tokens": 0, **values}


def test_label_values_are_escaped_and_read_back_unchanged() -> None:
    model = 'a"b\\c\nd'
    families = metric_families([_record(model)], timestamp=1.5, info={"version": 'x"y'})
    text = render_metrics(families)
    assert 'llmbench_transport_retries_total{model="a\\"b\\\\c\\nd"} 0\n' in text
    assert 'llmbench_run_info{version="x\\"y"} 1\n' in text
    parsed = parse_exposition(text)  # no raw newline split a sample line
    assert {labels["model"] for _, labels, _ in parsed["llmbench_requests_total"].samples} == {
        model
    }
    assert parsed["llmbench_last_run_timestamp_seconds"].samples == [
        ("llmbench_last_run_timestamp_seconds", {}, 1.5)
    ]
    assert escape_label_value("plain") == "plain"


def test_histogram_buckets_include_their_upper_bound_and_skip_unanswered_items() -> None:
    latencies = [0.1, 0.25, 0.3, 60.0, 61.0]
    records = [_record("m", latency_s=v) for v in latencies]
    records += [_record("m", "error", latency_s=0.01), _record("m", "failed", latency_s=None)]
    records += [_record(None, "skipped")]
    parsed = parse_exposition(render_metrics(metric_families(records, timestamp=0, info={})))
    latency = parsed["llmbench_latency_seconds"]
    buckets = [(s[1]["le"], s[2]) for s in latency.samples if s[1]["model"] == "m" and "le" in s[1]]
    assert buckets == [
        ("0.1", 1), ("0.25", 2), ("0.5", 3), ("1", 3), ("2.5", 3), ("5", 3), ("10", 3),
        ("30", 3), ("60", 4), ("+Inf", 5),
    ]  # fmt: skip
    assert latency.value("llmbench_latency_seconds_sum", model="m") == pytest.approx(121.65)
    _check_histogram(latency, "(no model)", [])  # a model without answers: an empty histogram
    errors = parsed["llmbench_errors_total"]
    assert errors.samples == [("llmbench_errors_total", {"model": "m", "kind": "unknown"}, 1)]
    requests = parsed["llmbench_requests_total"]
    assert requests.value("llmbench_requests_total", model="(no model)", outcome="skipped") == 1


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.0, "1"), (0.25, "0.25"), (3, "3"), (1e-7, "1e-07"), (math.inf, "+Inf"), (math.nan, "NaN")],
)
def test_values_are_formatted_for_the_exposition_format(value: float, text: str) -> None:
    assert format_value(value) == text
    assert re.fullmatch(_VALUE, text)


# -- github-action-benchmark and the Pushgateway -------------------------------------------------


def test_benchmark_files_follow_github_action_benchmark(ci: Bench) -> None:
    _fake_right_fake2_wrong(ci)
    ci.eval_file("capitals", TWO_CAPITALS)
    ci.run("--models=fake,fake2")
    import json

    bigger = json.loads(ci.out("benchmark-bigger.json").read_text())
    smaller = json.loads(ci.out("benchmark-smaller.json").read_text())
    by_name = {entry["name"]: entry for entry in bigger}
    assert by_name["fake: pass rate"] == {
        "name": "fake: pass rate", "unit": "%", "value": 100.0, "extra": "2 answered of 2",
    }  # fmt: skip
    assert by_name["fake2: pass rate"]["value"] == 0.0
    assert by_name["fake: score"]["unit"] == "score (0-1)"
    assert "fake: multiple choice accuracy" not in by_name  # no multiple choice item: no entry
    assert {e["name"] for e in smaller} >= {"fake: latency p50", "fake2: TTFT p50"}
    for entry in bigger + smaller:  # the shape the action reads: name, unit, numeric value
        assert set(entry) == {"name", "unit", "value", "extra"}
        assert isinstance(entry["value"], float) and math.isfinite(entry["value"])


class _Pushgateway:
    """A real HTTP server on 127.0.0.1 that keeps what is pushed to it."""

    def __init__(self, status: int = 200) -> None:
        import http.server
        import threading

        pushed = self.pushed = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                pushed.append((self.command, self.path, dict(self.headers), body.decode()))
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_prom_push_puts_metrics_prom_to_the_pushgateway(ci: Bench) -> None:
    gateway = _Pushgateway()
    try:
        _fake_right_fake2_wrong(ci)
        ci.eval_file("capitals", TWO_CAPITALS)
        url = f"http://ci:s3cret-push-pass@127.0.0.1:{gateway.port}"
        result = ci.run("--models=fake", f"--prom-push={url}")
    finally:
        gateway.close()
    assert result.ret == pytest.ExitCode.OK
    ((method, path, headers, body),) = gateway.pushed
    assert (method, path) == ("PUT", "/metrics/job/llmbench")
    assert body == ci.out("metrics.prom").read_text()
    assert 'llmbench_requests_total{model="fake",outcome="passed"} 2' in body
    assert headers["Authorization"] == "Basic Y2k6czNjcmV0LXB1c2gtcGFzcw=="  # ci:s3cret-push-pass
    assert "s3cret" not in result.stdout.str() + ci.out("run.json").read_text()


@pytest.mark.parametrize("status", [None, 500])
def test_a_failed_push_keeps_the_exit_status_and_says_so(ci: Bench, status: int | None) -> None:
    gateway = _Pushgateway(status or 200)
    port = gateway.port
    if status is None:
        gateway.close()  # nothing listens: connection refused
    try:
        _fake_right_fake2_wrong(ci)
        ci.eval_file("capitals", TWO_CAPITALS)
        result = ci.run("--models=fake", f"--prom-push=http://u:pw-hidden@127.0.0.1:{port}/")
    finally:
        if status is not None:
            gateway.close()
    assert result.ret == pytest.ExitCode.OK
    why = "cannot reach the Pushgateway" if status is None else "the Pushgateway answered HTTP 500"
    result.stdout.fnmatch_lines(
        [f"llmbench: push to http://u:***@127.0.0.1:{port}/ not written: *{why}*"]
    )
    assert "pw-hidden" not in result.stdout.str()


@pytest.mark.parametrize("url", ["ftp://host/x", "localhost:9091", "http://"])
def test_prom_push_needs_an_http_url(ci: Bench, url: str) -> None:
    result = ci.run("--models=fake", f"--prom-push={url}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--prom-push must be an http(s) URL of a Pushgateway*"])
