"""
A policy's ``max-length-bytes`` on the shared ``/queue/`` streams of the redis
engine (docs/policies.md, docs/cluster.md): a stream keeps no byte count, so
each stream a byte limit applies to has a counter beside it,
``PREFIX:{q:/queue/X}:bytes`` (``PREFIX:{q:/queue/X}:lane:P:bytes`` for a priority lane):
the bytes of the message bodies of its entries, those waiting and those nodes
have read and not settled, as the stream's length counts them for
``max-length``.

- The SEND's node adds the entry through :data:`ADD_SIZED`: one script that
  checks the count (and the length, when the policy sets ``max-length`` too),
  refuses, or adds and then removes the oldest entries (dropped, or moved to the
  dead-letter queue's stream) while the stream is over a limit, and writes the
  counter: one round trip per SEND.
- Every other place an entry of such a stream ends decrements the counter by
  its body size, read from the entry in Redis: a node's settling
  (:data:`.settle_scripts.SETTLE` given the counter, while the node sees the
  byte limit in force), the management's purge, move
  and delete, and the deciding node's move of an entry to a node's own stream
  (:data:`.dispatch_scripts.MOVE`; handed back, :data:`.dispatch_scripts.RETURN_NODE`
  counts it in again).  The scripts touch a
  counter only if it exists, so a queue no byte limit ever applied to has none.
- The count is repaired where it can drift (a policy set on a queue that
  already holds messages, entries ended by a node that did not yet see the
  policy, copies a node puts back after an outage): it is 0 when
  the stream is empty, never below 0, and when it says a SEND would go over a
  limit it is recounted from the stream's entries first, at most once a second
  per stream (the key ``PREFIX:{q:/queue/X}:bytes:recounted``, ``PX 1000``).

A body's size is read from the payload (:mod:`.codec`): what follows the first
newline, or the second for an entry moved to a dead-letter stream; in a
queue entry's binary form (``M``), the last length of its fixed header.
"""

from __future__ import annotations

from stompbroker.broker.engine.redis.scripts import load

__all__ = ["ADD_SIZED"]


#: lua/add_sized.lua (what it takes and answers is said there).
ADD_SIZED = load("add_sized")
