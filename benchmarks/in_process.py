"""
What the in-process cost benchmarks (:mod:`benchmarks.queue_cost`,
:mod:`benchmarks.fanout_cost`) share: a connected client session on a
``StringTransport``, and one timed run under the twistd plugin's gc settings.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

from twisted.internet.testing import StringTransport

from stompbroker.app.gc_tuning import DEFAULT_THRESHOLD, CollectorTuning


def connect(factory: Any) -> tuple[Any, StringTransport]:
    """
    :param factory: the broker's STOMP server factory.
    :returns: a protocol past CONNECT (1.2), and its transport, cleared.
    """
    protocol = factory.buildProtocol(None)
    transport = StringTransport()
    protocol.makeConnection(transport)
    protocol.dataReceived(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")
    transport.clear()
    return protocol, transport


def timed(run: Callable[[], float]) -> float:
    """
    Call ``run`` as the twistd plugin runs the broker (--gc-threshold's default):
    the setup's objects frozen, young collections rare.

    :returns: what ``run`` returns (the seconds it took).
    """
    tuning = CollectorTuning(DEFAULT_THRESHOLD)
    gc.collect()
    tuning.startService()
    try:
        return run()
    finally:
        tuning.stopService()
