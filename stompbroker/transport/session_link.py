"""
What an adapter gives its session of the connection, and what it gives the
Twisted transport of the session: two small objects the adapter holds, so that
neither the session nor the transport is handed the adapter itself.

- :class:`SessionLink` is the session's :class:`~stompbroker.interfaces.ISessionTransport`:
  the adapter's write and close, reading paused and resumed on the Twisted
  transport, the kind of connection, and the client's credentials.  Its
  ``write`` is the adapter's write function itself (for TCP the
  :class:`~stompbroker.transport.coalesce.CoalescedWrite`'s bound method), so a
  frame costs the session no call more than it would writing to the adapter.
- :class:`WriteProducer` is the streaming producer the adapter registers with
  the Twisted transport: ``pauseProducing`` when the transport's buffer is
  full, ``resumeProducing`` when it has drained, each passed on to the
  session's ``pause_writing`` and ``resume_writing``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attrs import frozen
from twisted.internet.interfaces import IPushProducer, ISSLTransport
from zope.interface import implementer

from stompbroker.interfaces import ISessionTransport
from stompbroker.transport.peer_credentials import PeerCredentials

__all__ = ["SessionLink", "WriteProducer", "carried_by", "link_over"]


def carried_by(transport: Any, kinds: tuple[str, str]) -> str:
    """
    :param transport: the Twisted transport a connection runs on.
    :param kinds: what the adapter is called over a plain transport, and over TLS.
    :returns: the one of ``kinds`` that carries this connection, for statistics.
    """
    return kinds[ISSLTransport.providedBy(transport)]


@implementer(ISessionTransport)
@frozen
class SessionLink:
    """
    All a session is given of its connection.

    :ivar write: sends bytes to the client (buffered by the transport).
    :ivar close: closes once everything written has been flushed.
    :ivar pause_reading: reads nothing more from the client until ``resume_reading``.
    :ivar resume_reading: reads from the client again.
    :ivar carrier: what carries the connection: ``tcp``, ``tls``, ``ws`` or ``wss``.
    :ivar credentials: what the connection tells of the client's credentials,
        which the session reads on CONNECT.
    """

    write: Callable[[bytes], None]
    close: Callable[[], None]
    pause_reading: Callable[[], None]
    resume_reading: Callable[[], None]
    carrier: str
    credentials: PeerCredentials

    def kind(self) -> str:
        """:returns: what carries the connection, for statistics."""
        return self.carrier


def link_over(
    transport: Any,
    write: Callable[[bytes], None],
    close: Callable[[], None],
    kinds: tuple[str, str],
    bearer_token: str | None = None,
) -> SessionLink:
    """
    :param transport: the Twisted transport the connection runs on, paused
        and resumed for the session, and asked for the client's certificate.
    :param write: the adapter's write function.
    :param close: the adapter's close.
    :param kinds: what the adapter is called over a plain transport, and over TLS.
    :param bearer_token: the WebSocket handshake's bearer token, if it had one.
    :returns: the link a session over ``transport`` is given.
    """
    return SessionLink(
        write,
        close,
        transport.pauseProducing,
        transport.resumeProducing,
        carried_by(transport, kinds),
        PeerCredentials(transport, bearer_token),
    )


@implementer(IPushProducer)
@frozen
class WriteProducer:
    """
    The producer of what a session writes, to the Twisted transport.

    :ivar pause_writing: called when the transport's buffer is full.
    :ivar resume_writing: called when it has drained.
    """

    pause_writing: Callable[[], None]
    resume_writing: Callable[[], None]

    def pauseProducing(self) -> None:
        """The transport's buffer is full: the session writes to it no more for now."""
        self.pause_writing()

    def resumeProducing(self) -> None:
        """The transport has flushed its buffer: the session may write again."""
        self.resume_writing()

    def stopProducing(self) -> None:
        """The connection is going; the adapter's connection-lost hook releases the session."""
