"""The controller's view of items waiting on the workers (engine/watch.py)."""

from __future__ import annotations

from pytest_llmbench.engine.watch import WorkerWatch


def _watch(lines: list[str], every_s: float = 30.0) -> WorkerWatch:
    return WorkerWatch(lambda: ["gpt-4o", "gpt-4o-mini", "local/smol"], lines.append, every_s)


def test_model_is_read_from_an_eval_items_id() -> None:
    watch = _watch([])
    assert watch.model_of("a.eval.yaml::c[gpt-4o-mini-r0]") == "gpt-4o-mini"
    assert watch.model_of("a.eval.yaml::c[gpt-4o-t0.7-r3]") == "gpt-4o"
    assert watch.model_of("d/a.eval.yaml::c[x]::y[local/smol-r1]") == "local/smol"
    assert watch.model_of("tests/test_a.py::test_b[gpt-4o]") is None  # not an eval item's id
    assert watch.model_of("tests/test_a.py::test_b") is None
    # A parameter id holding "::" (a node id as a test parameter) is read, not a crash.
    assert watch.model_of("tests/test_a.py::test_b[x.py::c]") is None
    assert watch.model_of("a.eval.yaml::c[gpt-4o-mini-r0::x]") == "gpt-4o-mini"
    assert watch.model_of("a.eval.yaml::c[other-r0]") is None


def test_only_items_past_the_interval_are_announced_per_model() -> None:
    lines: list[str] = []
    watch = _watch(lines, every_s=30.0)
    watch.pytest_runtest_logstart("a.eval.yaml::c1[gpt-4o-r0]")
    watch.pytest_runtest_logstart("a.eval.yaml::c2[gpt-4o-r0]")
    watch.pytest_runtest_logstart("a.eval.yaml::c1[local/smol-r0]")
    watch.pytest_runtest_logfinish("a.eval.yaml::c1[local/smol-r0]")
    started = watch._running["a.eval.yaml::c1[gpt-4o-r0]"][1]
    try:
        assert watch.waiting(started + 10) == []
        assert watch.waiting(started + 45) == [
            "llmbench: waiting 45 s on gpt-4o: 2 items in progress on the workers"
        ]
        watch.pytest_runtest_logfinish("a.eval.yaml::c2[gpt-4o-r0]")
        assert watch.waiting(started + 61) == [
            "llmbench: waiting 61 s on gpt-4o: 1 item in progress on the workers"
        ]
    finally:
        watch.close()
    assert lines == []  # the thread said nothing: nothing waited 30 s
