"""
The operator's part in resumable sessions: list the sessions that wait for
their client (detached, for ``--resume-window``), and end one for good.

A detached session is known by its session id (the ``session`` header of its
CONNECTED), never by its resume token, which is a secret like a password and
is shown nowhere.  Ending one voids its token (the client's next CONNECT with
it gets ``resumed:false``) and gives its topic subscriptions back to the
broker, as the window's expiry would.  The sessions are this process's: a
session is kept by the node its client was connected to.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from stompbroker.logs import logger

__all__ = ["DetachedSessionInfo", "DetachedSessions", "UnknownSession"]

log = logger("stompbroker.broker.management.operations")


class UnknownSession(LookupError):
    """No detached session has that id (or the broker keeps no resumable sessions)."""


@frozen
class DetachedSessionInfo:
    """
    One detached resumable session.

    :ivar id: its session id.
    :ivar login: whose it is (``""`` without authentication).
    :ivar version: the STOMP version it speaks.
    :ivar detached_since: when its connection was lost, in clock seconds.
    :ivar expires_at: when its window closes, in clock seconds.
    :ivar subscriptions: the subscriptions it will have again on resume.
    :ivar buffered_frames: MESSAGE frames its buffer holds (what it was sent
        lately before the drop, and what it missed since).
    :ivar buffered_bytes: their bytes.
    :ivar missed: messages its buffer took since the drop, dropped ones included.
    :ivar gap: whether some of those were dropped already (the buffer
        overflowed, or memory was short): a resume now says ``resume-gap:true``.
    """

    id: str
    login: str
    version: str
    detached_since: float
    expires_at: float
    subscriptions: int
    buffered_frames: int
    buffered_bytes: int
    missed: int
    gap: bool

    @classmethod
    def of(cls, record: Any) -> DetachedSessionInfo:
        """:param record: a :class:`~stompbroker.protocol.resume.resume_book.Detached` record."""
        buffer = record.buffer
        return cls(
            id=record.session,
            login=record.login,
            version=record.version,
            detached_since=record.since,
            expires_at=record.expires,
            subscriptions=len(record.subscriptions),
            buffered_frames=len(buffer),
            buffered_bytes=buffer.size,
            missed=buffer.appended - record.mark,
            gap=record.gap,
        )


class DetachedSessions:
    """
    The detached sessions of one broker.

    :param broker: the :class:`~stompbroker.broker.service.Broker`; its
        ``resumption`` is the book of its resumable sessions, or ``None``.
    """

    def __init__(self, broker: Any) -> None:
        self._broker = broker

    def list(self) -> list[DetachedSessionInfo]:
        """:returns: every detached session, the soonest to expire first."""
        book = self._broker.resumption
        if book is None:
            return []
        return [DetachedSessionInfo.of(record) for record in book.sessions()]

    def get(self, ident: str) -> DetachedSessionInfo:
        """:raises UnknownSession: if no detached session has the id ``ident``."""
        for info in self.list():
            if info.id == ident:
                return info
        raise UnknownSession(f"no detached session has the id {ident!r}")

    def end(self, ident: str, *, operator: str = "an operator") -> DetachedSessionInfo:
        """
        End a detached session for good: its token is void, its subscriptions go.

        :param operator: who asks, for the log (``alice at 10.0.0.5``).

        :returns: what it was just before.
        :raises UnknownSession: if no detached session has the id ``ident``.
        """
        book = self._broker.resumption
        record = book.end(ident) if book is not None else None
        if record is None:
            raise UnknownSession(f"no detached session has the id {ident!r}")
        info = DetachedSessionInfo.of(record)
        log.info(
            "{operator} ended detached session {id} of {login!r}",
            operator=operator,
            id=info.id,
            login=info.login,
        )
        return info
