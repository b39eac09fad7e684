"""
The router: where a SEND goes.

:meth:`Router.send` is what a session's SEND calls (the broker hands it over as
its own ``send``).  It checks the destination once per destination, makes the
:class:`~stompbroker.protocol.message.Message` (a broker-unique ``message-id``,
its expiry in clock seconds, whether it is persistent, a temporary ``reply-to``
rewritten to the broker-unique name other connections reach it by), and routes
it by kind:

- ``/topic/`` to the engine's fan-out
  (:meth:`~stompbroker.broker.engine.engine_interface.IEngine.publish_topic`), which expires
  it there if its time has passed;
- ``/queue/`` onto that queue
  (:meth:`~stompbroker.broker.engine.engine_interface.IEngine.publish_queue`);
- ``/temp-queue/NAME`` onto the sender's own temporary queue of that name;
- ``/reply-queue/`` onto the temporary queue of another connection, if it is
  still there (:meth:`~stompbroker.broker.engine.engine_interface.IEngine.publish_reply`);
- ``/user/LOGIN/...`` to the engine's fan-out, under the user's key
  (:mod:`stompbroker.broker.features.user_destinations`): every session of
  that user subscribed to it, on every node;
- ``/stream/`` onto the end of that stream's log
  (:meth:`~stompbroker.broker.engine.engine_interface.IEngine.publish_stream`), whose store
  write the RECEIPT waits for.

A SEND with a scheduling header (:mod:`stompbroker.broker.features.schedule_rules`) is held
by the broker's :class:`~stompbroker.broker.features.schedule_timer.Scheduling` instead, and
routed by :meth:`Router.fire` when due; one with ``retain`` on a topic changes
the topic's retained message (:mod:`stompbroker.broker.features.retaining`) and is routed.
An engine without them (``scheduled`` or ``retained`` ``None``) refuses those
headers.  Both headers are among those the one pass over the headers looks for,
so a SEND without them pays nothing more.  What those headers make of the
message is read by :class:`~stompbroker.broker.routing.send_headers.SendHeaders`, an
object the router holds.

A SEND with a duplicate-detection id (:mod:`stompbroker.broker.features.duplicate_ids`)
that its destination saw within its window is not routed: the session answers
it with its RECEIPT alone.  In a transaction the id counts at COMMIT.

In a transaction the routing is held until COMMIT.  A persistent message is
filed first (:meth:`~stompbroker.broker.engine.engine_interface.IEngine.keep`) and routed at once;
``send`` returns the Deferred of that write, on which the session holds the
RECEIPT.  After routing, the router pauses the sender if back-pressure calls for
it (:mod:`stompbroker.broker.flow.backpressure`).

This is a hot path: a SEND costs a dict lookup for its destination's kind, one
pass over its headers (none when it has no header the broker acts on), the
message, and one call of the engine's; the route methods are bound once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from twisted.internet.defer import Deferred

from stompbroker.broker.clients.connections import ConnectionRegistry
from stompbroker.broker.clients.transactions import Transactions
from stompbroker.broker.engine.duplicate_detection import RoutesOnce
from stompbroker.broker.features.duplicate_ids import duplicate_id_of
from stompbroker.broker.features.retain_rules import RETAIN_HEADER, parse_retain
from stompbroker.broker.features.retaining import Retaining
from stompbroker.broker.features.schedule_rules import ScheduledEntry, fired_headers
from stompbroker.broker.features.schedule_timer import Scheduling
from stompbroker.broker.features.user_destinations import send_key
from stompbroker.broker.flow.backpressure import BackPressure
from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.broker.queueing.priorities import DEFAULT_PRIORITY
from stompbroker.broker.routing.composite import SEPARATOR, split_destination
from stompbroker.broker.routing.destinations import Kind, validate_send_destination
from stompbroker.broker.routing.send_headers import (
    ACTED_ON,
    ACTED_ON_WHEN_PERSISTENT,
    SendHeaders,
)
from stompbroker.broker.store.journal import all_done
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

# On Python 3.11 reading an Enum member off its class (``Kind.QUEUE``) is a
# Python-level descriptor call (about 1 900 instructions, against 1 000 for a
# module constant); a SEND compares its kind two or three times, so the members
# it compares with are read once, here.
_TOPIC = Kind.TOPIC
_QUEUE = Kind.QUEUE
#: The kinds whose route is the engine's own ``publish_topic`` or ``publish_queue``.
_PLAIN = frozenset({_TOPIC, _QUEUE, Kind.USER})

#: Where a message goes: the engine's ``publish_*``; ``None``, or for a stream
#: the Deferred of its append.
Route = Callable[[Message], "Deferred[None] | None"]

#: What :meth:`Router._check` remembers for a composite destination, in place of a kind.
COMPOSITE = "composite"

#: How many destinations' checked kinds :meth:`Router.send` remembers; like the
#: subscription tree's match cache, it is cleared rather than trimmed when full.
MAX_CHECKED_DESTINATIONS = 4096


class Router:
    """
    Routes SENDs, and messages from Python code, to the engine's destinations.

    :param clock: ``seconds()``, for expiry.
    :param engine: the :class:`~stompbroker.broker.engine.engine_interface.IEngine`.
    :param registry: the connections, which own their temporary queues.
    :param backpressure: what routing may call for.
    :param transactions: holds a transaction's SENDs until COMMIT.
    :param policy: the broker's delivery policy, for the broker-wide TTL.
    :param persistent_queues: treat every SEND to a ``/queue/`` as persistent,
        if the engine keeps persistent messages.

    :ivar persistent_queues: whether every SEND to a ``/queue/`` is persistent.
    :ivar scheduling: the broker's scheduled messages on ``clock``, or ``None``
        if the engine cannot schedule.
    :ivar send_headers: reads the SEND headers the broker acts on.
    """

    __slots__ = (
        "persistent_queues",
        "scheduling",
        "send_headers",
        "_clock",
        "_registry",
        "_backpressure",
        "_held_in",
        "_policy",
        "_acted_on",
        "_checked",
        "_composites",
        "_user_keys",
        "_traffic",
        "_node",
        "_message_ids",
        "_publish_topic",
        "_publish_queue",
        "_publish_reply",
        "_publish_stream",
        "_keep",
        "_duplicates",
    )

    def __init__(
        self,
        clock: Any,
        engine: Any,
        registry: ConnectionRegistry,
        backpressure: BackPressure,
        transactions: Transactions,
        policy: DeliveryPolicy,
        persistent_queues: bool = False,
    ) -> None:
        capabilities = engine.capabilities()
        self.persistent_queues = persistent_queues and capabilities.persistence
        self._clock = clock
        self._registry = registry
        self._backpressure = backpressure
        self._held_in = transactions.held_in
        self._policy = policy
        self._acted_on = ACTED_ON_WHEN_PERSISTENT if capabilities.persistence else ACTED_ON
        #: SEND destinations already validated -> their kind.
        self._checked: dict[str, Kind | str] = {}
        #: Composite SEND destinations already checked -> their parts.
        self._composites: dict[str, tuple[tuple[str, Kind], ...]] = {}
        #: User SEND destinations already checked -> their user keys.
        self._user_keys: dict[str, str] = {}
        books = engine.bookkeeping()
        self._traffic = books.traffic
        self._node = books.ids.node
        self._message_ids = books.ids.message_ids
        self._publish_topic: Callable[[Message], None] = engine.publish_topic
        self._publish_queue: Callable[[Message], Deferred[None] | None] = engine.publish_queue
        self._publish_reply: Callable[[Message], None] = engine.publish_reply
        self._publish_stream: Route = engine.publish_stream
        self._keep: Callable[[Message], Deferred[None] | None] = engine.keep
        self._duplicates: RoutesOnce = engine.duplicate_detection()
        self.scheduling: Scheduling | None = None
        if capabilities.scheduling:
            self.scheduling = engine.scheduling(self.fire)
        retaining: Retaining | None = None
        if capabilities.retain:
            retaining = engine.retaining()
        self.send_headers = SendHeaders(
            clock,
            registry,
            policy,
            self._acted_on,
            self.persistent_queues,
            capabilities,
            self.scheduling,
            retaining,
        )

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
        """
        Route one message: to every matching topic subscription, or onto a queue.

        :param connection: the sending connection, which owns its ``/temp-queue/``
            destinations and transactions; ``None`` for a message from Python code.
        :param transaction: hold the message until this transaction commits.
        :param lines: ``headers`` as plain header lines (see
            :meth:`stompbroker.interfaces.IBroker.send`), for the message to hold
            unless a header is one the router acts on.
        :returns: ``None``; or, for a persistent message that the engine keeps, a
            Deferred that fires once it is durable (it is enqueued already), or
            fails with :class:`~stompbroker.broker.store.journal.MessageNotStored`.
        :raises InvalidDestination: for a wildcard or an unknown kind of destination.
        :raises MalformedFrame: for an ``expires`` or ``expiration`` header that is
            not a number of milliseconds.
        :raises UnknownTransaction: if ``transaction`` is not open on ``connection``.
        :raises NotSupported: for scheduling headers or ``retain`` the engine cannot
            honour, ``retain`` on anything but a topic, or ``AMQ_SCHEDULED_CRON``.
        :raises LimitExceeded: for ``retain:set`` when too many topics retain one.
        """
        return self._send(destination, headers, body, connection, transaction, None, lines)[1]

    def fire(self, entry: ScheduledEntry[Message]) -> None:
        """
        Route a scheduled message that is due, as if just sent: without its
        scheduling headers, with ``scheduledJobId``, its expiry counted from now.
        The first delivery keeps the SEND's message-id; each repeat gets its own.
        """
        message = entry.item
        headers = fired_headers(message.headers, entry.key)
        message_id = entry.key if entry.fired == 1 else None
        # Its duplicate-detection id counted when it was sent: its firing is no repeat.
        _, waiting = self._send(
            message.destination, headers, message.body, None, None, message_id, fired=True
        )
        if waiting is not None:
            # The journal has logged the failure; nobody else is there to hear of it.
            waiting.addErrback(lambda failure: None)

    def publish(
        self,
        destination: str,
        body: bytes | str,
        headers: Iterable[tuple[str, str]] | None = None,
    ) -> Message:
        """
        Publish a message from Python code in the broker's process, routed exactly
        as a SEND from a client would be (see
        :meth:`stompbroker.broker.service.Broker.publish`).

        :returns: the routed message.
        """
        pairs = list(headers or ())
        if isinstance(body, str):
            body = body.encode("utf-8")
            if not any(name == "content-type" for name, _ in pairs):
                pairs.append(("content-type", "text/plain;charset=utf-8"))
        message, waiting = self._send(destination, tuple(pairs), body, None, None)
        if waiting is not None:
            # The journal has logged the failure; nobody else is there to hear of it.
            waiting.addErrback(lambda failure: None)
        return message

    def _send(
        self,
        destination: str,
        headers: Headers,
        body: bytes,
        connection: Any,
        transaction: str | None,
        message_id: str | None = None,
        lines: bytes | None = None,
        fired: bool = False,
    ) -> tuple[Message, Deferred[None] | None]:
        """
        :param message_id: the message's id; a new one if ``None``.
        :param lines: as for :meth:`send`.
        :param fired: a scheduled message that is due, whose duplicate-detection
            id was counted when it was sent.
        :returns: the routed message, and what :meth:`send` returns.
        """
        kind = self._checked.get(destination)
        if kind is None:
            kind = self._check(destination)
        route: Route
        if kind is _TOPIC:
            route = self._publish_topic
        elif kind is _QUEUE:
            route = self._publish_queue
        elif kind is Kind.TEMP_QUEUE:
            route = self._registry.temp_queue(connection, destination).publish
        elif kind is Kind.REPLY_QUEUE:
            route = self._publish_reply
        elif kind is Kind.STREAM:
            route = self._publish_stream
        elif kind is Kind.USER:
            route = self._publish_topic
            destination = self._user_keys[destination]
        else:
            return self._send_composite(destination, headers, body, connection, transaction)
        held = None
        if transaction is not None:
            held = self._held_in(connection, transaction)
        acted_on = self._acted_on
        duplicate_id = None
        for name, _ in headers:
            if name in acted_on:
                lines = None
                headers, expires, persistent, priority, group, timing = self.send_headers.prepare(
                    headers, connection, kind
                )
                if not fired:
                    duplicate_id = duplicate_id_of(headers)
                break
        else:
            # The common SEND: no header the broker acts on.
            ttl = self._policy.ttl
            expires = self._clock.seconds() + ttl / 1000.0 if ttl else 0.0
            persistent = self.persistent_queues and kind is _QUEUE
            priority = DEFAULT_PRIORITY
            group = timing = None
        message = Message(
            destination,
            message_id or f"{self._node}-{next(self._message_ids)}",
            headers if lines is None else lines,
            body,
            expires,
            0,
            persistent,
            priority,
        )
        if group is not None:
            message.group, message.closes_group = group
        if timing is not None:
            route, persistent = self.send_headers.timed(route, message, kind, timing, connection)
        waiting = None
        if duplicate_id is not None:
            # Counted when routed: at COMMIT in a transaction.
            plain = timing is None and kind in _PLAIN
            if persistent:
                route = functools.partial(self._keep_and_route, route)
            route_once = self._duplicates.route_once
            if held is not None:
                held.hold(route_once, duplicate_id, message, persistent, route, plain)
            else:
                waiting = route_once(duplicate_id, message, persistent, route, plain)
                if self._backpressure.pending is not None:
                    self._backpressure.pause_sender(connection)
        elif held is not None:
            if persistent:
                held.hold(self._keep_and_route, route, message)
            else:
                held.hold(route, message)
        else:
            if persistent:
                waiting = self._keep_and_route(route, message)
            else:
                # None, or a Deferred the RECEIPT waits for (a stream's append).
                waiting = route(message)
            if self._backpressure.pending is not None:
                self._backpressure.pause_sender(connection)
        if persistent and self._backpressure.disk_full:
            self._backpressure.hold_persistent_sender(connection)
        traffic = self._traffic
        if traffic.sampling:
            counted = traffic.destinations.get(destination) or traffic.of(destination)
            counted.producers[connection] = traffic.generation
        return message, waiting

    def _send_composite(
        self,
        destination: str,
        headers: Headers,
        body: bytes,
        connection: Any,
        transaction: str | None,
    ) -> tuple[Message, Deferred[None] | None]:
        """
        Route a SEND to a composite destination: one message per part, each routed
        as if sent to that part alone (see :mod:`stompbroker.broker.routing.composite`).

        :returns: the first part's message, and a Deferred of every part's store
            writes, or ``None`` if there are none.
        :raises NotSupported: for ``retain`` with a part that is not a topic,
            before any part is sent to.
        """
        parts = self._composites[destination]
        for name, value in headers:
            if name == RETAIN_HEADER:
                for part, _ in parts:
                    parse_retain(value, part)
                break
        messages = []
        writes = []
        for part, _ in parts:
            message, waiting = self._send(part, headers, body, connection, transaction)
            messages.append(message)
            if waiting is not None:
                writes.append(waiting)
        return messages[0], all_done(writes)

    def _keep_and_route(self, route: Route, message: Message) -> Deferred[None] | None:
        """
        File a persistent message with the engine, then route it.

        :returns: the filing's Deferred (and the retained copy's), or ``None`` if
            nothing keeps the message.
        """
        waiting = self._keep(message)
        retaining: Deferred[None] | None = route(message)
        if retaining is None:
            return waiting
        if waiting is None:
            return retaining
        return all_done([waiting, retaining])

    def _check(self, destination: str) -> Kind | str:
        """
        Validate a SEND destination once, and remember its kind, or its parts if
        it is composite (:data:`COMPOSITE`).

        :raises InvalidDestination: for a wildcard or an unknown kind of
            destination, or a composite destination with a bad or empty part.
        :raises LimitExceeded: for a composite destination of too many parts.
        """
        kind: Kind | str
        if SEPARATOR in destination:
            parts = split_destination(destination)
            kind = COMPOSITE
        else:
            kind = validate_send_destination(destination)
        if len(self._checked) >= MAX_CHECKED_DESTINATIONS:
            self._checked.clear()
            self._composites.clear()
            self._user_keys.clear()
        if kind is COMPOSITE:
            self._composites[destination] = parts
        elif kind is Kind.USER:
            self._user_keys[destination] = send_key(destination)
        self._checked[destination] = kind
        return kind

    def checked_destinations(self) -> int:
        """:returns: how many destinations' kinds are remembered now."""
        return len(self._checked)
