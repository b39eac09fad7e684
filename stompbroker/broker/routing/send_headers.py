"""
What a SEND's headers make of its message, before the router routes it.

The headers the broker acts on (expiry, ``persistent``, ``priority``, the
message group's, a temporary ``reply-to``, and the scheduling and ``retain``
headers) are read here, by :class:`SendHeaders`, an object the
:class:`~stompbroker.broker.routing.router.Router` holds.  (A duplicate-detection
id is among them, so that a SEND without one pays nothing for it; the router
reads it itself.)  A SEND without any of
them (the common case) never comes here: ``Router._send``'s scan of its header
names finds none of :data:`ACTED_ON` (or :data:`ACTED_ON_WHEN_PERSISTENT`), and
it makes the message at once.

An object of its own, so that the router holds the routing alone and this
reading is built and tested without one.  Only a SEND with such a header pays
the hop from the router to it (one attribute read).  Callgrind counted the queue
path (``benchmarks.queue_parts path``, stompbench frames) and the fan-out path
(``benchmarks.fanout_cost``, 10 subscribers) within 0.3% of the instructions per
message they took when this was a mixin of the router (143.3 k and 148.0 k,
against 143.7 k and 148.4 k).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from attrs import evolve
from twisted.internet.defer import Deferred

from stompbroker.broker.clients.connections import ConnectionRegistry
from stompbroker.broker.engine.capabilities import Capabilities, require
from stompbroker.broker.features.duplicate_ids import DUPLICATE_ID_HEADERS
from stompbroker.broker.features.retain_rules import RETAIN_HEADER, parse_retain
from stompbroker.broker.features.retaining import Retaining
from stompbroker.broker.features.schedule_rules import SCHEDULE_HEADERS, parse_schedule
from stompbroker.broker.features.schedule_timer import Scheduling
from stompbroker.broker.queueing.delivery import DeliveryPolicy
from stompbroker.broker.queueing.groups import GROUP_HEADER, SEQUENCE_HEADER, parse_group
from stompbroker.broker.queueing.priorities import PRIORITY_HEADER, parse_priority
from stompbroker.broker.routing.destinations import TEMP_QUEUE_PREFIX, Kind
from stompbroker.broker.routing.expiry import EXPIRY_HEADERS, expiry_time
from stompbroker.protocol.frames import Headers
from stompbroker.protocol.message import Message

#: SEND headers that schedule or retain a message: :meth:`SendHeaders.timed` reads them.
TIMING: frozenset[str] = SCHEDULE_HEADERS | {RETAIN_HEADER}
#: SEND headers the broker acts on; a SEND without any of them skips that work.
ACTED_ON: frozenset[str] = (
    EXPIRY_HEADERS
    | {"reply-to", PRIORITY_HEADER, GROUP_HEADER, SEQUENCE_HEADER}
    | TIMING
    | DUPLICATE_ID_HEADERS
)
#: ... and with an engine that keeps persistent messages, ``persistent`` too.
ACTED_ON_WHEN_PERSISTENT: frozenset[str] = ACTED_ON | {"persistent"}


class SendHeaders:
    """
    The router's reading of the SEND headers it acts on.

    :param clock: ``seconds()``, for expiry.
    :param registry: the connections, which own their temporary queues.
    :param policy: the broker's delivery policy, for the broker-wide TTL.
    :param acted_on: the headers the broker acts on (:data:`ACTED_ON`, or
        :data:`ACTED_ON_WHEN_PERSISTENT` with an engine that keeps persistent
        messages).
    :param persistent_queues: every SEND to a ``/queue/`` is persistent.
    :param capabilities: what the engine can do: a SEND it cannot serve is refused.
    :param scheduling: the broker's scheduled messages, or ``None`` if the
        engine cannot schedule.
    :param retaining: what ``retain`` does, or ``None`` if the engine cannot retain.

    :ivar retaining: as given.
    """

    __slots__ = (
        "retaining",
        "_clock",
        "_registry",
        "_policy",
        "_acted_on",
        "_persistent_queues",
        "_capabilities",
        "_scheduling",
    )

    def __init__(
        self,
        clock: Any,
        registry: ConnectionRegistry,
        policy: DeliveryPolicy,
        acted_on: frozenset[str],
        persistent_queues: bool,
        capabilities: Capabilities,
        scheduling: Scheduling | None,
        retaining: Retaining | None,
    ) -> None:
        self._clock = clock
        self._registry = registry
        self._policy = policy
        self._acted_on = acted_on
        self._persistent_queues = persistent_queues
        self._capabilities = capabilities
        self._scheduling = scheduling
        self.retaining = retaining

    def prepare(
        self, headers: Headers, connection: Any, kind: Kind
    ) -> tuple[Headers, float, bool, int, tuple[str | None, bool] | None, dict[str, str] | None]:
        """
        Read a SEND's expiry, persistence, priority and message group, and rewrite
        its temporary ``reply-to``: for a SEND with a header the broker acts on
        (:meth:`~stompbroker.broker.routing.router.Router._send` handles one
        without, the common case, itself, and must read it as this would).

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
            persistent = self._persistent_queues or found.get("persistent") == "true"
        else:
            persistent = kind is Kind.TOPIC and found.get("persistent") == "true"
        priority = parse_priority(found.get(PRIORITY_HEADER))
        group = None
        if GROUP_HEADER in found:
            group = parse_group(found)
            if kind is Kind.QUEUE:
                require(self._capabilities, "message_groups")
        timing = None if TIMING.isdisjoint(found) else found
        return tuple(rewritten), expires, persistent, priority, group, timing

    def timed(
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
            require(self._capabilities, "retain")
            action = parse_retain(timing[RETAIN_HEADER], message.destination)
        scheduling = self._scheduling
        if not SCHEDULE_HEADERS.isdisjoint(timing):
            require(self._capabilities, "scheduling")
            assert scheduling is not None
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
        scheduling = self._scheduling
        assert scheduling is not None
        if destination != message.destination:
            message = evolve(message, destination=destination, wire={})
        schedule = parse_schedule(timing, scheduling.now_ms())
        if schedule is None:
            return None
        return scheduling.add(message, schedule)

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
