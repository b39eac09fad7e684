"""
The scripts that a shared queue's deciding node (:mod:`.dispatch`) runs in
Redis, each one round trip and atomic: moving the entries it read to the nodes
of the consumers that should get them, handing a node's own stream back, and
the decider's lease.
"""

from __future__ import annotations

from stompbroker.broker.engine.redis.scripts import load

__all__ = [
    "LEAD",
    "MOVE",
    "RESIGN",
    "RETURN_NODE",
]


#: lua/decide_entries.lua (what it takes and answers is said there).
MOVE = load("decide_entries")


#: lua/return_node_stream.lua (what it takes and answers is said there).
RETURN_NODE = load("return_node_stream")


#: lua/take_lease.lua (what it takes and answers is said there).
LEAD = load("take_lease")

#: lua/resign_lease.lua (what it takes and answers is said there).
RESIGN = load("resign_lease")
