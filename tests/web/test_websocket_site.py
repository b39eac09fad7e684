"""
Tests of the web port without sockets: the site's resources through ``StubTreq``,
and ``--http`` and the ``--ws-*`` options through ``makeService`` on a ``MemoryReactorClock``.
"""

from __future__ import annotations

from typing import Any

import pytest
from treq.testing import StubTreq
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactorClock
from twisted.python import usage
from twisted.web.resource import getChildForRequest
from twisted.web.test.requesthelper import DummyRequest

from stompbroker.app.options import DEFAULT_HTTP
from stompbroker.app.tap import makeService
from stompbroker.broker.service import Broker
from stompbroker.transport.tcp import StompServerFactory
from stompbroker.web.site import STATIC, WebSite, web_root
from tests.support.options import parse
from tests.support.web import get


def test_healthz_reports_whether_the_broker_runs() -> None:
    """/healthz answers 200 ok while the broker service runs and 503 once it stops, never cached."""
    broker = Broker(Clock())
    treq = StubTreq(web_root(broker))
    broker.startService()
    response, body = get(treq, "http://localhost/healthz")
    assert (response.code, body) == (200, b'{"status": "ok"}')
    assert response.headers.getRawHeaders("content-type") == ["application/json"]
    assert response.headers.getRawHeaders("cache-control") == ["no-store"]
    broker.stopService()
    response, body = get(treq, "http://localhost/healthz")
    assert (response.code, body) == (503, b'{"status": "stopped"}')


@pytest.mark.parametrize("path", ["ws", "stomp"])
def test_websocket_endpoint_answers_plain_http_with_426(path: str) -> None:
    """
    /ws and /stomp are the WebSocket endpoint: a request without an upgrade gets 426 Upgrade
    Required.
    """
    treq = StubTreq(web_root(Broker(Clock())))
    response, _ = get(treq, f"http://localhost/{path}")
    assert response.code == 426


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (b"/", STATIC / "index.html"),
        (b"/static/demo.js", STATIC / "demo.js"),
        (b"/static/vendor/stompjs/stomp.umd.min.js", STATIC / "vendor/stompjs/stomp.umd.min.js"),
        (b"/static/vendor/stompjs/LICENSE", STATIC / "vendor/stompjs/LICENSE"),
    ],
)
def test_demo_page_and_its_scripts_are_served_from_the_package(path: bytes, expected: Any) -> None:
    """
    The demo page, its script, and the vendored stompjs with its licence are files of the package.
    """
    resource = getChildForRequest(web_root(Broker(Clock())), DummyRequest(path.split(b"/")[1:]))
    assert resource.path == str(expected)
    assert expected.is_file()


@pytest.mark.parametrize(("name", "shared"), [(b"resumable.js", True), (b"demo.js", False)])
def test_resumable_js_may_be_imported_by_other_origins_pages(name: bytes, shared: bool) -> None:
    """/static/resumable.js carries Access-Control-Allow-Origin: *; the pages' scripts do not."""
    root = web_root(Broker(Clock()))
    request = DummyRequest([b"static", name])
    getChildForRequest(root, request).render(request)
    expected = [b"*"] if shared else None
    assert request.responseHeaders.getRawHeaders(b"access-control-allow-origin") == expected


@pytest.mark.parametrize("path", [b"/static/", b"/static/vendor/", b"/static/nothing.js"])
def test_static_folders_list_nothing(path: bytes) -> None:
    """Folders under /static/ have no index or listing: they are not found."""
    resource = getChildForRequest(web_root(Broker(Clock())), DummyRequest(path.split(b"/")[1:]))
    request = DummyRequest(path.split(b"/")[1:])
    resource.render(request)
    assert request.responseCode == 404


def test_demo_page_uses_the_vendored_stompjs() -> None:
    """The demo page loads the vendored @stomp/stompjs rather than a hand-written STOMP client."""
    page = (STATIC / "index.html").read_text()
    assert '<script src="static/vendor/stompjs/stomp.umd.min.js"></script>' in page
    script = (STATIC / "demo.js").read_text()
    assert "new StompJs.Client(" in script
    assert "Apache License" in (STATIC / "vendor/stompjs/LICENSE").read_text()


def test_web_port_defaults_to_loopback_15674() -> None:
    """Without --http the web port is RabbitMQ Web-STOMP's, on 127.0.0.1 only."""
    assert parse()["http"] == [DEFAULT_HTTP] == ["tcp:15674:interface=127.0.0.1"]


def test_http_none_turns_the_web_port_off() -> None:
    """--http none leaves only the STOMP listeners."""
    reactor = MemoryReactorClock()
    service = makeService(
        parse("--port", "7000", "--http", "none", "--data-dir", "none"), reactor=reactor
    )
    service.startService()
    try:
        assert [port for port, *_ in reactor.tcpServers] == [7000]
    finally:
        service.stopService()


@pytest.mark.parametrize(
    "argv",
    [
        ["--http", "none", "--http", "tcp:8080"],
        ["--ws-ping-interval", "-1"],
        ["--ws-ping-timeout", "soon"],
        ["--ws-ping-interval", "inf"],
    ],
)
def test_bad_web_options_are_usage_errors(argv: list[str]) -> None:
    """Web options refuse values they cannot use, with a usage error rather than a traceback."""
    with pytest.raises(usage.UsageError):
        parse(*argv)


def test_every_http_endpoint_serves_one_site_feeding_the_broker() -> None:
    """
    Each --http endpoint listens with the same site, whose WebSocket endpoint feeds the one broker
    with the listener's limits.
    """
    reactor = MemoryReactorClock()
    options = parse(
        "--port",
        "7000",
        "--http",
        "tcp:8000:interface=127.0.0.1",
        "--http",
        "tcp:8001",
        "--max-frame-size",
        "5000",
        "--ws-ping-interval",
        "3",
        "--ws-ping-timeout",
        "4.5",
        "--data-dir",
        "none",
    )
    service = makeService(options, reactor=reactor)
    service.startService()
    try:
        factories = {port: factory for port, factory, *_ in reactor.tcpServers}
        assert sorted(factories) == [7000, 8000, 8001]
        site = factories[8000]
        assert isinstance(site, WebSite) and factories[8001] is site
        assert isinstance(factories[7000], StompServerFactory)
        websocket = site.resource.children[b"ws"]._factory
        assert websocket.broker is service.getServiceNamed("broker")
        assert websocket.clock is reactor
        assert websocket.config.max_frame_size == 5000
        assert (websocket.autoPingInterval, websocket.autoPingTimeout) == (3.0, 4.5)
        assert service.getServiceNamed("http tcp:8001").running
    finally:
        service.stopService()
