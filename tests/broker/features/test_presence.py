"""
Presence (:mod:`stompbroker.broker.features.presence`): who subscribes to each
shared destination, the join and leave events a ``presence:true`` subscription
gets, the occupancy, and the other nodes' entries an engine applies.
"""

from __future__ import annotations

import itertools
import json

import pytest
from attrs import evolve
from twisted.internet.defer import succeed
from twisted.internet.task import Clock

from stompbroker.broker.features.presence import (
    MEMBERS,
    SUBSCRIPTIONS,
    Member,
    Presence,
    Present,
    event_message,
    member_message,
)
from stompbroker.interfaces import ConnectionDescription
from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.errors import InvalidDestination, MalformedFrame
from stompbroker.protocol.resume.resume_book import ResumeBook
from stompbroker.security.access_file import AccessControl
from stompbroker.security.identity import Identity
from tests.support.broker import Client, FakeConnection, Inbox, World


def presence(node: str = "n1") -> tuple[Presence, Clock]:
    clock = Clock()
    clock.advance(1000)
    numbers = itertools.count(1)
    return Presence(node, clock, lambda: f"p-{next(numbers)}"), clock


def inbox(destination: str, on: str, sid: str = "s", watch: bool = False) -> Inbox:
    return Inbox(
        destination,
        "auto",
        subscription_id=sid,
        connection=FakeConnection(on),
        headers={"presence": "true"} if watch else {},
    )


def events(watcher: Inbox) -> list[tuple[str, str, str]]:
    """:returns: (kind, connection, count) of each event the watcher got."""
    found = []
    for message in watcher.take():
        headers = dict(message.headers)
        found.append(
            (
                headers["stompbroker-presence"],
                headers["presence-connection"],
                headers["presence-subscribers"],
            )
        )
    return found


class Recorder:
    """An engine's share: the joins and leaves it is told."""

    def __init__(self) -> None:
        self.told: list[tuple[str, Present]] = []

    def joined(self, entry: Present) -> None:
        self.told.append(("joined", entry))

    def left(self, entry: Present) -> None:
        self.told.append(("left", entry))


def test_subscribers_are_listed_oldest_first_and_counted() -> None:
    tracker, clock = presence()
    first = inbox("/topic/room", "c1")
    tracker.join(first)
    clock.advance(2)
    tracker.join(inbox("/topic/room", "c2", "t"))
    tracker.join(inbox("/queue/jobs", "c1", "q"))
    listed = tracker.subscribers("/topic/room")
    assert [(e.connection, e.subscription, e.since) for e in listed] == [
        ("c1", "s", 1000.0),
        ("c2", "t", 1002.0),
    ]
    assert listed[0].field == "n1:c1:s" and listed[0].node == "n1"
    assert tracker.occupancy() == {"/topic/room": 2, "/queue/jobs": 1}
    tracker.join(first)  # given again: nothing changes
    assert tracker.occupancy() == {"/topic/room": 2, "/queue/jobs": 1}
    tracker.leave(first)
    tracker.leave(first)  # a second leave changes nothing
    assert tracker.occupancy() == {"/topic/room": 1, "/queue/jobs": 1}
    assert tracker.subscribers("/topic/none") == []


def test_private_destinations_are_not_tracked() -> None:
    """Temporary queues and user destinations belong to one client: nobody else is there."""
    tracker, _ = presence()
    tracker.join(inbox("/temp-queue/r", "c1"))
    tracker.join(inbox("/user/queue/inbox", "c1"))
    assert tracker.occupancy() == {}


def test_a_watcher_gets_the_joins_and_leaves_of_the_others_only() -> None:
    tracker, _ = presence()
    there = inbox("/topic/room", "c0")
    tracker.join(there)
    watcher = inbox("/topic/room", "c1", watch=True)
    tracker.join(watcher, Presence.watches(watcher))
    assert events(watcher) == []  # not its own join
    other = inbox("/topic/room", "c2")
    tracker.join(other)
    tracker.join(inbox("/topic/elsewhere", "c3"))
    tracker.leave(there)
    assert events(watcher) == [("join", "c2", "3"), ("leave", "c0", "2")]
    tracker.leave(watcher)
    tracker.leave(other)
    assert events(watcher) == []  # not its own leave, nor anything after


def test_an_event_carries_the_documented_headers() -> None:
    entry = Present("/topic/room", "n2", "session-n2-1", "sub-1", "alice", 5.0)
    message = event_message("join", entry, 4, "p-1")
    assert message.destination == "/topic/room" and message.body == b""
    assert dict(message.headers) == {
        "stompbroker-presence": "join",
        "presence-login": "alice",
        "presence-connection": "session-n2-1",
        "presence-subscription": "sub-1",
        "presence-node": "n2",
        "presence-subscribers": "4",
    }
    anonymous = event_message("leave", Present("/topic/room", "n", "c", "s", None, 5.0), 0, "p")
    assert "presence-login" not in dict(anonymous.headers)


@pytest.mark.parametrize(
    ("destination", "ack", "value", "error", "text"),
    [
        ("/topic/room", "auto", "yes", MalformedFrame, "presence must be true, members or false"),
        ("/topic/room", "client", "true", MalformedFrame, "ack:auto"),
        ("/temp-queue/r", "auto", "true", InvalidDestination, "/topic/, /queue/ and /stream/"),
        ("/user/queue/inbox", "auto", "true", InvalidDestination, "not '/user/queue/inbox'"),
    ],
)
def test_a_presence_header_it_cannot_have_is_refused(
    destination: str, ack: str, value: str, error: type[Exception], text: str
) -> None:
    subscriber = Inbox(destination, ack, headers={"presence": value})
    with pytest.raises(error, match="presence") as raised:
        Presence.watches(subscriber)
    assert text in (raised.value.detail or "")  # type: ignore[attr-defined]


def test_watching_is_asked_for_only_by_true() -> None:
    assert not Presence.watches(Inbox("/topic/a", "auto"))
    assert not Presence.watches(Inbox("/topic/a", "auto", headers={"presence": "false"}))
    assert Presence.watches(Inbox("/queue/a", "auto", headers={"presence": "true"}))


def test_the_share_is_told_of_this_nodes_changes_and_others_are_applied() -> None:
    tracker, _ = presence("here")
    share = Recorder()
    tracker.share = share
    watcher = inbox("/topic/room", "c1", watch=True)
    tracker.join(watcher, SUBSCRIPTIONS)
    remote = Present("/topic/room", "there", "c9", "s", "bob", 3.0)
    tracker.apply_join(remote)
    tracker.apply_join(remote)  # told twice, applied once
    assert events(watcher) == [("join", "c9", "2")]
    assert [kind for kind, _ in share.told] == ["joined"]  # not the other node's
    assert tracker.others() == [remote] and tracker.nodes() == {"here", "there"}
    tracker.apply_leave(remote)
    tracker.apply_leave(remote)
    assert events(watcher) == [("leave", "c9", "1")]
    tracker.leave(watcher)
    assert [kind for kind, _ in share.told] == ["joined", "left"]


def test_reconcile_tells_what_joined_and_left_meanwhile() -> None:
    """After a gap, the other nodes' entries become those read, as events."""
    tracker, _ = presence("here")
    watcher = inbox("/topic/room", "c1", watch=True)
    tracker.join(watcher, SUBSCRIPTIONS)
    gone = Present("/topic/room", "there", "c8", "s", None, 3.0)
    kept = Present("/topic/room", "there", "c9", "s", None, 3.0)
    tracker.apply_join(gone)
    tracker.apply_join(kept)
    watcher.take()
    new = Present("/topic/room", "other", "c7", "s", None, 4.0)
    mine = Present("/topic/room", "here", "c1", "s", None, 1000.0)
    tracker.reconcile([kept, new, mine])
    assert events(watcher) == [("leave", "c8", "2"), ("join", "c7", "3")]
    assert len(tracker.subscribers("/topic/room")) == 3


# -- through the broker and real sessions ------------------------------------------------

ACCESS = """
[users.alice]
read = ["/topic/room"]

[users.bob]
read = ["/topic/room"]

[users.eve]
read = ["/topic/other"]
"""


def logged_in(world: World, login: str) -> Client:
    return world.client(login=login, passcode="x")


def test_sessions_get_presence_events_as_messages(tmp_path: object) -> None:
    path = tmp_path / "access.toml"  # type: ignore[operator]
    path.write_text(ACCESS, encoding="utf-8")
    world = World(
        config=SessionConfig(
            authenticator=lambda login, *_: succeed(Identity(login or "")),
            access=AccessControl(str(path)),
        )
    )
    alice = logged_in(world, "alice")
    alice.send_frame("SUBSCRIBE", destination="/topic/room", id="a", presence="true")
    bob = logged_in(world, "bob")
    bob.send_frame("SUBSCRIBE", destination="/topic/room", id="b")
    [join] = alice.messages()
    assert join.get("stompbroker-presence") == "join"
    assert join.get("presence-login") == "bob" and join.get("subscription") == "a"
    assert join.get("presence-subscription") == "b"
    assert join.get("presence-connection") == bob.connected.get("session")
    assert join.get("presence-subscribers") == "2"
    assert join.get("destination") == "/topic/room"
    assert world.broker.presence.occupancy() == {"/topic/room": 2}
    bob.send_frame("DISCONNECT")
    [leave] = alice.messages()
    assert leave.get("stompbroker-presence") == "leave"
    assert leave.get("presence-subscribers") == "1"
    # Without read on the destination, no subscription and no presence: an ERROR naming it.
    eve = logged_in(world, "eve")
    eve.send_frame("SUBSCRIBE", destination="/topic/room", id="e", presence="true")
    [error] = eve.frames()
    assert error.command == "ERROR" and "read" in error.body.decode()
    assert alice.frames() == []


def test_a_refused_presence_header_subscribes_nothing() -> None:
    world = World()
    client = world.client()
    client.send_frame("SUBSCRIBE", destination="/topic/room", id="a", ack="client", presence="true")
    [error] = client.frames()
    assert error.command == "ERROR" and error.get("message") == "presence needs ack:auto"
    assert world.broker.presence.occupancy() == {}
    assert world.broker.engine.topic_subscriptions("/topic/room").direct == []


# -- members: what an application renders ----------------------------------------------


def member_events(watcher: Inbox) -> list[tuple[str, str, str, str]]:
    """:returns: (kind, member id, state, members count) of each member event."""
    found = []
    for message in watcher.take():
        headers = dict(message.headers)
        member = json.loads(message.body)
        found.append(
            (
                headers["stompbroker-presence"],
                headers["presence-member"],
                member["state"],
                headers["presence-members"],
            )
        )
    return found


def entry(connection: str, login: str | None, *, node: str = "there", sid: str = "s") -> Present:
    return Present("/topic/room", node, connection, sid, login, 3.0, info={"name": login})


def test_a_members_watcher_gets_the_list_then_one_event_per_user_not_per_tab() -> None:
    tracker, _ = presence("here")
    tracker.apply_join(entry("c8", "bob"))
    tracker.apply_join(entry("c9", None))
    watcher = inbox("/topic/room", "c1")
    watcher.headers = {"presence": "members"}
    assert Presence.watches(watcher) == MEMBERS
    tracker.join(watcher, MEMBERS)
    [listing] = watcher.take()
    headers = dict(listing.headers)
    assert headers["stompbroker-presence"] == "members" and headers["presence-members"] == "3"
    members = json.loads(listing.body)["members"]
    assert [(m["id"], m["login"], m["state"]) for m in members] == [
        ("bob", "bob", "online"),
        ("c9", None, "online"),  # an anonymous connection is a member of its own
        ("c1", None, "online"),  # the watcher itself, last to come
    ]
    assert members[0]["info"] == {"name": "bob"}
    # Bob's second tab is not a second member; alice's first is.
    tracker.apply_join(entry("c7", "bob"))
    tracker.apply_join(entry("c6", "alice"))
    assert member_events(watcher) == [("join", "alice", "online", "4")]
    # Bob closes one tab: still a member; the other: he leaves.
    tracker.apply_leave(entry("c8", "bob"))
    assert member_events(watcher) == []
    tracker.apply_leave(entry("c7", "bob"))
    assert member_events(watcher) == [("leave", "bob", "online", "3")]
    assert [m.id for m in tracker.members("/topic/room")] == ["alice", "c9", "c1"]  # oldest first


def test_a_member_is_away_while_every_subscription_it_has_is_held_then_back() -> None:
    tracker, _ = presence("here")
    share = Recorder()
    tracker.share = share
    watcher = inbox("/topic/room", "c1")
    tracker.join(watcher, MEMBERS)
    watcher.take()
    phone = inbox("/topic/room", "c2")
    laptop = inbox("/topic/room", "c3", "t")
    for subscriber in (phone, laptop):
        subscriber.connection.describe = lambda: ConnectionDescription(  # type: ignore[method-assign]
            session="x", address="a", user="carol", info={"avatar": "c.png"}
        )
        tracker.join(subscriber)
    assert member_events(watcher) == [("join", "carol", "online", "2")]
    tracker.away(phone)
    assert member_events(watcher) == []  # the laptop is still there
    tracker.away(laptop)
    tracker.away(laptop)  # told twice: once
    assert member_events(watcher) == [("away", "carol", "away", "2")]
    assert [kind for kind, told in share.told if told.away] == ["joined", "joined"]
    # The session resumes: its new subscription joins, then the held ones go.
    resumed = inbox("/topic/room", "c4")
    resumed.connection.describe = laptop.connection.describe  # type: ignore[method-assign]
    tracker.join(resumed)
    tracker.leave(phone)
    tracker.leave(laptop)
    assert member_events(watcher) == [("back", "carol", "online", "2")]
    # Another node's entry that comes away is applied as the same subscription, changed.
    remote = entry("c9", "dave")
    tracker.apply_join(remote)
    tracker.apply_join(evolve(remote, away=True))
    assert member_events(watcher) == [
        ("join", "dave", "online", "3"),
        ("away", "dave", "away", "3"),
    ]
    assert len(tracker.subscribers("/topic/room")) == 3


def test_members_events_carry_the_member_as_json() -> None:
    member = Member("bob", "bob", {"name": "Bob"}, "online", 3.0, 2)
    message = member_message("join", "/topic/room", member, 5, "p-1")
    headers = dict(message.headers)
    assert headers["content-type"] == "application/json"
    assert headers["presence-login"] == "bob" and headers["presence-members"] == "5"
    assert json.loads(message.body) == {
        "id": "bob",
        "login": "bob",
        "info": {"name": "Bob"},
        "state": "online",
        "since": 3.0,
        "subscriptions": 2,
    }


def test_sessions_see_members_with_their_info_away_while_detached_and_back() -> None:
    """Through real sessions: the login's info, a second tab, a detach and a resume."""
    world = World()
    world.config = SessionConfig(
        heartbeat=(0, 0),
        authenticator=lambda login, *_: succeed(Identity(login or "", info={"name": login})),
        resumption=ResumeBook(world.clock, 120, 1024 * 1024),
    )
    alice = logged_in(world, "alice")
    alice.send_frame("SUBSCRIBE", destination="/topic/room", id="a", presence="members")
    [listing] = alice.messages()
    assert json.loads(listing.body)["members"][0]["info"] == {"name": "alice"}
    bob = world.client(login="bob", passcode="x", resume_token="")
    bob.send_frame("SUBSCRIBE", destination="/topic/room", id="b")
    second_tab = logged_in(world, "bob")
    second_tab.send_frame("SUBSCRIBE", destination="/topic/room", id="b2")
    [join] = alice.messages()
    assert join.get("stompbroker-presence") == "join" and join.get("presence-member") == "bob"
    assert json.loads(join.body)["info"] == {"name": "bob"}
    second_tab.send_frame("DISCONNECT")
    assert alice.messages() == []
    bob.session.connection_lost()  # resumable: its topic subscription is held
    [away] = alice.messages()
    assert away.get("stompbroker-presence") == "away" and away.get("presence-members") == "2"
    again = world.client(login="bob", passcode="x", resume_token=bob.connected.get("resume-token"))
    assert again.connected.get("resumed") == "true"
    [back] = alice.messages()
    assert back.get("stompbroker-presence") == "back" and json.loads(back.body)["state"] == "online"
    again.send_frame("DISCONNECT")
    [leave] = alice.messages()
    assert leave.get("stompbroker-presence") == "leave" and leave.get("presence-members") == "1"
