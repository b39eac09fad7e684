"""
``--auth http:URL`` through the whole stack without sockets: the real TCP adapter,
session, portal, HTTP checker and broker, with the application a fake treq client
(:mod:`tests.support.http_app`) and time on one ``task.Clock``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from treq.testing import StubTreq
from twisted.internet.task import Clock
from twisted.web.resource import Resource
from twisted.web.server import Request as WebRequest

from stompbroker.broker.routing.virtual_hosts import VirtualHost, VirtualHosts
from stompbroker.broker.service import Broker
from stompbroker.protocol.session import SessionConfig
from stompbroker.security.access_file import AccessControl
from stompbroker.security.http_auth import (
    HttpChecker,
    anonymous_checker,
    make_checker,
)
from stompbroker.security.http_endpoint import EndpointOptions, parse_options
from stompbroker.security.portal import FAILED_LOGIN_DELAY, Authenticator, make_portal
from stompbroker.transport.tcp import stomp_server_factory
from tests.support.http_app import URL, AppClient, Decide, rules
from tests.support.tcp import NO_WATERMARK, Client

USERS = {"alice": "wonderland", "bob": "builder"}
ALLOWED = {
    ("alice", "subscribe", "/topic/prices"),
    ("alice", "send", "/queue/orders"),
    ("bob", "subscribe", "/topic/prices"),
}


def stack(
    clock: Clock,
    client: Any,
    options: str = "",
    hosts: VirtualHosts | None = None,
    allow_anonymous: bool = False,
) -> tuple[Any, HttpChecker]:
    """
    :param hosts: the broker's virtual hosts, if any.
    :param allow_anonymous: let clients without a login in, as ``--allow-anonymous``
        without ``--access`` does: the application decides what they may do.
    :returns: a TCP factory of a broker with ``--auth http:URL<options>``, and its checker.
    """
    checker = make_checker(URL + options, clock=clock, client=client)
    checkers: list[Any] = [checker]
    if allow_anonymous:
        checkers.append(anonymous_checker(checkers))
    authenticator = Authenticator(make_portal(checkers, allow_anonymous), clock)
    config = SessionConfig(heartbeat=(0, 0), authenticator=authenticator, access=AccessControl())
    broker = Broker(clock, limits=NO_WATERMARK, virtual_hosts=hosts)
    return stomp_server_factory(broker, clock, config), checker


@pytest.fixture
def app() -> AppClient:
    return AppClient(rules(USERS, ALLOWED))


@pytest.fixture
def factory(clock: Clock, app: AppClient) -> Any:
    return stack(clock, app)[0]


def logged_in(factory: Any, login: str = "alice", port: int = 40000) -> Client:
    client = Client(factory, port=port)
    answer = client.connect(("login", login), ("passcode", USERS[login]))
    assert answer.command == "CONNECTED", answer
    return client


def subscribe(client: Client, destination: str, receipt: str = "s") -> None:
    client.send("SUBSCRIBE", ("id", receipt), ("destination", destination), ("receipt", receipt))


# -- options -------------------------------------------------------------------------


def test_options_default_to_the_documented_values() -> None:
    """``http:URL`` alone: paths user, vhost and resource, 5 s timeout, a minute of cache."""
    assert parse_options("http://127.0.0.1:8000/auth") == EndpointOptions(
        "http://127.0.0.1:8000/auth", "user", "vhost", "resource", 5.0, 60.0, 100_000
    )


def test_options_after_the_url_are_colon_separated() -> None:
    """Each option after the URL changes its setting; a full URL as a path is used as is."""
    options = parse_options(
        "https://app:8443/stomp:timeout=0.5:cache=0:user_path=/login:resource_path=https://other/r"
        ":vhost_path=may-use"
    )
    assert (options.timeout, options.cache) == (0.5, 0.0)
    assert options.address(options.user_path) == "https://app:8443/stomp/login"
    assert options.address(options.vhost_path) == "https://app:8443/stomp/may-use"
    assert options.address(options.resource_path) == "https://other/r"


@pytest.mark.parametrize(
    ("argstring", "complaint"),
    [
        ("", "needs the application's URL"),
        ("ftp://host/x", "needs the application's URL"),
        ("http://h/x:timeout=0", "timeout must be a number from 0.001 to 300"),
        ("http://h/x:cache=soon", "cache must be a number"),
        ("http://h/x:cache=1:cache=2", "cache is given twice"),
        ("http://h/x:user_path=", "user_path needs a path"),
        ("http://h/x:vhost_path=", "vhost_path needs a path"),
    ],
)
def test_bad_options_are_refused_with_a_reason(argstring: str, complaint: str) -> None:
    """A bad URL or option stops twistd with a sentence naming it."""
    with pytest.raises(ValueError, match=complaint):
        parse_options(argstring)


# -- logins --------------------------------------------------------------------------


def test_the_application_lets_a_user_in(factory: Any, app: AppClient) -> None:
    """
    CONNECT's login, passcode and the client's address are POSTed to URL/user;
    the allowed user is then asked about for the default virtual host ``/``.
    """
    logged_in(factory)
    assert [(request.path, request.body) for request in app.requests] == [
        ("user", {"login": "alice", "passcode": "wonderland", "ip": "127.0.0.1"}),
        ("vhost", {"user": "alice", "groups": [], "vhost": "/", "ip": "127.0.0.1"}),
    ]


def test_anonymous_clients_subscribes_and_sends_are_asked_as_user_nobody(clock: Clock) -> None:
    """
    With --allow-anonymous and no access file, a client without a login is let in,
    and the application decides its SUBSCRIBEs and SENDs, asked with ``"user": ""``;
    what it refuses is refused (a room, another user's notifications).
    """
    app = AppClient(rules(USERS, {("", "subscribe", "/topic/lobby")}))
    factory, _ = stack(clock, app, allow_anonymous=True)
    client = Client(factory)
    assert client.connect().command == "CONNECTED"
    subscribe(client, "/topic/lobby")
    assert [frame.command for frame in client.frames()] == ["RECEIPT"]
    client.send("SEND", ("destination", "/user/alice/queue/notify"), body=b"hi")
    error = client.error()
    assert error.get("message") == "access denied: no write right on '/user/alice/queue/notify'"
    assert [(request.path, request.body.get("user")) for request in app.requests] == [
        ("vhost", ""),
        ("resource", ""),
        ("resource", ""),
    ]
    assert app.requests[2].body["action"] == "send"
    other = Client(factory, port=40001)
    assert other.connect().command == "CONNECTED"
    subscribe(other, "/topic/room.1")
    assert other.error().get("message") == "access denied: no read right on '/topic/room.1'"


def test_a_denial_with_a_reason_is_the_clients_error(factory: Any, clock: Clock) -> None:
    """The application's reason for a refusal goes into the ERROR, after the login delay."""
    client = Client(factory)
    client.send("CONNECT", ("accept-version", "1.2"), ("host", "/"), ("login", "eve"))
    assert client.frames() == []
    clock.advance(FAILED_LOGIN_DELAY)
    error = client.error()
    assert error.get("message") == "login failed: unknown user or wrong passcode"


def answering(code: int, document: Any) -> Decide:
    return lambda path, body: (code, document)


@pytest.mark.parametrize(
    ("code", "document", "detail", "counter"),
    [
        (500, {"allow": True}, "answered HTTP 500", "errors"),
        (200, b"yes", "not a JSON object with allow true or false", "errors"),
        (200, {"allow": "yes"}, "not a JSON object with allow true or false", "errors"),
        (200, {"allow": True, "groups": "g"}, "groups must be a list of strings", "errors"),
        (200, {"allow": True, "rights": {"fly": ["#"]}}, "rights are invalid", "allowed"),
        (200, {"allow": True, "info": "Alice"}, "info must be a JSON object", "errors"),
        (200, {"allow": True, "info": {"a": "x" * 5000}}, "more than 4096", "errors"),
    ],
)
def test_a_failing_endpoint_refuses_the_login_and_is_counted(
    clock: Clock, code: int, document: Any, detail: str, counter: str
) -> None:
    """An HTTP error or a nonsense answer: "login failed: authorization unavailable", counted."""
    factory, checker = stack(clock, AppClient(answering(code, document)))
    client = Client(factory)
    client.send("CONNECT", ("accept-version", "1.2"), ("host", "/"), ("login", "a"))
    clock.advance(FAILED_LOGIN_DELAY)
    error = client.error()
    assert error.get("message") == "login failed: authorization unavailable"
    assert detail in error.body.decode()
    assert getattr(checker.endpoint.figures.user, counter) == 1


def test_an_endpoint_that_does_not_answer_in_time_refuses_the_login(clock: Clock) -> None:
    """No answer within ``timeout``: the login fails, saying so, and a timeout is counted."""
    app = AppClient(lambda path, body: None)
    factory, checker = stack(clock, app, ":timeout=2")
    client = Client(factory)
    client.send("CONNECT", ("accept-version", "1.2"), ("host", "/"), ("login", "a"))
    clock.advance(2)
    clock.advance(FAILED_LOGIN_DELAY)
    error = client.error()
    assert error.get("message") == "login failed: authorization unavailable"
    assert b"did not answer within 2 s" in error.body
    assert checker.endpoint.figures.user.timeouts == 1


def test_logins_are_cached_by_a_digest_of_the_credentials(clock: Clock, app: AppClient) -> None:
    """A second login with the same credentials within ``cache`` seconds asks nothing."""
    factory, checker = stack(clock, app, ":cache=30")
    logged_in(factory)
    logged_in(factory, port=40001)
    assert app.paths() == ["user", "vhost"]
    assert checker.endpoint.figures.user.cached == 1
    assert checker.endpoint.figures.vhost.cached == 1
    clock.advance(31)
    logged_in(factory, port=40002)
    assert app.paths() == ["user", "vhost", "user", "vhost"]


# -- virtual hosts (vhost_path) ---------------------------------------------------------


def connect_to(factory: Any, host: str, login: str = "alice", port: int = 40000) -> Client:
    client = Client(factory, port=port)
    client.send(
        "CONNECT",
        ("accept-version", "1.2"),
        ("host", host),
        ("login", login),
        ("passcode", USERS[login]),
    )
    return client


def test_a_user_refused_on_a_virtual_host_may_use_the_default_one(clock: Clock) -> None:
    """The application allows alice on ``/`` only: CONNECT host:shop is refused, host:/ is not."""
    app = AppClient(rules(USERS, ALLOWED, vhosts={("alice", "/")}))
    factory, checker = stack(clock, app, hosts=VirtualHosts([VirtualHost("shop")]))
    refused = connect_to(factory, "shop")
    assert refused.frames() == []
    clock.advance(FAILED_LOGIN_DELAY)
    error = refused.error()
    assert error.get("message") == "login failed: virtual host refused"
    assert error.body == b"the application does not let alice use virtual host 'shop'"
    assert refused.closed
    assert connect_to(factory, "/", port=40001).frames()[0].command == "CONNECTED"
    assert [request.body for request in app.requests if request.path == "vhost"] == [
        {"user": "alice", "groups": [], "vhost": "shop", "ip": "127.0.0.1"},
        {"user": "alice", "groups": [], "vhost": "/", "ip": "127.0.0.1"},
    ]
    figures = checker.endpoint.figures.vhost
    assert (figures.asked, figures.allowed, figures.denied) == (2, 1, 1)


def test_a_virtual_host_denial_reason_is_the_error_body(clock: Clock) -> None:
    """A vhost deny with a reason: the ERROR's body is the application's sentence."""

    def decide(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if path == "vhost":
            return 200, {"allow": False, "reason": "the shop is closed"}
        return 200, {"allow": True}

    factory, _ = stack(clock, AppClient(decide))
    client = connect_to(factory, "/")
    clock.advance(FAILED_LOGIN_DELAY)
    error = client.error()
    assert (error.get("message"), error.body) == (
        "login failed: virtual host refused",
        b"the shop is closed",
    )


def test_a_failing_vhost_path_refuses_the_login_and_is_counted(clock: Clock) -> None:
    """vhost_path answering HTTP 404 (an application without it): authorization unavailable."""

    def decide(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        return (404, {"allow": False}) if path == "vhost" else (200, {"allow": True})

    factory, checker = stack(clock, AppClient(decide))
    client = connect_to(factory, "/")
    clock.advance(FAILED_LOGIN_DELAY)
    error = client.error()
    assert error.get("message") == "login failed: authorization unavailable"
    assert b"answered HTTP 404" in error.body
    assert checker.endpoint.figures.vhost.errors == 1


def test_a_renewal_asks_again_about_the_connections_virtual_host(clock: Clock) -> None:
    """Renewing a token on a ``shop`` connection asks vhost_path about ``shop`` again."""

    def decide(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if path == "vhost":
            return 200, {"allow": body["vhost"] == "shop"}
        return 200, {"allow": True, "user": "alice", "expires_at": clock.seconds() + 60}

    app = AppClient(decide)
    factory, _ = stack(clock, app, ":cache=0", hosts=VirtualHosts([VirtualHost("shop")]))
    client = Client(factory)
    client.send("CONNECT", ("accept-version", "1.2"), ("host", "shop"), ("passcode", "token-1"))
    assert client.frames()[0].command == "CONNECTED"
    client.send("SEND", ("destination", "/control/credentials"), ("receipt", "r"), body=b"token-2")
    assert client.frames()[0].command == "RECEIPT"
    assert [request.body["vhost"] for request in app.requests if request.path == "vhost"] == [
        "shop",
        "shop",
    ]


def test_the_url_in_statistics_and_logs_has_no_credentials() -> None:
    """A URL with a user name and password is shown without them."""
    options = parse_options("https://broker:s3cret@app.example:8443/stomp:timeout=1")
    assert options.shown_url == "https://app.example:8443/stomp"
    assert parse_options("http://app/stomp").shown_url == "http://app/stomp"


# -- rights per destination ------------------------------------------------------------


def test_subscribe_waits_for_the_application_and_frames_after_it_wait_too(clock: Clock) -> None:
    """A SUBSCRIBE is held until the application answers; a SEND behind it keeps its place."""
    app = AppClient(lambda path, body: (200, {"allow": True}) if path != "resource" else None)
    factory, _ = stack(clock, app)
    client = logged_in(factory)
    subscribe(client, "/topic/prices")
    client.send("SEND", ("destination", "/topic/prices"), ("receipt", "m"), body=b"1.08")
    assert client.frames() == []
    [question] = app.requests[2:]
    assert question.body == {
        "user": "alice",
        "groups": [],
        "destination": "/topic/prices",
        "action": "subscribe",
        "right": "read",
    }
    question.reply({"allow": True})
    # Now the SEND is asked about.
    app.requests[3].reply({"allow": True})
    frames = client.frames()
    assert [frame.command for frame in frames] == ["RECEIPT", "MESSAGE", "RECEIPT"]
    assert frames[1].body == b"1.08"


def test_a_refused_subscribe_ends_the_connection_with_access_denied(factory: Any) -> None:
    """The application's deny is an ERROR naming the right and the destination."""
    client = logged_in(factory)
    subscribe(client, "/topic/secrets")
    error = client.error()
    assert error.get("message") == "access denied: no read right on '/topic/secrets'"
    assert b"the application gives no read right on it" in error.body
    assert error.get("receipt-id") == "s"


def test_only_a_destinations_first_send_is_asked(factory: Any, app: AppClient) -> None:
    """Later SENDs to a destination the application allowed on this connection ask nothing."""
    client = logged_in(factory)
    for _ in range(3):
        client.send("SEND", ("destination", "/queue/orders"), body=b"order")
    assert app.paths() == ["user", "vhost", "resource"]
    client.send("SEND", ("destination", "/queue/other"))
    assert app.paths() == ["user", "vhost", "resource", "resource"]
    assert client.error().get("message") == "access denied: no write right on '/queue/other'"


def test_answers_are_cached_across_connections_for_the_configured_time(
    clock: Clock, app: AppClient
) -> None:
    """Each SUBSCRIBE is checked, through the cache: the application is asked again after it."""
    factory, checker = stack(clock, app, ":cache=10")
    first, second = logged_in(factory), logged_in(factory, port=40001)
    subscribe(first, "/topic/prices")
    subscribe(second, "/topic/prices")
    assert app.paths().count("resource") == 1
    assert checker.endpoint.figures.resource.cached == 1
    clock.advance(11)
    subscribe(first, "/topic/prices", receipt="again")
    assert app.paths().count("resource") == 2
    assert [frame.get("receipt-id") for frame in first.frames()] == ["s", "again"]


def test_one_question_on_its_way_answers_every_connection_that_asks(clock: Clock) -> None:
    """Two connections subscribing while the question is open make one request."""
    app = AppClient(lambda path, body: (200, {"allow": True}) if path != "resource" else None)
    factory, _ = stack(clock, app)
    first, second = logged_in(factory), logged_in(factory, port=40001)
    subscribe(first, "/topic/prices")
    subscribe(second, "/topic/prices")
    assert app.paths() == ["user", "vhost", "resource"]
    app.requests[2].reply({"allow": True})
    assert first.frames()[0].command == second.frames()[0].command == "RECEIPT"


def test_a_resource_timeout_refuses_the_frame_and_is_counted(clock: Clock) -> None:
    """No answer in time: ERROR "authorization unavailable", and a timeout counted."""
    app = AppClient(lambda path, body: (200, {"allow": True}) if path != "resource" else None)
    factory, checker = stack(clock, app, ":timeout=1.5")
    client = logged_in(factory)
    subscribe(client, "/topic/prices")
    clock.advance(1.5)
    error = client.error()
    assert error.get("message") == "authorization unavailable: read on '/topic/prices'"
    assert b"did not answer within 1.5 s" in error.body
    assert checker.endpoint.figures.resource.timeouts == 1


def test_a_denial_reason_is_the_error_body(clock: Clock) -> None:
    """A deny with a reason: the ERROR's body is the application's sentence."""

    def decide(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if path != "resource":
            return 200, {"allow": True}
        return 200, {"allow": False, "reason": "orders are closed on Sundays"}

    factory, _ = stack(clock, AppClient(decide))
    client = logged_in(factory)
    client.send("SEND", ("destination", "/queue/orders"))
    assert client.error().body == b"orders are closed on Sundays"


def test_rights_in_the_login_answer_are_checked_without_asking(clock: Clock) -> None:
    """An answer that lists rights: the broker checks them itself, like a token's scopes."""
    answer = {"allow": True, "user": "svc", "rights": {"write": ["/queue/orders.#"]}}
    app = AppClient(answering(200, answer))
    factory, _ = stack(clock, app)
    client = logged_in(factory)
    client.send("SEND", ("destination", "/queue/orders.eu"), ("receipt", "1"))
    assert client.frames()[0].command == "RECEIPT"
    subscribe(client, "/topic/prices")
    assert app.paths() == ["user", "vhost"]
    error = client.error()
    assert b"user 'svc' may not subscribe to '/topic/prices'" in error.body
    assert b"the application's answer gives no read right" in error.body


def test_the_answers_info_is_the_users_presence_data(clock: Clock) -> None:
    """``info`` in the login answer travels with the user's presence (a JSON object)."""
    answer = {"allow": True, "user": "alice", "info": {"name": "Alice", "avatar": "a.png"}}
    factory, _ = stack(clock, AppClient(answering(200, answer)))
    client = logged_in(factory)
    assert client.session.identity.info == {"name": "Alice", "avatar": "a.png"}
    assert client.session.describe().info == {"name": "Alice", "avatar": "a.png"}


def test_the_application_is_asked_again_on_renewal(clock: Clock) -> None:
    """A login with ``expires_at`` renews through /control/credentials: the app is asked anew."""
    answers = iter([clock.seconds() + 60, clock.seconds() + 120])

    def decide(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if path == "vhost":
            return 200, {"allow": True}
        return 200, {"allow": True, "user": "alice", "expires_at": next(answers)}

    app = AppClient(decide)
    factory, _ = stack(clock, app)
    client = Client(factory)
    assert client.connect(("passcode", "token-1")).command == "CONNECTED"
    client.send("SEND", ("destination", "/control/credentials"), ("receipt", "r"), body=b"token-2")
    assert client.frames()[0].command == "RECEIPT"
    assert [request.body for request in app.requests if request.path == "user"] == [
        {"login": "", "passcode": "token-1", "ip": "127.0.0.1"},
        {"login": "", "passcode": "token-2", "ip": "127.0.0.1"},
    ]
    clock.advance(90)
    assert not client.closed
    clock.advance(31)
    assert client.error().get("message") == "credentials expired"


def test_the_management_api_sees_only_rights_it_need_not_ask_about(clock: Clock) -> None:
    """Without listed rights, a check that cannot wait grants only SENDs the app allowed."""
    factory, _ = stack(clock, AppClient(rules(USERS, ALLOWED)))
    client = logged_in(factory)
    client.send("SEND", ("destination", "/queue/orders"))
    rights = client.session.identity.granted
    assert rights.allows("write", "/queue/orders")
    assert not rights.allows("admin", "#")
    assert not rights.allows("read", "/topic/prices")


# -- treq itself, over a twisted.web resource -------------------------------------------


class Application(Resource):
    """A twisted.web application answering both paths, as docs/security.md's example does."""

    isLeaf = True

    def render_POST(self, request: WebRequest) -> bytes:
        body = json.load(request.content)
        if request.path.endswith(b"/user"):
            answer = {"allow": body["passcode"] == "wonderland", "user": body["login"]}
        elif request.path.endswith(b"/vhost"):
            answer = {"allow": body["vhost"] == "/"}
        else:
            answer = {"allow": body["destination"].startswith("/topic/")}
        request.setHeader(b"content-type", b"application/json")
        return json.dumps(answer).encode()


def test_treq_talks_to_a_twisted_web_application(clock: Clock) -> None:
    """The real treq client path (StubTreq over a resource) logs in and checks a SUBSCRIBE."""
    stub = StubTreq(Application())
    factory, checker = stack(clock, stub)
    client = Client(factory)
    client.send(
        "CONNECT",
        ("accept-version", "1.2"),
        ("host", "/"),
        *(("login", "alice"), ("passcode", "wonderland")),
    )
    stub.flush()
    assert client.frames()[0].command == "CONNECTED"
    subscribe(client, "/topic/prices")
    stub.flush()
    assert client.frames()[0].command == "RECEIPT"
    assert checker.endpoint.figures.resource.allowed == 1


# -- counts in /stats and /metrics ------------------------------------------------------


def test_every_endpoints_counts_are_in_stats_and_metrics(clock: Clock, app: AppClient) -> None:
    """
    ``/stats`` has ``http_auth``, one entry per ``--auth http:`` checker named by
    its URL without credentials; ``/metrics`` a counter per endpoint, path and outcome.
    """
    from prometheus_client import generate_latest

    from stompbroker.stats.documents import stats_document
    from stompbroker.stats.metrics import metrics_registry
    from stompbroker.stats.model import StatsModel
    from stompbroker.stats.sampling_services import LiveStats

    factory, checker = stack(clock, app)
    client = logged_in(factory)
    subscribe(client, "/topic/prices")
    other = make_checker("http://svc:s3cret@other.test/auth", clock=clock, client=app)
    figures = [checker.endpoint.figures, other.endpoint.figures]
    model = StatsModel(factory.broker, clock, authorization=figures)
    first, second = stats_document(model, None)["http_auth"]
    assert first["url"] == URL
    assert first["user"] == {
        "asked": 1,
        "cached": 0,
        "allowed": 1,
        "denied": 0,
        "timeouts": 0,
        "errors": 0,
    }
    assert (first["vhost"]["allowed"], first["resource"]["allowed"]) == (1, 1)
    assert second["url"] == "http://other.test/auth"
    assert second["user"]["asked"] == 0
    text = generate_latest(metrics_registry(LiveStats(model, 5.0))).decode()
    assert (
        'stompbroker_http_auth_answers_total{endpoint="http://app.test/stomp",'
        'outcome="allowed",path="vhost"} 1.0'
    ) in text
    assert (
        'stompbroker_http_auth_answers_total{endpoint="http://other.test/auth",'
        'outcome="asked",path="user"} 0.0'
    ) in text
    assert "s3cret" not in text
    assert stats_document(StatsModel(factory.broker, clock), None)["http_auth"] is None
