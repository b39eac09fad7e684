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
    prefetch = Attribute(
        "Most messages it may hold unacknowledged (``prefetch-count``); 0 for the"
        " broker's default.  Ignored for ``auto``."
    )
    max_redeliveries = Attribute(
        "How often a message it returns may be redelivered before it is"
        " dead-lettered (``max-redeliveries``); ``-1`` for no limit, ``None`` for the"
        " broker's default."
    )
    durable = Attribute(
        "``(client-id, name)`` of the durable topic subscription it consumes, or"
        " ``None``; the client-id is ``\"\"`` when the client gave none."
    )

    def deliver(message):  # type: ignore[no-untyped-def]
        """
        Hand one message to the subscriber.

        Called on the hot path: it must not raise, log or create a Deferred.
        A subscriber that consumes from a queue is expected to tell the client how
        to settle the message: ``redelivered``/``redelivery-count`` when
        ``message.redeliveries`` is not 0, and for client acknowledgement an
        ``ack`` id that leads back to this subscriber and ``message.message_id``.

        :param message: a :class:`stompbroker.protocol.message.Message`.
        """


class IConnection(Interface):
    """A client connection as the broker sees it, for limits, statistics and cleanup."""

    session_id = Attribute("Broker-unique id sent in CONNECTED's ``session`` header.")
    peer = Attribute("The client's address, as text: ``HOST:PORT``.")

    def pause_reading():  # type: ignore[no-untyped-def]
        """Read nothing more from the client (memory is short, or it feeds a slow subscriber)."""

    def resume_reading():  # type: ignore[no-untyped-def]
        """Read from the client again."""

    def shut_down(on_closed):  # type: ignore[no-untyped-def]
        """
        The broker is stopping: tell the client with an ERROR, and close.

        :param on_closed: called with the connection once it is gone, what was
            written to it flushed.
        """


class IBroker(Interface):
    """What a session may ask of the broker."""

    def open_connection(connection):  # type: ignore[no-untyped-def]
        """
        Admit a new connection.

        :raises stompbroker.protocol.errors.LimitExceeded: when the broker is full.
        """

    def close_connection(connection):  # type: ignore[no-untyped-def]
        """
        Forget a connection: abort its open transactions and delete its temporary
        queues.  Its subscriptions should already be removed.
        """

    def new_session_id():  # type: ignore[no-untyped-def]
        """:returns: a fresh broker-unique session id."""

    def pause_consumers(connection):  # type: ignore[no-untyped-def]
        """
        The connection's socket has fallen behind: deliver nothing more to its
        queue subscriptions (their messages wait in their queues).
        """

    def resume_consumers(connection):  # type: ignore[no-untyped-def]
        """
        The connection's socket has caught up: its queue subscriptions get
        messages again, and publishers it blocked go on.
        """

    def block_sender(subscriber):  # type: ignore[no-untyped-def]
        """
        Under the ``block`` slow-consumer policy: pause the publisher of the
        message being delivered until the connection ``subscriber`` catches up
        (calls :meth:`resume_consumers`) or closes.
        """

    def count_dropped(connection, count, disconnected=False):  # type: ignore[no-untyped-def]
        """
        Count topic messages a slow subscriber will never get.

        :param disconnected: the connection is being closed for being slow.
        """

    def subscribe(subscriber):  # type: ignore[no-untyped-def]
        """
        Start delivering to an :class:`ISubscriber`.

        :raises stompbroker.protocol.errors.InvalidDestination: for a destination the
            broker does not serve.
        """

    def unsubscribe(subscriber):  # type: ignore[no-untyped-def]
        """
        Stop delivering to a subscriber; unknown subscribers are ignored.  What it
        holds unacknowledged returns to its queue for redelivery.
        """

    def remove_durable(durable):  # type: ignore[no-untyped-def]
        """
        Delete a durable subscription and what it has collected.

        :param durable: ``(client-id, name)``.
        :raises stompbroker.protocol.errors.UnknownSubscription: if there is none.
        """

    def send(destination, headers, body, *, connection=None, transaction=None):  # type: ignore[no-untyped-def]
        """
        Publish one message.

        :param destination: a destination without wildcards.
        :param headers: user headers as ``(name, value)`` pairs, hop headers removed.
        :param body: the payload bytes.
        :param connection: the sending :class:`IConnection`; it owns
            the ``/temp-queue/`` destinations it names.
        :param transaction: hold the message until this transaction of
            ``connection`` commits.
        :returns: ``None`` when nothing needs waiting for (every non-persistent
            message); for a persistent message the broker's store keeps, a
            Deferred that fires once it is durable, or fails with a
            :class:`~stompbroker.protocol.errors.ProtocolError` to send as an
            ERROR if it cannot be stored.  The message is routed either way; the
            session holds the SEND's RECEIPT (without one, the client's next
            frame) until the Deferred fires.
        :raises stompbroker.protocol.errors.InvalidDestination: for a destination
            with a wildcard, or one the broker does not serve.
        :raises stompbroker.protocol.errors.MalformedFrame: for an ``expires`` or
            ``expiration`` header that is not a number of milliseconds.
        :raises stompbroker.protocol.errors.UnknownTransaction: if the transaction
            is not open.
        """

    def ack(connection, message_id, *, subscriber=None, transaction=None):  # type: ignore[no-untyped-def]
        """
        Acknowledge a message delivered to ``connection`` (in ``client`` mode, and
        every earlier one of its subscription).

        :returns: as :meth:`send`: ``None``, or for persistent messages a Deferred
            that fires once their removal from the store is durable, on which the
            session holds the ACK's RECEIPT.

        :param message_id: the MESSAGE's ``message-id``.
        :param subscriber: the :class:`ISubscriber` it went to;
            ``None`` to look through all of the connection's.
        :param transaction: take effect when this transaction commits.
        :raises stompbroker.protocol.errors.UnknownAck: if the message is not
            awaiting acknowledgement there.
        :raises stompbroker.protocol.errors.UnknownTransaction: if the transaction
            is not open.
        """

    def nack(connection, message_id, *, subscriber=None, requeue=True, transaction=None):  # type: ignore[no-untyped-def]
        """
        Refuse a message, as :meth:`ack` accepts one.

        :returns: as :meth:`ack`, for the dead-letter moves it makes.

        :param requeue: redeliver it (up to the redelivery limit) if true,
            dead-letter it at once if false.
        """

    def begin(connection, transaction):  # type: ignore[no-untyped-def]
        """
        Open a transaction.

        :raises stompbroker.protocol.errors.DuplicateTransaction: if it is open already.
        """

    def commit(connection, transaction):  # type: ignore[no-untyped-def]
        """
        Perform what a transaction holds, at once and in order.

        :returns: as :meth:`send`: ``None``, or a Deferred for the persistent
            messages it sent, on which the session holds the COMMIT's RECEIPT.

        :raises stompbroker.protocol.errors.UnknownTransaction: if it is not open.
        """

    def abort(connection, transaction):  # type: ignore[no-untyped-def]
        """
        Discard what a transaction holds.

        :raises stompbroker.protocol.errors.UnknownTransaction: if it is not open.
        """


class ISessionTransport(Interface):
    """
    All a session knows of the connection beneath it.

    A transport may also offer a ``bearer_token`` attribute and a
    ``peer_certificate()`` method, which the session reads on CONNECT (see
    :mod:`stompbroker.transport.credentials`); a transport without them works.
    """

    def write(data):  # type: ignore[no-untyped-def]
        """Queue bytes for the peer.  Writes are buffered by the transport."""

    def close():  # type: ignore[no-untyped-def]
        """Close once everything written so far has been flushed."""

    def pause_reading():  # type: ignore[no-untyped-def]
        """Read nothing more from the peer until :meth:`resume_reading`."""

    def resume_reading():  # type: ignore[no-untyped-def]
        """Read from the peer again."""


class IClock(Interface):
    """The subset of ``IReactorTime`` a session uses, so the protocol layer need not import Twisted."""

    def seconds():  # type: ignore[no-untyped-def]
        """:returns: the current time in seconds."""

    def callLater(delay, callable, *args, **kw):  # type: ignore[no-untyped-def]
        """Schedule a call; returns an object with ``cancel()`` and ``active()``."""
