"""
What each adapter tells its session carries the connection
(``ISessionTransport.kind``), which statistics show: the adapter knows whether
it is TCP or WebSocket, and whether TLS is beneath from the Twisted transport it
runs on.
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.address import IPv4Address
from twisted.internet.interfaces import ISSLTransport
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from zope.interface import directlyProvides
from zope.interface.verify import verifyObject

from stompbroker.broker.service import Broker
from stompbroker.interfaces import ISessionTransport
from stompbroker.protocol.session import SessionConfig
from stompbroker.transport.session_link import carried_by
from stompbroker.transport.tcp import StompProtocol, stomp_server_factory
from stompbroker.transport.websocket import StompWebSocketProtocol
from tests.support import websocket as ws
from tests.support.websocket import SocketLikeTransport

ADDRESS = IPv4Address("TCP", "127.0.0.1", 40000)


def beneath(secure: bool) -> StringTransport:
    """:returns: a Twisted transport, which says it is TLS when ``secure``."""
    transport = SocketLikeTransport(peerAddress=ADDRESS)
    if secure:
        directlyProvides(transport, ISSLTransport)
    return transport


def tcp(transport: StringTransport) -> Any:
    """:returns: the session of a TCP connection made on ``transport``."""
    clock = Clock()
    protocol = stomp_server_factory(Broker(clock), clock, SessionConfig()).buildProtocol(ADDRESS)
    protocol.makeConnection(transport)
    return protocol.session


def websocket(transport: StringTransport) -> Any:
    """:returns: the session of a WebSocket connection opened on ``transport``."""
    return ws.Client(ws.make_factory(Clock()), transport=transport).protocol.session


@pytest.mark.parametrize(
    "adapter, secure, kind",
    [
        (StompProtocol, False, "tcp"),
        (StompProtocol, True, "tls"),
        (StompWebSocketProtocol, False, "ws"),
        (StompWebSocketProtocol, True, "wss"),
    ],
)
def test_each_adapter_names_its_kind_and_tls(adapter: Any, secure: bool, kind: str) -> None:
    """
    TCP is tcp or tls, WebSocket ws or wss, by whether the transport beneath is
    TLS (asked as each adapter asks when it makes its session's link: Autobahn's
    handshake will not run on a string transport that says it is TLS).
    """
    assert carried_by(beneath(secure), adapter.kinds) == kind


@pytest.mark.parametrize("adapter", [tcp, websocket])
def test_adapters_provide_the_session_transport_interface(adapter: Any) -> None:
    """Both adapters give the session everything it asks of its transport, kind included."""
    link = adapter(beneath(False)).transport
    verifyObject(ISessionTransport, link)
