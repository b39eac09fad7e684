"""
What a SEND's headers make of its message, before the router routes it.

The headers the broker acts on (expiry, ``persistent``, ``priority``, the
message group's, a temporary ``reply-to``, and the scheduling and ``retain``
headers) are read here, by :class:`SendHeadersMixin`, a part of
:class:`~stompbroker.broker.routing.router.Router`.  A SEND without any of them (the
common case) never comes here: ``Router._send``'s scan of its header names
finds none of :data:`ACTED_ON` (or :data:`ACTED_ON_WHEN_PERSISTENT`), and it
makes the message at once.

A module of its own so that the router holds the routing alone; a mixin of the
router rather than an object of its own because a SEND with such a header
passes here on its way to being routed, and must not pay for a call or an
attribute hop between objects: its methods are the router's, its state the
router's slots.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from attrs import evolve
from twisted.internet.defer import Deferred

from stompbroker.broker.clients.connections import ConnectionRegistry
from stompbroker.broker.features.retained_values import RETAIN_HEADER, parse_retain
from stompbroker.broker.features.retainer import Retaining
from stompbroker.broker.features.scheduled_messages import SCHEDULE_HEADERS, parse_schedule
from stompbroker.broker.features.scheduler import Scheduling
from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.broker.queueing.groups import GROUP_HEADER, SEQUENCE_HEADER, parse_group
from stompbroker.broker.queueing.priorities import PRIORITY_HEADER, parse_priority
from stompbroker.broker.routing.destinations import TEMP_QUEUE_PREFIX, Kind
from stompbroker.broker.routing.expiry import EXPIRY_HEADERS, expiry_time
from stompbroker.protocol.errors import NotSupported
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

#: SEND headers that schedule or retain a message: :meth:`SendHeadersMixin._timed` reads them.
TIMING: frozenset[str] = SCHEDULE_HEADERS | {RETAIN_HEADER}
#: SEND headers the broker acts on; a SEND without any of them skips that work.
ACTED_ON: frozenset[str] = (
    EXPIRY_HEADERS | {"reply-to", PRIORITY_HEADER, GROUP_HEADER, SEQUENCE_HEADER} | TIMING
)
#: ... and with an engine that keeps persistent messages, ``persistent`` too.
ACTED_ON_WHEN_PERSISTENT: frozenset[str] = ACTED_ON | {"persistent"}


class SendHeadersMixin:
    """
    The router's reading of the SEND headers it acts on.  Mixed into
    :class:`~stompbroker.broker.routing.router.Router`, whose slots hold the state it
    reads (declared here for type checkers).
    """

    __slots__ = ()

    # Of the router.
    persistent_queues: bool
    scheduling: Scheduling | None
    retaining: Retaining | None
    _clock: Any
    _registry: ConnectionRegistry
    _policy: DeliveryPolicy
    _acted_on: frozenset[str]
    _shared_queues: bool

    def _prepare(
        self, headers: Headers, connection: Any, kind: Kind
    ) -> tuple[Headers, float, bool, int, tuple[str | None, bool] | None, dict[str, str] | None]:
        """
        Read a SEND's expiry, persistence, priority and message group, and rewrite
        its temporary ``reply-to``: for a SEND with a header the broker acts on
        (:meth:`~stompbroker.broker.routing.router.Router._send` handles one
        without, the common case, itself).

        :param kind: the kind of its destination; only queues and topics keep
            persistent messages (temporary queues end with their connection).
        :returns: the headers to deliver, the expiry in clock seconds (0 for
            never), whether the message is persistent, its priority, its group
            with whether it closes the group (or ``None``), and the headers the
            broker acts on if it has a scheduling or ``retain`` header (``None``
            otherwise).
        :raises MalformedFrame: for a ``priority`` that is not a number, or bad
            group headers.
        :raises NotSupported: for a grouped message to a queue the engine shares
            between nodes (the redis engine), which keep no common group owners.
        """
        ttl = self._policy.ttl
        acted_on = self._acted_on
        found: dict[str, str] = {}
        rewritten = []
        for name, value in headers:
            if name in acted_on and name not in found:
                found[name] = value
                if (
                    name == "reply-to"
                    and value.startswith(TEMP_QUEUE_PREFIX)
                    and connection is not None
                ):
                    value = self._registry.temp_queue(connection, value).destination
            rewritten.append((name, value))
        expires = expiry_time(
            found.get("expires"), found.get("expiration"), self._clock.seconds(), ttl
        )
        if kind is Kind.QUEUE:
            persistent = self.persistent_queues or found.get("persistent") == "true"
        else:
            persistent = kind is Kind.TOPIC and found.get("persistent") == "true"
        priority = parse_priority(found.get(PRIORITY_HEADER))
        group = None
        if GROUP_HEADER in found:
            group = parse_group(found)
            if self._shared_queues and kind is Kind.QUEUE:
                raise NotSupported(
                    "message groups on queues are not supported by the redis engine yet",
                    "this broker runs on the redis engine, whose queues are shared by nodes"
                    " that keep no common record of group owners (docs/cluster.md); send"
                    " without JMSXGroupID",
                )
        timing = None if TIMING.isdisjoint(found) else found
        return tuple(rewritten), expires, persistent, priority, group, timing

    def _timed(
        self,
        route: Callable[[Message], Any],
        message: Message,
        kind: Kind,
        timing: Mapping[str, str],
        connection: Any,
    ) -> tuple[Callable[[Message], Any], bool]:
        """
        Read a SEND's scheduling and ``retain`` headers, refusing what cannot be done.

        :param route: where the message would go now; like every route, it
            returns ``None``, or a Deferred the SEND's RECEIPT waits on.
        :returns: where the message goes instead, and whether it is still to be
            filed as a persistent message of its destination (a scheduled one is
            filed by the scheduler, and its destination's copy when it fires).
        :raises MalformedFrame: for a bad value.
        :raises NotSupported: as :meth:`~stompbroker.broker.routing.router.Router.send` says.
        """
        action = None
        if RETAIN_HEADER in timing:
            if self.retaining is None:
                raise NotSupported(
                    "retain is not supported by this engine",
                    "This broker's engine (Redis) does not keep retained messages;"
                    " see docs/cluster.md.",
                )
            action = parse_retain(timing[RETAIN_HEADER], message.destination)
        scheduling = self.scheduling
        if not SCHEDULE_HEADERS.isdisjoint(timing):
            if scheduling is None:
                raise NotSupported(
                    "scheduled delivery is not supported by this engine",
                    "This broker's engine (Redis) does not hold scheduled messages;"
                    " see docs/cluster.md.",
                )
            if parse_schedule(timing, scheduling.now_ms()) is not None:
                destination = message.destination
                if kind is Kind.TEMP_QUEUE:
                    # Fired later, perhaps without its sender: by the name others reach it by.
                    destination = self._registry.temp_queue(connection, destination).destination
                return partial(self._schedule, timing, destination), False
        if action is not None:
            assert self.retaining is not None
            return partial(self._retain_and_route, self.retaining.apply, action, route), (
                message.persistent
            )
        return route, message.persistent

    def _schedule(
        self, timing: Mapping[str, str], destination: str, message: Message
    ) -> Deferred[None] | None:
        """
        Hand a message to the scheduler, due from now (at COMMIT for a transaction's).

        :param destination: where it goes when due (a temporary queue's
            ``/reply-queue/`` name for a SEND to ``/temp-queue/``).
        :returns: the Deferred of its filing, for a persistent message with a store.
        """
        assert self.scheduling is not None
        if destination != message.destination:
            message = evolve(message, destination=destination, wire={})
        schedule = parse_schedule(timing, self.scheduling.now_ms())
        if schedule is None:
            return None
        return self.scheduling.add(message, schedule)

    @staticmethod
    def _retain_and_route(
        apply: Callable[[str, Message], Deferred[None] | None],
        action: str,
        route: Callable[[Message], Any],
        message: Message,
    ) -> Deferred[None] | None:
        """
        Change the topic's retained message, then route the SEND as usual.

        :returns: the Deferred of the retained copy's filing, or ``None``.
        """
        waiting = apply(action, message)
        route(message)
        return waiting
