"""
The client's side of subscriptions: what one SUBSCRIBE becomes, and how ACK and
NACK find what they settle.  (The broker's side, which matches destinations to
subscriptions, is :mod:`stompbroker.broker.routing.topic_tree`.)

- Each SUBSCRIBE becomes one of the classes of
  :mod:`~stompbroker.protocol.subscribers`, the
  :class:`~stompbroker.interfaces.ISubscriber` the broker delivers to:
  ``SessionSubscription`` for an ``auto``-ack topic subscription,
  ``TrackedSubscription`` for one that takes from a queue (queues, and topic
  subscriptions with client acknowledgements or a durable name),
  ``StreamSubscription`` for a stream.
- :class:`Subscriptions` is the session's part that makes them and keeps
  them: by ``id``, and by number for ack ids.  A 1.2 ``ack`` id is ``NUMBER.MESSAGE-ID``, where
  NUMBER is the subscription's number on this connection, so the id alone names
  both.  Acknowledgements are the broker's business: the session finds which
  subscription and message an ACK or NACK names and passes the ``transaction``
  header along.
- The SUBSCRIBE headers other brokers' clients rely on are read here: the
  window (``prefetch-count``, ``activemq.prefetchSize``), ``max-redeliveries``,
  and durable subscription names (ActiveMQ's, Artemis's and RabbitMQ's).
- The session's SUBSCRIBE, UNSUBSCRIBE, ACK and NACK handlers sequence this
  part's methods with the broker and the receipts.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, ItemsView

from stompbroker.interfaces import IBroker
from stompbroker.protocol.config import READ, SessionConfig
from stompbroker.protocol.errors import (
    DuplicateSubscription,
    LimitExceeded,
    MalformedFrame,
    MissingHeader,
    UnknownAck,
    UnknownSubscription,
)
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.parts import Identified
from stompbroker.protocol.resume.resume_book import STREAM_PREFIX
from stompbroker.protocol.subscribers import (
    MessageOutput,
    SessionSubscription,
    StreamSubscription,
    TrackedSubscription,
)

ACK_MODES: frozenset[str] = frozenset({"auto", "client", "client-individual"})

#: Topic destinations; an auto-ack subscription to one is delivered to directly.
TOPIC_PREFIX = "/topic/"
#: A connection's own queues; ``reply-to`` naming one subscribes the sender to it.
TEMP_QUEUE_PREFIX = "/temp-queue/"

#: SUBSCRIBE headers that set a subscription's window, in order of preference
#: (RabbitMQ's, then ActiveMQ's).
PREFETCH_HEADERS = ("prefetch-count", "activemq.prefetchSize")
#: SUBSCRIBE/UNSUBSCRIBE headers that name a durable subscription, which is then
#: keyed by the CONNECT ``client-id`` and this name (ActiveMQ's, then Artemis's).
DURABLE_NAME_HEADERS = ("activemq.subscriptionName", "durable-subscription-name")
#: SUBSCRIBE/UNSUBSCRIBE headers that, set to ``true``, make the subscription's
#: ``id`` the name of a durable subscription (RabbitMQ's).
DURABLE_FLAG_HEADERS = ("durable", "persistent")


def integer_header(name: str, value: str, minimum: int) -> int:
    """
    Read an integer header.

    :raises MalformedFrame: if ``value`` is not an integer of at least ``minimum``.
    """
    try:
        number = int(value)
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise MalformedFrame(
            f"invalid {name} header",
            f"{name} must be an integer of at least {minimum}, got {value!r}",
        )
    return number


def durable_name(
    frame: Frame, subscription_id: str, client_id: str | None
) -> tuple[str, str] | None:
    """
    Read a SUBSCRIBE's or UNSUBSCRIBE's durable subscription name, if it has one.

    :param client_id: the CONNECT frame's ``client-id``.
    :returns: ``(client-id, name)``: ActiveMQ's and Artemis's name headers need
        the CONNECT ``client-id``; RabbitMQ's ``durable:true`` (or
        ``persistent:true``) names it by the subscription id, and the
        client-id is ``""`` when CONNECT gave none.
    :raises MissingHeader: for a name header on a connection without client-id.
    """
    for header in DURABLE_NAME_HEADERS:
        name = frame.get(header)
        if name:
            if client_id is None:
                raise MissingHeader(
                    "missing client-id header",
                    f"a durable subscription named by {header} needs a client-id header on CONNECT",
                )
            return (client_id, name)
    if any(frame.get(header) == "true" for header in DURABLE_FLAG_HEADERS):
        return (client_id or "", subscription_id)
    return None


def unknown_subscription(subscription_id: str) -> UnknownSubscription:
    """The error for an UNSUBSCRIBE, ACK or NACK naming a subscription the connection lacks."""
    return UnknownSubscription(
        "unknown subscription",
        f"this connection has no subscription with id {subscription_id!r}",
    )


class Subscriptions:
    """
    The client's subscriptions: made from SUBSCRIBE frames, given to the
    broker, kept by ``id`` and by number for 1.2 ack ids.

    :param connection: what the broker knows the connection by, which each
        subscription carries to it; the part only passes it on.
    :param broker: the broker they are given to.
    :param output: where they write their MESSAGE frames.
    :param login: who the client is, whose rights a SUBSCRIBE needs.
    :param config: the listener's settings (``access``, ``max_subscriptions``).
    """

    __slots__ = (
        "by_id",
        "_broker",
        "_client_id",
        "_config",
        "_connection",
        "_login",
        "_numbered",
        "_numbers",
        "_output",
        "_recent",
        "_version",
    )

    def __init__(
        self,
        connection: object,
        broker: IBroker,
        output: MessageOutput,
        login: Identified,
        config: SessionConfig,
    ) -> None:
        self._connection = connection
        self._broker = broker
        self._output = output
        self._login = login
        self._config = config
        #: The version CONNECT negotiated, and its ``client-id``.
        self._version = "1.2"
        self._client_id: str | None = None
        #: Where a resumable session's auto-ack topic messages go, or ``None``.
        self._recent: Callable[[bytes], None] | None = None
        #: id -> subscription.
        self.by_id: dict[str, SessionSubscription] = {}
        #: str(subscription number) -> subscription, to resolve 1.2 ack ids.
        self._numbered: dict[str, SessionSubscription] = {}
        self._numbers = itertools.count(1)

    def negotiated(self, version: str, client_id: str | None) -> None:
        """CONNECT's version, and its ``client-id``, which scopes durable subscription names."""
        self._version = version
        self._client_id = client_id

    def use(self, broker: IBroker, config: SessionConfig) -> None:
        """CONNECT chose a virtual host: subscribe through its view of the broker, by its rules."""
        self._broker = broker
        self._config = config

    def keep_recent(self, write: Callable[[bytes], None] | None) -> None:
        """
        The session is resumable: its auto-ack topic subscriptions write with
        ``write``, which keeps what they write a while (see resume/part.py).
        """
        self._recent = write

    def __len__(self) -> int:
        return len(self.by_id)

    def items(self) -> ItemsView[str, SessionSubscription]:
        """:returns: the subscriptions now by id (as a resume record's signature reads them)."""
        return self.by_id.items()

    def values(self) -> tuple[SessionSubscription, ...]:
        """:returns: the subscriptions now, in the order they were made."""
        return tuple(self.by_id.values())

    def new(self, frame: Frame) -> SessionSubscription:
        """
        :returns: the subscription a SUBSCRIBE asks for, not yet given to the broker.
        :raises ProtocolError: for a SUBSCRIBE that cannot be.
        """
        destination = frame.required("destination")
        access = self._config.access
        if access is not None:
            access.check(self._login.identity, READ, destination)
        subscription_id = frame.get("id")
        version = self._version
        if subscription_id is None:
            if version != "1.0":
                frame.required("id")
            # STOMP 1.0 made the id optional: the destination is a stable stand-in,
            # and it is what a 1.0 UNSUBSCRIBE by destination names; the MESSAGE
            # frames carry no subscription header (see SessionSubscription).
            subscription_id = destination
        if subscription_id in self.by_id:
            raise DuplicateSubscription(
                "duplicate subscription",
                f"this connection already has a subscription with id {subscription_id!r}",
            )
        ack_mode = frame.get("ack", "auto")
        if ack_mode not in ACK_MODES:
            raise MalformedFrame(
                "invalid ack mode",
                f"ack must be auto, client or client-individual, got {ack_mode!r}",
            )
        prefetch = 0
        for name in PREFETCH_HEADERS:
            value = frame.get(name)
            if value is not None:
                prefetch = integer_header(name, value, minimum=0)
                break
        max_redeliveries = frame.get("max-redeliveries")
        durable = None
        if destination.startswith(TOPIC_PREFIX):
            durable = durable_name(frame, subscription_id, self._client_id)
        cls = SessionSubscription
        if destination.startswith(STREAM_PREFIX):
            cls = StreamSubscription
        elif ack_mode != "auto" or durable is not None or not destination.startswith(TOPIC_PREFIX):
            cls = TrackedSubscription
        subscription = cls(
            self._connection,
            self._output,
            version,
            subscription_id,
            destination,
            ack_mode,
            frame.header_dict(),
            next(self._numbers),
            prefetch,
            None
            if max_redeliveries is None
            else integer_header("max-redeliveries", max_redeliveries, minimum=-1),
            durable,
            named=frame.get("id") is not None,
        )
        if cls is SessionSubscription and self._recent is not None:
            # A resumable session keeps what it writes a while (see resume/part.py).
            subscription.divert(self._recent)
        return subscription

    def add(self, subscription: SessionSubscription) -> None:
        """Give a subscription to the broker, and keep it."""
        limit = self._config.max_subscriptions
        if limit and len(self.by_id) >= limit:
            raise LimitExceeded(
                "too many subscriptions",
                f"a connection may have at most {limit} subscriptions (max-subscriptions)",
            )
        self._broker.subscribe(subscription)
        self.by_id[subscription.subscription_id] = subscription
        self._numbered[str(subscription.number)] = subscription

    def subscribe_to_replies(self, temp_queue: str) -> None:
        """
        Make sure replies to ``temp_queue`` reach this client, as RabbitMQ does.

        Unless the client subscribed to it itself, the session subscribes with
        ``auto`` acknowledgement and the temporary queue's name as subscription id,
        which is what the replies' ``subscription`` header will say.
        """
        if temp_queue in self.by_id:
            return
        for subscription in self.by_id.values():
            if subscription.destination == temp_queue:
                return
        self.add(
            TrackedSubscription(
                self._connection,
                self._output,
                self._version,
                temp_queue,
                temp_queue,
                "auto",
                {},
                next(self._numbers),
            )
        )

    def unsubscribe(self, frame: Frame) -> None:
        """
        Handle an UNSUBSCRIBE: by id, by destination (1.0), or by durable name.

        :raises UnknownSubscription: for one this connection does not have.
        """
        subscription_id = frame.get("id")
        if subscription_id is None:
            destination = frame.get("destination")
            if self._version != "1.0" or destination is None:
                frame.required("id")
            subscription_id = self._by_destination(destination or "")
        # With a durable header, UNSUBSCRIBE also deletes the durable subscription,
        # which need not be active on this connection (ActiveMQ, RabbitMQ).
        durable = durable_name(frame, subscription_id, self._client_id)
        subscription = self.by_id.pop(subscription_id, None)
        if subscription is None:
            if durable is None:
                raise unknown_subscription(subscription_id)
            self._broker.remove_durable(durable)
        else:
            del self._numbered[str(subscription.number)]
            self._broker.unsubscribe(subscription)
            if durable is not None:
                self._broker.remove_durable(subscription.durable or durable)

    def _by_destination(self, destination: str) -> str:
        for subscription_id, subscription in self.by_id.items():
            if subscription.destination == destination:
                return subscription_id
        return destination

    def take_all(self) -> list[SessionSubscription]:
        """Forget every subscription, without telling the broker: the caller takes them."""
        subscriptions = list(self.by_id.values())
        self.by_id = {}
        self._numbered = {}
        return subscriptions

    def drop_all(self) -> None:
        """Give every subscription back to the broker (the session is ending)."""
        for subscription in self.take_all():
            self._broker.unsubscribe(subscription)

    def discard(self, subscription: SessionSubscription) -> None:
        """Give back one subscription (made for a resume that did not need it)."""
        name = subscription.subscription_id
        if self.by_id.get(name) is subscription:
            del self.by_id[name]
            self._numbered.pop(str(subscription.number), None)
        self._broker.unsubscribe(subscription)

    def hold_away(self, subscription: SessionSubscription) -> None:
        """One subscription is held for the client of a detached session: presence shows it away."""
        self._broker.away(subscription)

    def ack_names(
        self, frame: Frame
    ) -> tuple[SessionSubscription | None, str, str | None, str | None]:
        """
        What an ACK names: as :meth:`acknowledged`, and its ``transaction`` and
        ``receipt``.

        The commonest ACK (STOMP 1.2, by ack id) has its headers read in one
        pass, the first of each kept (STOMP 1.2, Repeated Header Entries),
        rather than scanned once for each header read.
        """
        if self._version == "1.2":
            ack_id = transaction = receipt = None
            for name, value in frame.headers:
                if name == "id":
                    if ack_id is None:
                        ack_id = value
                elif name == "receipt":
                    if receipt is None:
                        receipt = value
                elif name == "transaction" and transaction is None:
                    transaction = value
            if ack_id is not None:
                subscription, message_id = self.by_ack_id(ack_id)
                return subscription, message_id, transaction, receipt
        subscription, message_id = self.acknowledged(frame)
        return subscription, message_id, frame.get("transaction"), frame.get("receipt")

    def by_ack_id(self, ack_id: str) -> tuple[SessionSubscription | None, str]:
        """
        Read a STOMP 1.2 ack id: ``NUMBER.MESSAGE-ID`` names a subscription of
        this connection and the message; anything else is taken for a message-id.

        :returns: as :meth:`acknowledged`.
        :raises UnknownAck: for an ack id of a subscription this connection does not have.
        """
        number, dot, acked = ack_id.partition(".")
        if dot and number.isdigit():
            subscription = self._numbered.get(number)
            if subscription is None:
                raise UnknownAck(
                    "unknown message to acknowledge",
                    f"ack id {ack_id!r} belongs to no subscription of this connection",
                )
            return subscription, acked
        return None, ack_id

    def acknowledged(self, frame: Frame) -> tuple[SessionSubscription | None, str]:
        """
        Find the message an ACK or NACK names, and the subscription it was delivered to.

        STOMP 1.2 names it by ``id``, the MESSAGE's ``ack`` header; 1.1 by
        ``message-id`` and ``subscription``; 1.0 by ``message-id`` alone.  An
        ``id`` that is not one of our ack ids is taken for a message-id (ActiveMQ's
        ack ids are message ids, and clients ported from it send those); so is a
        1.1 ``subscription`` that names none of this connection's.

        :returns: the subscription, or ``None`` to look through all of this
            connection's, and the message id.
        :raises MissingHeader: if the frame names no message.
        :raises UnknownAck: for an ack id of a subscription this connection does not have.
        """
        version = self._version
        ack_id = frame.get("id") if version == "1.2" else None
        if ack_id is not None:
            return self.by_ack_id(ack_id)
        message_id = frame.get("message-id")
        if message_id is None:
            # Raises: 1.2 names the message by id, older versions by message-id.
            message_id = frame.required("id" if version == "1.2" else "message-id")
        subscription_id = frame.get("subscription")
        if subscription_id is None:
            return None, message_id
        # A subscription this connection does not have (clients send the
        # destination, or a stale id) is no error: the message-id is looked for
        # through all of its subscriptions, as ActiveMQ and RabbitMQ do.
        return self.by_id.get(subscription_id), message_id
