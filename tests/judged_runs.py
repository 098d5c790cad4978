"""Two checks the tests of every judged assertion make on a run of two cases (one passing, one
failing): its records are the same under two real xdist workers as in one process, and a run
answered from the response cache (``--cache=replay``, ``--rescore``) makes no request and
gives the same verdicts. ``fields`` picks what of the records must be equal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conftest import Bench

#: What of a run's records two runs must agree on.
Fields = Callable[[Bench], Any]


def same_under_xdist(bench: Bench, fields: Fields) -> None:
    """``-n 2`` (both workers used) and ``-n 0`` give the same ``fields``."""
    bench.run_subprocess("-n", "2", "--models=fake").assert_outcomes(passed=1, failed=1)
    assert {r["worker"] for r in bench.records()} == {"gw0", "gw1"}
    with_xdist = fields(bench)
    bench.run("--models=fake").assert_outcomes(passed=1, failed=1)
    assert fields(bench) == with_xdist


def replayed_with_no_request(bench: Bench, again: str, fields: Fields) -> None:
    """A run that fills the cache, then ``again`` (``--cache=replay`` or ``--rescore``) with
    nothing scripted on the server: no request, the same ``fields``, every judge cached."""
    bench.run("--models=fake", "--cache=use", "--cache-dir=c").assert_outcomes(passed=1, failed=1)
    first = fields(bench)
    bench.server.reset()  # a call now would be answered "ok": a malformed verdict
    bench.run("--models=fake", again, "--cache-dir=c").assert_outcomes(passed=1, failed=1)
    assert bench.server.requests == []
    assert fields(bench) == first
    assert all(j["cached"] for r in bench.records() for j in r["judges"])
