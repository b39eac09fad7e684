"""
The broker's log names who changed what through the management API (the login
and the address), and counts in words that read for one.
"""

from __future__ import annotations

from typing import Any

from twisted.logger import formatEvent

from tests.support.api import ORDERS, Api, basic
from tests.support.broker import FakeConnection


def lines(events: list[dict[str, Any]]) -> list[str]:
    """:returns: the formatted log lines of the broker's management."""
    return [formatEvent(event) for event in events if " at 127.0.0.1 " in formatEvent(event)]


def test_each_change_is_logged_with_the_operator_and_address(
    log_events: list[dict[str, Any]],
) -> None:
    """Move, purge, close and delete each log ``LOGIN at ADDRESS`` and what was done."""
    api = Api(auth=True)
    admin = basic("admin")
    api.call("POST", f"destinations/{ORDERS}/move", {"to": "/queue/other", "count": 1}, admin)
    api.call("DELETE", f"destinations/{ORDERS}/messages", headers=admin)
    api.broker.open_connection(FakeConnection("c7"))
    api.call("DELETE", "connections/c7", headers=admin)
    api.call("DELETE", "destinations/%2Fqueue%2Fother", headers=admin)
    assert lines(log_events) == [
        "admin at 127.0.0.1 moved 1 message from /queue/orders to /queue/other",
        "admin at 127.0.0.1 purged 2 messages from /queue/orders",
        "admin at 127.0.0.1 closed connection c7 from 127.0.0.1:1",
        "admin at 127.0.0.1 deleted /queue/other (1 message)",
    ]
