"""
The ways a benchmark run can fail, one exception type each.

A scenario catches them at its edge and turns them into the ``error`` field of
its result, so that one broker's failure never hides the figures of the others.
"""

from __future__ import annotations


class BenchmarkError(Exception):
    """Base of every failure the suite reports instead of crashing."""


class BrokerRefused(BenchmarkError):
    """
    The broker answered with an ERROR frame.

    :param message: the ERROR frame's ``message`` header (or the start of its body).
    """

    def __init__(self, message: str) -> None:
        super().__init__(f"broker sent ERROR: {message}")
        self.message = message


class HandshakeFailed(BenchmarkError):
    """The TCP connection, the WebSocket upgrade or the STOMP CONNECT did not succeed."""


class BrokerStartFailed(BenchmarkError):
    """The stompbroker process the suite started did not come up."""
