"""Keep each xdist worker's queue deep enough for its calls to overlap, to the last item.

A worker starts the calls of the items it has been sent before it runs them (the
:class:`~pytest_llmbench.engine.prefetch.Prefetcher`), so its concurrency is bounded by its queue.
xdist's ``--dist load`` scheduler keeps queues short on purpose, to balance the tail of the
run: it tops a worker up to half of its share of the items still unsent once the queue falls
under a quarter, and sends nothing while the worker's last item took 0.1 s or more and two
items are left. With eval items that wait on a model, queues then shrink to a few items for the
last few hundred, which run a few at a time (measured on the benchmark: the last 135 of a
worker's 1035 items took 4 s of the run's 20 s).

:class:`LookaheadScheduling` is xdist's load scheduler plus one rule: a worker with fewer eval
items queued than its look-ahead (see :func:`~pytest_llmbench.engine.pacing.lookahead`), plus the two
xdist keeps, is topped up with the eval items at the head of the unsent ones, at most its fair
share of them (the unsent items divided by the workers). Other tests are scheduled exactly as
xdist does. It replaces xdist's own ``--dist load`` scheduler only (the default of ``-n``), not
another plugin's, and not when ``--maxschedchunk`` is given: the user then chose how many items
travel at once.

It also sends the eval items of one case together (every model, variant and repeat of it, node
ids equal but for their ``[...]``): whenever one of them is sent, the others still unsent go to
the same worker. A select-best contest compares the answers of a case's items, which must
therefore be given by one process (:mod:`.contests`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from xdist.scheduler import LoadScheduling
from xdist.workermanage import parse_tx_spec_config

from .. import config as _config

#: Items xdist keeps queued so that a worker knows the item after the one it runs.
_XDIST_MIN_QUEUE = 2


def make_scheduler(config: pytest.Config, log: Any, chosen: Any) -> Any:
    """Ours in place of xdist's own load scheduler (``--dist load`` without ``--maxschedchunk``);
    any other scheduler ``chosen`` by xdist or another plugin is kept."""
    if type(chosen) is not LoadScheduling or config.getoption("maxschedchunk") is not None:
        return chosen

    def depth() -> int:
        from .pacing import lookahead

        workers = len(parse_tx_spec_config(config))
        return lookahead(_config.get_run_config(config), workers) + _XDIST_MIN_QUEUE

    is_eval = _config.eval_nodeid_matcher(config)
    return LookaheadScheduling(config, log, depth_of=depth, is_eval=is_eval)


def dist_mode(config: pytest.Config) -> str:
    """How the controller sends items to workers: ``--dist``'s mode, with
    `` --maxschedchunk`` when given to ``load`` (our scheduler then stands aside; the other
    modes ignore it)."""
    mode = str(config.getvalue("dist"))
    chunked = mode == "load" and config.getoption("maxschedchunk") is not None
    return f"{mode} --maxschedchunk" if chunked else mode


def _case_groups(collection: list[str], evals: list[bool]) -> dict[int, list[int]]:
    """Each eval item of a case with several items (node ids equal but for their ``[...]``)
    -> the collection indices of its case's items, in collection order."""
    by_case: dict[str, list[int]] = {}
    for index, nodeid in enumerate(collection):
        if evals[index] and "[" in nodeid:
            by_case.setdefault(nodeid.rsplit("[", 1)[0], []).append(index)
    return {index: group for group in by_case.values() if len(group) > 1 for index in group}


class LookaheadScheduling(LoadScheduling):  # type: ignore[misc]  # xdist ships no types
    """xdist's load scheduling, with each worker's eval items kept at ``depth`` while any are
    unsent."""

    def __init__(
        self,
        config: pytest.Config,
        log: Any,
        *,
        depth_of: Callable[[], int],
        is_eval: Callable[[str], bool],
    ) -> None:
        super().__init__(config, log)
        #: Eval items each worker keeps queued; known once the collection has eval items (the
        #: run's settings are only read then, so a run of plain tests never loads them).
        self.depth = 0
        self.depth_of = depth_of
        self._is_eval = is_eval
        self._evals: list[bool] = []
        self._only_evals = False
        #: each eval item of a case with several items -> the collection indices of its case
        self._cases: dict[int, list[int]] = {}
        self._sent: set[int] = set()  #: the indices sent so far (with cases grouped)

    def schedule(self) -> None:
        """xdist's initial distribution, then every worker topped up to the look-ahead."""
        first = self.collection is None
        if first and self.collection_is_completed and self.node2collection:
            # Before xdist's initial distribution, which sends a case's items together too.
            collection = next(iter(self.node2collection.values()))
            evals = [self._is_eval(nodeid) for nodeid in collection]
            self._cases = _case_groups(collection, evals)
        super().schedule()
        if first and self.collection is not None:
            self._evals = [self._is_eval(nodeid) for nodeid in self.collection]
            if not any(self._evals):
                self._evals = []  # plain tests only: xdist's scheduling, unchanged
                return
            self._only_evals = all(self._evals)
            self.depth = self.depth_of()
            # Under --batch (an unbounded look-ahead) every unsent eval item goes out now,
            # split evenly: each worker's calls gather into its batches at once.
            from .pacing import BATCH_LOOKAHEAD

            all_at_once = self.depth >= BATCH_LOOKAHEAD
            for position, node in enumerate(self.nodes):
                self._top_up(node, len(self.nodes) - position if all_at_once else None)
            if not self.pending:  # all sent: xdist shuts workers down once nothing is left
                for node in self.nodes:
                    if not node.shutting_down:
                        node.shutdown()

    def _send_tests(self, node: Any, num: int) -> None:
        """xdist's send of the first ``num`` unsent items, with the unsent items of their
        cases."""
        if not self._cases:
            super()._send_tests(node, num)
            return
        chosen = self.pending[:num]
        if not chosen:
            return
        del self.pending[:num]
        taken = self._sent
        taken.update(chosen)
        for index in list(chosen):
            for other in self._cases.get(index, ()):
                if other not in taken:  # not sent yet, so still unsent
                    taken.add(other)
                    self.pending.remove(other)
                    chosen.append(other)
        chosen.sort()  # run in collection order (--stop-early's waves: repeat by repeat)
        self.node2pending[node].extend(chosen)
        node.send_runtest_some(chosen)

    def remove_node(self, node: Any) -> str | None:
        """xdist's: a crashed worker's items still to run go back to the unsent ones, to be sent
        again with the unsent items of their cases."""
        self._sent.difference_update(self.node2pending.get(node, ())[1:])  # [0]: the crashed
        return super().remove_node(node)  # type: ignore[no-any-return]

    def check_schedule(self, node: Any, duration: float = 0) -> None:
        """Top the worker up to the look-ahead, then let xdist apply its own rule."""
        self._top_up(node)
        super().check_schedule(node, duration)

    def _top_up(self, node: Any, sharing: int | None = None) -> None:
        """Send ``node`` eval items up to its depth, at most its fair share of the unsent ones
        (split between ``sharing`` workers; default: all of them)."""
        if node.shutting_down or not self.pending or not self._evals:
            return
        pending = self.node2pending[node]
        # Counted on every report: skip the walk when every item is an eval item.
        queued = len(pending) if self._only_evals else sum(self._evals[i] for i in pending)
        fair_share = math.ceil(len(self.pending) / (sharing or len(self.node2pending)))
        wanted = min(self.depth - queued, fair_share)
        count = 0
        while count < wanted and self._evals[self.pending[count]]:
            count += 1
        if count:
            self._send_tests(node, count)
