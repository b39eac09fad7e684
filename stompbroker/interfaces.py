"""
Where the session and the broker meet.

The session (``stompbroker.protocol.session``) only ever talks to an
:class:`IBroker`, and the broker only ever delivers to an :class:`ISubscriber`;
each side is tested against a recording fake of the other.  An
:class:`ISessionTransport` is all a session knows of its connection, so the same
session runs over TCP, WebSocket or a test's list of bytes.  What a connection
tells statistics about itself is a :class:`ConnectionDescription`, so that the
statistics read it through :meth:`IConnection.describe` and need know nothing
of sessions or transports.

What the broker asks of the engine that holds its destinations' state is in
:mod:`stompbroker.broker.engine.engine_interface` (``IEngine``, ``IQueue``).
"""

from __future__ import annotations

from typing import Any

from attrs import frozen
from zope.interface import Attribute, Interface


@frozen(kw_only=True)
class ConnectionDescription:
    """
    One client connection at one moment, as statistics show it (``/stats``,
    ``/metrics``).

    A connection that keeps no counters of its own (one that an application
    embedding the broker made, say) describes itself by the two attributes
    every :class:`IConnection` has:
    ``ConnectionDescription(session=self.session_id, address=self.peer)``.
    Every other field's default says nothing is known: no user or version,
    ``tcp``, zeros.

    :ivar session: the broker-unique session id (empty before CONNECTED).
    :ivar address: the client's ``HOST:PORT``.
    :ivar user: the login it authenticated as; ``None`` when anonymous, or
        without authentication.
    :ivar version: the STOMP version negotiated; ``None`` before CONNECTED.
    :ivar transport: what carries it: ``tcp``, ``tls``, ``ws`` or ``wss``
        (:meth:`ISessionTransport.kind`).
    :ivar frames_in: frames received.
    :ivar frames_out: frames sent (written to the socket, or queued for it).
    :ivar bytes_in: bytes received.
    :ivar bytes_out: bytes of frames sent.
    :ivar messages_in: messages it published (SENDs routed to the broker).
    :ivar messages_out: messages delivered to it (MESSAGE frames).
    :ivar subscriptions: subscriptions open now.
    :ivar connected_since: when the connection was made, in clock seconds.
    :ivar info: what its login says of the user for presence (a JSON object),
        or ``None``.
    """

    session: str = ""
    address: str
    user: str | None = None
    version: str | None = None
    transport: str = "tcp"
    frames_in: int = 0
    frames_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    messages_in: int = 0
    messages_out: int = 0
    subscriptions: int = 0
    connected_since: float = 0.0
    info: dict[str, Any] | None = None


class ISubscriber(Interface):
    """
    The receiving end of one subscription, as the broker sees it.

    A session makes one of these per SUBSCRIBE; the broker stores it in its
    subscription tree and calls :meth:`deliver` for each matching message.

    A subscriber of a stream may also have a ``stream_position(offset)``
    method, which the stream's reader calls with the offset it reads first
    (:class:`~stompbroker.broker.streams.reader.StreamReader`); it is optional,
    so it is not declared here.
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
        ' ``None``; the client-id is ``""`` when the client gave none.'
    )
    headers = Attribute(
        "The SUBSCRIBE frame's headers, name -> value (the first of a repeated"
        " header): the broker reads the headers of its destination features there"
        " (``selector``, consumer priorities, ``browser``).  ``{}`` for none."
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

    def mark_gap():  # type: ignore[no-untyped-def]
        """
        Messages meant for this subscription may have been lost (a node of a
        cluster missed other nodes' topic messages): say so on its next message
        (a session's subscription writes ``cluster-gap:true`` on its next
        MESSAGE).  Not on the hot path; a subscriber that cannot tell its
        client does nothing and returns 0.

        :returns: 1 if it is told now, 0 if it was told already and has not
            delivered since.
        """

    def count_deliveries(count, tails):  # type: ignore[no-untyped-def]
        """
        Count messages the broker delivered here earlier, for the connection's
        frames and bytes out.

        Topic fan-out to a subscription that sits in the subscription tree itself
        (``auto`` acknowledgement, no durable name) counts nothing per delivery:
        the broker notes each SEND once, per destination, and tells the
        subscriptions in batches (see :mod:`stompbroker.broker.flow.traffic`): when
        statistics are read, and just before a subscription matching the
        destination comes or goes.  A subscription that takes from a queue is
        never told, as its connection counts what it writes.  A subscriber that
        keeps no such counts does nothing.

        :param count: how many messages were delivered.
        :param tails: escaping style (the session's STOMP version) -> the bytes
            of those messages' encoded tails (``message.wire``), so that a
            subscriber adds its own MESSAGE prefix's length per message.
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

    def describe():  # type: ignore[no-untyped-def]
        """
        :returns: a :class:`ConnectionDescription` of the connection now, for
            statistics; for a connection that counts nothing,
            ``ConnectionDescription(session=self.session_id, address=self.peer)``.
        """

    def subscribers():  # type: ignore[no-untyped-def]
        """
        :returns: the connection's subscriptions now, each an :class:`ISubscriber`,
            for the management API; a connection that makes none returns ``()``.
        """

    def end_subscription(subscription_id, reason):  # type: ignore[no-untyped-def]
        """
        End one of the connection's subscriptions for the application (the
        management API's unsubscribe of a user): as an UNSUBSCRIBE would, then
        a last MESSAGE on it with the header ``stompbroker-unsubscribed``
        (``reason``), so that the client knows.  A connection that makes no
        subscriptions, or has none of that id, ignores it.

        :returns: whether the subscription was there.
        """

    def fail(error):  # type: ignore[no-untyped-def]
        """
        End the connection with an ERROR: the management API's close, with a
        :class:`~stompbroker.protocol.errors.ClosedByOperator`.  A connection
        that is closing already ignores it.

        :param error: a :class:`~stompbroker.protocol.errors.ProtocolError`,
            whose message and detail the client is told.
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

    def select_host(connection, header):  # type: ignore[no-untyped-def]
        """
        CONNECT's ``host`` header: which virtual host the connection works in.

        :returns: the ``IBroker`` the session calls from now on, with a
            ``session_config(config)`` method that gives the session's settings
            in that host and a ``vhost`` attribute, its name (``/`` for the
            default host); or ``None`` when the broker has no virtual hosts.
        :raises stompbroker.protocol.errors.ProtocolError: for a host the broker refuses.
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

    def slow_consumer(destinations, policy, buffer):  # type: ignore[no-untyped-def]
        """
        The slow-consumer policy and buffer of a connection that has just fallen
        behind, from the per-destination policies of its topic subscriptions
        (docs/policies.md).

        :param destinations: its subscriptions' destinations.
        :param policy: the listener's ``--slow-consumer``.
        :param buffer: the listener's ``--slow-consumer-buffer``.
        :returns: ``(policy, buffer)``.
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

    def away(subscriber):  # type: ignore[no-untyped-def]
        """
        A subscription is held for a detached resumable session, whose client
        may come back: its member shows as away in presence.  Unknown
        subscribers are ignored.
        """

    def remove_durable(durable):  # type: ignore[no-untyped-def]
        """
        Delete a durable subscription and what it has collected.

        :param durable: ``(client-id, name)``.
        :raises stompbroker.protocol.errors.UnknownSubscription: if there is none.
        """

    def send(destination, headers, body, *, connection=None, transaction=None, lines=None):  # type: ignore[no-untyped-def]
        """
        Publish one message.

        :param destination: a destination without wildcards.
        :param headers: user headers as ``(name, value)`` pairs, hop headers removed.
        :param body: the payload bytes.
        :param connection: the sending :class:`IConnection`; it owns
            the ``/temp-queue/`` destinations it names.
        :param transaction: hold the message until this transaction of
            ``connection`` commits.
        :param lines: the same user headers as the SEND carried them, when
            that is as plain ``name:value`` lines (UTF-8, LF-separated, one
            colon each, no escapes, no repeats): the message then holds these
            bytes rather than the pairs, unless the broker acts on one of the
            headers.  See :class:`~stompbroker.protocol.message.Message`.
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
    """

    credentials = Attribute(
        "What the connection tells of the client's credentials, read on CONNECT:"
        " a ``bearer_token`` (or ``None``) and ``peer_certificate()`` (or ``None``);"
        " see :mod:`stompbroker.transport.peer_credentials`."
    )

    def write(data):  # type: ignore[no-untyped-def]
        """Queue bytes for the peer.  Writes are buffered by the transport."""

    def close():  # type: ignore[no-untyped-def]
        """Close once everything written so far has been flushed."""

    def pause_reading():  # type: ignore[no-untyped-def]
        """Read nothing more from the peer until :meth:`resume_reading`."""

    def resume_reading():  # type: ignore[no-untyped-def]
        """Read from the peer again."""

    def kind():  # type: ignore[no-untyped-def]
        """:returns: what carries the connection: ``tcp``, ``tls``, ``ws`` or ``wss``."""


class IClock(Interface):
    """
    The subset of ``IReactorTime`` a session uses, so that the protocol layer need not
    import Twisted.
    """

    def seconds():  # type: ignore[no-untyped-def]
        """:returns: the current time in seconds."""

    def callLater(delay, callable, *args, **kw):  # type: ignore[no-untyped-def]
        """Schedule a call; returns an object with ``cancel()`` and ``active()``."""


class IResumeDirectory(Interface):
    """
    Where a cluster's nodes find each other's resumable sessions
    (:mod:`~stompbroker.protocol.resume.session_records`), so that a client may resume
    on any node.  An engine shared by several processes makes one
    (``IEngine.share_resumption``) and sets it as the
    :class:`~stompbroker.protocol.resume.resume_book.ResumeBook`'s ``directory``;
    without one (one process), sessions resume on their own node only.

    A session's key is :func:`~stompbroker.protocol.resume.session_records.token_key`
    of its token: the token itself never leaves its node.
    """

    def available():  # type: ignore[no-untyped-def]
        """:returns: whether the directory can answer now (its server is reachable)."""

    def file(key, record):  # type: ignore[no-untyped-def]
        """
        Keep (or replace) the record of one of this node's sessions, for as long
        as this node lives and a resume window after.  Nothing waits for it.

        :param record: a :class:`~stompbroker.protocol.resume.session_records.SessionRecord`.
        """

    def drop(key):  # type: ignore[no-untyped-def]
        """This node's session of ``key`` is resumed, ended or expired: forget its record."""

    def take(key, login, version):  # type: ignore[no-untyped-def]
        """
        Take a session's record, so that no other node can: atomically, and only
        if it belongs to ``login`` and ``version`` (another login's is left alone).

        :returns: a Deferred firing with a
            :class:`~stompbroker.protocol.resume.session_records.Taken`, or ``None``
            when there is no such record; it fails when the directory cannot answer.
        """

    def hand_over(node, key, last):  # type: ignore[no-untyped-def]
        """
        Ask ``node``, which keeps the session of ``key``, to give it up.

        :param last: ``(subscription, message-id)`` of the last message the
            client says it got, or ``None``.
        :returns: a Deferred firing with a
            :class:`~stompbroker.protocol.resume.session_records.Handover`, or ``None``
            when the node no longer has the session or did not answer in time.
        """
