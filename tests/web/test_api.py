"""
The management API (:mod:`stompbroker.web.api`) without sockets, through
``StubTreq``: each call's answer, the credentials, rights and origin checks, and
for every refused call the JSON error that names the problem and the proof that
nothing changed.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.web.test.requesthelper import DummyRequest

from stompbroker.interfaces import ConnectionDescription
from stompbroker.web.api_guard import ApiGuard
from tests.support.api import ORDERS, Api, basic, bearer, call_api, refused
from tests.support.broker import FakeConnection, Inbox
from tests.support.tokens import NOW, SECRET, make_token


def test_browse_shows_the_head_of_a_queue_and_leaves_it() -> None:
    """GET .../messages?count=N answers the first N messages, text bodies as text."""
    api = Api()
    code, messages, response = api.call("GET", f"destinations/{ORDERS}/messages?count=2")
    assert code == 200
    assert [message["body"] for message in messages] == ["one", "two"]
    assert messages[0]["body_encoding"] == "utf-8"
    assert response.headers.getRawHeaders("cache-control") == ["no-store"]
    assert api.depth() == 3


def test_binary_bodies_are_published_and_browsed_as_base64() -> None:
    """A body that is not UTF-8 goes in and comes out base64, with body_encoding saying so."""
    api = Api()
    raw = base64.b64encode(b"\xff\x00\xfe").decode()
    code, answer, _ = api.call(
        "POST",
        "destinations/%2Fqueue%2Fbinary/publish",
        {"body": raw, "body_encoding": "base64", "headers": {"k": "v"}},
    )
    assert code == 200 and answer["message_id"]
    code, [message], _ = api.call("GET", "destinations/%2Fqueue%2Fbinary/messages")
    assert (message["body"], message["body_encoding"], message["headers"]) == (
        raw,
        "base64",
        {"k": "v"},
    )


def test_destinations_list_and_detail() -> None:
    """The list has destination, kind, depth, in_flight and consumers; the detail its consumers."""
    api = Api()
    connection = FakeConnection("c1")
    api.broker.open_connection(connection)
    api.broker.subscribe(Inbox("/queue/orders", connection=connection, prefetch=1))
    code, rows, _ = api.call("GET", "destinations")
    assert code == 200
    [row] = rows
    keys = ("destination", "kind", "depth", "in_flight", "consumers")
    assert {key: row[key] for key in keys} == {
        "destination": "/queue/orders",
        "kind": "queue",
        "depth": 2,
        "in_flight": 1,
        "consumers": 1,
    }
    code, detail, _ = api.call("GET", f"destinations/{ORDERS}")
    assert detail["subscribers"][0]["connection"] == "c1"


def test_purge_move_and_delete_change_the_queue() -> None:
    """DELETE .../messages purges; move sends messages on; DELETE on the queue deletes it."""
    api = Api()
    code, moved, _ = api.call(
        "POST", f"destinations/{ORDERS}/move", {"to": "/queue/other", "count": 1}
    )
    assert (code, moved["moved"]) == (200, 1)
    assert api.call("DELETE", f"destinations/{ORDERS}/messages")[1]["purged"] == 2
    assert api.call("DELETE", "destinations/%2Fqueue%2Fother")[1]["discarded"] == 1
    assert "/queue/other" not in api.broker.engine.queues


def test_connections_are_listed_and_closed() -> None:
    """GET lists connections; DELETE closes one with the operator's reason."""
    api = Api()
    connection = FakeConnection("c7")
    api.broker.open_connection(connection)
    code, [row], _ = api.call("GET", "connections")
    assert (code, row["id"], row["peer"]) == (200, "c7", "127.0.0.1:1")
    code, closed, _ = api.call("DELETE", "connections/c7?reason=bye")
    assert code == 200 and closed["id"] == "c7"
    [error] = connection.failed
    assert error.message == "closed by an operator" and "bye" in error.detail


def test_overview_and_nodes() -> None:
    """The overview says how many connections there are; nodes lists this broker."""
    api = Api()
    assert api.call("GET", "overview")[1]["connections"] == 0
    [node] = api.call("GET", "nodes")[1]
    assert node == {"name": api.broker.engine.ids.node, "here": True, "engine": "local"}


def test_bad_input_is_refused_with_a_json_error_naming_it() -> None:
    """Bad counts, fields, targets, paths and methods get a 4xx that says what was wrong."""
    api = Api()
    cases = [
        ("GET", f"destinations/{ORDERS}/messages?count=0", None, 400, "count"),
        ("POST", f"destinations/{ORDERS}/move", {"to": "/queue/x", "n": 1}, 400, "'n'"),
        ("POST", f"destinations/{ORDERS}/move", {"to": "/queue/a.*"}, 400, "wildcard"),
        ("POST", f"destinations/{ORDERS}/move", {"to": "/queue/orders"}, 400, "itself"),
        ("POST", f"destinations/{ORDERS}/retry", {}, 400, "dead-letter"),
        ("POST", "destinations/%2Fqueue%2Fx/publish", {"headers": {"a:b": "c"}}, 400, "a:b"),
        ("POST", "destinations/%2Ftemp-queue%2Fx/publish", {}, 400, "of one connection"),
        ("POST", "destinations/%2Fqueue%2Fa%2C%2Fqueue%2Fb/publish", {}, 400, "parts"),
        ("DELETE", "destinations/%2Fqueue%2Fnone/messages", None, 404, "/queue/none"),
        ("DELETE", "destinations/%2Ftopic%2Ft/messages", None, 400, "topic"),
        ("DELETE", "connections/nobody", None, 404, "nobody"),
        ("GET", "nothing", None, 404, "/api/nothing"),
        ("POST", "destinations", {}, 405, "GET"),
    ]
    for method, path, body, code, named in cases:
        status, error = refused(api, method, path, body)
        assert status == code, (path, error)
        assert named in error["detail"], (path, error)


def test_a_queue_being_consumed_is_not_deleted() -> None:
    """DELETE on a queue with consumers answers 409 and the queue stays."""
    api = Api()
    api.broker.subscribe(Inbox("/queue/orders", prefetch=1))
    code, error = refused(api, "DELETE", f"destinations/{ORDERS}")
    assert code == 409 and "consumers" in error["detail"]


def test_a_post_that_is_not_json_is_refused() -> None:
    """A POST without Content-Type: application/json (what a form sends) gets 415."""
    api = Api()
    code, error = refused(
        api, "POST", f"destinations/{ORDERS}/move", None, {"Content-Type": "text/plain"}
    )
    assert code == 415


def test_another_origin_is_refused() -> None:
    """A request whose Origin is not the broker's own gets 403, whatever its credentials."""
    api = Api()
    code, error = refused(
        api, "DELETE", f"destinations/{ORDERS}/messages", None, {"Origin": "http://evil.test"}
    )
    assert code == 403 and "evil.test" in error["detail"]
    code, _, _ = api.call("GET", "destinations", headers={"Origin": "http://localhost"})
    assert code == 200


APP = "https://app.example.com"


def test_an_allowed_origin_may_call_and_read_the_answer() -> None:
    """
    With --allowed-origin, its pages' calls are answered with CORS headers naming
    it; other origins are still refused, and the broker's own pages still work.
    """
    api = Api(allowed_origins=("https://*.example.com",))
    code, _, response = api.call("GET", "destinations", headers={"Origin": APP})
    assert code == 200
    assert response.headers.getRawHeaders("access-control-allow-origin") == [APP]
    assert response.headers.getRawHeaders("vary") == ["Origin"]
    code, error = refused(api, "GET", "destinations", None, {"Origin": "https://evil.test"})
    assert code == 403 and "--allowed-origin" in error["detail"]
    code, _, response = api.call("GET", "destinations", headers={"Origin": "http://localhost"})
    assert code == 200
    assert response.headers.getRawHeaders("access-control-allow-origin") is None


def test_the_preflight_of_an_allowed_origin_names_methods_and_headers() -> None:
    """OPTIONS from an allowed origin: 204 with what the API takes; from another: 403."""
    api = Api(allowed_origins=(APP,))
    headers = {"Origin": APP, "Access-Control-Request-Method": "POST"}
    code, body, response = call_api(api.treq, api.clock, "OPTIONS", "destinations", None, headers)
    assert (code, body) == (204, b"")
    assert response.headers.getRawHeaders("access-control-allow-origin") == [APP]
    assert "POST" in response.headers.getRawHeaders("access-control-allow-methods")[0]
    assert "Authorization" in response.headers.getRawHeaders("access-control-allow-headers")[0]
    headers["Origin"] = "https://evil.test"
    code, body, response = call_api(api.treq, api.clock, "OPTIONS", "destinations", None, headers)
    assert code == 403
    assert response.headers.getRawHeaders("access-control-allow-origin") is None


def test_with_auth_every_call_needs_valid_credentials() -> None:
    """Without or with wrong credentials: 401 with a Basic challenge; the console gets none."""
    api = Api(auth=True)
    code, error = refused(api, "GET", "destinations")
    assert code == 401
    code, _, response = api.call("GET", "destinations")
    assert response.headers.getRawHeaders("www-authenticate")[0].startswith("Basic")
    code, _, response = api.call("GET", "connections", headers={"X-Requested-With": "console"})
    assert code == 401 and response.headers.getRawHeaders("www-authenticate") is None
    code, error = refused(api, "GET", "destinations", None, basic("admin", "wrong"))
    assert (code, error["error"]) == (401, "login failed")
    code, error = refused(api, "GET", "destinations", None, {"Authorization": "Bearer abc"})
    assert code == 401 and "no token checker" in error["detail"]
    assert api.call("GET", "destinations", headers=basic("admin"))[0] == 200


def test_a_bearer_token_is_checked_by_the_token_checker_and_its_scopes_apply(
    tmp_path: Path,
) -> None:
    """
    With --auth jwt:..., a bearer token logs in as its subject with its scopes' rights; an
    expired token is refused naming why, and nothing is purged by a refused call.
    """
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)
    api = Api(auth=True, token_secret=secret)
    reader = make_token(NOW, SECRET, "HS256", scope="stompbroker.read:/queue/#")
    assert api.call("GET", f"destinations/{ORDERS}", headers=bearer(reader))[0] == 200
    code, error = refused(api, "DELETE", f"destinations/{ORDERS}/messages", None, bearer(reader))
    assert (code, error["error"]) == (403, "no admin right")
    expired = make_token(NOW, SECRET, "HS256", exp=int(NOW) - 60)
    code, error = refused(api, "DELETE", f"destinations/{ORDERS}/messages", None, bearer(expired))
    assert (code, error["error"]) == (401, "login failed") and "expired" in error["detail"]
    assert api.depth() == 3


def test_read_looks_and_admin_changes() -> None:
    """A reader browses but cannot purge; admin on one queue purges it but sees no connections."""
    api = Api(auth=True)
    assert api.call("GET", f"destinations/{ORDERS}/messages", headers=basic("reader"))[0] == 200
    code, error = refused(api, "DELETE", f"destinations/{ORDERS}/messages", None, basic("reader"))
    assert code == 403 and "admin" in error["detail"]
    code, error = refused(api, "GET", "connections", None, basic("orders"))
    assert code == 403 and "'#'" in error["detail"]
    code, error = refused(
        api, "POST", f"destinations/{ORDERS}/move", {"to": "/queue/x"}, basic("orders")
    )
    assert code == 403 and "write" in error["detail"]
    code, answer, _ = api.call("DELETE", f"destinations/{ORDERS}/messages", headers=basic("orders"))
    assert (code, answer["purged"]) == (200, 3)


def test_without_auth_only_loopback_clients_are_answered() -> None:
    """A broker without --auth refuses management from other machines."""
    guard = ApiGuard(None, None, Clock())
    remote = DummyRequest([b"api", b"destinations"])
    remote.client = IPv4Address("TCP", "192.0.2.7", 4000)
    failures: list[Any] = []
    guard.identify(remote).addErrback(failures.append)
    [failure] = failures
    assert failure.value.code == 403 and "loopback" in failure.value.detail
    local = DummyRequest([b"api"])
    local.client = IPv4Address("TCP", "127.0.0.1", 4000)
    identities: list[Any] = []
    guard.identify(local).addCallback(identities.append)
    assert identities[0].name == "local operator"


#: Every call that changes state, as the reader (``read`` on everything, nothing else) makes it.
CHANGES = [
    ("DELETE", f"destinations/{ORDERS}/messages", None, "admin"),
    ("DELETE", f"destinations/{ORDERS}", None, "admin"),
    ("POST", f"destinations/{ORDERS}/move", {"to": "/queue/other"}, "admin"),
    ("POST", f"destinations/{ORDERS}/move", {"to": "/queue/other", "copy": True}, "admin"),
    ("POST", "destinations/%2Fqueue%2FDLQ.orders/retry", {}, "admin"),
    ("POST", f"destinations/{ORDERS}/publish", {"body": "forged"}, "write"),
    ("POST", "destinations/%2Fqueue%2Fnew/publish", {"body": "forged"}, "write"),
    ("DELETE", "connections/c7", None, "admin"),
    ("DELETE", "detached-sessions/session-1", None, "admin"),
]


@pytest.mark.parametrize(("method", "path", "body", "right"), CHANGES)
def test_every_change_without_its_right_is_refused_and_changes_nothing(
    method: str, path: str, body: Any, right: str
) -> None:
    """A reader's purge, delete, move, copy, retry, publish, close or end: 403 naming the right."""
    api = Api(auth=True)
    connection = FakeConnection("c7")
    api.broker.open_connection(connection)
    code, error = refused(api, method, path, body, basic("reader"))
    assert code == 403 and right in error["detail"]
    assert connection.failed == []
    assert api.call("GET", "connections", headers=basic("admin"))[1][0]["id"] == "c7"


BAD_TOKENS = [
    ("expired", {"exp": int(NOW) - 60}, SECRET, "token expired"),
    ("not yet valid", {"nbf": int(NOW) + 600}, SECRET, "token not yet valid"),
    ("wrong audience", {"aud": "another-api"}, SECRET, "wrong audience"),
    ("no sub", {"sub": None}, SECRET, "no sub claim"),
    ("invalid scope", {"scope": "stompbroker.admin:/queue/a*"}, SECRET, "invalid scope"),
    ("bad signature", {}, b"another secret of thirty-two bytes!", "bad signature"),
]


@pytest.mark.parametrize(
    ("overrides", "key", "reason"),
    [case[1:] for case in BAD_TOKENS],
    ids=[case[0] for case in BAD_TOKENS],
)
def test_every_bad_bearer_token_is_refused_naming_why_and_changes_nothing(
    tmp_path: Path, overrides: dict[str, Any], key: bytes, reason: str
) -> None:
    """A bad token with every right in its scopes still gets 401 "login failed" and its reason."""
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)
    api = Api(auth=True, token_secret=secret)
    claims = {"scope": "stompbroker.admin stompbroker.read stompbroker.write", **overrides}
    token = make_token(NOW, key, "HS256", **claims)
    code, error = refused(api, "DELETE", f"destinations/{ORDERS}/messages", None, bearer(token))
    assert (code, error["error"]) == (401, "login failed")
    assert error["detail"].startswith(f"{reason}: ")
    malformed = refused(api, "DELETE", f"destinations/{ORDERS}", None, bearer("not.a.jwt"))
    assert malformed[0] == 401 and malformed[1]["detail"].startswith("malformed token: ")


def test_members_are_read_by_anyone_with_read_on_the_destination() -> None:
    """GET .../members: the users subscribed (a second subscription is not a second member)."""
    api = Api(auth=True)
    for name in ("c1", "c2"):
        connection = FakeConnection(name)
        connection.describe = lambda: ConnectionDescription(  # type: ignore[method-assign]
            session="x", address="a", user="carol", info={"name": "Carol"}
        )
        api.broker.open_connection(connection)
        api.broker.subscribe(Inbox("/queue/orders", "auto", connection=connection))
    code, members, _ = api.call("GET", f"destinations/{ORDERS}/members", headers=basic("orders"))
    assert code == 200
    [member] = members
    assert (member["id"], member["info"], member["state"], member["subscriptions"]) == (
        "carol",
        {"name": "Carol"},
        "online",
        2,
    )
    assert member["since"].endswith("Z")  # a time, as every time the API shows
    code, error = refused(
        api, "GET", "destinations/%2Fqueue%2Fother/members", None, basic("orders")
    )
    assert code == 403 and "read" in error["detail"]


def test_the_brief_overview_counts_the_lists_it_leaves_out_and_vhosts_count_their_own() -> None:
    """?brief=true: no destinations or connections lists, their counts; /api/vhosts the default."""
    api = Api(live_interval=5.0)
    api.broker.open_connection(FakeConnection("c1"))
    code, overview, _ = api.call("GET", "overview?brief=true")
    assert code == 200
    assert "destinations" not in overview and "connections" not in overview
    assert overview["object_totals"] == {"connections": 1, "destinations": 1}
    code, hosts, _ = api.call("GET", "vhosts")
    assert hosts == [
        {"name": "/", "aliases": [], "connections": 1, "destinations": 1, "messages": 3}
    ]
