"""
Clients of resumable sessions for the tests against a real broker: a
``stomp.py`` connection that asks for one, a listener that keeps its CONNECTED
headers (the token), and a cut of the TCP connection as a dead network makes it.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from tests.support.clients import Collector, connect
from tests.support.process import BrokerProcess

#: How long the broker may take to notice a cut connection (it reads the FIN at once).
NOTICE = 0.5


class Session(Collector):
    """Records the CONNECTED frame too, whose headers carry the resume token."""

    def __init__(self) -> None:
        super().__init__()
        self.connected: dict[str, str] = {}

    def on_connected(self, frame: Any) -> None:
        self._record(lambda: self.connected.update(frame.headers))


def resumable(broker: BrokerProcess, token: str = "", **headers: str) -> tuple[Any, Session]:
    """
    :param headers: more CONNECT headers (``resume-last-...``, with ``_`` for ``-``).
    :returns: a stomp.py connection that asks for a resumable session, and its listener.
    """
    session = Session()
    sent = {"resume-token": token}
    sent.update({name.replace("_", "-"): value for name, value in headers.items()})
    connection, _ = connect(broker.address, collector=session, headers=sent)
    return connection, session


def cut(connection: Any) -> None:
    """Drop the TCP connection with its socket, as a dead network would, without DISCONNECT."""
    sock = connection.transport.socket
    sock.shutdown(socket.SHUT_RDWR)
    sock.close()
    time.sleep(NOTICE)


def subscribed(
    broker: BrokerProcess, destination: str, subscription: str, **headers: str
) -> tuple[Any, Session]:
    """
    :param headers: more SUBSCRIBE headers (``ack``...).
    :returns: a resumable connection subscribed to ``destination`` (its receipt
        in), and its listener.
    """
    connection, session = resumable(broker)
    connection.subscribe(destination, id=subscription, receipt="subscribed", **headers)
    assert session.wait_for(lambda: "subscribed" in session.receipts)
    return connection, session
