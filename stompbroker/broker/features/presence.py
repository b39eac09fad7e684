"""
Presence: who is subscribed to a destination, as Centrifugo's presence and
Pusher's presence channels (docs/destinations.md, "Presence").

:class:`Presence` keeps one :class:`Present` per subscription to a shared
destination (``/topic/``, ``/queue/``, ``/stream/``), under the destination (or
pattern) its SUBSCRIBE named: the management API's list of a destination's
subscribers, and the occupancy (how many subscribe to each) in ``/stats`` and
``/metrics``.  A subscription that asks for it (``presence:true``) gets a
MESSAGE for each join and leave of the destination's other subscribers, with
the headers of :func:`event_message`.

Pure: subscriptions in, events out to subscribers, no socket and no timer.  An
engine shared by several nodes (the redis engine,
:mod:`stompbroker.broker.engine.redis.cluster_presence`) is this node's
:class:`PresenceShare`: it is told of each join and leave here, and tells this
object of the other nodes' (:meth:`Presence.apply_join`,
:meth:`Presence.apply_leave`), so that every node knows the whole cluster's.

It costs a subscription a dict entry and a SUBSCRIBE one header look-up; a
message routed costs nothing (routing never consults it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from attrs import frozen

from stompbroker.protocol.errors import InvalidDestination, MalformedFrame
from stompbroker.protocol.message import Message

__all__ = [
    "EVENT_HEADER",
    "PRESENCE_HEADER",
    "Present",
    "Presence",
    "PresenceShare",
    "event_message",
    "tracked",
]

#: The SUBSCRIBE header that asks for join and leave events.
PRESENCE_HEADER = "presence"
#: The header that marks an event's MESSAGE, ``join`` or ``leave``.
EVENT_HEADER = "stompbroker-presence"
JOIN = "join"
LEAVE = "leave"
#: The destinations whose subscribers are tracked: the ones clients share.
TRACKED_PREFIXES = ("/topic/", "/queue/", "/stream/")


def tracked(destination: str) -> bool:
    """:returns: whether subscriptions to ``destination`` are in presence."""
    return destination.startswith(TRACKED_PREFIXES)


@frozen
class Present:
    """
    One subscription to a destination, on one node.

    :ivar destination: the destination (or pattern) the SUBSCRIBE named.
    :ivar node: the node the subscription is on.
    :ivar connection: its connection's session id.
    :ivar subscription: its ``id``.
    :ivar login: the connection's login; ``None`` for an anonymous one.
    :ivar since: when it subscribed, in seconds since the epoch.
    """

    destination: str
    node: str
    connection: str
    subscription: str
    login: str | None
    since: float

    @property
    def field(self) -> str:
        """``node:connection:subscription``: unique in the cluster, per destination."""
        return f"{self.node}:{self.connection}:{self.subscription}"


def event_message(kind: str, entry: Present, count: int, message_id: str) -> Message:
    """
    :param kind: :data:`JOIN` or :data:`LEAVE`.
    :param entry: who joined or left.
    :param count: the destination's subscribers after the event.
    :returns: the MESSAGE a ``presence:true`` subscription gets, with an empty body.
    """
    headers = [(EVENT_HEADER, kind)]
    if entry.login is not None:
        headers.append(("presence-login", entry.login))
    headers += [
        ("presence-connection", entry.connection),
        ("presence-subscription", entry.subscription),
        ("presence-node", entry.node),
        ("presence-subscribers", str(count)),
    ]
    return Message(entry.destination, message_id, tuple(headers), b"")


class PresenceShare(Protocol):
    """What an engine shared by several nodes does with this node's joins and leaves."""

    def joined(self, entry: Present) -> None: ...

    def left(self, entry: Present) -> None: ...


class Presence:
    """
    Every node's subscriptions to shared destinations, by destination, and the
    subscriptions of this node that watch them.

    :param node: this node's token.
    :param clock: ``seconds()``: when a subscription joined.
    :param new_id: a fresh ``message-id`` for each event.
    :ivar share: the engine's :class:`PresenceShare`, or ``None`` for a broker of
        one process.
    """

    def __init__(self, node: str, clock: Any, new_id: Callable[[], str]) -> None:
        self.node = node
        self._clock = clock
        self._new_id = new_id
        self.share: PresenceShare | None = None
        #: destination -> field -> entry: every node's.
        self._present: dict[str, dict[str, Present]] = {}
        #: this node's subscriptions -> their entries.
        self._here: dict[Any, Present] = {}
        #: destination -> this node's subscriptions that watch it.
        self._watchers: dict[str, list[Any]] = {}

    # -- this node's subscriptions -----------------------------------------------------

    @staticmethod
    def watches(subscriber: Any) -> bool:
        """
        Check a SUBSCRIBE's ``presence`` header before the subscription is made.

        :returns: whether it asks for join and leave events.
        :raises MalformedFrame: for a value other than ``true`` or ``false``, or
            ``presence:true`` on a subscription with client acknowledgements.
        :raises InvalidDestination: for ``presence:true`` on a destination not in
            presence (a temporary queue, a user destination).
        """
        value = subscriber.headers.get(PRESENCE_HEADER)
        if value is None or value == "false":
            return False
        if value != "true":
            raise MalformedFrame(
                "invalid presence header", f"presence must be true or false, got {value!r}"
            )
        if not tracked(subscriber.destination):
            raise InvalidDestination(
                "no presence on this destination",
                f"presence is kept for /topic/, /queue/ and /stream/ destinations,"
                f" not {subscriber.destination!r}",
            )
        if subscriber.ack_mode != "auto":
            raise MalformedFrame(
                "presence needs ack:auto",
                "presence events are not acknowledged: subscribe with ack:auto to get them",
            )
        return True

    def join(self, subscriber: Any, watch: bool = False) -> None:
        """
        A subscription of this node is made: add it, tell the others, and, with
        ``watch``, send it the destination's events from now on.  One given
        again changes nothing.
        """
        destination = subscriber.destination
        if not tracked(destination) or subscriber in self._here:
            return
        connection = subscriber.connection
        entry = Present(
            destination,
            self.node,
            connection.session_id,
            subscriber.subscription_id,
            connection.describe().user,
            self._clock.seconds(),
        )
        self._here[subscriber] = entry
        self.apply_join(entry)
        if watch:
            self._watchers.setdefault(destination, []).append(subscriber)
        if self.share is not None:
            self.share.joined(entry)

    def leave(self, subscriber: Any) -> None:
        """A subscription of this node is gone: remove it, tell the others (unknown: nothing)."""
        entry = self._here.pop(subscriber, None)
        if entry is None:
            return
        watchers = self._watchers.get(entry.destination)
        if watchers is not None and subscriber in watchers:
            watchers.remove(subscriber)
            if not watchers:
                del self._watchers[entry.destination]
        self.apply_leave(entry)
        if self.share is not None:
            self.share.left(entry)

    # -- every node's ------------------------------------------------------------------

    def apply_join(self, entry: Present) -> None:
        """Add ``entry`` (any node's) and tell the watchers; one known already changes nothing."""
        present = self._present.setdefault(entry.destination, {})
        if entry.field in present:
            return
        present[entry.field] = entry
        self._tell(JOIN, entry, len(present))

    def apply_leave(self, entry: Present) -> None:
        """Remove ``entry`` (any node's) and tell the watchers; an unknown one is ignored."""
        present = self._present.get(entry.destination)
        if present is None or present.pop(entry.field, None) is None:
            return
        if not present:
            del self._present[entry.destination]
        self._tell(LEAVE, entry, len(present))

    def reconcile(self, others: Iterable[Present]) -> None:
        """
        Make the other nodes' entries those of ``others`` (read from the engine's
        server after a gap), telling the watchers what joined and left meanwhile.
        """
        wanted = {(entry.destination, entry.field): entry for entry in others}
        for entry in self.others():
            if (entry.destination, entry.field) not in wanted:
                self.apply_leave(entry)
        for entry in wanted.values():
            if entry.node != self.node:
                self.apply_join(entry)

    def _tell(self, kind: str, entry: Present, count: int) -> None:
        watchers = self._watchers.get(entry.destination)
        if not watchers:
            return
        message = event_message(kind, entry, count, self._new_id())
        # A watcher's own join and leave are not its to see: it is added after
        # its join and removed before its leave.
        for watcher in list(watchers):
            watcher.deliver(message)

    # -- what operators see ------------------------------------------------------------

    def subscribers(self, destination: str) -> list[Present]:
        """:returns: the subscriptions to ``destination``, on every node, oldest first."""
        present = self._present.get(destination, {})
        return sorted(present.values(), key=lambda entry: (entry.since, entry.field))

    def occupancy(self) -> dict[str, int]:
        """:returns: destination -> how many subscribe to it, for those with any."""
        return {destination: len(present) for destination, present in self._present.items()}

    def others(self) -> list[Present]:
        """:returns: the entries of the other nodes."""
        return [
            entry
            for present in self._present.values()
            for entry in present.values()
            if entry.node != self.node
        ]

    def nodes(self) -> set[str]:
        """:returns: the nodes with subscriptions in presence, this one included."""
        return {entry.node for present in self._present.values() for entry in present.values()}
