"""
What one SUBSCRIBE becomes: the :class:`~stompbroker.interfaces.ISubscriber`
objects the broker delivers to, and how each writes a MESSAGE frame.  The
session's bookkeeping of them, and SUBSCRIBE, ACK and NACK, are
:mod:`~stompbroker.protocol.subscriptions`.

- :class:`SessionSubscription`: an ``auto``-ack topic subscription, whose
  delivery is one dict lookup, one concatenation and one write: the bytes
  every subscriber shares are encoded once per message and cached on it.
- :class:`TrackedSubscription`: one that takes from a queue (queues, and topic
  subscriptions with client acknowledgements or a durable name), whose MESSAGE
  frames also carry ``ack`` and the redelivery headers.
- :class:`StreamSubscription`: one to a stream, which notes the offset of what
  it delivers, for a resumed session to go on from there.

A subscription told of a gap (:meth:`SessionSubscription.mark_gap`: messages
for it may have been lost, as when a node of a cluster was cut from the
others' topic messages) says ``cluster-gap:true`` on its next MESSAGE.  The
mark swaps the subscription's write for one that adds the header once and
swaps back, so a delivery with no gap pending costs nothing more.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from zope.interface import implementer

from stompbroker.interfaces import ISubscriber
from stompbroker.protocol.encoder import message_prefix, message_tail
from stompbroker.protocol.resume.resume_book import STREAM_OFFSET_HEADER

#: The header line of the first MESSAGE after a gap (docs/destinations.md).
GAP_HEADER = b"cluster-gap:true\n"


class MessageOutput(Protocol):
    """Where a subscription writes its MESSAGE frames (the session's output)."""

    def write_message(self, data: bytes) -> None:
        """An auto-ack topic message, which a slow client's buffer may drop."""

    def write_delivery(self, data: bytes) -> None:
        """A message from a queue, counted as it is written."""

    def count_messages(self, count: int, size: int) -> None:
        """Count topic messages routed here, told in batches."""


@implementer(ISubscriber)
class SessionSubscription:
    """
    One SUBSCRIBE of one session: what the broker stores and delivers to.

    It holds the encoded start of every MESSAGE it will send (``MESSAGE`` and the
    ``subscription`` header), so a delivery costs one lookup of the message's
    shared bytes, one concatenation and one write.  A STOMP 1.0 SUBSCRIBE without
    an ``id`` is not ``named``: its destination stands in for the id, and its
    MESSAGE frames carry no ``subscription`` header, as ActiveMQ's do (1.0
    clients match such messages by destination, and would look for a handler
    of the stand-in id), for the same cost.
    """

    __slots__ = (
        "subscription_id",
        "destination",
        "ack_mode",
        "connection",
        "headers",
        "number",
        "prefetch",
        "max_redeliveries",
        "durable",
        "_count",
        "_prefix",
        "_style",
        "_write",
        "_after_gap",
    )

    #: Whether the subscription stays in the broker while its session is
    #: detached, its messages kept for the client's return
    #: (:mod:`~stompbroker.protocol.resume.part`): ``auto``-ack topic ones do.
    collects_while_detached = True
    #: The hook for stream subscriptions: the ``x-stream-offset`` of the last
    #: message delivered (before any, the one before where its reader
    #: started), from which a resumed session subscribes again (a stream
    #: subscription class defines it as a slot and sets it in ``deliver`` and
    #: ``stream_position``); ``None`` for every other subscription.
    last_stream_offset: int | None = None

    def __init__(
        self,
        connection: Any,
        output: MessageOutput,
        version: str,
        subscription_id: str,
        destination: str,
        ack_mode: str,
        headers: dict[str, str],
        number: int = 0,
        prefetch: int = 0,
        max_redeliveries: int | None = None,
        durable: tuple[str, str] | None = None,
        named: bool = True,
    ) -> None:
        self.subscription_id = subscription_id
        self.destination = destination
        self.ack_mode = ack_mode
        #: The connection the broker knows it by (an ``IConnection``).
        self.connection = connection
        self.headers = headers
        self.number = number
        self.prefetch = prefetch
        self.max_redeliveries = max_redeliveries
        self.durable = durable
        self._style = version
        self._prefix = message_prefix(subscription_id if named else None, version)
        # Only auto-ack topic subscriptions are this class; their messages are
        # the ones a slow client's buffer may drop (see SlowConsumer.write_message).
        self._write: Callable[[bytes], None] = output.write_message
        self._count = output.count_messages
        #: While a gap is pending, the write to go back to after the next frame.
        self._after_gap: Callable[[bytes], None] | None = None

    def deliver(self, message: Any) -> None:
        """
        Send one MESSAGE frame to the client.

        :param message: a :class:`stompbroker.protocol.message.Message`.
        """
        tail = message.wire.get(self._style)
        if tail is None:
            tail = message_tail(message, self._style)
        self._write(self._prefix + tail)

    @property
    def prefix(self) -> bytes:
        """The encoded start of every MESSAGE it sends: which subscription a frame is for."""
        return self._prefix

    def divert(self, write: Callable[[bytes], None]) -> None:
        """Write this subscription's MESSAGE frames with ``write`` from now on."""
        if self._after_gap is None:
            self._write = write
        else:
            self._after_gap = write

    def mark_gap(self) -> int:
        """
        Messages for this subscription may have been lost: its next MESSAGE says
        ``cluster-gap:true``, wherever it is written (to the client, or held for
        a resumed session).

        :returns: 1 if the subscription is told now, 0 if a gap was pending already.
        """
        if self._after_gap is not None:
            return 0
        self._after_gap = self._write
        self._write = self._write_after_gap
        return 1

    def _write_after_gap(self, data: bytes) -> None:
        """Write the first frame after a gap with the gap header, and write plainly again."""
        write = self._after_gap
        assert write is not None
        self._after_gap = None
        self._write = write
        # Every frame starts with the prefix (a tracked one's ack line follows it).
        cut = len(self._prefix)
        write(b"".join((data[:cut], GAP_HEADER, data[cut:])))

    def hold_writes(self) -> Callable[[], None]:
        """
        Keep this subscription's MESSAGE frames back until the returned function
        is called, which writes them, in order, and writes straight on from then.
        """
        write = self._write if self._after_gap is None else self._after_gap
        held: list[bytes] = []
        self.divert(held.append)

        def release() -> None:
            self.divert(write)
            for data in held:
                write(data)

        return release

    def count_deliveries(self, count: int, tails: dict[str, int]) -> None:
        """
        Add MESSAGE frames the broker routed here to the connection's frames and
        bytes out: counted per SEND and told in batches, so that a delivery costs
        nothing more (see :mod:`stompbroker.broker.flow.traffic`).

        :param count: how many messages.
        :param tails: bytes of their encoded tails, by escaping style.
        """
        self._count(count, count * len(self._prefix) + tails.get(self._style, 0))

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self.subscription_id!r} on {self.destination!r}"
            f" of {self.connection.session_id!r}>"
        )


class TrackedSubscription(SessionSubscription):
    """
    A subscription that takes from a queue, whose MESSAGE frames say how to settle them.

    Each frame gets, after ``subscription``: ``ack:NUMBER.MESSAGE-ID`` when the
    client must acknowledge (STOMP 1.2 only: older versions acknowledge by
    ``message-id``), and ``redelivered:true`` with ``redelivery-count`` when the
    message has come back to its queue before.  Both are ours to write (a number
    and a broker-made id), so they need no escaping.
    """

    __slots__ = ("_ack_head",)

    #: Given back to the broker when the session detaches: what it holds
    #: returns to its queue at once rather than wait for a client that may
    #: never come back.
    collects_while_detached = False

    def __init__(
        self, connection: Any, output: MessageOutput, version: str, *args: Any, **kwargs: Any
    ) -> None:
        super().__init__(connection, output, version, *args, **kwargs)
        # Counted as a message as it is written (SlowConsumer.write_delivery).
        self._write = output.write_delivery
        acknowledged = self.ack_mode != "auto" and version == "1.2"
        #: The prefix and the start of the ``ack`` line, to which each frame adds
        #: its message-id; empty when the frames carry no ``ack`` header.
        self._ack_head = (self._prefix + b"ack:%d." % self.number) if acknowledged else b""

    def deliver(self, message: Any) -> None:
        """
        Send one MESSAGE frame to the client, with its ``ack`` and redelivery headers.

        :param message: a :class:`stompbroker.protocol.message.Message`.
        """
        tail = message.wire.get(self._style)
        if tail is None:
            tail = message_tail(message, self._style)
        if message.redeliveries:
            tail = b"redelivered:true\nredelivery-count:%d\n%b" % (message.redeliveries, tail)
        if self._ack_head:
            # One join copies the tail once (a queued message's frame is built
            # once per delivery, so this is on the per-message path).
            self._write(b"".join((self._ack_head, message.message_id.encode(), b"\n", tail)))
        else:
            self._write(self._prefix + tail)


class StreamSubscription(TrackedSubscription):
    """
    A subscription to a stream (``/stream/NAME``), which remembers the
    ``x-stream-offset`` of the last message it delivered: a resumed session
    subscribes again from the one after it
    (:func:`~stompbroker.protocol.resume.resume_book.resubscribe_headers`).  Its own
    class, so that queues and topics pay nothing for it.
    """

    __slots__ = ("last_stream_offset",)

    def __init__(
        self, connection: Any, output: MessageOutput, version: str, *args: Any, **kwargs: Any
    ) -> None:
        super().__init__(connection, output, version, *args, **kwargs)
        self.last_stream_offset: int | None = None

    def stream_position(self, offset: int) -> None:
        """
        The stream's reader starts at ``offset``: until it delivers, a resumed
        session subscribes again from there, and so misses nothing published
        while it was away even if its start was ``next`` or ``last``.
        """
        self.last_stream_offset = offset - 1

    def deliver(self, message: Any) -> None:
        """Send one MESSAGE frame, as a tracked subscription does, noting its offset."""
        # The stream stamps the offset last (see broker/streams/entries.py).
        for name, value in reversed(message.headers):
            if name == STREAM_OFFSET_HEADER:
                self.last_stream_offset = int(value)
                break
        super().deliver(message)
