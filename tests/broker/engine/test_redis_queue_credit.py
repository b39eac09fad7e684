"""
Consumers behind (stompbroker.broker.engine.redis.queue_credit): the credit
between what a shared queue takes in and what this node's consumers take out,
and the hold of the queue's publishers here, on a ``task.Clock``.
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.task import Clock

from stompbroker.broker.engine.redis.queue_credit import STALE, QueueCredit, behind_reason

QUEUE = "/queue/a"
REASON = behind_reason(QUEUE)


class Holds:
    """Records the senders held and the reasons released."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def hold_sender(self, reason: str) -> None:
        self.calls.append(("hold", reason))

    def release_held(self, reason: str) -> None:
        self.calls.append(("release", reason))


def credit(bound: int = 100, low: int | None = None) -> tuple[QueueCredit, Holds, Clock]:
    clock = Clock()
    made = QueueCredit(clock, bound, low)
    holds = Holds()
    made.watch(holds)
    return made, holds, clock


def test_a_queue_growing_past_its_floor_holds_its_publishers_until_it_drains() -> None:
    """Past the bound each SEND to the queue holds its sender; within the low mark they are read."""
    queue, holds, _ = credit(100)
    queue.measured(QUEUE, 40, 1)
    queue.measured(QUEUE, 140, 1)
    queue.sent(QUEUE)
    assert holds.calls == [] and not queue.behind
    queue.measured(QUEUE, 141, 1)
    queue.sent(QUEUE)
    queue.sent(QUEUE)
    assert holds.calls == [("hold", REASON), ("hold", REASON)]
    queue.measured(QUEUE, 91, 1)
    assert queue.behind == {QUEUE: REASON}
    queue.measured(QUEUE, 90, 1)
    assert holds.calls[-1] == ("release", REASON) and not queue.behind
    assert queue.count == 1


def test_other_queues_publishers_go_on() -> None:
    """A queue behind holds the senders to it alone."""
    queue, holds, _ = credit(100)
    queue.measured(QUEUE, 0, 1)
    queue.measured(QUEUE, 500, 1)
    queue.sent("/queue/b")
    assert holds.calls == []


def test_a_backlog_there_before_the_reading_began_holds_nobody() -> None:
    """The floor is the least length since the reading began: a draining backlog holds nobody."""
    queue, holds, _ = credit(100)
    queue.measured(QUEUE, 50_000, 1)
    queue.measured(QUEUE, 49_000, 1)
    queue.measured(QUEUE, 49_050, 1)
    queue.sent(QUEUE)
    assert holds.calls == []
    queue.measured(QUEUE, 49_101, 1)
    assert queue.behind == {QUEUE: REASON}


def test_a_queue_no_longer_read_releases_its_publishers() -> None:
    """Consumers gone (the reading ended) or taking nothing for a while starve no one: released."""
    queue, holds, clock = credit(100)
    queue.measured(QUEUE, 0, 1)
    queue.measured(QUEUE, 200, 1)
    queue.ended(QUEUE)
    assert holds.calls == [("release", REASON)] and not queue.behind
    queue.measured(QUEUE, 200, 1)
    queue.measured(QUEUE, 400, 1)
    clock.advance(STALE / 2)
    queue.measured(QUEUE, 400, 1)
    clock.advance(STALE * 0.75)
    # Reads that take nothing do not keep the hold.
    queue.measured(QUEUE, 400, 0)
    assert queue.behind
    clock.advance(STALE)
    assert holds.calls[-1] == ("release", REASON) and not queue.behind
    # A read after that begins a new floor: what grew meanwhile holds nobody.
    queue.measured(QUEUE, 450, 1)
    queue.measured(QUEUE, 500, 1)
    assert not queue.behind


def test_the_first_hold_is_logged(log_events: list[dict[str, Any]]) -> None:
    """An operator learns that publishers are paused, and for which queue."""
    queue, _, _ = credit(100)
    queue.measured(QUEUE, 0, 1)
    queue.measured(QUEUE, 101, 1)
    assert any(event.get("destination") == QUEUE for event in log_events)


@pytest.mark.parametrize(("bound", "low"), [(0, None), (-5, None), (100, 100), (100, -1)])
def test_marks_that_make_no_sense_are_refused(bound: int, low: int | None) -> None:
    """A bound that is not positive, or a low mark not under it, is a mistake, said so."""
    with pytest.raises(ValueError):
        QueueCredit(Clock(), bound, low)
