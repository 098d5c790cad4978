"""The per-process engine: one event loop on a background thread that runs model calls.

pytest runs items one at a time on the main thread. Calls are coroutines submitted to a loop
that lives on its own thread, so a test never nests event loops (it works beside pytest-asyncio)
and later work can start the calls of upcoming items while pytest reports earlier ones.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
#: How long closing waits for cancelled calls to unwind.
_SETTLE_S = 2.0


class Engine:
    """Owns the background event loop of this process."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._on_calling: list[Callable[[], None]] = []
        self._calling = False

    def when_calling(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once calls are under way: on the engine's thread right after the
        first submitted calls took their first step (their set-up done, such as importing the
        HTTP client, they wait on the network), or now when that happened already. A run whose
        answers all come from the cache submits none and never calls it."""
        with self._lock:
            if not self._calling:
                self._on_calling.append(callback)
                return
        callback()

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        running = self._loop  # once set, only close() changes it: no lock on the common path
        if running is not None:
            return running
        with self._lock:
            if self._loop is not None:
                return self._loop
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="llmbench-engine", daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
            return loop

    def _after_first_steps(self, loop: asyncio.AbstractEventLoop) -> None:
        """Once, after calls were queued on ``loop``: run the :meth:`when_calling` callbacks
        behind their first steps. The hop through ``call_soon`` queues them after the tasks
        that the callback queued just before creates."""
        if self._calling:  # set once under the lock and never reset: a plain read suffices
            return
        with self._lock:
            first, self._calling = not self._calling, True
            callbacks, self._on_calling = (self._on_calling, []) if first else ([], [])
        if callbacks:
            loop.call_soon_threadsafe(loop.call_soon, _run_all, callbacks)

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the engine loop."""
        loop = self._ensure_loop()
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        self._after_first_steps(loop)
        return future

    def submit_many(
        self, coros: Sequence[Coroutine[Any, Any, T]]
    ) -> list[concurrent.futures.Future[T]]:
        """Schedule ``coros`` on the engine loop in one step of it: one wake-up of its thread,
        where :meth:`submit` takes one per coroutine. Each future is :meth:`submit`'s: its
        coroutine's result or exception, and cancelling it cancels the coroutine."""
        if len(coros) <= 1:
            return [self.submit(coro) for coro in coros]
        loop = self._ensure_loop()
        futures: list[concurrent.futures.Future[T]] = [concurrent.futures.Future() for _ in coros]

        def start() -> None:
            for coro, future in zip(coros, futures, strict=True):
                if future.cancelled():
                    coro.close()  # cancelled before it started
                    continue
                _bind(loop.create_task(coro), future, loop)

        loop.call_soon_threadsafe(start)
        self._after_first_steps(loop)
        return futures

    def cancel(self, futures: Sequence[concurrent.futures.Future[Any]]) -> None:
        """Cancel ``futures`` (of :meth:`submit`) in one step of the loop, the last submitted
        first: a call that stops frees its slot only after every queued one was cancelled, so
        none of them starts meanwhile."""
        doomed = list(reversed(futures))
        if not doomed:
            return
        with self._lock:
            loop = self._loop
        if loop is None or loop.is_closed():
            for future in doomed:
                future.cancel()
            return
        loop.call_soon_threadsafe(lambda: [future.cancel() for future in doomed])

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the engine loop and wait; Ctrl-C cancels it."""
        future = self.submit(coro)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def close(self) -> None:
        """Stop the loop and its thread (pending calls are cancelled)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(_cancel_all, loop)
        thread.join(timeout=5)
        if not thread.is_alive():
            loop.close()


def _bind(task: asyncio.Task[T], future: concurrent.futures.Future[T], loop: Any) -> None:
    """``task``'s outcome becomes ``future``'s; cancelling ``future`` cancels ``task``."""

    def settle(done: asyncio.Task[T]) -> None:
        if future.done():
            return  # cancelled from another thread meanwhile
        if done.cancelled():
            future.cancel()
            return
        error = done.exception()
        try:
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(done.result())
        except concurrent.futures.InvalidStateError:
            pass  # cancelled from another thread between the check and here

    def cancelled(done: concurrent.futures.Future[T]) -> None:
        if done.cancelled() and not loop.is_closed():
            loop.call_soon_threadsafe(task.cancel)

    task.add_done_callback(settle)
    future.add_done_callback(cancelled)


async def _close_clients() -> None:
    """Close the lean client's connections on this loop (if it made any)."""
    lean = sys.modules.get("pytest_llmbench.models.providers.openai_compatible")
    if lean is not None:
        try:
            await asyncio.wait_for(lean.close_sessions(), _SETTLE_S)
        except Exception:  # closing is tidiness; the process ends anyway
            pass


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    tasks = list(asyncio.all_tasks(loop))
    for task in tasks:
        task.cancel()

    async def settle() -> None:
        # Let cancelled tasks (ours and litellm's logging tasks) finish before the loop stops,
        # or Python warns that pending tasks were destroyed.
        if tasks:
            await asyncio.wait(tasks, timeout=_SETTLE_S)
        await _close_clients()
        loop.stop()

    loop.create_task(settle())


def _run_all(callbacks: Sequence[Callable[[], None]]) -> None:
    for callback in callbacks:
        callback()
