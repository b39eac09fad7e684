"""
Redis away, and the hold (stompbroker.broker.engine.redis.outage) on a ``task.Clock``; the
writer's marking of re-sent writes (stompbroker.broker.engine.redis.connection).
"""

from __future__ import annotations

import pytest
from twisted.internet.task import Clock

from stompbroker.broker.engine.redis.codec import decode, encode, mark_resent
from stompbroker.broker.engine.redis.outage import OUTAGE, Outage, unreachable_text
from stompbroker.broker.engine.redis.replicas import resent as _resent
from stompbroker.protocol.message import Message


class Alarm:
    """Records the alarms an outage raises and clears."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def alarm_on(self, reason: str) -> None:
        self.calls.append(("on", reason))

    def alarm_off(self, reason: str) -> None:
        self.calls.append(("off", reason))


def outage(hold: float) -> tuple[Clock, Outage, Alarm, list[float]]:
    clock = Clock()
    away = Outage(clock, hold)
    alarm = Alarm()
    away.watch(alarm)
    expired: list[float] = []
    away.on_expiry(expired.append)
    return clock, away, alarm, expired


def test_a_short_outage_holds_publishers_and_lets_them_go_when_redis_is_back() -> None:
    """Within the hold publishers are paused (the alarm), and nobody is told of a failure."""
    clock, away, alarm, expired = outage(30)
    clock.advance(100)
    away.began()
    clock.advance(10)
    away.began()  # a second failure of the same outage changes nothing
    assert away.away and not away.expired and away.lasted() == 10
    away.ended()
    clock.advance(60)
    assert alarm.calls == [("on", OUTAGE), ("off", OUTAGE)]
    assert expired == []
    assert not away.away and away.count == 1


def test_past_the_hold_publishers_are_read_again_and_waiters_told() -> None:
    """The hold runs out: the alarm goes off, and the expiry callbacks hear how long it lasted."""
    clock, away, alarm, expired = outage(5)
    away.began()
    clock.advance(5)
    assert away.expired
    assert expired == [5.0]
    assert alarm.calls == [("on", OUTAGE), ("off", OUTAGE)]
    away.ended()
    assert alarm.calls == [("on", OUTAGE), ("off", OUTAGE)]
    assert not away.expired
    away.began()
    assert away.count == 2 and not away.expired


def test_a_hold_of_zero_refuses_at_once_and_pauses_nobody() -> None:
    """--engine-outage-hold 0: the outage is past its hold from its start."""
    _, away, alarm, expired = outage(0)
    away.began()
    assert away.expired and expired == [0.0] and alarm.calls == []


def test_a_negative_hold_is_refused() -> None:
    """A hold under 0 seconds is a mistake, said so."""
    with pytest.raises(ValueError, match="0 or more"):
        Outage(Clock(), -1)


def test_the_error_says_for_how_long_redis_has_been_unreachable() -> None:
    """Past the hold, the ERROR's text says Redis is unreachable, and since when."""
    assert "unreachable for 31 s" in unreachable_text(31.2)


def test_a_resent_message_carries_one_more_redelivery_once() -> None:
    """An XADD sent again is marked redelivered once, however often it is sent again."""
    message = Message("/queue/a", "n-1", (("k", "v"),), b"body", 0.0, 2, True)
    command = ("XADD", "p:{q:/queue/a}", "*", "m", encode("node", message))
    again = _resent(command)
    assert decode(again[4])[1].redeliveries == 3
    assert decode(again[4])[0] == "node"
    assert _resent(again) is again
    other = ("XACK", "p:{q:/queue/a}", "nodes", b"1-0")
    assert tuple(_resent(other)) == other
    assert decode(mark_resent(encode("n", message)))[1].body == b"body"
