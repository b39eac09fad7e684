"""
Tests for :mod:`stompbroker.broker.features.schedule_rules`: ActiveMQ's ``AMQ_SCHEDULED_*``
headers,
Artemis's ``AMQ_SCHEDULED_TIME``, RabbitMQ's ``x-delay``, and the sans-I/O scheduler.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stompbroker.broker.features.schedule_rules import (
    JOB_ID_HEADER,
    Schedule,
    Scheduler,
    fired_headers,
    parse_schedule,
)
from stompbroker.protocol.errors import MalformedFrame, NotSupported

NOW = 1_700_000_000_000


@pytest.mark.parametrize(
    "headers, schedule",
    [
        ({}, None),
        ({"AMQ_SCHEDULED_DELAY": "0"}, None),
        ({"AMQ_SCHEDULED_DELAY": "-5"}, None),
        ({"AMQ_SCHEDULED_DELAY": "1500"}, Schedule(NOW + 1500)),
        ({"x-delay": "250"}, Schedule(NOW + 250)),
        ({"x-delay": "-1"}, None),
        ({"AMQ_SCHEDULED_TIME": str(NOW + 60_000)}, Schedule(NOW + 60_000)),
        ({"AMQ_SCHEDULED_TIME": str(NOW - 60_000)}, None),  # passed: due at once
        ({"AMQ_SCHEDULED_TIME": "0"}, None),
        # several: the latest due time counts
        ({"AMQ_SCHEDULED_DELAY": "100", "x-delay": "300"}, Schedule(NOW + 300)),
        (
            {"AMQ_SCHEDULED_DELAY": "5000", "AMQ_SCHEDULED_TIME": str(NOW + 10)},
            Schedule(NOW + 5000),
        ),
        # ActiveMQ's documented example: 30 s, then 9 more, 10 s apart
        (
            {
                "AMQ_SCHEDULED_DELAY": "30000",
                "AMQ_SCHEDULED_PERIOD": "10000",
                "AMQ_SCHEDULED_REPEAT": "9",
            },
            Schedule(NOW + 30_000, 10_000, 9),
        ),
        ({"AMQ_SCHEDULED_PERIOD": "1000", "AMQ_SCHEDULED_REPEAT": "2"}, Schedule(NOW, 1000, 2)),
        ({"AMQ_SCHEDULED_PERIOD": "1000", "AMQ_SCHEDULED_REPEAT": "-1"}, Schedule(NOW, 1000, -1)),
        ({"AMQ_SCHEDULED_PERIOD": "1000"}, None),  # a period without repeats changes nothing
        ({"AMQ_SCHEDULED_PERIOD": "1000", "AMQ_SCHEDULED_DELAY": "5"}, Schedule(NOW + 5)),
        # a fired message sent on is not scheduled again (ActiveMQ)
        ({"AMQ_SCHEDULED_DELAY": "1000", "scheduledJobId": "m-1"}, None),
    ],
)
def test_parse_schedule(headers: dict[str, str], schedule: Schedule | None) -> None:
    """Each broker's scheduling headers give the first due time, period and repeats."""
    assert parse_schedule(headers, NOW) == schedule


@pytest.mark.parametrize(
    "headers, error, message",
    [
        ({"AMQ_SCHEDULED_DELAY": "soon"}, MalformedFrame, "invalid AMQ_SCHEDULED_DELAY header"),
        ({"x-delay": "1.5"}, MalformedFrame, "invalid x-delay header"),
        ({"AMQ_SCHEDULED_TIME": ""}, MalformedFrame, "invalid AMQ_SCHEDULED_TIME header"),
        (
            {"AMQ_SCHEDULED_REPEAT": "3"},
            MalformedFrame,
            "AMQ_SCHEDULED_REPEAT without AMQ_SCHEDULED_PERIOD",
        ),
        (
            {"AMQ_SCHEDULED_REPEAT": "3", "AMQ_SCHEDULED_PERIOD": "0"},
            MalformedFrame,
            "AMQ_SCHEDULED_REPEAT without AMQ_SCHEDULED_PERIOD",
        ),
        (
            {"AMQ_SCHEDULED_REPEAT": "-2", "AMQ_SCHEDULED_PERIOD": "10"},
            MalformedFrame,
            "invalid AMQ_SCHEDULED_REPEAT header",
        ),
        ({"AMQ_SCHEDULED_CRON": "0 * * * *"}, NotSupported, "AMQ_SCHEDULED_CRON is not supported"),
    ],
)
def test_bad_schedules_are_errors(headers: dict[str, str], error: type, message: str) -> None:
    """A bad value is an ERROR; a cron entry is refused rather than delivered at once."""
    with pytest.raises(error) as caught:
        parse_schedule(headers, NOW)
    assert caught.value.message == message


def test_fired_headers_drop_scheduling_and_name_the_job() -> None:
    """A fired message carries no scheduling header, and scheduledJobId as ActiveMQ sets it."""
    headers = (
        ("a", "1"),
        ("AMQ_SCHEDULED_DELAY", "10"),
        ("x-delay", "10"),
        ("AMQ_SCHEDULED_TIME", "5"),
        ("AMQ_SCHEDULED_PERIOD", "1"),
        ("AMQ_SCHEDULED_REPEAT", "2"),
        ("b", "2"),
    )
    assert fired_headers(headers, "m-9") == (("a", "1"), ("b", "2"), (JOB_ID_HEADER, "m-9"))
    assert parse_schedule(dict(fired_headers(headers, "m-9")), NOW) is None


def test_entries_fire_in_due_order_once() -> None:
    """due() returns what is due, earliest first, and a one-off entry then leaves."""
    scheduler: Scheduler[str] = Scheduler()
    scheduler.add("late", "L", Schedule(300))
    scheduler.add("early", "E", Schedule(100))
    scheduler.add("same", "S", Schedule(100))
    assert scheduler.next_due() == 100 and len(scheduler) == 3
    assert scheduler.due(99) == []
    fired = scheduler.due(100)
    assert [entry.item for entry in fired] == ["E", "S"]
    assert all(entry.finished and entry.fired == 1 for entry in fired)
    assert "early" not in scheduler and scheduler.next_due() == 300
    assert [entry.key for entry in scheduler.due(1000)] == ["late"]
    assert scheduler.next_due() is None and len(scheduler) == 0


def test_repeats_are_fixed_delay_from_the_firing() -> None:
    """REPEAT:2 fires three times, each a period after the previous firing actually happened."""
    scheduler: Scheduler[str] = Scheduler()
    entry = scheduler.add("m", "M", Schedule(1000, 100, 2))
    assert scheduler.due(1000) == [entry]
    assert (entry.fired, entry.remaining, entry.due, entry.finished) == (1, 1, 1100, False)
    assert scheduler.due(1500) == [entry]  # late: the next is due 100 after 1500, no burst
    assert (entry.fired, entry.remaining, entry.due) == (2, 0, 1600)
    assert scheduler.due(1599) == []
    assert scheduler.due(1600) == [entry]
    assert entry.finished and entry.fired == 3 and "m" not in scheduler


def test_forever_repeats_until_cancelled() -> None:
    """REPEAT:-1 keeps firing a period apart until the entry is cancelled."""
    scheduler: Scheduler[str] = Scheduler()
    scheduler.add("m", "M", Schedule(0, 10, -1))
    for step in range(50):
        (entry,) = scheduler.due(step * 10)
        assert entry.remaining == -1 and not entry.finished
    assert scheduler.cancel("m") is entry
    assert scheduler.cancel("m") is None
    assert scheduler.next_due() is None and scheduler.due(10_000) == []


def test_cancelled_entries_never_fire_and_the_heap_stays_small() -> None:
    """Cancelling leaves no trace in what fires, and the heap is rebuilt when mostly stale."""
    scheduler: Scheduler[int] = Scheduler()
    for n in range(1000):
        scheduler.add(f"m{n}", n, Schedule(n))
    for n in range(0, 1000, 2):
        scheduler.cancel(f"m{n}")
    for n in range(1, 990, 2):
        scheduler.cancel(f"m{n}")
    assert len(scheduler) == 5
    assert len(scheduler._heap) <= 2 * len(scheduler) + 16
    assert [entry.item for entry in scheduler.due(10_000)] == [991, 993, 995, 997, 999]


def test_restore_keeps_the_due_time_across_a_restart() -> None:
    """A stored entry restored after a restart is due when it was due, or at once if passed."""
    before: Scheduler[str] = Scheduler()
    entry = before.add("m", "M", Schedule(5000, 100, 3))
    before.due(5000)
    stored = (entry.key, entry.item, entry.due, entry.period, entry.remaining, entry.fired)
    after: Scheduler[str] = Scheduler()
    restored = after.restore(*stored)
    assert after.next_due() == 5100 and restored.fired == 1
    assert after.due(9000) == [restored]  # down past its time: one delivery now
    assert restored.remaining == 1 and restored.due == 9100


def test_keys_are_unique() -> None:
    """A key names one scheduled message; scheduling it twice is a programming error."""
    scheduler: Scheduler[str] = Scheduler()
    scheduler.add("m", "M", Schedule(1))
    with pytest.raises(ValueError):
        scheduler.add("m", "N", Schedule(2))
    assert [entry.key for entry in scheduler] == ["m"]


@given(st.lists(st.tuples(st.integers(0, 50), st.booleans()), max_size=40), st.integers(0, 60))
def test_due_matches_a_brute_force_scan(adds: list[tuple[int, bool]], now: int) -> None:
    """Whatever is added and cancelled, due(now) fires exactly the live one-offs due by now."""
    scheduler: Scheduler[int] = Scheduler()
    live = {}
    for n, (due, cancel) in enumerate(adds):
        scheduler.add(str(n), n, Schedule(due))
        live[n] = due
        if cancel:
            scheduler.cancel(str(n))
            del live[n]
    expected = sorted((due, n) for n, due in live.items() if due <= now)
    assert [entry.item for entry in scheduler.due(now)] == [n for _, n in expected]
    remaining = [due for due in live.values() if due > now]
    assert scheduler.next_due() == (min(remaining) if remaining else None)
