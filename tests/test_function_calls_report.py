"""A reply's tool calls in the readers of records: report.html's item detail (and pytest-html's
extras, the same block) and `llmbench view`'s item page (in Debian's chromium), each call's name
with its arguments pretty-printed as JSON, escaped (report/function_calls.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from browser import chromium_page, viewing
from conftest import Bench, Rule

from pytest_llmbench.report.function_calls import function_calls_html, pretty_arguments

XSS = "<script>alert(1)</script>"
CALLS = """
tools:
  - {name: get_weather, parameters: {type: object, properties: {city: {type: string}}}}
cases:
  - id: paris
    prompt: What is the weather in Paris?
    assert: [{type: tool-call, value: get_weather, args_match: ignore}]
  - id: talk
    turns:
      - user: What is the weather in Rome?
        assert: [{type: tool-call, value: get_weather, args: {city: Rome}}]
      - user: Thanks.
        assert: [no-tool-call]
"""


@pytest.fixture
def called(bench: Bench) -> Bench:
    """A run whose replies called a tool: a plain case, and a conversation's first turn."""
    paris = [{"name": "get_weather", "arguments": {"city": f"Paris {XSS}"}}]
    bench.server.add_rule(Rule(match="weather in Paris", tool_calls=paris))
    rome = [{"name": "get_weather", "arguments": {"city": "Rome"}}]
    bench.server.add_rule(Rule(match="weather in Rome", tool_calls=rome))
    bench.server.add_rule(Rule(match="Thanks", reply="You are welcome."))
    bench.eval_file("calls", CALLS)
    bench.run("--models=fake").assert_outcomes(passed=2)
    return bench


def test_arguments_are_indented_json_or_shown_as_sent() -> None:
    assert pretty_arguments('{"city": "Paris", "days": [1, 2]}') == (
        '{\n  "city": "Paris",\n  "days": [\n    1,\n    2\n  ]\n}'
    )
    assert pretty_arguments('{"city": "Par') == '{"city": "Par'  # broken JSON, as the model sent
    assert function_calls_html([]) == "" and function_calls_html(None) == ""
    shown = function_calls_html([{"name": "f<b>", "arguments": '{"a": "<i>"}'}])
    assert "f&lt;b&gt;" in shown and "&lt;i&gt;" in shown and "<i>" not in shown


def test_the_report_shows_each_replys_calls(called: Bench) -> None:
    page = called.out("report.html").read_text()
    blocks = re.findall(r'<ol class="function-calls">(.*?)</ol>', page, re.S)
    assert len(blocks) == 2  # the plain reply's, and the conversation's first reply's
    plain, turn = sorted(blocks, key=lambda block: "Rome" in block)
    assert '<span class="name">get_weather</span>' in plain
    # pretty-printed, the model's script escaped
    assert "&quot;city&quot;: &quot;Paris &lt;script&gt;alert(1)&lt;/script&gt;&quot;" in plain
    assert "<pre>{\n  &quot;city&quot;" in plain
    assert XSS not in page
    assert "&quot;city&quot;: &quot;Rome&quot;" in turn
    # the conversation's calls sit in the reply to turn 1, not in a block of their own
    reply = re.search(r'<li class="assistant" data-turn="1">(.*?)</li>\s*<li', page, re.S)
    assert reply is not None and "function-calls" in reply.group(1)
    assert page.count("<h4>Tool calls</h4>") == 1


# -- llmbench view, in chromium ------------------------------------------------------------------


@pytest.fixture
def viewer(called: Bench) -> Iterator[str]:
    with viewing(called, "calls") as url:
        yield url


@pytest.fixture
def page(viewer: str) -> Iterator[Any]:
    with chromium_page(viewport={"width": 1280, "height": 900}) as page:
        yield page


@pytest.mark.slow
def test_the_viewers_item_page_shows_the_calls(page: Any, viewer: str) -> None:
    page.goto(viewer + "run/0/calls")
    page.locator("#matrix tr[data-case=paris] td").nth(2).locator("a").click()
    calls = page.locator("ol.function-calls > li")
    assert calls.count() == 1
    shown = calls.inner_text()
    assert shown.startswith("get_weather")
    assert f'"city": "Paris {XSS}"' in shown  # the argument, as text, never run
    assert calls.locator("pre").is_visible()
