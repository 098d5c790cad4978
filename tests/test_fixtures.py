"""The fixtures plain Python tests share with eval items: llm, eval_case, workdir, record_score."""

from __future__ import annotations

import json

import pytest
from conftest import Bench, Rule


def test_llm_parametrizes_plain_tests_over_models_and_repeats(bench: Bench) -> None:
    bench.pytester.makepyfile(
        test_plain="""
        def test_ask(llm):
            answer = llm.complete("Say hi", max_tokens=8)
            assert answer.text == "hi there"
            assert answer.output_tokens == 2
        """
    )
    bench.server.add_rule(Rule(reply="hi there"))
    result = bench.run("--models=@fakes", "--repeat=2", "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*test_plain.py::test_ask?fake-r0? PASSED*",
            "*test_plain.py::test_ask?fake-r1? PASSED*",
            "*test_plain.py::test_ask?fake2-r0? PASSED*",
            "*test_plain.py::test_ask?fake2-r1? PASSED*",
        ]
    )
    bodies = [request.body for request in bench.server.chat_requests()]
    assert sorted(body["model"] for body in bodies) == ["fake-model"] * 2 + ["fake-model-2"] * 2
    assert all(body["max_tokens"] == 8 for body in bodies)
    records = bench.records()
    assert sorted((r["model"], r["repeat"]) for r in records) == [
        ("fake", 0), ("fake", 1), ("fake2", 0), ("fake2", 1)
    ]  # fmt: skip
    assert all(r["suite"] == "test_plain" and r["case_id"] == "test_ask" for r in records)
    assert all(r["output_tokens"] == 2 and r["response"] == "hi there" for r in records)


def test_record_score_and_metrics_reach_the_record(bench: Bench) -> None:
    bench.pytester.makepyfile(
        test_scored="""
        def test_graded(llm, record_score):
            answer = llm.complete("Name a colour", system="Answer in one word.")
            llm.complete(messages=[{"role": "user", "content": "again"}])
            record_score(0.75)
            record_score(3, name="words")

        def test_no_llm(record_score):
            record_score(1.0)
        """
    )
    bench.server.add_rule(Rule(reply="blue"))
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=2)
    by_case = {r["case_id"]: r for r in bench.records()}
    graded = by_case["test_graded"]
    assert graded["score"] == 0.75
    assert graded["metrics"] == {"words": 3.0}
    assert graded["prompt"] == "again"
    # Tokens and cost are summed over both calls the test made.
    first, _second = bench.server.chat_requests()
    assert first.body["messages"][0] == {"role": "system", "content": "Answer in one word."}
    assert graded["output_tokens"] == 2
    assert by_case["test_no_llm"]["score"] == 1.0
    assert by_case["test_no_llm"]["model"] is None


def test_record_score_rejects_scores_outside_0_1(bench: Bench) -> None:
    bench.pytester.makepyfile(
        test_bad="""
        def test_bad(record_score):
            record_score(1.5)
        """
    )
    result = bench.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*a score is between 0 and 1, got 1.5*"])


def test_provider_outage_in_plain_test_is_an_error_record(bench: Bench) -> None:
    bench.pytester.makepyfile(
        test_outage="""
        def test_ask(llm):
            llm.complete("hello")
        """
    )
    bench.server.add_rule(Rule(status=503, error_message="overloaded"))
    result = bench.run("--models=fake", "--max-retries=0")
    result.assert_outcomes(failed=1)
    (record,) = bench.records()
    assert record["outcome"] == "error"
    assert record["error_kind"] == "provider"
    assert "overloaded" in record["error"]
    assert record["score"] is None


def test_workdir_is_seeded_from_case_files_for_eval_items(bench: Bench) -> None:
    bench.pytester.makeconftest(
        """
        import json, pytest

        @pytest.fixture(autouse=True)
        def list_workdir(request):
            case = getattr(request.node, "case", None)
            root = request.getfixturevalue("workdir") if case is not None else None
            yield
            if case is not None:
                files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
                contents = {f: (root / f).read_text() for f in files}
                out = request.config.rootpath / f"workdir-{case.id}.json"
                out.write_text(json.dumps({"files": contents, "in_tmp": "workdir" in str(root)}))
        """
    )
    bench.eval_file(
        "files",
        """
        cases:
          - id: seeded
            prompt: Read notes
            expected: ok
            files: {notes.txt: "remember", src/app.py: "print(1)"}
          - id: empty
            prompt: Nothing
            expected: ok
        """,
    )
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=2)
    seeded = json.loads((bench.pytester.path / "workdir-seeded.json").read_text())
    assert seeded == {"files": {"notes.txt": "remember", "src/app.py": "print(1)"}, "in_tmp": True}
    empty = json.loads((bench.pytester.path / "workdir-empty.json").read_text())
    assert empty["files"] == {}


def test_workdir_for_plain_tests_uses_marker_and_refuses_escapes(bench: Bench) -> None:
    bench.pytester.makepyfile(
        test_wd="""
        import pytest

        @pytest.mark.llmbench_files({"data/input.csv": "a,b"})
        def test_seeded(workdir):
            assert (workdir / "data" / "input.csv").read_text() == "a,b"
            assert workdir.name == "workdir"

        @pytest.mark.llmbench_files({"../escape.txt": "x"})
        def test_escape(workdir):
            pass

        @pytest.mark.llmbench_files({"/etc/evil": "x"})
        def test_absolute(workdir):
            pass
        """
    )
    result = bench.run("--strict-markers")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(["*'../escape.txt' must be a relative path inside the workdir*"])
    assert not (bench.pytester.path.parent / "escape.txt").exists()


def test_eval_case_fixture_outside_eval_items_is_a_clear_error(bench: Bench) -> None:
    bench.pytester.makepyfile(
        test_case="""
        def test_wrong(eval_case):
            pass
        """
    )
    result = bench.run()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*`eval_case` fixture exists only for items of *.eval.yaml files*"]
    )


def test_eval_case_and_llm_inside_eval_item_conftest(bench: Bench) -> None:
    bench.pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(autouse=True)
        def check(request):
            if getattr(request.node, "case", None) is not None:
                case = request.getfixturevalue("eval_case")
                llm = request.getfixturevalue("llm")
                assert case.id == "one" and llm.name == request.node.model.name
        """
    )
    bench.eval_file("one", "cases: [{id: one, prompt: hi, expected: ok}]")
    result = bench.run("--models=fake,fake2")
    result.assert_outcomes(passed=2)


def test_llm_calls_are_budgeted_and_replayed_like_eval_calls(bench: Bench) -> None:
    bench.pricey_profile()
    bench.pytester.makepyfile(
        test_paid="""
        def test_twice(llm):
            llm.complete("Say hi")
            llm.complete("Say hi again")
        """
    )
    bench.server.add_rule(Rule(reply="hi there"))
    # The first call spends more than --max-cost: the second is not made, the test is skipped.
    result = bench.run("--models=pricey", "--max-cost=0.5")
    result.assert_outcomes(skipped=1)
    assert len(bench.server.chat_requests()) == 1
    # The budget stopped the test: counted as not run, with the budget's exit status.
    (record,) = bench.records()
    assert (record["outcome"], record["error_kind"]) == ("skipped", "budget")
    assert result.ret == 6
    # Under --cache=replay a call without a cached answer is a cache miss, never a request.
    bench.server.reset()
    result = bench.run("--models=pricey", "--cache=replay")
    result.assert_outcomes(failed=1)
    assert bench.server.chat_requests() == []
    (record,) = bench.records()
    assert (record["outcome"], record["error_kind"]) == ("error", "cache_miss")


def test_acomplete_runs_from_another_event_loop(bench: Bench) -> None:
    bench.pytester.makepyfile(
        test_async="""
        import asyncio

        def test_async(llm):
            async def main():
                first, second = await asyncio.gather(llm.acomplete("a"), llm.acomplete("b"))
                return first.text + second.text
            assert asyncio.run(main()) == "okok"
        """
    )
    result = bench.run("--models=fake")
    result.assert_outcomes(passed=1)
    assert len(bench.server.chat_requests()) == 2


def test_llm_calls_are_cached_like_eval_calls(bench: Bench) -> None:
    bench.pytester.makepyfile(
        test_cached="""
        def test_twice(llm):
            first = llm.complete("Say hi")
            second = llm.complete("Say hi")
            assert first.text == second.text == "hi there"
        """
    )
    bench.server.add_rule(Rule(reply="hi there"))
    bench.run("--models=fake", "--cache=use").assert_outcomes(passed=1)
    # The same prompt twice in one test is two answers: each call has its own cache entry.
    assert len(bench.server.chat_requests()) == 2
    result = bench.run("--models=fake", "--cache=use")
    result.assert_outcomes(passed=1)
    assert len(bench.server.chat_requests()) == 2, "the second run is answered from the cache"
    assert bench.records()[-1]["cached"] is True


@pytest.mark.parametrize("concurrency", [1, 3])
def test_llm_calls_obey_concurrency(bench: Bench, concurrency: int) -> None:
    """Three overlapping ``acomplete`` calls of one test take the model's slots like eval calls."""
    from fakeserver import peak_in_flight

    bench.server.add_rule(Rule(delay_s=0.3))
    bench.pytester.makepyfile(
        test_async="""
        import asyncio

        def test_async(llm):
            async def main():
                return await asyncio.gather(*(llm.acomplete(f"q{i}") for i in range(3)))
            assert [c.text for c in asyncio.run(main())] == ["ok"] * 3
        """
    )
    result = bench.run("--models=fake", "--concurrency", str(concurrency))
    result.assert_outcomes(passed=1)
    requests = bench.server.chat_requests()
    assert len(requests) == 3
    assert peak_in_flight(requests) == concurrency


@pytest.mark.parametrize("limit", ["--rpm=1", "--tpm=60"])
def test_llm_calls_obey_rpm_and_tpm(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, limit: str
) -> None:
    """A plain test's calls wait for the model's rate window like eval calls (a short window
    here, in-process, so that the test does not wait a minute)."""
    from pytest_llmbench.engine import pacing

    window_s = 1.5
    monkeypatch.setattr(pacing, "_RATE_WINDOW_S", window_s)
    bench.pytester.makepyfile(
        test_paced="""
        def test_twice(llm):
            assert llm.complete("Say hi").text == "ok"
            assert llm.complete("Say hi again").text == "ok"
        """
    )
    # Each call is counted at more than half of 60 tokens (its prompt and the answer's
    # allowance): one call per window.
    result = bench.run("--models=fake", limit)
    result.assert_outcomes(passed=1)
    first, second = bench.server.chat_requests()
    assert second.time - first.time >= window_s * 0.9, "the second call did not wait"
    (record,) = bench.records()
    assert record["rate_limit_wait_s"] >= window_s * 0.5


def test_llm_calls_are_not_held_without_a_limit(bench: Bench) -> None:
    bench.pytester.makepyfile(
        test_free="""
        def test_twice(llm):
            llm.complete("Say hi")
            llm.complete("Say hi again")
        """
    )
    bench.run("--models=fake").assert_outcomes(passed=1)
    (record,) = bench.records()
    assert record["rate_limit_wait_s"] == 0
