"""
Where the session and the broker meet.

The session (``stompbroker.protocol.session``) only ever talks to an
:class:`IBroker`, and the broker only ever delivers to an :class:`ISubscriber`;
each side is tested against a recording fake of the other.  An
:class:`ISessionTransport` is all a session knows of its connection, so the same
session runs over TCP, WebSocket or a test's list of bytes.
"""

from __future__ import annotations

from zope.interface import Attribute, Interface


class ISubscriber(Interface):
    """
    The receiving end of one subscription, as the broker sees it.

    A session makes one of these per SUBSCRIBE; the broker stores it in its
    subscription tree and calls :meth:`deliver` for each matching message.
    """

    subscription_id = Attribute("The SUBSCRIBE frame's ``id`` (generated for 1.0 clients).")
    destination = Attribute("The destination pattern subscribed to; may hold wildcards.")
    ack_mode = Attribute("``auto``, ``client`` or ``client-individual``.")
    connection = Attribute("The :class:`IConnection` this subscription belongs to.")

    def deliver(message):  # type: ignore[no-untyped-def]
        """
        Hand one message to the subscriber.

        Called on the hot path: it must not raise, log or create a Deferred.

        :param message: a :class:`stompbroker.message.Message`.
        """


class IConnection(Interface):
    """A client connection as the broker sees it, for limits, statistics and cleanup."""

    session_id = Attribute("Broker-unique id sent in CONNECTED's ``session`` header.")
    peer = Attribute("The client's address, as text.")


class IBroker(Interface):
    """What a session may ask of the broker."""

    def open_connection(connection):  # type: ignore[no-untyped-def]
        """
        Admit a new connection.

        :raises stompbroker.protocol.errors.LimitExceeded: when the broker is full.
        """

    def close_connection(connection):  # type: ignore[no-untyped-def]
        """Forget a connection; its subscriptions must already be removed."""

    def new_session_id():  # type: ignore[no-untyped-def]
        """:returns: a fresh broker-unique session id."""

    def subscribe(subscriber):  # type: ignore[no-untyped-def]
        """
        Start delivering to an :class:`ISubscriber`.

        :raises stompbroker.protocol.errors.InvalidDestination: for a destination the
            broker does not serve.
        """

    def unsubscribe(subscriber):  # type: ignore[no-untyped-def]
        """Stop delivering to a subscriber; unknown subscribers are ignored."""

    def send(destination, headers, body):  # type: ignore[no-untyped-def]
        """
        Publish one message.

        :param destination: a destination without wildcards.
        :param headers: user headers as ``(name, value)`` pairs, hop headers removed.
        :param body: the payload bytes.
        :returns: the :class:`stompbroker.message.Message` that was routed.
        :raises stompbroker.protocol.errors.InvalidDestination: for a destination
            with a wildcard, or one the broker does not serve.
        """


class ISessionTransport(Interface):
    """All a session knows of the connection beneath it."""

    def write(data):  # type: ignore[no-untyped-def]
        """Queue bytes for the peer.  Writes are buffered by the transport."""

    def close():  # type: ignore[no-untyped-def]
        """Close once everything written so far has been flushed."""


class IClock(Interface):
    """The subset of ``IReactorTime`` a session uses, so the protocol layer need not import Twisted."""

    def seconds():  # type: ignore[no-untyped-def]
        """:returns: the current time in seconds."""

    def callLater(delay, callable, *args, **kw):  # type: ignore[no-untyped-def]
        """Schedule a call; returns an object with ``cancel()`` and ``active()``."""
