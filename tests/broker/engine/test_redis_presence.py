"""
The redis engine's part in presence, without Redis: the entry as the hash and
the notices hold it, the scripts a node's joins and leaves send, and how the
other nodes' notices reach the node's copy (docs/cluster.md, "Presence").
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from twisted.internet.task import Clock

from stompbroker.broker.engine.redis.cluster_presence import (
    JOIN,
    LEAVE,
    ClusterPresence,
    decode_entry,
    encode_entry,
)
from stompbroker.broker.engine.redis.keys import Keys
from stompbroker.broker.features.presence import SUBSCRIPTIONS, Presence, Present
from tests.support.broker import FakeConnection, Inbox


class Writer:
    """Keeps the commands it is given."""

    def __init__(self) -> None:
        self.commands: list[tuple[Any, ...]] = []

    def command(self, *args: Any) -> None:
        self.commands.append(args)


class FakeEngine:
    def __init__(self) -> None:
        self.names = Keys("p")
        self.writer = Writer()


def node(name: str = "here") -> tuple[Presence, ClusterPresence, FakeEngine]:
    numbers = itertools.count(1)
    presence = Presence(name, Clock(), lambda: f"id-{next(numbers)}")
    engine = FakeEngine()
    return presence, ClusterPresence(engine, presence), engine


def test_an_entry_goes_through_the_hash_unchanged() -> None:
    for entry in (
        Present("/topic/a.b", "n1", "session-n1-3", "sub:1", "alice", 1700000000.25),
        Present("/queue/q", "n1", "session-n1-4", "0", None, 5.0),
    ):
        assert decode_entry(encode_entry(entry)) == entry


@pytest.mark.parametrize("data", [b"", b"{}", b"[1, 2]", b'["/t", "n", "c", "s", 5, 1.0]'])
def test_anything_else_is_not_an_entry(data: bytes) -> None:
    with pytest.raises(ValueError, match="not a presence entry"):
        decode_entry(data)


def test_this_nodes_joins_and_leaves_are_scripts_on_its_hash_and_channel() -> None:
    presence, shared, engine = node()
    assert presence.share is shared and shared.channel == "p:presence"
    subscriber = Inbox("/topic/room", "auto", connection=FakeConnection("c1"))
    presence.join(subscriber)
    presence.leave(subscriber)
    [(_, join, *join_args), (_, leave, *leave_args)] = engine.writer.commands
    entry = decode_entry(join_args[-1])
    assert (join, leave) == (JOIN, LEAVE)
    assert join_args[:4] == [1, "p:presence:/topic/room", "p:presence", "here:c1:s"]
    assert leave_args == join_args
    assert entry.node == "here" and entry.destination == "/topic/room"


def test_notices_of_other_nodes_are_applied_and_its_own_ignored() -> None:
    presence, shared, _ = node()
    watcher = Inbox("/topic/room", "auto", connection=FakeConnection("c1"))
    presence.join(watcher, SUBSCRIPTIONS)
    other = Present("/topic/room", "there", "c9", "s", "bob", 1.0)
    mine = Present("/topic/room", "here", "c2", "s", "me", 1.0)
    shared.notice(b"j" + encode_entry(other))
    shared.notice(b"j" + encode_entry(mine))  # applied when it was made
    shared.notice(b"jnonsense")  # logged and ignored
    assert [e.connection for e in presence.subscribers("/topic/room")] == ["c1", "c9"]
    shared.notice(b"l" + encode_entry(other))
    kinds = [dict(m.headers)["stompbroker-presence"] for m in watcher.received]
    assert kinds == ["join", "leave"]
    assert presence.occupancy() == {"/topic/room": 1}
