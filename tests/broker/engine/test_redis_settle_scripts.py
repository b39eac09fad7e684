"""
The scripts that end, give back and claim a shared queue's entries, run on a real
``redis-server`` with a plain redis-py client (docs/design/cluster.md, "A node that was
stopped, not killed", "Liveness and dead nodes"): an entry another node holds is
never ended by this one, and a message's redelivery count goes with its entry.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from stompbroker.broker.engine.redis.codec import decode, encode, encode_entry
from stompbroker.broker.engine.redis.dispatch_scripts import RETURN_NODE
from stompbroker.broker.engine.redis.keys import record_key
from stompbroker.broker.engine.redis.lapse import CLAIM_DEAD, claimed_entries, claimed_records
from stompbroker.broker.engine.redis.liveness import BEAT
from stompbroker.broker.engine.redis.redelivery_records import fold
from stompbroker.broker.engine.redis.settle_scripts import GIVE_BACK, SETTLE
from stompbroker.protocol.message import Message
from tests.support.redis import RedisServer, redis_server  # noqa: F401

STREAM = "t:{q:/queue/a}"
GROUP = "nodes"


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:  # noqa: F811
    connection = redis.Redis(port=redis_server.port)
    connection.flushdb()
    connection.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    yield connection
    connection.close()


def payload(number: int, redeliveries: int = 0) -> bytes:
    message = Message("/queue/a", f"m-{number}", (), b"x", redeliveries=redeliveries)
    return encode("n0", message)


def read_by(client: redis.Redis, node: str, count: int = 3) -> list[bytes]:
    """Add ``count`` entries and let ``node`` read them; :returns: their ids."""
    for number in range(count):
        client.xadd(STREAM, {"m": payload(number)})
    reply = client.xreadgroup(GROUP, node, {STREAM: ">"})
    return [entry_id for entry_id, _ in reply[0][1]]


def owners(client: redis.Redis) -> dict[bytes, str]:
    rows = client.xpending_range(STREAM, GROUP, min="-", max="+", count=100)
    return {row["message_id"]: row["consumer"].decode() for row in rows}


def settle(
    client: redis.Redis, node: str, ids: list[bytes], records: int = 0, epoch: str = "1"
) -> list[bytes]:
    """Run SETTLE as ``node``, which settled ``ids`` under ``epoch``."""
    keys = [STREAM, record_key(node, STREAM), f"t:alive:{node}", "t:{q:/queue/a}:bytes"]
    reply = client.eval(SETTLE, 4, *keys, GROUP, node, records, epoch, *ids)
    return list(reply)


def test_under_the_epoch_the_liveness_key_still_holds_every_entry_is_ended_unasked(
    client: redis.Redis,
) -> None:
    """The key never expired since the epoch began: nobody can have claimed anything."""
    ids = read_by(client, "B")
    client.set("t:alive:B", "4")
    assert settle(client, "B", ids, epoch="4") == []
    assert client.xlen(STREAM) == 0 and owners(client) == {}


def test_under_an_older_epoch_each_entry_is_asked_for(client: redis.Redis) -> None:
    """B lapsed and announced itself again (epoch 5): what it settled under 4 is checked."""
    ids = read_by(client, "B")
    client.xclaim(STREAM, GROUP, "A", 0, [ids[0]])
    client.set("t:alive:B", "5")
    assert settle(client, "B", ids, epoch="4") == [ids[0]]
    assert owners(client) == {ids[0]: "A"}


def test_settling_ends_this_nodes_entries_and_leaves_those_another_node_claimed(
    client: redis.Redis,
) -> None:
    """B's late acknowledgements end nothing that A claimed meanwhile, and say which."""
    ids = read_by(client, "B")
    client.xclaim(STREAM, GROUP, "A", 0, [ids[1]])
    assert settle(client, "B", ids) == [ids[1]]
    assert owners(client) == {ids[1]: "A"}
    assert [entry_id for entry_id, _ in client.xrange(STREAM)] == [ids[1]]


def test_settling_ends_an_entry_pending_to_nobody(client: redis.Redis) -> None:
    """A copy Redis handed out again after a roll-back, or an entry whose XDEL was lost, goes."""
    ids = read_by(client, "B", 2)
    client.xack(STREAM, GROUP, ids[0])
    assert settle(client, "B", ids) == []
    assert client.xlen(STREAM) == 0 and owners(client) == {}


def test_settling_a_stream_that_is_gone_is_no_error(client: redis.Redis) -> None:
    """A queue deleted meanwhile: nothing to end, nothing foreign."""
    ids = read_by(client, "B", 1)
    client.delete(STREAM)
    assert settle(client, "B", ids) == []


def test_settling_removes_the_records_of_the_entries_it_ends(client: redis.Redis) -> None:
    """The redelivery records of ended entries go with them; another node's stay with it."""
    ids = read_by(client, "B", 2)
    hash_key = record_key("B", STREAM)
    client.hset(hash_key, mapping={ids[0]: 2, ids[1]: 5})
    client.xclaim(STREAM, GROUP, "A", 0, [ids[1]])
    assert settle(client, "B", ids, records=1) == [ids[1]]
    assert client.hgetall(hash_key) == {ids[1]: b"5"}


def test_giving_back_adds_again_only_what_this_node_still_holds(client: redis.Redis) -> None:
    """A message another node claimed is not added again: that node delivers it."""
    ids = read_by(client, "B", 2)
    client.xclaim(STREAM, GROUP, "A", 0, [ids[0]])
    keys = [STREAM, record_key("B", STREAM), "t:alive:B"]
    args = [ids[0], STREAM, payload(0, 1), "", 0, ids[1], STREAM, payload(1, 1), "", 0]
    assert client.eval(GIVE_BACK, 3, *keys, GROUP, "B", 0, "1", *args) == [ids[0]]
    entries = client.xrange(STREAM)
    assert [entry_id for entry_id, _ in entries][0] == ids[0]
    assert [decode(fields[b"m"])[1].message_id for _, fields in entries] == ["m-0", "m-1"]
    assert owners(client) == {ids[0]: "A"}


def claim(client: redis.Redis, dead: str, ids: list[bytes]) -> tuple[list, dict]:
    keys = [STREAM, f"t:alive:{dead}", record_key(dead, STREAM)]
    claimed, records = client.eval(CLAIM_DEAD, 3, *keys, GROUP, "C", *ids)
    return claimed_entries(claimed), claimed_records(ids, records)


def test_a_claim_takes_a_dead_nodes_records_with_its_entries(client: redis.Redis) -> None:
    """The counts the dead node kept come back in the claim's one round trip, and leave Redis."""
    ids = read_by(client, "B", 2)
    client.hset(record_key("B", STREAM), ids[1], 3)
    entries, records = claim(client, "B", ids)
    assert [entry_id for entry_id, _ in entries] == ids
    assert records == {ids[1]: 3}
    assert client.exists(record_key("B", STREAM)) == 0
    assert set(owners(client).values()) == {"C"}


def test_no_claim_while_the_nodes_key_lives(client: redis.Redis) -> None:
    """A node back from a lapse keeps its entries and its records."""
    ids = read_by(client, "B", 1)
    client.set("t:alive:B", 1)
    client.hset(record_key("B", STREAM), ids[0], 2)
    assert claim(client, "B", ids) == ([], {})
    assert owners(client) == {ids[0]: "B"}
    assert client.hget(record_key("B", STREAM), ids[0]) == b"2"


def test_a_claim_of_a_node_that_recorded_nothing_has_no_records(client: redis.Redis) -> None:
    ids = read_by(client, "B", 2)
    entries, records = claim(client, "B", ids)
    assert len(entries) == 2 and records == {}


def test_handing_back_a_nodes_own_stream_keeps_the_counts_it_recorded(
    client: redis.Redis,
) -> None:
    """
    RETURN_NODE: a delivered entry goes back with its delivery count, or with one
    more than the node's record (the whole count, less what its payload says).
    """
    own = "t:{q:/queue/a}:node:B"
    client.xgroup_create(own, GROUP, id="0", mkstream=True)
    first = client.xadd(own, {"m": payload(0, redeliveries=1)})
    client.xadd(own, {"m": payload(1)})
    client.xadd(own, {"m": payload(2)})
    client.xreadgroup(GROUP, "B", {own: ">"}, count=2)
    records = record_key("B", own)
    client.hset(records, first, 4)
    assert client.eval(RETURN_NODE, 4, own, STREAM, "t:{q:/queue/a}:bytes", records, GROUP) == 3
    back = [fields for _, fields in client.xrange(STREAM)]
    # 4 recorded, +1 for coming back, less the 1 the payload carries.
    assert back[0][b"r"] == b"4"
    assert back[1][b"r"] == b"1"
    assert b"r" not in back[2]
    assert client.exists(own) == 0 and client.exists(records) == 0


def test_handing_back_a_nodes_own_stream_puts_each_message_in_its_prioritys_lane(
    client: redis.Redis,
) -> None:
    """
    RETURN_NODE with the lanes: a priority 8 message goes back to lane 8 (and its
    byte counter, which exists), a priority 4 one to the queue's stream.
    """
    own = "t:{q:/queue/a}:node:B"
    lanes = [STREAM if p == 4 else f"t:{{q:/queue/a}}:lane:{p}" for p in range(10)]
    counters = [f"{lane}:bytes" for lane in lanes]
    client.set(counters[8], 0)
    high = Message("/queue/a", "n1-8", (("priority", "8"),), b"high")
    high.priority = 8
    client.xadd(own, {"m": encode_entry("n1", high)})
    client.xadd(own, {"m": encode_entry("n1", Message("/queue/a", "n1-4", (), b"plain"))})
    keys = (own, STREAM, counters[4], record_key("B", own))
    assert client.eval(RETURN_NODE, 4, *keys, GROUP, *lanes, *counters) == 2
    [(_, eight)] = client.xrange(lanes[8])
    assert decode(eight[b"m"])[1].message_id == "n1-8"
    [(_, four)] = client.xrange(STREAM)
    assert decode(four[b"m"])[1].message_id == "n1-4"
    assert client.get(counters[8]) == b"4"
    assert not client.exists(counters[4])


def test_folding_puts_the_whole_count_in_the_payload() -> None:
    """What an entry's r field and Redis's delivery count add goes with the payload."""
    fields = {b"m": payload(0, redeliveries=2), b"r": b"1", b"o": b"owner"}
    folded = fold(fields, delivered=3)
    assert set(folded) == {b"m", b"o"} and folded[b"o"] == b"owner"
    assert decode(folded[b"m"])[1].redeliveries == 6


def test_folding_never_counts_below_the_floor() -> None:
    """A dead node's record says more than Redis's count: the record wins."""
    assert decode(fold({b"m": payload(0)}, delivered=1, floor=5)[b"m"])[1].redeliveries == 5
    assert decode(fold({b"m": payload(0)}, delivered=7, floor=5)[b"m"])[1].redeliveries == 7


def test_a_beat_renews_only_the_key_that_holds_its_epoch(client: redis.Redis) -> None:
    """A live key of the beat's epoch gets its full time to live again."""
    client.set("t:alive:B", "3", px=500)
    assert client.eval(BEAT, 1, "t:alive:B", "3", 10000) == b"3"
    assert client.pttl("t:alive:B") > 5000


def test_a_beat_never_makes_an_expired_key_again(client: redis.Redis) -> None:
    """Only the node's announce does, with a new epoch, once it has sorted out its entries."""
    assert client.eval(BEAT, 1, "t:alive:B", "3", 10000) is None
    assert client.exists("t:alive:B") == 0


def test_a_late_beat_of_an_older_epoch_leaves_the_new_one(client: redis.Redis) -> None:
    """A beat queued before a lapse and sent after the node announced epoch 4 renews nothing."""
    client.set("t:alive:B", "4", px=10000)
    assert client.eval(BEAT, 1, "t:alive:B", "3", 10000) == b"4"
    assert client.get("t:alive:B") == b"4"


def test_settling_under_a_byte_limit_counts_out_only_what_it_ends(client: redis.Redis) -> None:
    """SETTLE takes the bodies of the entries it ends off the counter, not those it leaves."""
    ids = read_by(client, "B", 2)
    counter = "t:{q:/queue/a}:bytes"
    client.set(counter, 10)
    client.xclaim(STREAM, GROUP, "A", 0, [ids[1]])
    keys = [STREAM, record_key("B", STREAM), "t:alive:B", counter]
    assert client.eval(SETTLE, 4, *keys, GROUP, "B", 0, "1", *ids) == [ids[1]]
    # Each body is one byte (b"x"): one ended, one left to A.
    assert client.get(counter) == b"9"
    assert owners(client) == {ids[1]: "A"}


def test_what_is_given_back_keeps_its_original_id(client: redis.Redis) -> None:
    """
    An entry added again at the lane's tail carries the id it first had there
    (field ``i``): its own, or the ``i`` it carried from a node's own stream.
    """
    ids = read_by(client, "B", 1)
    own = "t:{q:/queue/a}:node:B"
    client.xgroup_create(own, GROUP, id="0", mkstream=True)
    client.xadd(own, {"m": payload(1), "i": b"1-1"})
    [(_, [(moved, _)])] = client.xreadgroup(GROUP, "B", {own: ">"})
    keys = [STREAM, record_key("B", STREAM), "t:alive:B"]
    client.eval(GIVE_BACK, 3, *keys, GROUP, "B", 0, "1", ids[0], STREAM, payload(0), "", 0)
    keys[0] = own
    client.eval(GIVE_BACK, 3, *keys, GROUP, "B", 0, "1", moved, STREAM, payload(1), "", 0)
    assert [fields[b"i"] for _, fields in client.xrange(STREAM)] == [ids[0], b"1-1"]
