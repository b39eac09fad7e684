"""
The Lua scripts the redis engine's queues run, registered once per client.

redis-py's script objects send ``EVALSHA`` and load the script again when the
server answers ``NOSCRIPT`` (after a restart), so each claim stays one round
trip.  The scripts' texts live beside what they do
(:mod:`~stompbroker.broker.engine.redis.lanes`).
"""

from __future__ import annotations

from typing import Any

from stompbroker.broker.engine.redis.lanes import READ_LANES

__all__ = ["Scripts"]


class Scripts:
    """
    The scripts, bound to one client.

    :ivar read_lanes: :data:`~stompbroker.broker.engine.redis.lanes.READ_LANES`.
    """

    __slots__ = ("read_lanes",)

    def __init__(self, client: Any) -> None:
        self.read_lanes = client.register_script(READ_LANES)
