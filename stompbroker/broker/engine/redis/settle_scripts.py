"""
The scripts that end a shared queue's entries only where they are still the
node's own (:mod:`.queue_settling` runs them): an ACK queued before a node saw
its liveness lapse must not end an entry another node has claimed since
(docs/cluster.md, "A node that was stopped, not killed").
"""

from __future__ import annotations

from stompbroker.broker.engine.redis.scripts import load

__all__ = ["GIVE_BACK", "SETTLE", "SETTLE_BATCH"]

#: lua/settle.lua (what it takes and answers is said there).
SETTLE = load("settle")

#: lua/give_back.lua (what it takes and answers is said there).
GIVE_BACK = load("give_back")

#: Most entries one script ends (Lua's ``unpack`` takes a few thousand at most).
SETTLE_BATCH = 1000
