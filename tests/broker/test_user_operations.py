"""
What an application's backend does to a user through the management
operations (:class:`~stompbroker.broker.management.operations.Management`), on
a real in-process broker with real sessions: its subscriptions to one
destination ended with a last MESSAGE saying so, its sessions closed and its
detached ones ended.
"""

from __future__ import annotations

from twisted.internet.defer import succeed

from stompbroker.broker.management.operations import Management
from stompbroker.protocol.config import SessionConfig
from stompbroker.protocol.resume.resume_book import ResumeBook
from stompbroker.security.identity import Identity
from tests.support.broker import World


def world() -> World:
    made = World()
    book = ResumeBook(made.clock, 120, 1024 * 1024)
    made.config = SessionConfig(
        heartbeat=(0, 0),
        authenticator=lambda login, *_: succeed(Identity(login or "")),
        resumption=book,
    )
    made.broker.keep_resumable_sessions(book)
    return made


def test_a_user_unsubscribed_gets_a_last_message_and_nothing_more() -> None:
    here = world()
    carol = here.client(login="carol", passcode="x")
    carol.send_frame("SUBSCRIBE", destination="/topic/room", id="r")
    carol.send_frame("SUBSCRIBE", destination="/queue/jobs", id="j", ack="client")
    here.broker.publish("/queue/jobs", "job")
    [job] = carol.messages()
    dave = here.client(login="dave", passcode="x")
    dave.send_frame("SUBSCRIBE", destination="/topic/room", id="d")
    ended = Management(here.broker).unsubscribe_user("carol", "/queue/jobs", "kicked")
    assert ended == 1
    [notice] = carol.messages()
    assert notice.get("subscription") == "j" and notice.get("destination") == "/queue/jobs"
    assert notice.get("stompbroker-unsubscribed") == "kicked" and notice.get("ack") is None
    # Its unacknowledged job went back to the queue; the topic subscription stays.
    assert [m.body for m in here.broker.engine.queues["/queue/jobs"].pending] == [b"job"]
    here.broker.publish("/topic/room", "hello")
    assert [m.get("subscription") for m in carol.messages()] == ["r"]
    assert [m.body for m in dave.messages()] == [b"hello"]
    # Once more: nothing left to end.
    assert Management(here.broker).unsubscribe_user("carol", "/queue/jobs") == 0


def test_a_user_disconnected_loses_its_connections_and_detached_sessions() -> None:
    here = world()
    phone = here.client(login="carol", passcode="x", resume_token="")
    token = phone.connected.get("resume-token")
    phone.session.connection_lost()
    laptop = here.client(login="carol", passcode="x")
    dave = here.client(login="dave", passcode="x")
    management = Management(here.broker)
    sessions = management.user_sessions("carol")
    assert len(sessions.connections) == 1 and len(sessions.detached) == 1
    management.disconnect_user("carol", "logged out everywhere")
    [error] = laptop.frames()
    assert error.command == "ERROR" and b"logged out everywhere" in error.body
    assert dave.frames() == []
    again = here.client(login="carol", passcode="x", resume_token=token)
    assert again.connected.get("resumed") == "false"
    assert management.user_sessions("carol").detached == ()


def test_another_nodes_actions_are_applied_here_and_an_unknown_one_changes_nothing() -> None:
    """What the engine hands over from another node: the same action, applied to this node's."""
    here = world()
    carol = here.client(login="carol", passcode="x")
    carol.send_frame("SUBSCRIBE", destination="/topic/room", id="r")
    actions = here.broker.user_actions
    actions.apply("teleport", "carol", "")
    assert carol.frames() == []
    actions.apply("unsubscribe", "carol", "/topic/room\nkicked")
    [notice] = carol.messages()
    assert notice.get("stompbroker-unsubscribed") == "kicked"
    actions.apply("disconnect", "carol", "banned")
    [error] = carol.frames()
    assert error.command == "ERROR" and b"banned" in error.body
