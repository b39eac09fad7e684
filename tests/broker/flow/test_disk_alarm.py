"""
The disk alarm (``--disk-free-limit``): its watch on a ``task.Clock`` with a probe
the test sets, and the broker holding persistent publishers, and only them,
while it is on.
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.task import Clock

from stompbroker.broker.flow.broker_limits import Limits
from stompbroker.broker.flow.disk_alarm import (
    DISK_SAMPLE_INTERVAL,
    DISK_SAMPLE_LEAST,
    FASTEST_FILL,
    DiskAlarm,
    DiskFreeLimit,
    DiskWatch,
    resume_mark,
)
from stompbroker.broker.service import Broker
from stompbroker.broker.store.disk_space import DiskSpace
from stompbroker.broker.store.memory import MemoryStore
from tests.support.broker import FakeConnection, Inbox

MIB = 1 << 20
PERSISTENT = (("persistent", "true"),)
LIMIT = DiskFreeLimit(size=50 * MIB)


class Disk:
    """A disk whose room the test sets; the probe the watch samples."""

    def __init__(self, free: int = 500 * MIB, total: int = 1000 * MIB) -> None:
        self.free = free
        self.total = total
        self.readable = True

    def __call__(self) -> DiskSpace | None:
        return DiskSpace(self.free, self.total) if self.readable else None


class Crossings:
    """Records the watch's calls."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, int]] = []

    def low(self, space: DiskSpace, limit: int) -> None:
        self.seen.append(("low", space.free, limit))

    def ok(self, space: DiskSpace, limit: int) -> None:
        self.seen.append(("ok", space.free, limit))


def watch(disk: Disk, limit: DiskFreeLimit) -> tuple[Clock, DiskWatch, Crossings]:
    clock = Clock()
    crossings = Crossings()
    watching = DiskWatch(clock, disk, limit, crossings.low, crossings.ok)
    watching.start()
    return clock, watching, crossings


def test_the_alarm_starts_under_the_limit_and_ends_over_its_resume_mark() -> None:
    """Under the limit: one call; back over the limit but under the mark: none; over it: one."""
    disk = Disk()
    clock, watching, crossings = watch(disk, DiskFreeLimit(size=50 * MIB))
    assert crossings.seen == []
    disk.free = 40 * MIB
    clock.advance(DISK_SAMPLE_INTERVAL)
    clock.advance(DISK_SAMPLE_INTERVAL)
    assert crossings.seen == [("low", 40 * MIB, 50 * MIB)]
    assert watching.low
    disk.free = 52 * MIB
    clock.advance(DISK_SAMPLE_INTERVAL)
    assert watching.low
    disk.free = resume_mark(50 * MIB)
    clock.advance(DISK_SAMPLE_INTERVAL)
    assert crossings.seen[1:] == [("ok", resume_mark(50 * MIB), 50 * MIB)]
    assert not watching.low


def test_a_share_of_the_filesystem_is_taken_of_its_size() -> None:
    """A limit of 10% on a 1000 MiB filesystem is 100 MiB."""
    disk = Disk(free=99 * MIB)
    _, watching, crossings = watch(disk, DiskFreeLimit(share=0.1))
    assert crossings.seen == [("low", 99 * MIB, 100 * MIB)]
    assert watching.limit_bytes() == 100 * MIB


def test_a_sample_that_cannot_be_taken_changes_nothing() -> None:
    """A probe that cannot tell (the store closing) is skipped, the alarm as it was."""
    disk = Disk(free=10 * MIB)
    clock, watching, crossings = watch(disk, DiskFreeLimit(size=50 * MIB))
    disk.readable = False
    disk.free = 500 * MIB
    clock.advance(DISK_SAMPLE_INTERVAL)
    assert watching.low
    assert len(crossings.seen) == 1


def test_samples_come_sooner_as_the_room_nears_the_limit() -> None:
    """
    A producer of large messages fills a disk fast: the next sample comes before
    the room left could reach the limit at FASTEST_FILL, never later than the
    interval, and at the interval again while the alarm is on.
    """
    disk = Disk(free=250 * MIB)
    clock, watching, crossings = watch(disk, DiskFreeLimit(size=50 * MIB))
    [call] = clock.getDelayedCalls()
    assert call.getTime() == pytest.approx(200 * MIB / FASTEST_FILL)
    assert call.getTime() < DISK_SAMPLE_INTERVAL
    disk.free = 50 * MIB + 1000
    clock.advance(call.getTime())
    [call] = clock.getDelayedCalls()
    assert call.getTime() - clock.seconds() == pytest.approx(DISK_SAMPLE_LEAST)
    disk.free = 40 * MIB
    clock.advance(DISK_SAMPLE_LEAST)
    assert crossings.seen == [("low", 40 * MIB, 50 * MIB)]
    [call] = clock.getDelayedCalls()
    assert call.getTime() - clock.seconds() == pytest.approx(DISK_SAMPLE_INTERVAL)
    assert watching.low
    far_clock, _, _ = watch(Disk(free=900 * MIB), DiskFreeLimit(size=MIB))
    [call] = far_clock.getDelayedCalls()
    assert call.getTime() == pytest.approx(DISK_SAMPLE_INTERVAL)


def test_stop_cancels_the_timer() -> None:
    """A stopped watch leaves nothing on the clock."""
    clock, watching, _ = watch(Disk(), DiskFreeLimit(size=MIB))
    watching.stop()
    assert clock.getDelayedCalls() == []


@pytest.mark.parametrize(
    ("limit", "shown"),
    [
        (DiskFreeLimit(size=1234), "1234"),
        (DiskFreeLimit(size=50 << 20), "50M"),
        (DiskFreeLimit(share=0.05), "5%"),
    ],
)
def test_a_limit_says_what_it_is(limit: DiskFreeLimit, shown: str) -> None:
    """The banner and the log show a limit as it was given."""
    assert str(limit) == shown
    assert limit.enabled
    assert not DiskFreeLimit().enabled


# -- the broker ------------------------------------------------------------------------


class Publisher(FakeConnection):
    """A connection that records whether it is read from."""

    def __init__(self, session_id: str) -> None:
        super().__init__(session_id)
        self.paused = 0

    def pause_reading(self) -> None:
        self.paused += 1

    def resume_reading(self) -> None:
        self.paused -= 1


class Setup:
    """A started broker on a store whose disk the test sets."""

    def __init__(self, limit: DiskFreeLimit = LIMIT) -> None:
        self.clock = Clock()
        self.disk = Disk()
        self.broker = Broker(
            self.clock, limits=Limits(memory_high=0, disk_free_limit=limit), store=MemoryStore()
        )
        self.broker.backpressure.disk_space = self.disk
        self.broker.startService()
        self.clock.advance(0)

    def connection(self, name: str) -> Publisher:
        connection = Publisher(name)
        self.broker.open_connection(connection)
        return connection

    def send(self, connection: Any, destination: str, headers: Any = PERSISTENT) -> None:
        self.broker.send(destination, headers, b"x", connection=connection)

    def fill(self, free: int) -> None:
        self.disk.free = free
        self.clock.advance(DISK_SAMPLE_INTERVAL)


def test_persistent_publishers_are_held_under_the_limit_and_resumed_with_room() -> None:
    """Under the limit a persistent SEND holds its connection, until there is room again."""
    setup = Setup()
    publisher = setup.connection("p")
    setup.fill(10 * MIB)
    setup.send(publisher, "/queue/q")
    assert publisher.paused == 1
    assert setup.broker.disk_alarm().held_publishers == 1
    setup.fill(100 * MIB)
    assert publisher.paused == 0
    assert setup.broker.disk_alarm().held_publishers == 0


def test_topics_non_persistent_messages_and_consumers_carry_on() -> None:
    """The alarm holds no one who does not publish persistent messages; consumers get theirs."""
    setup = Setup()
    publisher = setup.connection("p")
    consumer = setup.connection("c")
    inbox = Inbox("/queue/q", connection=consumer)
    setup.broker.subscribe(inbox)
    setup.fill(10 * MIB)
    setup.send(publisher, "/topic/t", PERSISTENT[:0])
    setup.send(publisher, "/queue/q", ())
    assert publisher.paused == 0
    assert inbox.bodies() == [b"x"]
    setup.send(publisher, "/queue/q")
    assert publisher.paused == 1
    assert inbox.bodies() == [b"x", b"x"]
    assert consumer.paused == 0


def test_the_alarm_shows_its_state_to_operators() -> None:
    """disk_alarm() gives what the console, /api/overview and /metrics show."""
    setup = Setup()
    assert setup.broker.disk_alarm() == DiskAlarm(
        enabled=True,
        alarm=False,
        free=500 * MIB,
        total=1000 * MIB,
        limit=50 * MIB,
        since=None,
        held_publishers=0,
    )
    setup.fill(10 * MIB)
    alarm = setup.broker.disk_alarm()
    assert (alarm.alarm, alarm.free, alarm.since) == (True, 10 * MIB, setup.clock.seconds())


def test_the_alarm_is_logged_once_when_it_starts_and_once_when_it_ends(
    log_events: list[dict[str, Any]],
) -> None:
    """However many SENDs it holds, the log gets a line when it starts and one when it ends."""
    setup = Setup()
    publisher = setup.connection("p")
    setup.fill(10 * MIB)
    for _ in range(10):
        setup.send(publisher, "/queue/q")
        setup.fill(10 * MIB)
    setup.fill(100 * MIB)
    lines = [
        event["log_format"].split(":")[0]
        for event in log_events
        if event.get("log_format", "").startswith("disk alarm")
    ]
    assert lines == ["disk alarm", "disk alarm over"]


@pytest.mark.parametrize(
    ("limit", "store"), [(DiskFreeLimit(), MemoryStore()), (DiskFreeLimit(size=50 * MIB), None)]
)
def test_no_alarm_without_a_limit_or_without_a_store(limit: DiskFreeLimit, store: Any) -> None:
    """A limit of 0, or no store (--data-dir none), turns the alarm off: no timer runs."""
    clock = Clock()
    broker = Broker(clock, limits=Limits(memory_high=0, disk_free_limit=limit), store=store)
    broker.startService()
    assert not broker.disk_alarm().enabled
    assert clock.getDelayedCalls() == []
