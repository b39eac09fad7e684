"""
Redis busy (stompbroker.broker.engine.redis.busy): the writer's bound, and the
alarm that holds publishers while it is over, on a ``task.Clock``.
"""

from __future__ import annotations

import pytest
from twisted.internet.task import Clock

from stompbroker.broker.engine.redis.busy import BUSY, Busy


class Alarm:
    """Records the alarms raised and cleared, and whether each was to be logged."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, bool]] = []

    def alarm_on(self, reason: str, loud: bool = True) -> None:
        self.calls.append(("on", reason, loud))

    def alarm_off(self, reason: str) -> None:
        self.calls.append(("off", reason, True))


def busy(high: int = 1000, low: int | None = None) -> tuple[Busy, Alarm]:
    bound = Busy(Clock(), high, low)
    alarm = Alarm()
    bound.watch(alarm)
    return bound, alarm


def test_over_the_high_mark_publishers_are_paused_and_read_again_under_the_low_one() -> None:
    """Between the marks nothing changes, so a node under steady load does not flap."""
    bound, alarm = busy(1000)
    bound.held(1000)
    assert alarm.calls == [] and not bound.on
    bound.held(1001)
    bound.held(5000)
    assert alarm.calls == [("on", BUSY, False)] and bound.on
    bound.held(600)
    assert bound.on
    bound.held(499)
    assert alarm.calls == [("on", BUSY, False), ("off", BUSY, True)]
    assert not bound.on and bound.count == 1


def test_each_episode_counts() -> None:
    """Every pause is counted (the log says how many there were)."""
    bound, _ = busy(100, 10)
    for _ in range(3):
        bound.held(200)
        bound.held(0)
    assert bound.count == 3


@pytest.mark.parametrize(("high", "low"), [(0, None), (-5, None), (100, 100), (100, -1)])
def test_marks_that_make_no_sense_are_refused(high: int, low: int | None) -> None:
    """A bound that is not positive, or a low mark not under it, is a mistake, said so."""
    with pytest.raises(ValueError, match="must be"):
        Busy(Clock(), high, low)
