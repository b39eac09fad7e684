"""
A published message as the broker holds it.

The broker never sees bytes, but the delivery path must not encode the same
message once per subscriber: a message therefore carries a small cache, filled
by the first session that encodes it, of the wire bytes that every subscription
shares (everything after the ``subscription`` header), one entry per escaping
style.  The cache is the protocol layer's; the broker learns only how long its
entries are (:meth:`Message.add_tail_sizes`), to count bytes out.

A message may wait in a queue for a long time, among hundreds of thousands of
others, so it is kept small: the user headers of a plain SEND (see
:meth:`stompbroker.interfaces.IBroker.send`) are held as the one ``bytes``
object of their lines, as they came off the wire, rather than as a tuple of
pairs of strings, which is ten objects for three headers, four of them tracked
by the garbage collector.  Delivery copies those lines into the MESSAGE frame
as they are (:func:`stompbroker.protocol.encoder.message_tail`); the pairs are
made the first time anything else asks for :attr:`Message.headers` (a
selector, the store, the API), and kept.
"""

from __future__ import annotations

from typing import NoReturn

from attrs import define, field

from stompbroker.protocol.frames import Headers


class _NoTails(dict):
    """
    The tail cache of every message not encoded yet: one shared, empty dict,
    rather than one per waiting message.  The encoder gives a message a dict
    of its own for its first tail; writing to this one is a bug.
    """

    __slots__ = ()

    def _shared(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("NO_TAILS is shared: give the message a dict of its own")

    __setitem__ = __delitem__ = __ior__ = _shared
    update = setdefault = pop = popitem = clear = _shared


#: See :class:`_NoTails`.
NO_TAILS: dict[str, bytes] = _NoTails()


@define(slots=True, eq=False)
class Message:
    """
    One message on its way through the broker.

    :ivar destination: where it was sent, e.g. ``/topic/prices.eur``.
    :ivar message_id: broker-unique id, sent as ``message-id``.
    :ivar headers: the SEND's user headers, without ``destination``, hop headers
        (``receipt``, ``transaction``) and ``content-length``, in wire order.
        The constructor (and ``evolve``) takes them as pairs, or as the plain
        lines a SEND carried them in (``b"name:value\\n..."``: UTF-8, one colon
        a line, no escapes, no name twice); the attribute always reads as pairs.
    :ivar body: the payload.
    :ivar expires: when it expires, in seconds of the broker's clock; ``0.0`` for
        never.  See :mod:`stompbroker.broker.routing.expiry`.
    :ivar redeliveries: how many times it has been returned to its queue for
        another delivery; sent as ``redelivery-count`` (with ``redelivered:true``)
        when more than 0.  A queue makes a copy to count a redelivery, so the same
        published message can be at different counts in different subscriptions.
    :ivar persistent: whether the message store keeps it until it is settled:
        a ``persistent:true`` SEND (or any queue SEND under ``--persistent-queues``)
        to a queue, or to a topic for its durable subscriptions.  Queues tell the
        store what becomes of such a message; every other message costs the store
        nothing.
    :ivar priority: 0 (lowest) to 9, from the SEND's ``priority`` header (4, JMS's
        default, without one): a queue hands out higher priorities first (see
        :mod:`stompbroker.broker.queueing.priorities`).  Derived from the headers, so a
        message rebuilt from the store gets it back.
    :ivar group: its message group, from the SEND's ``JMSXGroupID``, or ``None``:
        a queue hands every message of a group to one consumer (see
        :mod:`stompbroker.broker.queueing.groups`).  Derived from the headers, as ``priority``.
    :ivar closes_group: its ``JMSXGroupSeq`` is ``-1``: the group forgets its
        consumer once this message is handed out.
    :ivar wire: encoded shared tails, keyed by escaping style; see
        :func:`stompbroker.protocol.encoder.message_tail`.  :data:`NO_TAILS`
        until the first is encoded.
    """

    destination: str
    message_id: str
    _headers: Headers | bytes
    body: bytes
    expires: float = 0.0
    redeliveries: int = 0
    persistent: bool = False
    priority: int = 4
    group: str | None = None
    closes_group: bool = False
    wire: dict[str, bytes] = field(default=NO_TAILS, repr=False)

    @property
    def headers(self) -> Headers:
        """
        The user headers, as ``(name, value)`` pairs in wire order.

        Held lines are split at each LF, and each line at its first colon:
        they hold no escapes (the parser keeps no lines with a backslash), so
        that is all their decoding.  A plain loop with a path of its own for one
        line, rather than a generator: about 4 500 instructions rather than
        8 400 for one line, 13 % fewer for ten (callgrind, CPython 3.11).  A regular
        expression (``findall``) costs more than either once values are a few
        dozen characters long: its engine matches character by character, where
        ``split`` and ``partition`` run a fast search for one character.
        """
        stored = self._headers
        if not isinstance(stored, bytes):
            return stored
        text = stored.decode()
        if "\n" not in text:
            name, _, value = text.partition(":")
            one: Headers = ((name, value),)
            self._headers = one
            return one
        pairs: list[tuple[str, str]] = []
        for line in text.split("\n"):
            name, _, value = line.partition(":")
            pairs.append((name, value))
        held = tuple(pairs)
        self._headers = held
        return held

    def add_tail_sizes(self, sizes: dict[str, int]) -> None:
        """
        Add the length of each encoded tail cached so far to ``sizes``, by
        escaping style: what each delivery of the message wrote, but for its
        subscription's own prefix.  One call per message routed, whatever the
        number of subscribers (see :mod:`stompbroker.broker.flow.traffic`).

        :param sizes: escaping style (a STOMP version) -> bytes, added to in place.
        """
        for style, tail in self.wire.items():
            sizes[style] = sizes.get(style, 0) + len(tail)
