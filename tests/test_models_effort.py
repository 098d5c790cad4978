"""The effort axis (models/providers/effort.py): efforts multiply items like temperatures do,
labelled ``model@high``, sent as each provider takes them, refused at collection for a model
that does not reason, and compared in ``by_effort.csv`` and the report."""

from __future__ import annotations

import csv
from typing import Any

import pytest
from conftest import FAKE_KEY_ENV, Bench, Rule

from pytest_llmbench.models.profiles import ModelProfile
from pytest_llmbench.models.providers.effort import EffortError, effort_params, parse_effort
from pytest_llmbench.spec.variants import Variant

CAPITAL = (
    "cases:\n  - {id: france, prompt: Capital of France?, expected: Paris, assert: [contains]}\n"
)


def collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::" in line and not line.startswith(" ")]


def _thinking_profile(
    bench: Bench, effort: str = "reasoning_effort", name: str = "thinker"
) -> None:
    """A profile on the fake server (a model litellm's map does not know) whose ``effort:``
    says how it takes an effort."""
    bench.pytester.makefile(
        ".yaml",
        **{
            f"profiles/{name}": f"""
models:
  {name}:
    model: openai/fake-thinker
    api_base: {bench.server.base_url}
    api_key_env: {FAKE_KEY_ENV}
    cost_per_1k: {{input: 0.001, output: 0.002}}
    effort: {effort}
"""
        },
    )


# --- values -------------------------------------------------------------------------------------


def test_an_effort_is_a_level_or_a_budget() -> None:
    assert parse_effort("High ") == "high"
    assert parse_effort(8000) == 8000
    assert parse_effort("8000") == 8000
    for bad in ("extreme", 0, -5, True, 1.5, None, ""):
        with pytest.raises(EffortError, match="is not one of none, minimal, low"):
            parse_effort(bad)


def test_the_label_puts_the_effort_last_and_the_id_gains_it() -> None:
    variant = Variant("concise", 0.2, True, "high")
    assert variant.label("gpt-5") == "gpt-5:concise_optimized@t0.2@high"
    assert variant.id_parts() == ["concise_optimized", "t0.2", "high"]
    assert Variant(effort=8000).label("claude") == "claude@8000"
    assert Variant().label("m") == "m" and Variant().id_parts() == []


# --- the mapping per provider ---------------------------------------------------------------------


def _profile(model: str, effort: str = "auto", **params: Any) -> ModelProfile:
    return ModelProfile(name=model.rpartition("/")[2], model=model, effort=effort, params=params)


@pytest.mark.parametrize(
    ("model", "effort", "sent"),
    [
        ("openai/gpt-5", "high", {"reasoning_effort": "high"}),
        ("azure/o3", "minimal", {"reasoning_effort": "minimal"}),
        ("deepseek/deepseek-reasoner", "low", {"reasoning_effort": "low"}),
        # litellm turns a level into Anthropic's and Gemini's thinking budgets itself
        ("anthropic/claude-sonnet-4-5", "medium", {"reasoning_effort": "medium"}),
        ("gemini/gemini-2.5-flash", "none", {"reasoning_effort": "none"}),
        # a budget is litellm's `thinking` parameter, which both transformations read
        (
            "anthropic/claude-sonnet-4-5",
            8000,
            {"thinking": {"type": "enabled", "budget_tokens": 8000}},
        ),
        ("gemini/gemini-2.5-flash", 512, {"thinking": {"type": "enabled", "budget_tokens": 512}}),
    ],
)
def test_auto_sends_a_level_as_reasoning_effort_and_a_budget_as_thinking(
    model: str, effort: str | int, sent: dict[str, Any]
) -> None:
    assert effort_params(_profile(model), effort, {}) == sent


@pytest.mark.parametrize(
    ("model", "effort", "why"),
    [
        ("openai/gpt-4o", "high", "is not a reasoning model by litellm's price map"),
        ("hosted_vllm/Qwen/Qwen3-8B", "low", "is not a reasoning model by litellm's price map"),
        ("openai/gpt-5", 8000, "takes a level, not a thinking budget"),
        ("anthropic/claude-sonnet-4-5", 500, "takes a thinking budget of at least 1024 tokens"),
    ],
)
def test_auto_refuses_what_the_model_cannot_take_naming_model_and_fix(
    model: str, effort: str | int, why: str
) -> None:
    with pytest.raises(EffortError) as caught:
        effort_params(_profile(model), effort, {})
    message = str(caught.value)
    assert f"effort {effort} for model {model.rpartition('/')[2]} ({model}): it {why}" in message
    assert "`effort: passthrough`" in message


def test_a_profile_says_how_its_model_takes_an_effort() -> None:
    qwen = _profile(
        "hosted_vllm/Qwen/Qwen3-8B",
        "enable_thinking",
        extra_body={"top_k": 20, "chat_template_kwargs": {"other": 1}},
    )
    on = effort_params(qwen, "high", qwen.params)
    assert on == {
        "extra_body": {"top_k": 20, "chat_template_kwargs": {"other": 1, "enable_thinking": True}}
    }
    off = effort_params(qwen, "none", {})
    assert off == {"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}}
    assert qwen.params["extra_body"]["chat_template_kwargs"] == {"other": 1}  # not changed
    budget = _profile("openai/proxy-claude", "thinking_budget")
    assert effort_params(budget, "high", {}) == {
        "thinking": {"type": "enabled", "budget_tokens": 4096}
    }
    assert effort_params(budget, 3000, {}) == {
        "thinking": {"type": "enabled", "budget_tokens": 3000}
    }
    assert effort_params(budget, "none", {}) == {"thinking": {"type": "disabled"}}
    levels = _profile("ollama/qwen3", "reasoning_effort")
    assert effort_params(levels, "low", {}) == {"reasoning_effort": "low"}
    with pytest.raises(EffortError, match="give a level, or set `effort: thinking_budget`"):
        effort_params(levels, 2000, {})
    # passthrough: the value as given, whatever the model
    assert effort_params(_profile("openai/gpt-4o", "passthrough"), 2000, {}) == {
        "reasoning_effort": 2000
    }


def test_a_profile_effort_must_be_a_known_mapping() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="'auto', 'reasoning_effort', 'thinking_budget'"):
        ModelProfile(name="m", model="openai/m", effort="levels")


# --- collection ---------------------------------------------------------------------------------


def test_efforts_multiply_items_with_ids_and_labels_and_k_selects_one(bench: Bench) -> None:
    _thinking_profile(bench)
    bench.eval_file("capitals", "effort: [low, high]\n" + CAPITAL)
    result = bench.run("--models=thinker", "--temperature-variations=1", "--collect-only", "-q")
    assert collected(result) == [
        f"capitals.eval.yaml::france[thinker-t{t}-{e}-r0]"
        for t in ("0.5", "1") for e in ("low", "high")
    ]  # fmt: skip
    result = bench.run("--models=thinker", "-k", "high", "--collect-only", "-q")
    assert collected(result) == ["capitals.eval.yaml::france[thinker-high-r0]"]


def test_efforts_on_the_command_line_or_in_the_ini_file_replace_the_files(bench: Bench) -> None:
    _thinking_profile(bench)
    bench.eval_file("capitals", "effort: [low, high]\n" + CAPITAL)
    result = bench.run("--models=thinker", "--efforts=minimal, XHIGH", "--collect-only", "-q")
    assert collected(result) == [
        f"capitals.eval.yaml::france[thinker-{e}-r0]" for e in ("minimal", "xhigh")
    ]
    bench.pytester.makeini("[pytest]\nllmbench_efforts = none, max\n")
    result = bench.run("--models=thinker", "--collect-only", "-q")
    assert collected(result) == [
        f"capitals.eval.yaml::france[thinker-{e}-r0]" for e in ("none", "max")
    ]


def test_a_bad_effort_is_a_usage_error_or_a_collection_error_at_its_line(bench: Bench) -> None:
    _thinking_profile(bench)
    bench.eval_file("capitals", CAPITAL)
    result = bench.run("--models=thinker", "--efforts=low,extreme", "--collect-only")
    result.stderr.fnmatch_lines(["*llmbench: --efforts: effort 'extreme' is not one of none, *"])
    bench.eval_file("capitals", "effort: [low, low]\n" + CAPITAL)
    result = bench.run("--models=thinker", "--collect-only")
    result.stdout.fnmatch_lines(["*capitals.eval.yaml:1: effort: effort low is given twice*"])
    bench.eval_file("capitals", "effort: 0\n" + CAPITAL)
    result = bench.run("--models=thinker", "--collect-only")
    result.stdout.fnmatch_lines(["*capitals.eval.yaml:1: effort: effort 0 is not one of none*"])
    assert "Traceback" not in result.stdout.str()


def test_an_effort_for_a_model_that_does_not_reason_is_a_collection_error(bench: Bench) -> None:
    bench.eval_file("capitals", "effort: high\n" + CAPITAL)
    result = bench.run("--models=fake", "--collect-only")
    result.stdout.fnmatch_lines(
        [
            "*capitals.eval.yaml:3: case 'france': effort high for model fake (openai/fake-model): "
            "it is not a reasoning model by litellm's price map (supports_reasoning); set "
            "`effort:` in its profile*`effort: passthrough`*"
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert bench.server.chat_requests() == []


# --- a run --------------------------------------------------------------------------------------

LONG_THOUGHT = "First I recall the capitals of Europe and then I check twice. " * 4


def _effort_rules(bench: Bench) -> None:
    """The fake model thinks more, and answers better, the more effort it is given."""
    bench.server.add_rule(Rule(body={"reasoning_effort": "low"}, reply="Lyon", reasoning="Hm."))
    bench.server.add_rule(
        Rule(body={"reasoning_effort": "high"}, reply="Paris", reasoning=LONG_THOUGHT)
    )


def _by_effort(bench: Bench) -> list[dict[str, str]]:
    with bench.out("by_effort.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_a_run_sends_each_effort_and_compares_them_in_by_effort_csv(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    step_summary = bench.pytester.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    _thinking_profile(bench)
    bench.eval_file("capitals", "effort: [low, high]\n" + CAPITAL)
    _effort_rules(bench)
    result = bench.run("--models=thinker,fake", "--efforts=low,high", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["*effort low for model fake (openai/fake-model)*"])
    result = bench.run("--models=thinker", "--repeat=2")
    result.assert_outcomes(passed=2, failed=2)
    sent = sorted(request.body.get("reasoning_effort") for request in bench.server.chat_requests())
    assert sent == ["high", "high", "low", "low"]
    records = sorted(bench.records(), key=lambda record: (record["model"], record["repeat"]))
    assert [(r["model"], r["effort"], r["passed"]) for r in records] == [
        ("thinker@high", "high", True),
        ("thinker@high", "high", True),
        ("thinker@low", "low", False),
        ("thinker@low", "low", False),
    ]
    assert records[0]["params"]["reasoning_effort"] == "high"
    assert records[0]["reasoning_tokens"] == len(LONG_THOUGHT.split())
    rows = _by_effort(bench)
    assert list(rows[0]) == [
        "model", "effort", "n_items", "n_errors", "pass_rate", "score_mean",
        "output_tokens_mean", "reasoning_tokens_mean", "output_tokens_total",
        "reasoning_tokens_total", "cost_usd_total", "cost_usd_mean", "latency_s_p50",
        "latency_s_p95",
    ]  # fmt: skip
    low, high = rows  # levels least first
    assert (low["model"], low["effort"], low["n_items"], low["pass_rate"]) == (
        "thinker",
        "low",
        "2",
        "0.0",
    )
    assert (high["model"], high["effort"], high["pass_rate"]) == ("thinker", "high", "1.0")
    assert int(high["reasoning_tokens_total"]) == 2 * len(LONG_THOUGHT.split())
    assert int(low["reasoning_tokens_total"]) == 2
    assert float(high["output_tokens_mean"]) == len(LONG_THOUGHT.split()) + 1
    assert float(high["cost_usd_total"]) > float(low["cost_usd_total"]) > 0
    assert float(high["latency_s_p95"]) >= float(high["latency_s_p50"]) > 0
    report = bench.out("report.html").read_text()
    assert '<section id="efforts"><h2>Efforts</h2><table class="efforts">' in report
    efforts = step_summary.read_text().split("**Efforts**")[1].strip().splitlines()
    assert efforts[0].startswith("| model | effort | items | pass rate | score | output tokens |")
    assert efforts[2].startswith("| thinker | low | 2 | 0.0% | 0.000 | 2 | 1 |")
    assert efforts[3].startswith("| thinker | high | 2 | 100.0% | 1.000 |")


def test_a_run_without_efforts_has_no_effort_table(bench: Bench) -> None:
    bench.eval_file("capitals", CAPITAL)
    bench.server.add_rule(Rule(reply="Paris"))
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["effort"] is None and record["model"] == "fake"
    assert not bench.out("by_effort.csv").exists()
    assert 'id="efforts"' not in bench.out("report.html").read_text()


def test_efforts_are_recorded_the_same_under_xdist(bench: Bench) -> None:
    _thinking_profile(bench)
    bench.eval_file("capitals", "effort: [low, high]\n" + CAPITAL)
    _effort_rules(bench)
    fields = ("model", "effort", "passed", "response", "reasoning", "reasoning_tokens", "params")
    seen, tables = [], []
    for args in ((), ("-n", "2")):
        bench.run_subprocess("--models=thinker", *args).assert_outcomes(passed=1, failed=1)
        seen.append(sorted(tuple(str(r[k]) for k in fields) for r in bench.records()))
        tables.append(
            [(row["model"], row["effort"], row["pass_rate"]) for row in _by_effort(bench)]
        )
    assert seen[0] == seen[1]
    assert tables[0] == tables[1] == [("thinker", "low", "0.0"), ("thinker", "high", "1.0")]


# --- what litellm is handed for Anthropic and Gemini -------------------------------------------


def test_anthropic_and_gemini_hand_litellm_their_effort(
    bench: Bench, litellm_loaded: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No network: litellm answers with its own mock (the profile's ``mock_response``), and the
    keyword arguments our client hands it are kept."""
    handed: list[dict[str, Any]] = []
    original = litellm_loaded.acompletion

    async def kept(**kwargs: Any) -> Any:
        handed.append(kwargs)
        return await original(**kwargs)

    monkeypatch.setattr(litellm_loaded, "acompletion", kept)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake")
    monkeypatch.setenv("GEMINI_API_KEY", "fake-gemini-key")
    bench.pytester.makefile(
        ".yaml",
        **{
            "profiles/thinkers": """
models:
  claude:
    model: anthropic/claude-sonnet-4-5
    litellm: {mock_response: Paris}
  gemini:
    model: gemini/gemini-2.5-flash
    litellm: {mock_response: Paris}
"""
        },
    )
    bench.eval_file("capitals", "effort: [high, 4096]\n" + CAPITAL)
    bench.run("--models=claude,gemini", "--stream=off").assert_outcomes(passed=4)
    sent = sorted(
        (call["model"], str(call.get("reasoning_effort")), str(call.get("thinking")))
        for call in handed
    )
    budget = str({"type": "enabled", "budget_tokens": 4096})
    assert sent == [
        ("anthropic/claude-sonnet-4-5", "None", budget),
        ("anthropic/claude-sonnet-4-5", "high", "None"),
        ("gemini/gemini-2.5-flash", "None", budget),
        ("gemini/gemini-2.5-flash", "high", "None"),
    ]
    assert {record["model"] for record in bench.records()} == {
        "claude@high", "claude@4096", "gemini@high", "gemini@4096"
    }  # fmt: skip


def test_open_servers_get_the_effort_in_the_body_their_profile_says(bench: Bench) -> None:
    """vLLM or SGLang serving Qwen3 (``enable_thinking``: the profile's own extra_body kept) and
    a proxy that takes a ``thinking`` budget, on the OpenAI-compatible fake server."""
    _thinking_profile(bench, "enable_thinking", name="qwen")
    _thinking_profile(bench, "thinking_budget", name="proxy")
    profile = bench.pytester.path / "profiles" / "qwen.yaml"
    profile.write_text(
        profile.read_text().replace("openai/fake-thinker", "openai/qwen")
        + "\n    params: {extra_body: {top_k: 20, chat_template_kwargs: {keep: 1}}}\n"
    )
    bench.server.add_rule(Rule(reply="Paris"))
    bench.eval_file("capitals", "effort: [none, high]\n" + CAPITAL)
    bench.run("--models=qwen,proxy").assert_outcomes(passed=4)
    sent = {
        (r.body["model"], str(r.body.get("chat_template_kwargs")), str(r.body.get("thinking")), r.body.get("top_k"))
        for r in bench.server.chat_requests()
    }  # fmt: skip
    assert sent == {
        ("qwen", "{'keep': 1, 'enable_thinking': False}", "None", 20),
        ("qwen", "{'keep': 1, 'enable_thinking': True}", "None", 20),
        ("fake-thinker", "None", "{'type': 'disabled'}", None),
        ("fake-thinker", "None", "{'type': 'enabled', 'budget_tokens': 4096}", None),
    }
    assert all("reasoning_effort" not in r.body for r in bench.server.chat_requests())


def test_an_older_record_reads_with_no_effort_after_its_temperature() -> None:
    from pytest_llmbench.results_folder import upgrade_record

    old = {"schema": 1, "model": "m", "temperature": 0.2, "optimized": False, "outcome": "passed"}
    upgraded = upgrade_record(old)
    assert upgraded["effort"] is None
    keys = list(upgraded)
    assert keys[keys.index("temperature") + 1] == "effort"


def test_the_effort_board_puts_each_models_efforts_side_by_side() -> None:
    from pytest_llmbench.results.effort_table import effort_board
    from pytest_llmbench.results.summary import records_frame

    def record(
        model: str, effort: str | int | None, passed: bool, reasoning: int | None
    ) -> dict[str, Any]:
        label = model if effort is None else f"{model}@{effort}"
        return {
            "suite": "s", "case_id": "c", "model": label, "profile": model, "effort": effort,
            "repeat": 0, "outcome": "passed" if passed else "failed", "passed": passed,
            "score": float(passed), "output_tokens": 10, "reasoning_tokens": reasoning,
            "cost_usd": 0.01, "latency_s": 1.0, "eval_type": "quality", "cached": False,
        }  # fmt: skip

    records = [
        record("b:terse", 8000, True, 7),
        record("b:terse", "high", True, 5),
        record("a", "max", True, None),
        record("a", "none", False, None),
        record("b:terse", "low", False, 2),
        record("plain", None, True, None),  # outside the axis: not in the board
    ]
    board = effort_board(records_frame(records))
    assert board is not None
    assert list(zip(board["model"], board["effort"], strict=True)) == [
        ("a", "none"), ("a", "max"), ("b:terse", "low"), ("b:terse", "high"), ("b:terse", "8000")
    ]  # fmt: skip
    assert board["pass_rate"].tolist() == [0.0, 1.0, 0.0, 1.0, 1.0]
    assert board["reasoning_tokens_total"].tolist()[2:] == [2, 5, 7]
    assert board["reasoning_tokens_total"].isna().tolist()[:2] == [True, True]
    assert effort_board(records_frame([record("plain", None, True, None)])) is None


@pytest.mark.parametrize("client", ["auto", "litellm"])
def test_both_clients_send_the_effort_alike(bench: Bench, client: str) -> None:
    _thinking_profile(bench)
    bench.eval_file("capitals", "effort: [low, high]\n" + CAPITAL)
    _effort_rules(bench)
    bench.run("--models=thinker", f"--client={client}").assert_outcomes(passed=1, failed=1)
    bodies = sorted(
        (r.body["reasoning_effort"], r.body["model"]) for r in bench.server.chat_requests()
    )
    assert bodies == [("high", "fake-thinker"), ("low", "fake-thinker")]
    records = {r["effort"]: r for r in bench.records()}
    assert records["high"]["reasoning"] == LONG_THOUGHT and records["low"]["response"] == "Lyon"
