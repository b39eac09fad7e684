"""
The session's reading (stompbroker.protocol.reading.ReadPauses) built alone on a
recording transport and a ``task.Clock``: each part's reason pauses it, the last
one gone resumes it, unless the session is ending.
"""

from __future__ import annotations

from twisted.internet.task import Clock

from stompbroker.protocol.reading import ReadPauses
from tests.support.session import FakeTransport


def test_the_first_reason_pauses_and_the_last_one_gone_resumes() -> None:
    transport, clock = FakeTransport(), Clock()
    reading = ReadPauses(transport, clock, lambda: True)
    reading.pause("window")
    reading.pause("held")
    reading.pause("window")
    assert (reading.paused, transport.reading) == (True, False)
    reading.resume("window")
    assert (reading.reasons, transport.reading) == ({"held"}, False)
    reading.resume("window")
    reading.resume("held")
    assert (reading.paused, transport.reading) == (False, True)


def test_silence_while_paused_is_not_counted_once_reading_resumes() -> None:
    transport, clock = FakeTransport(), Clock()
    reading = ReadPauses(transport, clock, lambda: True)
    reading.heard(2.0)
    reading.pause("login")
    clock.advance(30)
    assert reading.last_heard == 2.0
    reading.resume("login")
    assert reading.last_heard == 30.0


def test_an_ending_session_reads_no_more_when_its_reasons_are_gone() -> None:
    transport, clock = FakeTransport(), Clock()
    asked: list[bool] = []

    def ending() -> bool:
        asked.append(False)
        return False

    reading = ReadPauses(transport, clock, ending)
    reading.pause("backlog")
    reading.resume("backlog")
    assert (asked, reading.paused, transport.reading) == ([False], False, False)
