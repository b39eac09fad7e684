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

A subscription that asks for *members* (``presence:members``) gets what an
application renders, as Pusher's presence channels give it: first the member
list (:func:`members_message`), then a MESSAGE when a member joins, leaves,
goes away or comes back (:func:`member_message`).  A member is a user, however
many subscriptions and connections it has (a second tab is not a second
member); an anonymous connection is a member of its own.  A member is *away*
while every subscription it has is held for a detached resumable session
(:meth:`Presence.away`), and leaves when the last one goes.  Its ``info`` is
what its login said of it (the application's answer, a token's claim).

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

import json
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from attrs import evolve, frozen

from stompbroker.protocol.errors import InvalidDestination, MalformedFrame
from stompbroker.protocol.message import Message

__all__ = [
    "EVENT_HEADER",
    "MEMBERS",
    "PRESENCE_HEADER",
    "SUBSCRIPTIONS",
    "Member",
    "Present",
    "Presence",
    "PresenceShare",
    "event_message",
    "member_message",
    "members_message",
    "tracked",
]

#: The SUBSCRIBE header that asks for join and leave events.
PRESENCE_HEADER = "presence"
#: The header that marks an event's MESSAGE, ``join`` or ``leave``.
EVENT_HEADER = "stompbroker-presence"
JOIN = "join"
LEAVE = "leave"
AWAY = "away"
BACK = "back"
#: The event that carries the member list, first to a ``presence:members`` subscription.
LIST = "members"
#: What a SUBSCRIBE's ``presence`` header may ask for: each subscription's joins
#: and leaves (``true``), or the members' (``members``).
SUBSCRIPTIONS = "true"
MEMBERS = "members"
ONLINE = "online"
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
    :ivar info: what the login said of the user (a JSON object), or ``None``.
    :ivar away: whether the subscription is held for a detached resumable
        session, whose client may come back.
    """

    destination: str
    node: str
    connection: str
    subscription: str
    login: str | None
    since: float
    info: dict[str, Any] | None = None
    away: bool = False

    @property
    def member(self) -> str:
        """The member it counts for: its login, or an anonymous connection's session id."""
        return self.login if self.login is not None else self.connection

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


@frozen
class Member:
    """
    One member of a destination: a user, with every subscription it has there.

    :ivar id: the login, or an anonymous connection's session id.
    :ivar login: the login; ``None`` for an anonymous connection.
    :ivar info: what the login said of the user, or ``None``.
    :ivar state: ``online``, or ``away`` while every subscription is held for a
        detached resumable session.
    :ivar since: when its oldest subscription was made.
    :ivar subscriptions: how many subscriptions it has to the destination.
    """

    id: str
    login: str | None
    info: dict[str, Any] | None
    state: str
    since: float
    subscriptions: int

    def document(self) -> dict[str, Any]:
        """:returns: the member as the events' bodies and the API show it."""
        return {
            "id": self.id,
            "login": self.login,
            "info": self.info,
            "state": self.state,
            "since": self.since,
            "subscriptions": self.subscriptions,
        }


def member_of(entries: list[Present]) -> Member | None:
    """:returns: the member that a user's entries in one destination make, if any."""
    if not entries:
        return None
    oldest = min(entries, key=lambda entry: entry.since)
    newest = max(entries, key=lambda entry: entry.since)
    state = AWAY if all(entry.away for entry in entries) else ONLINE
    return Member(oldest.member, oldest.login, newest.info, state, oldest.since, len(entries))


def _json(document: Any) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


def members_message(destination: str, members: list[Member], message_id: str) -> Message:
    """:returns: the MESSAGE that gives a ``presence:members`` subscription the member list."""
    headers = (
        (EVENT_HEADER, LIST),
        ("presence-members", str(len(members))),
        ("content-type", "application/json"),
    )
    body = _json({"members": [member.document() for member in members]})
    return Message(destination, message_id, headers, body)


def member_message(
    kind: str, destination: str, member: Member, count: int, message_id: str
) -> Message:
    """
    :param kind: :data:`JOIN`, :data:`LEAVE`, :data:`AWAY` or :data:`BACK`.
    :param member: the member as it is now (as it was, for a leave).
    :param count: the destination's members after the event.
    :returns: the MESSAGE a ``presence:members`` subscription gets, the member as JSON.
    """
    headers = [(EVENT_HEADER, kind), ("presence-member", member.id)]
    if member.login is not None:
        headers.append(("presence-login", member.login))
    headers += [("presence-members", str(count)), ("content-type", "application/json")]
    return Message(destination, message_id, tuple(headers), _json(member.document()))


def _change(before: Member | None, after: Member | None) -> str | None:
    """:returns: the member event that going from ``before`` to ``after`` makes, if any."""
    if before is None:
        return None if after is None else JOIN
    if after is None:
        return LEAVE
    if before.state == after.state:
        return None
    return AWAY if after.state == AWAY else BACK


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
        #: The broker's :class:`~stompbroker.broker.features.webhooks.Webhooks`,
        #: told what this node's subscriptions change; ``None`` without them.
        self.webhooks: Any = None
        #: destination -> field -> entry: every node's.
        self._present: dict[str, dict[str, Present]] = {}
        #: this node's subscriptions -> their entries.
        self._here: dict[Any, Present] = {}
        #: destination -> this node's subscriptions that watch its subscriptions.
        self._watchers: dict[str, list[Any]] = {}
        #: destination -> this node's subscriptions that watch its members.
        self._member_watchers: dict[str, list[Any]] = {}

    # -- this node's subscriptions -----------------------------------------------------

    @staticmethod
    def watches(subscriber: Any) -> str | None:
        """
        Check a SUBSCRIBE's ``presence`` header before the subscription is made.

        :returns: what it asks for: :data:`SUBSCRIPTIONS` (each subscription's
            joins and leaves), :data:`MEMBERS` (the member list, then the
            members' events), or ``None``.
        :raises MalformedFrame: for a value other than ``true``, ``members`` or
            ``false``, or events asked on a subscription with client
            acknowledgements.
        :raises InvalidDestination: for events asked on a destination not in
            presence (a temporary queue, a user destination).
        """
        value = subscriber.headers.get(PRESENCE_HEADER)
        if value is None or value == "false":
            return None
        if value not in (SUBSCRIPTIONS, MEMBERS):
            raise MalformedFrame(
                "invalid presence header",
                f"presence must be true, members or false, got {value!r}",
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
        return str(value)

    def join(self, subscriber: Any, watch: str | None = None) -> None:
        """
        A subscription of this node is made: add it, tell the others, and, with
        ``watch`` (what :meth:`watches` returned), send it the destination's
        events from now on (for :data:`MEMBERS`, the member list first).  One
        given again changes nothing.
        """
        destination = subscriber.destination
        if not tracked(destination) or subscriber in self._here:
            return
        connection = subscriber.connection
        described = connection.describe()
        entry = Present(
            destination,
            self.node,
            connection.session_id,
            subscriber.subscription_id,
            described.user,
            self._clock.seconds(),
            info=described.info,
        )
        self._here[subscriber] = entry
        reported = self._before(entry)
        self.apply_join(entry)
        self._report(entry, reported)
        if watch == MEMBERS:
            subscriber.deliver(
                members_message(destination, self.members(destination), self._new_id())
            )
            self._member_watchers.setdefault(destination, []).append(subscriber)
        elif watch is not None:
            self._watchers.setdefault(destination, []).append(subscriber)
        if self.share is not None:
            self.share.joined(entry)

    def leave(self, subscriber: Any) -> None:
        """A subscription of this node is gone: remove it, tell the others (unknown: nothing)."""
        entry = self._here.pop(subscriber, None)
        if entry is None:
            return
        for watching in (self._watchers, self._member_watchers):
            watchers = watching.get(entry.destination)
            if watchers is not None and subscriber in watchers:
                watchers.remove(subscriber)
                if not watchers:
                    del watching[entry.destination]
        reported = self._before(entry)
        self.apply_leave(entry)
        self._report(entry, reported)
        if self.share is not None:
            self.share.left(entry)

    def away(self, subscriber: Any) -> None:
        """
        A subscription of this node is held for a detached resumable session:
        its member may be away (until a resumed session's subscriptions join),
        and the other nodes are told.  An unknown one changes nothing.
        """
        entry = self._here.get(subscriber)
        if entry is None or entry.away:
            return
        held = evolve(entry, away=True)
        self._here[subscriber] = held
        self.apply_join(held)
        if self.share is not None:
            self.share.joined(held)

    # -- every node's ------------------------------------------------------------------

    def apply_join(self, entry: Present) -> None:
        """
        Add ``entry`` (any node's) and tell the watchers; one known already
        changes nothing, unless it comes away or back.
        """
        present = self._present.setdefault(entry.destination, {})
        known = present.get(entry.field)
        if known == entry:
            return
        before = self._member(entry) if entry.destination in self._member_watchers else None
        present[entry.field] = entry
        if known is None:
            self._tell(JOIN, entry, len(present))
        self._tell_members(entry, before)

    def apply_leave(self, entry: Present) -> None:
        """Remove ``entry`` (any node's) and tell the watchers; an unknown one is ignored."""
        present = self._present.get(entry.destination)
        if present is None or entry.field not in present:
            return
        before = self._member(entry) if entry.destination in self._member_watchers else None
        del present[entry.field]
        if not present:
            del self._present[entry.destination]
        self._tell(LEAVE, entry, len(present))
        self._tell_members(entry, before)

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

    def _member(self, entry: Present) -> Member | None:
        """:returns: the member ``entry`` counts for in its destination, as it is now."""
        present = self._present.get(entry.destination, {})
        key = entry.member
        return member_of([other for other in present.values() if other.member == key])

    def _before(self, entry: Present) -> tuple[int, Member | None] | None:
        """:returns: what the webhooks compare a change of this node with, if there are any."""
        if self.webhooks is None:
            return None
        return len(self._present.get(entry.destination, ())), self._member(entry)

    def _report(self, entry: Present, before: tuple[int, Member | None] | None) -> None:
        """Tell the webhooks what a change of this node's subscriptions did."""
        if before is None:
            return
        count, member = before
        hooks, destination = self.webhooks, entry.destination
        now = len(self._present.get(destination, ()))
        after = self._member(entry)
        if count == 0 and now:
            hooks.occupied(destination)
        if member is None and after is not None:
            hooks.member_added(destination, after.document())
        elif member is not None and after is None:
            hooks.member_removed(destination, member.document())
        if count and not now:
            hooks.vacated(destination)

    def _tell_members(self, entry: Present, before: Member | None) -> None:
        watchers = self._member_watchers.get(entry.destination)
        if not watchers:
            return
        after = self._member(entry)
        kind = _change(before, after)
        if kind is None:
            return
        shown = after if after is not None else before
        assert shown is not None
        count = len(self.members(entry.destination))
        message = member_message(kind, entry.destination, shown, count, self._new_id())
        for watcher in list(watchers):
            watcher.deliver(message)

    # -- what operators see ------------------------------------------------------------

    def subscribers(self, destination: str) -> list[Present]:
        """:returns: the subscriptions to ``destination``, on every node, oldest first."""
        present = self._present.get(destination, {})
        return sorted(present.values(), key=lambda entry: (entry.since, entry.field))

    def members(self, destination: str) -> list[Member]:
        """:returns: the members of ``destination``, on every node, oldest first."""
        by_member: dict[str, list[Present]] = {}
        for entry in self._present.get(destination, {}).values():
            by_member.setdefault(entry.member, []).append(entry)
        found = [member_of(entries) for entries in by_member.values()]
        return sorted(
            (member for member in found if member is not None),
            key=lambda member: (member.since, member.id),
        )

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
