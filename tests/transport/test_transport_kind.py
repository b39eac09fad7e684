"""
What each adapter says carries its connection (``ISessionTransport.kind``), which
statistics show: the adapter knows whether it is TCP or WebSocket, and whether
TLS is beneath from the Twisted transport it runs on.
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.interfaces import ISSLTransport
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from zope.interface import directlyProvides
from zope.interface.verify import verifyObject

from stompbroker.interfaces import ISessionTransport
from stompbroker.protocol.session import SessionConfig
from stompbroker.transport.tcp import StompProtocol
from stompbroker.transport.websocket import StompWebSocketProtocol


def beneath(secure: bool) -> StringTransport:
    """:returns: a Twisted transport, which says it is TLS when ``secure``."""
    transport = StringTransport()
    if secure:
        directlyProvides(transport, ISSLTransport)
    return transport


def tcp() -> Any:
    return StompProtocol(None, Clock(), SessionConfig())


@pytest.mark.parametrize(
    "adapter, secure, kind",
    [
        (tcp, False, "tcp"),
        (tcp, True, "tls"),
        (StompWebSocketProtocol, False, "ws"),
        (StompWebSocketProtocol, True, "wss"),
    ],
)
def test_each_adapter_names_its_kind_and_tls(adapter: Any, secure: bool, kind: str) -> None:
    """TCP is tcp or tls, WebSocket ws or wss, by whether the transport beneath is TLS."""
    protocol = adapter()
    protocol.transport = beneath(secure)
    assert protocol.kind() == kind


@pytest.mark.parametrize("adapter", [tcp, StompWebSocketProtocol])
def test_adapters_provide_the_session_transport_interface(adapter: Any) -> None:
    """Both adapters offer everything a session asks of its transport, kind included."""
    verifyObject(ISessionTransport, adapter())
