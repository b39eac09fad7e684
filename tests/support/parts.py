"""
What a session part is given, made for its tests with no session: the session's
state (a real :class:`~stompbroker.protocol.states.SessionState`), its reading
(a real :class:`~stompbroker.protocol.reading.ReadPauses` over a recording
transport), and a recorder of the ERRORs that would end it.
"""

from __future__ import annotations

from attrs import define, field
from twisted.internet.task import Clock

from stompbroker.protocol.errors import ProtocolError
from stompbroker.protocol.reading import ReadPauses
from stompbroker.protocol.states import Event, SessionState
from tests.support.session import FakeTransport


def connected_state() -> SessionState:
    """:returns: the state of a session whose client is in."""
    life = SessionState()
    life.move(Event.LOGIN_ACCEPTED)
    return life


def reading(clock: Clock | None = None) -> tuple[ReadPauses, FakeTransport]:
    """:returns: a session's reading, which may always resume, and the transport it pauses."""
    transport = FakeTransport()
    return ReadPauses(transport, clock or Clock(), lambda: True), transport


@define
class Failures:
    """
    Records each ERROR a part ends the session with, and moves ``life`` by the
    event along the session's real ``TRANSITIONS``, as the session does.
    """

    life: SessionState = field(factory=connected_state)
    errors: list[ProtocolError] = field(factory=list)
    events: list[Event] = field(factory=list)

    def __call__(self, error: ProtocolError, event: Event = Event.ERROR) -> None:
        self.errors.append(error)
        self.events.append(event)
        self.life.move(event)

    @property
    def messages(self) -> list[str]:
        """:returns: the ERRORs' messages, in order."""
        return [error.message for error in self.errors]
