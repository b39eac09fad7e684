"""
Issue 14: what real clients (stomp.py, stompjs, 1.0 clients) expect of the
broker at its default settings, against one real ``twistd -n stompbroker``
started with no option that the issue's defaults concern.
"""

from __future__ import annotations

import time

from tests.support.clients import RawClient, connect
from tests.support.process import BrokerProcess, module_broker

defaults = module_broker("defaults")


def test_heartbeats_at_the_clients_one_second_pace(defaults: BrokerProcess) -> None:
    """A stomp.py client asking for 1000,1000 gets a beat about every second, not every ten."""
    connection, events = connect(defaults.address, "1.2", heartbeats=(1000, 1000))
    started = time.monotonic()
    assert events.wait_for(lambda: events.heartbeats >= 2, timeout=4)
    assert time.monotonic() - started < 3.5
    assert connection.is_connected()
    assert not events.errors
    connection.disconnect()


def test_silent_client_is_dropped_after_two_of_its_intervals(defaults: BrokerProcess) -> None:
    """
    A client that promised a beat every second and sends none is dropped after about two
    seconds, and CONNECTED told it the intervals applied.
    """
    client = RawClient(defaults.address)
    connected = client.connect("1.2", "1000,0")
    assert connected.get("heart-beat") == "0,1000"
    started = time.monotonic()
    frames = client.read_frames(count=10, timeout=6)
    elapsed = time.monotonic() - started
    assert frames and frames[-1].get("message") == "heart-beat timeout"
    assert 1.5 <= elapsed < 3.5
    assert client.closed_by_peer()
