"""
User destinations (:mod:`stompbroker.broker.features.user_destinations`): the
mapping of ``/user/queue/NAME`` onto the subscriber's own key, SENDs to
``/user/LOGIN/...`` reaching every session of that user, and the rights they need.
"""

from __future__ import annotations

import pytest
from twisted.internet.defer import succeed

from stompbroker.broker.features.user_destinations import (
    UserInbox,
    login_segment,
    send_key,
    send_login,
    shown_destination,
    subscription_key,
)
from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.errors import AccessDenied, InvalidDestination
from stompbroker.security.access_file import AccessControl, parse_policy
from stompbroker.security.identity import ANONYMOUS_IDENTITY, Identity
from tests.support.broker import Client, World


def test_a_subscription_maps_onto_the_subscribers_own_key() -> None:
    """Spring's mapping: /user/queue/NAME is the subscriber's, under its login."""
    assert subscription_key("alice", "/user/queue/news") == "/user/alice/queue/news"
    assert subscription_key("alice", "/user/topic/a.b") == "/user/alice/topic/a.b"
    assert shown_destination("/user/alice/topic/a.b") == "/user/topic/a.b"


def test_a_send_names_the_login_percent_encoded() -> None:
    """A login holding '/' is written %2F in a SEND (Spring's convention); both ends meet."""
    assert send_key("/user/a%2Fb/queue/x") == subscription_key("a/b", "/user/queue/x")
    assert send_login("/user/a%2Fb/queue/x") == "a/b"
    assert send_key("/user/alice.smith/queue/x") == subscription_key("alice.smith", "/user/queue/x")


@pytest.mark.parametrize(
    ("first", "second"),
    [("alice.queue", "alice"), ("a/b", "a.b"), ("*", "bob"), ("#", "x")],
)
def test_no_two_logins_share_a_key_and_none_is_a_pattern(first: str, second: str) -> None:
    """Separators and wildcards in a login are encoded: one segment, never a pattern."""
    assert "/" not in login_segment(first) and "." not in login_segment(first)
    keys = {
        subscription_key(first, "/user/queue/queue.x"),
        subscription_key(second, "/user/queue/queue.x"),
        subscription_key(second, "/user/queue/x"),
    }
    assert len(keys) == 3
    assert all("*" not in key and "#" not in key for key in keys)


@pytest.mark.parametrize(
    ("destination", "text"),
    [
        ("/user/alice/queue/x", "subscribe to /user/queue/NAME"),
        ("/user/queue/", "subscribe to /user/queue/NAME"),
        ("/user/queue/a/*", "without wildcards"),
        ("/user/queue/a//b", "without wildcards or empty segments"),
    ],
)
def test_bad_subscriptions_are_refused(destination: str, text: str) -> None:
    with pytest.raises(InvalidDestination) as caught:
        subscription_key("alice", destination)
    assert text in (caught.value.detail or "")


@pytest.mark.parametrize(
    "destination", ["/user/queue/x", "/user/alice", "/user//queue/x", "/user/alice/news/x"]
)
def test_bad_sends_are_refused(destination: str) -> None:
    with pytest.raises(InvalidDestination, match="invalid user destination"):
        send_key(destination)


def test_an_anonymous_session_has_no_user_destinations() -> None:
    with pytest.raises(InvalidDestination, match="no user destinations for anonymous sessions"):
        subscription_key(None, "/user/queue/x")


def logged_in(world: World, login: str) -> Client:
    """:returns: a session of ``login`` on the world's broker."""
    return world.client(login=login, passcode="pw")


def world() -> World:
    """:returns: a broker whose sessions log in as whoever they say."""
    return World(
        config=SessionConfig(authenticator=lambda login, *_: succeed(Identity(login or "")))
    )


def test_every_session_of_the_user_gets_it_and_nobody_else() -> None:
    """Two sessions of alice get a SEND to /user/alice/queue/news; bob's does not."""
    broker = world()
    alice_1, alice_2, bob = (logged_in(broker, name) for name in ("alice", "alice", "bob"))
    for client in (alice_1, alice_2, bob):
        client.send_frame("SUBSCRIBE", destination="/user/queue/news", id="s")
    backend = logged_in(broker, "backend")
    backend.send_frame("SEND", b"hi alice", destination="/user/alice/queue/news")
    for client in (alice_1, alice_2):
        [frame] = client.messages()
        assert (frame.body, frame.get("destination")) == (b"hi alice", "/user/queue/news")
        assert frame.get("subscription") == "s"
    assert bob.frames() == []


def test_client_acknowledgement_works_on_a_user_destination() -> None:
    """The subscription's own queue holds a client-ack message until it is acknowledged."""
    broker = world()
    alice = logged_in(broker, "alice")
    alice.send_frame("SUBSCRIBE", destination="/user/topic/jobs", id="s", ack="client-individual")
    broker.broker.send("/user/alice/topic/jobs", (), b"one")
    [frame] = alice.messages()
    assert frame.get("destination") == "/user/topic/jobs"
    alice.ack(frame, receipt="r")
    assert [f.command for f in alice.frames()] == ["RECEIPT"]


def test_the_last_subscription_of_a_key_leaves_the_tree() -> None:
    """UNSUBSCRIBE and a closed connection take the user's inbox out of the topic tree."""
    broker = world()
    tree = broker.broker.engine.fanout.tree
    first, second = logged_in(broker, "alice"), logged_in(broker, "alice")
    for client in (first, second):
        client.send_frame("SUBSCRIBE", destination="/user/queue/news", id="s")
    [inbox] = tree.match("/user/alice/queue/news")
    assert isinstance(inbox, UserInbox) and len(inbox.queues) == 2
    first.send_frame("UNSUBSCRIBE", id="s")
    assert len(inbox.queues) == 1
    second.send_frame("DISCONNECT")
    assert tree.match("/user/alice/queue/news") == ()
    assert len(tree) == 0


def test_an_anonymous_subscription_gets_a_clear_error() -> None:
    broker = World()
    client = broker.client()
    client.send_frame("SUBSCRIBE", destination="/user/queue/news", id="s")
    [error] = client.frames()
    assert error.command == "ERROR"
    assert error.get("message") == "no user destinations for anonymous sessions"


ACCESS = """
[users.backend]
write = ["/user/#"]
"""


def test_own_user_destinations_need_no_rule() -> None:
    """A user may subscribe to /user/queue/... and send to itself without any rule."""
    policy = parse_policy(ACCESS)
    alice = Identity("alice")
    policy.check(alice, "read", "/user/queue/news")
    policy.check(alice, "write", "/user/alice/queue/news")
    policy.check(Identity("a.b"), "write", "/user/a.b/topic/x")
    policy.check(Identity("backend"), "write", "/user/alice/queue/news")
    with pytest.raises(AccessDenied):
        policy.check(alice, "write", "/user/bob/queue/news")
    with pytest.raises(AccessDenied):
        policy.check(ANONYMOUS_IDENTITY, "write", "/user/anonymous/queue/news")
    with pytest.raises(AccessDenied):
        policy.check(alice, "read", "/user/bob/queue/news")


def test_a_session_sends_to_another_user_only_with_the_write_right(tmp_path: object) -> None:
    """Through the session: alice's SEND to bob is refused, the backend's goes through."""
    path = tmp_path / "access.toml"  # type: ignore[operator]
    path.write_text(ACCESS, encoding="utf-8")
    broker = World(
        config=SessionConfig(
            authenticator=lambda login, *_: succeed(Identity(login or "")),
            access=AccessControl(str(path)),
        )
    )
    bob = logged_in(broker, "bob")
    bob.send_frame("SUBSCRIBE", destination="/user/queue/inbox", id="s")
    logged_in(broker, "backend").send_frame("SEND", b"ok", destination="/user/bob/queue/inbox")
    assert [frame.body for frame in bob.messages()] == [b"ok"]
    alice = logged_in(broker, "alice")
    alice.send_frame("SEND", b"no", destination="/user/bob/queue/inbox")
    [error] = alice.frames()
    assert error.command == "ERROR" and "may not send to" in error.body.decode()
    assert bob.frames() == []
