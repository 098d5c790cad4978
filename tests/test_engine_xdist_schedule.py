"""How items are handed to xdist workers: queues as deep as the look-ahead, to the last item.

The scheduler is driven here as xdist's DSession drives it (add nodes, their collections,
``schedule``, ``mark_test_complete``) with stand-in workers that keep what they were sent; one
test runs real xdist workers and reads the queue each of them had before every item.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pandas  # noqa: F401  (imported once: numpy cannot be re-imported by pytester's runs)
import pytest
from conftest import Bench, Rule
from xdist.scheduler import LoadScheduling

from pytest_llmbench.config import eval_nodeid_matcher
from pytest_llmbench.engine.xdist_schedule import LookaheadScheduling

DEPTH = 10


@dataclass(eq=False)
class StandInWorker:
    """What a scheduler needs of an xdist worker: it queues what it is sent."""

    name: str
    queue: list[int] = field(default_factory=list)
    sent: list[list[int]] = field(default_factory=list)
    shutting_down: bool = False
    shutdowns: int = 0

    @property
    def gateway(self) -> SimpleNamespace:
        return SimpleNamespace(id=self.name)

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.append(list(indices))
        self.queue.extend(indices)

    def send_runtest_all(self) -> None:  # pragma: no cover - xdist's load scheduling never does
        raise AssertionError("not expected")

    def shutdown(self) -> None:
        self.shutting_down = True
        self.shutdowns += 1


def evals(count: int, file: str = "suite.eval.yaml") -> list[str]:
    return [f"{file}::c{index}[fake-r0]" for index in range(count)]


def plain(count: int) -> list[str]:
    return [f"test_plain.py::test_{index}" for index in range(count)]


def started(
    pytester: pytest.Pytester, scheduler_of: Any, collection: list[str], workers: int = 2
) -> tuple[Any, list[StandInWorker]]:
    """A scheduler with ``workers`` stand-ins that collected ``collection``, first batch sent."""
    config = pytester.parseconfig("--tx", f"{workers}*popen", "--dist", "load")
    scheduler = scheduler_of(config)
    nodes = [StandInWorker(f"gw{index}") for index in range(workers)]
    for node in nodes:
        scheduler.add_node(node)
    for node in nodes:
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    return scheduler, nodes


def ours(config: pytest.Config) -> LookaheadScheduling:
    return LookaheadScheduling(
        config, None, depth_of=lambda: DEPTH, is_eval=eval_nodeid_matcher(config)
    )


def xdists(config: pytest.Config) -> LoadScheduling:
    return LoadScheduling(config, None)


def run_to_end(
    scheduler: Any, nodes: list[StandInWorker], duration: float, watch: Any = None
) -> list[int]:
    """Complete items worker after worker (each its oldest), as the reports would arrive."""
    done: list[int] = []
    turn = 0
    while any(node.queue for node in nodes):
        node = nodes[turn % len(nodes)]
        turn += 1
        if not node.queue:
            continue
        index = node.queue.pop(0)
        done.append(index)
        scheduler.mark_test_complete(node, index, duration)
        if watch is not None:
            watch(scheduler, node)
    return done


def test_eval_queues_stay_at_the_lookahead_while_items_are_unsent(
    pytester: pytest.Pytester,
) -> None:
    collection = evals(200)
    scheduler, nodes = started(pytester, ours, collection)
    assert all(len(node.queue) >= DEPTH for node in nodes)
    seen: list[tuple[int, int]] = []

    def watch(scheduler: Any, node: StandInWorker) -> None:
        seen.append((len(scheduler.pending), len(node.queue)))

    # Items that take 0.3 s: xdist alone stops sending while a worker has two items left.
    done = run_to_end(scheduler, nodes, duration=0.3, watch=watch)
    assert sorted(done) == list(range(200)), "every item runs once"
    assert all(node.shutdowns == 1 for node in nodes)
    while_unsent = [queued for pending, queued in seen if pending]
    assert while_unsent and min(while_unsent) >= DEPTH


def test_xdist_alone_starves_the_queue_in_the_same_run(pytester: pytest.Pytester) -> None:
    """What the rule fixes: the same run with xdist's scheduler has two items queued while
    dozens are still unsent."""
    scheduler, nodes = started(pytester, xdists, evals(200))
    seen: list[tuple[int, int]] = []
    run_to_end(
        scheduler,
        nodes,
        duration=0.3,
        watch=lambda s, node: seen.append((len(s.pending), len(node.queue))),
    )
    starved = [pending for pending, queued in seen if pending >= 20 and queued <= 2]
    assert starved, "xdist kept the queues deep: this scenario no longer shows the problem"


def test_the_tail_is_shared_between_workers(pytester: pytest.Pytester) -> None:
    scheduler, nodes = started(pytester, ours, evals(30))
    # 30 items, 2 workers: xdist's first batch is 3 each; the top-up takes a fair share.
    assert sum(len(node.queue) for node in nodes) == 30 - len(scheduler.pending)
    assert all(len(node.queue) >= DEPTH for node in nodes)
    done = run_to_end(scheduler, nodes, duration=0.0)
    assert sorted(done) == list(range(30))
    counts = [sum(len(batch) for batch in node.sent) for node in nodes]
    assert min(counts) >= 30 // 2 - DEPTH, counts


@pytest.mark.parametrize("count", [1, 3, 4, 7])
def test_small_runs_send_everything_once_and_shut_down(
    pytester: pytest.Pytester, count: int
) -> None:
    scheduler, nodes = started(pytester, ours, evals(count))
    assert not scheduler.pending, "the look-ahead covers the whole run"
    assert all(node.shutting_down for node in nodes)
    done = run_to_end(scheduler, nodes, duration=0.0)
    assert sorted(done) == list(range(count))
    assert all(node.shutdowns == 1 for node in nodes)


def test_plain_tests_are_scheduled_as_xdist_does(pytester: pytest.Pytester) -> None:
    """Without eval items the run's settings are not even read (no .env, no profiles)."""

    def unread(config: pytest.Config) -> LookaheadScheduling:
        def depth() -> int:
            raise AssertionError("the look-ahead was computed for plain tests")

        return LookaheadScheduling(
            config, None, depth_of=depth, is_eval=eval_nodeid_matcher(config)
        )

    collection = plain(120)
    runs = []
    for scheduler_of in (unread, xdists):
        scheduler, nodes = started(pytester, scheduler_of, collection)
        run_to_end(scheduler, nodes, duration=0.3)
        runs.append([node.sent for node in nodes])
    assert runs[0] == runs[1]


def test_a_top_up_stops_at_the_first_plain_test(pytester: pytest.Pytester) -> None:
    collection = evals(40) + plain(60) + evals(40, "other.eval.yaml")
    scheduler, nodes = started(pytester, ours, collection)
    is_eval = eval_nodeid_matcher(scheduler.config)
    for node in nodes:
        for batch in node.sent[1:]:  # after xdist's first batch, the top-ups
            assert all(is_eval(collection[index]) for index in batch)
    done = run_to_end(scheduler, nodes, duration=0.0)
    assert sorted(done) == list(range(len(collection)))


def test_the_eval_pattern_follows_the_ini(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nllmbench_pattern = *.llm.yml\n")
    is_eval = eval_nodeid_matcher(pytester.parseconfig())
    assert is_eval("evals/a.llm.yml::case[m-r0]")
    assert not is_eval("evals/a.eval.yaml::case[m-r0]")
    assert not is_eval("tests/test_a.py::test_b")


def chosen_scheduler(pytester: pytest.Pytester, *args: str) -> Any:
    """The scheduler xdist's DSession would use: the hook as configured plugins answer it."""
    # xdist turns -n 2 into these when the command line runs; parseconfigure does not.
    config = pytester.parseconfigure("--tx", "2*popen", "--dist", "load", *args)
    return config.hook.pytest_xdist_make_scheduler(config=config, log=None)


def test_replaces_xdists_load_scheduler_only(bench: Bench) -> None:
    chosen = chosen_scheduler(bench.pytester, "--models=fake")
    assert isinstance(chosen, LookaheadScheduling)
    assert chosen.depth_of() == 2 * 4 + 2, "--concurrency 8 over 2 workers: 4 each, twice, +2"
    wide = chosen_scheduler(bench.pytester, "--models=fake,fake2", "--concurrency=64")
    assert isinstance(wide, LookaheadScheduling) and wide.depth_of() == 2 * (32 + 32) + 2
    assert type(chosen_scheduler(bench.pytester, "--maxschedchunk", "4")) is LoadScheduling
    for mode in ("loadscope", "worksteal", "each"):
        kept = chosen_scheduler(bench.pytester, "--dist", mode)
        assert not isinstance(kept, LoadScheduling), mode


def test_another_plugins_scheduler_is_kept(bench: Bench) -> None:
    bench.pytester.makeconftest(
        """
from xdist.scheduler import LoadScheduling

class Mine(LoadScheduling):
    pass

def pytest_xdist_make_scheduler(config, log):
    return Mine(config, log)
"""
    )
    assert type(chosen_scheduler(bench.pytester)).__name__ == "Mine"


QUEUE_LOG = """
import json, os
import pytest
from pytest_llmbench.engine.prefetch import _xdist_interactor, _xdist_queue

seen = []

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    if hasattr(item.config, "workerinput"):
        seen.append(len(_xdist_queue(_xdist_interactor(item.config))))

def pytest_sessionfinish(session):
    worker = getattr(session.config, "workerinput", {}).get("workerid")
    if worker:
        with open(f"queue-{worker}.json", "w") as handle:
            json.dump(seen, handle)
"""


@pytest.mark.slow
def test_real_workers_keep_their_lookahead_queued_to_the_end(bench: Bench) -> None:
    """Under ``-n 2`` no item starts with its worker's queue nearly empty while that worker has
    more items to run (xdist alone leaves one to three queued for the last few dozen)."""
    bench.server.add_rule(Rule(delay_s=0.2))
    bench.eval_file(
        "many",
        "cases:\n"
        + "".join(f"  - {{id: c{i:03d}, prompt: Question {i}, assert: [contains], expected: ok}}\n"
                  for i in range(160)),
    )  # fmt: skip
    bench.pytester.makeconftest(QUEUE_LOG)
    result = bench.run_subprocess("-n", "2", "--models=fake", "--concurrency=16")
    result.assert_outcomes(passed=160)
    lookahead = 16  # 8 calls per worker, twice over
    for worker in ("gw0", "gw1"):
        queued = json.loads((bench.pytester.path / f"queue-{worker}.json").read_text())
        assert len(queued) > lookahead
        # A quarter of the look-ahead: a worker runs its ready items faster than the
        # controller's top-ups come back, so the queue dips between them.
        starved = [
            (position, length)
            for position, length in enumerate(queued)
            if length < min(lookahead // 4, len(queued) - position - 1)
        ]
        assert not starved, (worker, queued)


def test_the_items_of_a_case_go_to_one_worker(pytester: pytest.Pytester) -> None:
    """Every model, variant and repeat of a case goes where its first item went, however far
    apart they are in the collection (prompt variants come case after case)."""
    cases = [f"c{index}" for index in range(40)]
    collection = [
        f"suite.eval.yaml::{case}[{model}-r{repeat}]"
        for variant in ("", "-terse")
        for case in cases
        for model in (f"a{variant}", f"b{variant}")
        for repeat in (0, 1)
    ]
    scheduler, nodes = started(pytester, ours, collection)
    done = run_to_end(scheduler, nodes, 0.5)
    where: dict[str, set[str]] = {}
    for node in nodes:
        for index in (index for batch in node.sent for index in batch):
            where.setdefault(collection[index].rsplit("[", 1)[0], set()).add(node.name)
    assert sorted(where) == sorted(f"suite.eval.yaml::{case}" for case in cases)
    assert all(len(names) == 1 for names in where.values())
    assert sorted(done) == list(range(len(collection)))
    sent = sorted(index for node in nodes for batch in node.sent for index in batch)
    assert sent == list(range(len(collection)))  # each item sent once
    assert {name for names in where.values() for name in names} == {"gw0", "gw1"}


def test_a_crashed_workers_items_are_sent_again_with_their_cases(
    pytester: pytest.Pytester,
) -> None:
    collection = [
        f"suite.eval.yaml::c{case}[m{model}-r0]" for case in range(8) for model in range(3)
    ]
    scheduler, nodes = started(pytester, ours, collection, workers=2)
    crashed = nodes[0]
    requeued = crashed.queue[1:]  # [0] is the item it crashed on
    assert len(requeued) >= 3
    scheduler.remove_node(crashed)
    survivor = nodes[1]
    survivor.sent.clear()
    run_to_end(scheduler, [survivor], 0.5)
    sent_again = [index for batch in survivor.sent for index in batch]
    assert sorted(set(requeued) - set(sent_again)) == []  # every requeued item is run again
    for batch in survivor.sent:  # a case's requeued items travel together
        cases = {collection[index].rsplit("[", 1)[0] for index in batch}
        for case in cases:
            mates = [i for i in requeued if collection[i].startswith(case + "[")]
            assert set(mates) <= set(batch) or not set(mates) & set(batch)
