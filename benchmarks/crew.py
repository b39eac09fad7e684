"""
A scenario's worker processes, started together and always ended together.

Workers are forked (the parent holds no threads, so that is safe, and it
starts them in milliseconds) and marked daemonic, and :meth:`Crew.close`
joins each one, then terminates and finally kills any that linger, by its own
process handle: a run never leaves a process behind, however it ends.
Workers ignore Ctrl-C, which the parent turns into that same clean-up.
"""

from __future__ import annotations

import multiprocessing
import signal
import time
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from types import TracebackType
from typing import Any

CONTEXT = multiprocessing.get_context("fork")


def _worker(body: Callable[..., None], *args: Any) -> None:
    """
    Run a worker's body with Ctrl-C ignored.

    Ctrl-C reaches the whole process group; the parent alone handles it, and
    ends its workers through :meth:`Crew.close`.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    body(*args)


class Crew:
    """The worker processes of one scenario run; use it as a context manager."""

    def __init__(self) -> None:
        self._processes: list[Any] = []

    def __enter__(self) -> Crew:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # After a failure or Ctrl-C there is nothing to wait for.
        self.close(grace=5.0 if kind is None else 0.0)

    def shared_counts(self, size: int) -> Any:
        """:returns: an array of ``size`` 64-bit counters the workers can write without locks."""
        return CONTEXT.RawArray("q", size)

    def start(self, body: Callable[..., None], spec: Any, *shared: Any) -> Connection:
        """
        Fork one worker.

        :param body: one of the ``run_*`` functions of :mod:`benchmarks.workers`
            (or :func:`benchmarks.idle.run_idle`).
        :param spec: its spec.
        :param shared: shared arrays it takes after the pipe.
        :returns: the parent's end of the worker's pipe.
        """
        ours, theirs = CONTEXT.Pipe()
        process = CONTEXT.Process(target=_worker, args=(body, spec, theirs, *shared), daemon=True)
        process.start()
        theirs.close()
        self._processes.append(process)
        return ours

    @staticmethod
    def gather(pipes: list[Connection], deadline: float) -> list[dict[str, Any] | None]:
        """
        Take the next message from each pipe.

        :param deadline: ``time.monotonic()`` after which missing answers stay missing.
        :returns: one message per pipe, in order; ``None`` for a worker that did
            not answer in time or died.
        """
        answers: dict[int, dict[str, Any] | None] = {}
        waiting = {id(pipe): pipe for pipe in pipes}
        while waiting:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for pipe in wait(list(waiting.values()), remaining):
                try:
                    answers[id(pipe)] = pipe.recv()  # type: ignore[union-attr]
                except (EOFError, OSError):
                    answers[id(pipe)] = None
                del waiting[id(pipe)]
        return [answers.get(id(pipe)) for pipe in pipes]

    @staticmethod
    def tell(pipes: list[Connection], message: str) -> None:
        """Send ``message`` to each worker still listening."""
        for pipe in pipes:
            try:
                pipe.send(message)
            except (BrokenPipeError, OSError):
                continue

    def close(self, grace: float = 5.0) -> None:
        """Wait up to ``grace`` seconds for the workers to end, then end the rest."""
        deadline = time.monotonic() + grace
        for process in self._processes:
            process.join(max(0.0, deadline - time.monotonic()))
        for process in self._processes:
            if process.is_alive():
                process.terminate()
                process.join(2.0)
            if process.is_alive():
                process.kill()
                process.join(2.0)
        self._processes = []
