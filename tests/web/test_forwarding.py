"""
The web port's client address behind trusted proxies: the WebSocket session's
peer, and the request's client address that the access log and the management
API's loopback check read.  Without ``--trusted-proxy`` the headers change nothing.
"""

from __future__ import annotations

from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.web.resource import Resource
from twisted.web.test.requesthelper import DummyChannel

from stompbroker.transport.forwarded import TrustedProxies, parse_networks
from stompbroker.transport.websocket import WebSocketConfig
from stompbroker.web.api_guard import is_loopback
from stompbroker.web.site import ForwardedRequest, WebSite
from tests.support.websocket import NO_PINGS, Client, make_factory

LOOPBACK = TrustedProxies(parse_networks(["127.0.0.1/32"]))


def websocket_peer(trusted: TrustedProxies, *headers: tuple[str, str]) -> str:
    config = WebSocketConfig(NO_PINGS.ping_interval, NO_PINGS.ping_timeout, trusted_proxies=trusted)
    client = Client(make_factory(Clock(), websocket=config), headers=headers)
    assert client.status == 101
    session = client.protocol.session
    assert session is not None
    peer: str = session.peer
    return peer


def test_a_trusted_proxy_names_the_websocket_client() -> None:
    """The session's peer is the client X-Forwarded-For names, from a trusted proxy."""
    assert websocket_peer(LOOPBACK, ("X-Forwarded-For", "192.0.2.7")) == "192.0.2.7:0"


def test_forwarded_names_the_websocket_client_with_its_port() -> None:
    assert websocket_peer(LOOPBACK, ("Forwarded", 'for="192.0.2.7:4711"')) == "192.0.2.7:4711"


def test_websocket_headers_are_ignored_by_default() -> None:
    """Without trusted proxies the header is ignored: the peer is the connection's."""
    assert websocket_peer(TrustedProxies(), ("X-Forwarded-For", "192.0.2.7")) == "127.0.0.1:40000"


def request(site: WebSite, peer: str, *headers: tuple[bytes, bytes]) -> ForwardedRequest:
    channel = DummyChannel()
    channel.site = site
    channel.transport.client = (peer, 40000)
    channel.transport.getPeer = lambda: IPv4Address("TCP", peer, 40000)  # type: ignore[method-assign]
    made = ForwardedRequest(channel)
    for name, value in headers:
        made.requestHeaders.addRawHeader(name, value)
    made.gotLength(0)
    made.requestReceived(b"GET", b"/api/overview", b"HTTP/1.1")
    return made


def test_a_request_through_a_trusted_proxy_has_the_clients_address() -> None:
    """The API's loopback check sees the remote client, not the proxy on this machine."""
    site = WebSite(Resource(), trusted_proxies=LOOPBACK)
    forwarded = request(site, "127.0.0.1", (b"x-forwarded-for", b"192.0.2.7"))
    assert forwarded.getClientAddress() == IPv4Address("TCP", "192.0.2.7", 0)
    assert not is_loopback(forwarded)


def test_a_request_keeps_its_address_without_trusted_proxies() -> None:
    site = WebSite(Resource())
    plain = request(site, "127.0.0.1", (b"x-forwarded-for", b"192.0.2.7"))
    assert plain.getClientAddress() == IPv4Address("TCP", "127.0.0.1", 40000)
    assert is_loopback(plain)
