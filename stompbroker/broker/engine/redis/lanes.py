"""
Message priority on a shared queue: waiting messages in ten lanes, read highest first.

A queue's stream (``PREFIX:{q:/queue/NAME}``) is the lane of the default priority
(4, JMS's); a message of another priority is ``XADD``\\ ed to the stream of its
lane, ``PREFIX:{q:/queue/NAME}:lane:P``, and the queue's mode hash
(``PREFIX:{q:/queue/NAME}:mode``, field ``p``) is set once, so that every node's
reader knows the queue has lanes.  A queue that never had a message of another
priority has no lanes: its readers read its one stream as before.

A node's read of a queue with lanes is one script (:data:`READ_LANES`): it
reads, for the node's consumer in the ``nodes`` group, from the highest lane
down, as many entries as the node has room for; so whichever node reads, the
waiting message of the highest priority leaves first, as on one node.  When
no lane has anything, the script answers each lane's newest entry id, and the
node waits for anything newer with one ``XREAD BLOCK`` (which takes nothing),
then runs the script again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stompbroker.broker.engine.redis.keys import LANE_ORDER, lane_stream, mode_key, queue_stream
from stompbroker.broker.engine.redis.scripts import load
from stompbroker.broker.queueing.priorities import DEFAULT_PRIORITY

__all__ = [
    "LANE_ORDER",
    "MARK_GROUPED",
    "READ_LANES",
]


#: lua/read_lanes.lua (what it takes and answers is said there).
READ_LANES = load("read_lanes")


#: lua/mark_grouped.lua (what it takes and answers is said there).
MARK_GROUPED = load("mark_grouped")


def parse_read(
    reply: Sequence[Any], lanes: Sequence[str]
) -> tuple[list[tuple[str, bytes, dict[bytes, bytes]]], list[Any]]:
    """
    :param reply: what :data:`READ_LANES` answered.
    :param lanes: the keys it was given.
    :returns: ``(entries, newest)``: the entries read as ``(lane, id, fields)``
        in the order read (``fields`` as a stream entry's: ``m``, the payload,
        ``o``, its group's owner, and ``i``, its original id, when it has
        them), and (when none) each
        lane's newest id for the wait; both empty when a plain read found the
        queue grouped.
    """
    if int(reply[0]) == 2:
        return [], []
    if int(reply[0]) == 0:
        return [], list(reply[1])
    flat = reply[1]
    entries = []
    for i in range(0, len(flat), 5):
        fields = {b"m": flat[i + 2]}
        if flat[i + 3]:
            fields[b"o"] = flat[i + 3]
        if flat[i + 4]:
            fields[b"i"] = flat[i + 4]
        entries.append((lanes[int(flat[i]) - 1], flat[i + 1], fields))
    return entries, []


class LaneMarks:
    """
    Where this node writes a queue's message: its stream, or its priority's
    lane, setting the queue's mode hash the first time (in the same ordered
    pipeline, before the entry, so a reader that sees the entry sees the mark).

    :param prefix: the keys' prefix.
    """

    __slots__ = ("_prefix", "_marked")

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        #: The queues this node has marked as having lanes.
        self._marked: set[str] = set()

    def stream(self, writer: Any, destination: str, stream: str, priority: int) -> str:
        """
        :param writer: the engine's ordered writer.
        :param stream: the queue's own stream.
        :returns: the stream a message of ``priority`` to ``destination`` goes to.
        """
        if priority == DEFAULT_PRIORITY:
            return stream
        if destination not in self._marked:
            self._marked.add(destination)
            writer.command("HSET", mode_key(self._prefix, destination), "p", "1")
        return lane_stream(self._prefix, destination, priority)

    def grouped(self, writer: Any, destination: str) -> None:
        """
        Mark a queue as having had a grouped message (field ``g`` of its mode
        hash, and the switch point: :data:`MARK_GROUPED`), once
        per node, before the message's entry: from then on its readers decide
        who gets each entry (:mod:`.dispatch`).
        """
        key = "g" + destination
        if key not in self._marked:
            self._marked.add(key)
            stream = queue_stream(self._prefix, destination)
            mode = mode_key(self._prefix, destination)
            writer.command("EVALSHA", MARK_GROUPED, 2, mode, stream)
