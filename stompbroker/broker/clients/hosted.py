"""
A session's view of the broker inside one virtual host
(:mod:`stompbroker.broker.routing.virtual_hosts`).

When virtual hosts are configured, CONNECT hands its ``host`` to
:meth:`stompbroker.broker.service.Broker.select_host`, and the session talks
to a :class:`HostedBroker` from then on: the broker's own methods, but for
those that name destinations.  These map the names a client sends to the
broker's names of its virtual host's destinations, and wrap each subscription
in a :class:`HostedSubscriber`, which hands the session a copy of each
message under the name its client knows.  The default virtual host's view
only refuses the marker character, so that no client name can reach another
host's destinations.  Without virtual hosts no view exists: sessions call the
broker itself, at no cost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attrs import evolve
from twisted.internet.defer import Deferred

from stompbroker.broker.features.user_destinations import USER_PREFIX
from stompbroker.broker.queueing.dead_letters import DEAD_LETTER_HEADERS
from stompbroker.broker.routing.virtual_hosts import VirtualHost, client_name, refuse_marker
from stompbroker.protocol.errors import NotSupported
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

#: How many client destinations a view remembers the broker's names of; cleared when full.
MAX_MAPPED = 4096

#: The header of a dead-lettered message that names the broker's destination.
_ORIGINAL = DEAD_LETTER_HEADERS[0]


def client_copy(message: Message) -> Message:
    """
    :returns: a copy of an internal message under the names its virtual host's
        clients know (its destination, a dead letter's ``original-destination``),
        with no encoded tails yet.
    """
    headers: Headers = message.headers
    if any(name == _ORIGINAL for name, _ in headers):
        headers = tuple(
            (name, client_name(value) if name == _ORIGINAL else value) for name, value in headers
        )
    return Message(
        client_name(message.destination),
        message.message_id,
        headers,
        message.body,
        message.expires,
        message.redeliveries,
        message.persistent,
        message.priority,
        message.group,
        message.closes_group,
    )


class HostedSubscriber:
    """
    The broker's side of one subscription in a virtual host: an
    :class:`~stompbroker.interfaces.ISubscriber` under the broker's names (its
    destination, its durable name), which delivers to the session's
    subscription under the client's.  Optional hooks of the session's
    subscription (a stream's ``stream_position``) are reached through it.
    """

    __slots__ = (
        "inner",
        "subscription_id",
        "destination",
        "ack_mode",
        "connection",
        "headers",
        "prefetch",
        "max_redeliveries",
        "durable",
        "_translate",
    )

    def __init__(self, inner: Any, host: VirtualHost, translate: Callable[[Message], Message]):
        self.inner = inner
        self.subscription_id = inner.subscription_id
        self.destination = host.internal(inner.destination)
        self.ack_mode = inner.ack_mode
        self.connection = inner.connection
        self.headers = inner.headers
        self.prefetch = inner.prefetch
        self.max_redeliveries = inner.max_redeliveries
        self.durable = host.durable(inner.durable)
        self._translate = translate

    def deliver(self, message: Message) -> None:
        """Hand the session's subscription the message under its client's names."""
        self.inner.deliver(self._translate(message))

    def count_deliveries(self, count: int, tails: dict[str, int]) -> None:
        """As the session's subscription counts them."""
        self.inner.count_deliveries(count, tails)

    def __getattr__(self, name: str) -> Any:
        # The optional hooks ISubscriber leaves out (stream_position,
        # last_stream_offset, collects_while_detached...) are the session's.
        return getattr(self.inner, name)


class HostedBroker:
    """
    What the sessions of one virtual host call instead of the broker.

    :param broker: the :class:`~stompbroker.broker.service.Broker`.
    :param host: the virtual host, or ``None`` for the default host, whose
        names are the clients' own.

    :ivar host: the virtual host, or ``None``.
    :ivar vhost: its name, ``/`` for the default host (as RabbitMQ names it).
    """

    def __init__(self, broker: Any, host: VirtualHost | None) -> None:
        self.host = host
        self.vhost = "/" if host is None else host.name
        self._broker = broker
        self._send: Callable[..., Deferred[None] | None] = broker.send
        self._ack: Callable[..., Deferred[None] | None] = broker.ack
        self._nack: Callable[..., Deferred[None] | None] = broker.nack
        #: Client destinations checked -> the broker's names.
        self._mapped: dict[str, str] = {}
        #: The session's subscriptions -> what the broker holds for them.
        self._subscribers: dict[Any, HostedSubscriber] = {}
        #: Listener configs -> the same with this host's access rules.
        self._configs: dict[int, tuple[Any, Any]] = {}
        #: The last message copied for this host's clients, and its copy: a
        #: topic message fanned out to many subscribers is copied once.
        self._last: tuple[Message | None, Message | None] = (None, None)
        self.open_connection = broker.open_connection
        self.close_connection = broker.close_connection
        self.new_session_id = broker.new_session_id
        self.pause_consumers = broker.pause_consumers
        self.resume_consumers = broker.resume_consumers
        self.block_sender = broker.block_sender
        self.count_dropped = broker.count_dropped
        self.begin = broker.begin
        self.commit = broker.commit
        self.abort = broker.abort

    def session_config(self, config: Any) -> Any:
        """
        :param config: a listener's ``SessionConfig``.
        :returns: the config this host's sessions use: with its own access rules,
            if it has any.
        """
        if self.host is None or self.host.access is None:
            return config
        known = self._configs.get(id(config))
        if known is None:
            known = self._configs[id(config)] = (config, evolve(config, access=self.host.access))
        return known[1]

    def broker_name(self, destination: str) -> str:
        """
        :returns: the broker's name of a destination a client of this host sent.
        :raises InvalidDestination: for a destination holding the marker.
        :raises NotSupported: for a user destination outside the default host.
        """
        name = self._mapped.get(destination)
        if name is None:
            refuse_marker(destination)
            host = self.host
            if host is None:
                name = destination
            else:
                if destination.startswith(USER_PREFIX):
                    raise NotSupported(
                        "user destinations in a virtual host",
                        "/user/ destinations are served in the default virtual host only.",
                    )
                name = host.internal(destination)
            if len(self._mapped) >= MAX_MAPPED:
                self._mapped.clear()
            self._mapped[destination] = name
        return name

    def send(
        self,
        destination: str,
        headers: Headers,
        body: bytes,
        *,
        connection: Any = None,
        transaction: str | None = None,
        lines: bytes | None = None,
    ) -> Deferred[None] | None:
        """:meth:`stompbroker.interfaces.IBroker.send`, to this host's destination."""
        return self._send(
            self.broker_name(destination),
            headers,
            body,
            connection=connection,
            transaction=transaction,
            lines=lines,
        )

    def subscribe(self, subscriber: Any) -> None:
        """:meth:`stompbroker.interfaces.IBroker.subscribe`, to this host's destinations."""
        refuse_marker(subscriber.destination)
        if subscriber.durable is not None:
            refuse_marker(subscriber.durable[1])
        host = self.host
        if host is None:
            self._broker.subscribe(subscriber)
            return
        if subscriber.destination.startswith(USER_PREFIX):
            self.broker_name(subscriber.destination)
        hosted = HostedSubscriber(subscriber, host, self._client_copy)
        self._broker.subscribe(hosted)
        self._subscribers[subscriber] = hosted

    def unsubscribe(self, subscriber: Any) -> None:
        """:meth:`stompbroker.interfaces.IBroker.unsubscribe`."""
        self._broker.unsubscribe(self._subscribers.pop(subscriber, subscriber))

    def away(self, subscriber: Any) -> None:
        """:meth:`stompbroker.interfaces.IBroker.away`."""
        self._broker.away(self._subscribers.get(subscriber, subscriber))

    def remove_durable(self, durable: tuple[str, str]) -> None:
        """:meth:`stompbroker.interfaces.IBroker.remove_durable`, of this host's."""
        refuse_marker(durable[1])
        if self.host is not None:
            durable = (durable[0], self.host.prefix + durable[1])
        self._broker.remove_durable(durable)

    def ack(
        self,
        connection: Any,
        message_id: str,
        *,
        subscriber: Any = None,
        transaction: str | None = None,
    ) -> Deferred[None] | None:
        """:meth:`stompbroker.interfaces.IBroker.ack`."""
        return self._ack(
            connection,
            message_id,
            subscriber=self._subscribers.get(subscriber, subscriber),
            transaction=transaction,
        )

    def nack(
        self,
        connection: Any,
        message_id: str,
        *,
        subscriber: Any = None,
        requeue: bool = True,
        transaction: str | None = None,
    ) -> Deferred[None] | None:
        """:meth:`stompbroker.interfaces.IBroker.nack`."""
        return self._nack(
            connection,
            message_id,
            subscriber=self._subscribers.get(subscriber, subscriber),
            requeue=requeue,
            transaction=transaction,
        )

    def _client_copy(self, message: Message) -> Message:
        """:func:`client_copy`, once per message however many subscribers it reaches."""
        last, copy = self._last
        if message is last and copy is not None:
            return copy
        copy = client_copy(message)
        self._last = (message, copy)
        return copy
