"""
Who sees what on the web port with ``--auth``, without sockets: ``/stats``
keeps its totals public and shows its connections only to credentials with the
``read`` right, as ``/api/connections`` does; ``/api/whoami`` tells the pages'
sign-in who the credentials are; the overview and ``/metrics`` show the memory
alarm, the listeners and the settings in force; the pages carry a
Content-Security-Policy.
"""

from __future__ import annotations

import json
from typing import Any

from treq.testing import StubTreq
from twisted.cred import strcred
from twisted.internet.task import Clock
from twisted.web.resource import getChildForRequest
from twisted.web.test.requesthelper import DummyRequest

from stompbroker.broker.flow.broker_limits import Limits
from stompbroker.broker.management.operations import Management
from stompbroker.broker.service import Broker
from stompbroker.security.access_file import AccessControl, parse_policy
from stompbroker.security.portal import make_portal
from stompbroker.stats.model import StatsModel
from stompbroker.stats.sampling_services import LiveStats
from stompbroker.stats.setup import RunningSetup
from stompbroker.web.api import ManagementApi
from stompbroker.web.api_guard import ApiGuard
from stompbroker.web.site import PAGE_POLICY, WITHHELD, web_root
from tests.support.api import basic
from tests.support.broker import FakeConnection
from tests.support.web import metric_samples

POLICY = """
[users.reader]
read = ["#"]
[users.orders]
read = ["/queue/orders"]
"""
SETUP = RunningSetup.of(
    [("stomp", "tcp:61613:interface=127.0.0.1"), ("http", "tcp:15674")],
    [("max-connections", 10000), ("auth", ("password",))],
)


class Site:
    """A broker with one client, a memory watermark the test moves, and its web port."""

    def __init__(self, auth: bool = True) -> None:
        self.clock = Clock()
        self.clock.advance(1_700_000_000)
        self.broker = Broker(self.clock, limits=Limits(memory_high=1000, memory_low=500))
        self.used = 100
        self.broker.memory_gauge = lambda: self.used
        self.live = LiveStats(StatsModel(self.broker, rss=lambda: 1234), interval=5.0)
        self.broker.startService()
        self.live.startService()
        self.broker.open_connection(FakeConnection("c1"))
        self.broker.send("/queue/orders", (), b"one")
        portal = access = None
        if auth:
            portal = make_portal([strcred.makeChecker("memory:reader:secret:orders:secret")])
            access = AccessControl()
            access.policy = parse_policy(POLICY)
        api = ManagementApi(
            Management(self.broker), ApiGuard(portal, access, self.clock), self.live, SETUP
        )
        self.root = web_root(self.broker, stats=self.live, api=api, setup=SETUP)
        self.treq = StubTreq(self.root)

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[Any, bytes]:
        """:returns: the response to a GET and its body, the login delay passed."""
        responses: list[Any] = []
        self.treq.get(f"http://localhost/{path}", headers=headers).addCallback(responses.append)
        self.treq.flush()
        self.clock.advance(2)
        self.treq.flush()
        [response] = responses
        bodies: list[bytes] = []
        self.treq.content(response).addCallback(bodies.append)
        self.treq.flush()
        return response, bodies[0]

    def json(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        response, body = self.get(path, headers)
        return response.code, json.loads(body)


def test_stats_without_credentials_keep_totals_and_withhold_connections() -> None:
    """With --auth, anyone gets the totals and destinations of /stats, not who is connected."""
    code, stats = Site().json("stats")
    assert code == 200
    assert stats["broker"]["connections"] == 1
    assert stats["destinations"]["/queue/orders"]["messages_in"] == 1
    assert stats["connections"] is None
    assert stats["connections_withheld"] == WITHHELD


def test_stats_show_connections_to_the_read_right_on_everything() -> None:
    """The reader (read on '#') sees every connection; a user with a narrower right does not."""
    site = Site()
    code, stats = site.json("stats", basic("reader"))
    assert code == 200 and "connections_withheld" not in stats
    assert [connection["address"] for connection in stats["connections"]] == ["127.0.0.1:1"]
    code, stats = site.json("stats", basic("orders"))
    assert (code, stats["connections"]) == (200, None)


def test_stats_refuse_credentials_that_fail() -> None:
    """A wrong password gets 401 and a JSON error, not the document."""
    code, error = Site().json("stats", basic("reader", "wrong"))
    assert code == 401
    assert error["error"] == "login failed"


def test_stats_without_auth_show_everything_as_before() -> None:
    """A broker without --auth has no one to hide connections from: /stats shows them."""
    code, stats = Site(auth=False).json("stats")
    assert code == 200 and len(stats["connections"]) == 1


def test_whoami_names_the_user_and_its_broker_wide_rights() -> None:
    """/api/whoami needs valid credentials and no right; it says which rights they carry."""
    site = Site()
    code, answer = site.json("api/whoami", basic("orders"))
    assert (code, answer) == (
        200,
        {"user": "orders", "auth": True, "rights": {"read": False, "write": False, "admin": False}},
    )
    code, answer = site.json("api/whoami", basic("reader"))
    assert answer["rights"]["read"] is True
    code, answer = site.json("api/whoami")
    assert (code, answer["error"]) == (401, "credentials required")


def test_whoami_without_auth_is_the_local_operator() -> None:
    """Without --auth, a loopback client is the local operator, with every right."""
    code, answer = Site(auth=False).json("api/whoami")
    assert code == 200
    assert answer == {
        "user": "local operator",
        "auth": False,
        "rights": {"read": True, "write": True, "admin": True},
    }


def test_the_overview_shows_the_memory_alarm_the_listeners_and_the_settings() -> None:
    """
    /api/overview has the memory watermark (off, then on with its time and the paused
    publishers' count), the listeners with their URLs, and the configuration in force.
    """
    site = Site()
    site.clock.advance(1)
    code, overview = site.json("api/overview", basic("reader"))
    assert code == 200
    assert overview["memory"] == {
        "enabled": True,
        "alarm": False,
        "in_use_bytes": 100,
        "high_bytes": 1000,
        "low_bytes": 500,
        "since": None,
        "paused_publishers": 0,
    }
    assert overview["listeners"][0]["url"] == "stomp://127.0.0.1:61613"
    assert overview["configuration"] == {"auth": "password", "max-connections": "10000"}
    site.used = 5000
    site.clock.advance(1)
    _, overview = site.json("api/overview", basic("reader"))
    assert overview["memory"]["alarm"] is True
    assert overview["memory"]["in_use_bytes"] == 5000
    assert overview["memory"]["since"].endswith("Z")


class Publisher(FakeConnection):
    """A connection the broker may stop reading from."""

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


def test_metrics_gauge_the_memory_alarm_and_name_the_listeners_and_settings() -> None:
    """
    /metrics has stompbroker_memory_alarm 0, then 1 with the publishers it paused once memory
    is over --memory-high; the listeners and settings as info metrics.
    """
    site = Site()
    site.clock.advance(1)
    _, body = site.get("metrics")
    before = metric_samples(body)
    assert before["stompbroker_memory_alarm", ()] == 0
    assert before["stompbroker_memory_in_use_bytes", ()] == 100
    assert before["stompbroker_memory_high_watermark_bytes", ()] == 1000
    assert before["stompbroker_memory_low_watermark_bytes", ()] == 500
    listener = (
        ("endpoint", "tcp:15674"),
        ("kind", "http"),
        ("url", "http://0.0.0.0:15674/"),
    )
    assert before["stompbroker_listener_info", listener] == 1
    settings = (("auth", "password"), ("max_connections", "10000"))
    assert before["stompbroker_configuration_info", settings] == 1
    site.used = 5000
    site.clock.advance(1)
    sender = Publisher("c2")
    site.broker.open_connection(sender)
    site.broker.send("/queue/orders", (), b"two", connection=sender)
    _, body = site.get("metrics")
    after = metric_samples(body)
    assert after["stompbroker_memory_alarm", ()] == 1
    assert after["stompbroker_publishers_paused", ()] == 1


def test_pages_carry_a_content_security_policy() -> None:
    """The demo, dashboard and console load scripts from the broker only, and are never framed."""
    site = Site()
    for path in (b"", b"dashboard", b"console"):
        request = DummyRequest([path])
        resource = getChildForRequest(site.root, request)
        resource.render_GET(request)
        assert request.responseHeaders.getRawHeaders(b"content-security-policy") == [PAGE_POLICY]
        assert b"script-src 'self';" in PAGE_POLICY
