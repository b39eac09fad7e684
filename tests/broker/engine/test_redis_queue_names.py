"""
The cluster's queue names for wildcard consumers (:mod:`.redis.queue_names`):
which names a pattern matches, one write per queue per node, and which
notices open a queue here.  No Redis: a recording writer and a stand-in engine.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from stompbroker.broker.engine.redis.keys import Keys
from stompbroker.broker.engine.redis.queue_names import ADD_NAME, QueueNames, matching


class Writer:
    def __init__(self) -> None:
        self.commands: list[tuple[Any, ...]] = []

    def command(self, *args: Any) -> None:
        self.commands.append(args)


class Table:
    def __init__(self) -> None:
        self.watchers: dict[Any, str] = {}

    def watch(self, pattern: str, watcher: Any) -> None:
        self.watchers[watcher] = pattern

    def unwatch(self, watcher: Any) -> None:
        self.watchers.pop(watcher, None)


class Watcher:
    def __init__(self) -> None:
        self.attached: list[str] = []

    def attach(self, queue: str) -> None:
        self.attached.append(queue)


class Engine:
    """What :class:`QueueNames` uses of the engine; ``queue`` returns the destination."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.names = Keys("p")
        self.writer = Writer()
        self.table = Table()
        self.loop = loop
        self.opened: list[str] = []

    def queue(self, destination: str) -> str:
        self.opened.append(destination)
        return destination


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def replied(loop: asyncio.AbstractEventLoop, names: set[bytes]) -> Any:
    done = loop.create_future()
    done.set_result(names)
    return done


def test_a_pattern_matches_queue_names_only_once_each() -> None:
    names = [b"/queue/orders.eu", "/queue/orders.us", b"/queue/orders.eu", b"/queue/other"]
    assert matching("/queue/orders.*", names) == ["/queue/orders.eu", "/queue/orders.us"]
    assert matching("/queue/orders.>", [b"/queue/orders.eu.north"]) == ["/queue/orders.eu.north"]
    assert matching("/queue/orders.*", [b"/queue/orders.eu.north"]) == []
    assert matching("/queue/>", [b"/topic/orders"]) == []


def test_a_queue_is_named_in_redis_once_per_node(loop: asyncio.AbstractEventLoop) -> None:
    engine = Engine(loop)
    names = QueueNames(engine)
    names.met("/queue/a")
    names.met("/queue/a")
    names.met("/queue/b")
    assert engine.writer.commands == [
        ("EVALSHA", ADD_NAME, 1, "p:queues", "/queue/a", "p:queues:new"),
        ("EVALSHA", ADD_NAME, 1, "p:queues", "/queue/b", "p:queues:new"),
    ]


def test_a_name_read_or_noticed_is_not_written_again(loop: asyncio.AbstractEventLoop) -> None:
    engine = Engine(loop)
    names = QueueNames(engine)
    names.notice(b"/queue/a")
    names._found(replied(loop, {b"/queue/b"}), [])
    names.met("/queue/a")
    names.met("/queue/b")
    assert engine.writer.commands == []


def test_a_notice_opens_the_queue_only_when_a_wildcard_consumer_matches(
    loop: asyncio.AbstractEventLoop,
) -> None:
    engine = Engine(loop)
    names = QueueNames(engine)
    names.notice(b"/queue/orders.eu")
    assert engine.opened == []
    engine.table.watch("/queue/orders.>", Watcher())
    names.notice(b"/queue/other")
    names.notice(b"/queue/orders.us")
    assert engine.opened == ["/queue/orders.us"]


def test_the_names_read_attach_each_watcher_still_watching(
    loop: asyncio.AbstractEventLoop,
) -> None:
    engine = Engine(loop)
    names = QueueNames(engine)
    eu, everything, gone = Watcher(), Watcher(), Watcher()
    engine.table.watch("/queue/orders.eu", eu)
    engine.table.watch("/queue/>", everything)
    reply = replied(loop, {b"/queue/orders.eu", b"/queue/orders.us"})
    names._found(reply, [eu, everything, gone])
    assert eu.attached == ["/queue/orders.eu"]
    assert sorted(everything.attached) == ["/queue/orders.eu", "/queue/orders.us"]
    assert gone.attached == []


def test_a_failed_read_attaches_nothing(loop: asyncio.AbstractEventLoop) -> None:
    engine = Engine(loop)
    names = QueueNames(engine)
    watcher = Watcher()
    engine.table.watch("/queue/>", watcher)
    failed = loop.create_future()
    failed.set_exception(ConnectionError("gone"))
    names._found(failed, [watcher])
    assert watcher.attached == []
