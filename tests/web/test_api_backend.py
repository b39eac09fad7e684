"""
The backend's calls of the management API (:mod:`stompbroker.web.api_backend`)
without sockets, through ``StubTreq``: a batch publish, checked whole before
anything is sent, and a user's sessions listed, closed and unsubscribed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stompbroker.interfaces import ConnectionDescription
from stompbroker.protocol.errors import ClosedByOperator
from tests.support.api import ORDERS, Api, basic, bearer, refused
from tests.support.broker import FakeConnection, Inbox
from tests.support.tokens import NOW, SECRET, make_token


def carol(api: Api, name: str, *destinations: str) -> FakeConnection:
    """:returns: a connection of carol's, open on the broker and subscribed to ``destinations``."""
    connection = FakeConnection(name)
    connection.describe = lambda: ConnectionDescription(  # type: ignore[method-assign]
        session=name, address="127.0.0.1:9", user="carol"
    )
    api.broker.open_connection(connection)
    for number, destination in enumerate(destinations):
        inbox = Inbox(destination, "auto", subscription_id=f"s{number}", connection=connection)
        connection.subscriptions[inbox.subscription_id] = inbox
        api.broker.subscribe(inbox)
    return connection


def test_a_batch_goes_to_queues_topics_and_users_in_order() -> None:
    api = Api()
    inbox = Inbox("/user/queue/notify", "auto", connection=carol(api, "c1"))
    api.broker.subscribe(inbox)
    batch = {
        "messages": [
            {"destination": "/queue/orders", "body": "four"},
            {"destination": "/user/carol/queue/notify", "body": "hi", "headers": {"k": "v"}},
            {"destination": "/queue/orders", "body": "/w==", "body_encoding": "base64"},
        ]
    }
    code, answer, _ = api.call("POST", "publish", batch)
    assert code == 200 and answer["published"] == 3
    assert [m["destination"] for m in answer["messages"]] == [
        "/queue/orders",
        "/user/carol/queue/notify",
        "/queue/orders",
    ]
    assert all(m["message_id"] for m in answer["messages"])
    pending = [m.body for m in api.broker.engine.queues["/queue/orders"].pending]
    assert pending[-2:] == [b"four", b"\xff"]
    assert [(m.body, dict(m.headers).get("k")) for m in inbox.received] == [(b"hi", "v")]


def test_a_bad_or_refused_message_refuses_the_batch_and_nothing_is_sent() -> None:
    api = Api(auth=True)
    for batch, status, detail in [
        ({"messages": []}, 400, '"messages" must be a list'),
        ({"messages": [{"destination": "/queue/orders"}, {"body": "x"}]}, 400, "message 1:"),
        ({"messages": [{"destination": "/temp-queue/x"}]}, 400, "of one connection"),
        ({"messages": [{"destination": "/queue/orders", "colour": "red"}]}, 400, "'colour'"),
        ({"messages": [{"destination": "/queue/orders"}] * 1001}, 400, "at most 1000"),
    ]:
        code, error = refused(api, "POST", "publish", batch, basic("admin"))
        assert (code, detail in error["detail"]) == (status, True), error
    # orders may not write: nothing of the batch is published.
    batch = {"messages": [{"destination": "/queue/orders", "body": "x"}]}
    code, error = refused(api, "POST", "publish", batch, basic("orders"))
    assert code == 403 and "write" in error["detail"]
    assert api.depth() == 3


def test_a_users_sessions_are_listed_then_closed_by_a_backend_with_the_right() -> None:
    api = Api(auth=True)
    connections = [carol(api, name, "/topic/room") for name in ("c1", "c2")]
    other = FakeConnection("c3")
    api.broker.open_connection(other)
    code, sessions, _ = api.call("GET", "users/carol/sessions", headers=basic("reader"))
    assert code == 200 and sessions["login"] == "carol" and sessions["detached"] == []
    assert sorted(info["id"] for info in sessions["connections"]) == ["c1", "c2"]
    code, error = refused(api, "DELETE", "users/carol/sessions", None, basic("reader"))
    assert code == 403 and "'/user/carol/#'" in error["detail"]
    code, closed, _ = api.call(
        "DELETE", "users/carol/sessions?reason=banned", headers=basic("admin")
    )
    assert code == 200 and len(closed["connections"]) == 2
    for connection in connections:
        [error_sent] = connection.failed
        assert isinstance(error_sent, ClosedByOperator) and "banned" in error_sent.detail
    assert other.failed == []


def test_a_user_is_unsubscribed_from_one_destination() -> None:
    api = Api(auth=True)
    connection = carol(api, "c1", "/queue/orders", "/topic/room")
    body: Any = {"destination": "/queue/orders", "reason": "kicked"}
    code, error = refused(api, "POST", "users/carol/unsubscribe", body, basic("reader"))
    assert code == 403 and "admin" in error["detail"]
    code, answer, _ = api.call("POST", "users/carol/unsubscribe", body, headers=basic("orders"))
    assert code == 200 and answer == {
        "login": "carol",
        "destination": "/queue/orders",
        "unsubscribed": 1,
    }
    assert list(connection.subscriptions) == ["s1"]
    code, error = refused(api, "GET", "users/carol/unsubscribe", None, basic("admin"))
    assert code == 405
    code, error = refused(api, "GET", "users/carol/friends", None, basic("admin"))
    assert code == 404


def test_a_service_token_publishes_anywhere_and_acts_on_users_but_purges_nothing(
    tmp_path: Path,
) -> None:
    """
    The backend's credential is a token whose scopes are what it may do: write
    on every destination (/user/ and /stream/ included) and admin on users.
    """
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)
    api = Api(auth=True, token_secret=secret)
    service = make_token(
        NOW, SECRET, "HS256", sub="backend", scope="stompbroker.write:# stompbroker.admin:/user/#"
    )
    batch = {
        "messages": [
            {"destination": "/user/carol/queue/notify", "body": "hi"},
            {"destination": "/stream/audit", "body": "logged"},
            {"destination": "/queue/orders", "body": "four"},
        ]
    }
    code, answer, _ = api.call("POST", "publish", batch, headers=bearer(service))
    assert (code, answer["published"]) == (200, 3)
    connection = carol(api, "c1", "/topic/room")
    code, _, _ = api.call("DELETE", "users/carol/sessions", headers=bearer(service))
    assert code == 200 and len(connection.failed) == 1
    code, error = refused(api, "DELETE", f"destinations/{ORDERS}/messages", None, bearer(service))
    assert code == 403 and api.depth() == 4
