"""
Child processes that use the real :class:`stompbroker.broker.store.sqlite.SQLiteStore`
with its writer thread, for :mod:`tests.integration.test_store_processes`; run as
``python -m tests.integration.store_children MODE ...``:

- ``crash DATA_DIR SYNC ROUND LOG``: write as fast as the store acknowledges,
  logging every acknowledged operation to ``LOG``, until killed;
- ``hold DATA_DIR``: open the store, print ``held``, and keep it open until stdin
  closes;
- ``open DATA_DIR``: try to open the store and print what happened;
- ``stop DATA_DIR``: add messages and stop the reactor at once, without closing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from stompbroker.broker.store.base import RecoveredState, StoreError
from stompbroker.broker.store.sqlite import SQLiteStore
from tests.support.store import Sent, result_of, sent, sqlite_store

#: Concurrent writers in the crash child, each waiting for its last add (as a
#: producer waits for its receipt) before the next.
CRASH_WRITERS = 8
#: Messages the ``stop`` child leaves pending when it stops the reactor.
STOP_MESSAGES = 50


def crash_child(data_dir: str, sync: str, round_number: str, log_path: str) -> None:
    """
    Write through a real :class:`SQLiteStore` until killed, logging what it acknowledged.

    Each of :data:`CRASH_WRITERS` writers adds a message to its own queue, waits
    for the add to be acknowledged, logs it, and adds the next; every third
    message is then removed, every third marked delivered, each logged once
    acknowledged.  Log lines are written with one ``write`` each, so a kill can
    cut at most the last one short.
    """
    from twisted.internet import reactor

    log = open(log_path, "a", buffering=1)
    store = SQLiteStore(data_dir, reactor=reactor, sync=sync)
    store.open()

    def report(result: Any, line: str) -> None:
        log.write(line + "\n")

    def failed(failure: Any) -> None:
        log.write(f"error {failure.getErrorMessage()!r}\n")

    def produce(writer: int, index: int) -> None:
        queue = f"/queue/w{writer}"
        message = Sent(queue, f"{round_number}-{writer}-{index}", (("n", str(index)),), b"x" * 1024)
        adding = store.add(queue, message)
        adding.addCallback(report, f"added {queue} {message.message_id}")
        adding.addCallback(lambda _: after(writer, index, queue, message.message_id))
        adding.addErrback(failed)

    def after(writer: int, index: int, queue: str, message_id: str) -> None:
        if index % 3 == 0:
            store.remove(queue, message_id).addCallbacks(
                report, failed, (f"removed {queue} {message_id}",)
            )
        elif index % 3 == 1:
            store.mark_delivered(queue, message_id).addCallbacks(
                report, failed, (f"marked {queue} {message_id}",)
            )
        produce(writer, index + 1)

    def start(state: RecoveredState) -> None:
        log.write(f"ready {sum(len(found) for found in state.queues.values())}\n")
        for writer in range(CRASH_WRITERS):
            produce(writer, 0)

    store.recover().addCallbacks(start, failed)
    reactor.run()  # type: ignore[attr-defined]


def hold_child(data_dir: str) -> None:
    """Open a store, say ``held``, and keep it open until stdin closes."""
    store = sqlite_store(data_dir)
    store.open()
    print("held", flush=True)
    sys.stdin.read()
    result_of(store.close())


def stop_child(data_dir: str) -> None:
    """Add :data:`STOP_MESSAGES` messages in batch mode and stop the reactor straight away."""
    from twisted.internet import reactor

    store = SQLiteStore(data_dir, reactor=reactor, sync="batch", batch_delay=60.0)
    store.open()

    def add_and_stop() -> None:
        for index in range(STOP_MESSAGES):
            store.add("/queue/orders", sent(f"m-{index}"))
        reactor.stop()  # type: ignore[attr-defined]

    reactor.callWhenRunning(add_and_stop)  # type: ignore[attr-defined]
    reactor.run()  # type: ignore[attr-defined]


def open_child(data_dir: str) -> None:
    """Try to open a store; print ``opened``, or the error's kind and message."""
    store = sqlite_store(data_dir)
    try:
        store.open()
    except StoreError as error:
        print(f"{type(error).__name__}: {error}")
        return
    print("opened")
    result_of(store.close())


if __name__ == "__main__":
    children: dict[str, Callable[..., None]] = {
        "crash": crash_child,
        "hold": hold_child,
        "open": open_child,
        "stop": stop_child,
    }
    children[sys.argv[1]](*sys.argv[2:])
