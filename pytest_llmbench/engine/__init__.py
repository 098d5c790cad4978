"""Engine: every model call of a process, from a frozen plan to an answer.

Collection builds one :class:`~.plan.CallPlan` per item. Before each item runs,
:mod:`.prefetch` hands the next plans to the :class:`~.scheduler.CallScheduler` (look-ahead,
take, cancel), which starts their answers on the background loop of :mod:`.loop`;
:mod:`.answer` is the one call path (optimizer rewrite, plain call, agent loop or
:mod:`.solver`, then the judges of :mod:`.grading`), and every call waits its turn in
:mod:`.pacing` (lanes and rate limits of :mod:`.ratelimit`, the response :mod:`.cache`, the
budget). :mod:`.runtime` holds the per-process pieces, :mod:`.targets` resolves where a profile
is called, :mod:`.xdist_schedule` keeps xdist workers' queues deep enough, :mod:`.estimate` is
``--estimate-cost`` and :mod:`.preflight` is ``--check-models``. Nothing here imports the pytest
item: the engine takes plans, and gives back :class:`~.request.Answer` values.
"""
