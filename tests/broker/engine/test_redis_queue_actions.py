"""
The pure parts of the management across nodes (docs/cluster.md, "Management
across nodes"): a node giving back its read-ahead and holding its reading, the
control requests that ask it to, and what a move makes of a message.  The
scripts and the round trips are the integration tests'
(tests/integration/test_cluster_management.py).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import Clock

from stompbroker.broker.engine.redis.codec import encode
from stompbroker.broker.engine.redis.control import (
    DELETED,
    GIVE_BACK,
    HELD,
    HOLD,
    RESUME,
    ControlChannel,
)
from stompbroker.broker.engine.redis.keys import Keys
from stompbroker.broker.engine.redis.lanes import LaneMarks
from stompbroker.broker.engine.redis.queue_actions import new_message
from stompbroker.broker.engine.redis.settle_scripts import GIVE_BACK as GIVE_BACK_SCRIPT
from stompbroker.broker.engine.redis.shared_limits import SharedLimits
from stompbroker.broker.engine.redis.stream_queue import StreamQueue
from stompbroker.broker.engine.shared_queues import Acted
from stompbroker.broker.features.policies import Policies, parse_policy
from stompbroker.broker.flow.traffic import Traffic
from stompbroker.broker.queueing.delivery import DeliveryCounters, DeliveryPolicy
from stompbroker.protocol.message import Message


class Recorder:
    """The engine's writer: the commands queued, in order."""

    connected = True

    def __init__(self) -> None:
        self.commands: list[tuple[Any, ...]] = []

    def command(self, *args: Any) -> None:
        self.commands.append(args)

    def command_waited(self, *args: Any) -> Deferred[Any]:
        """A script whose answer is waited for: nothing foreign (queue_settling.GIVE_BACK)."""
        self.commands.append(args)
        return succeed([])


class FakeEngine:
    """What a queue handle and the control channel read of the engine."""

    def __init__(self) -> None:
        self.names = Keys("p")
        self.clock = Clock()
        self.policy = DeliveryPolicy()
        self.counters = DeliveryCounters()
        self.traffic = Traffic()
        self.ids = type("Ids", (), {"node": "me"})()
        self.writer = Recorder()
        self.liveness = type("Liveness", (), {"key": "p:alive:me", "epoch": "1"})()
        self.dead_letters = type("DeadLetters", (), {"dead_letter": lambda *_: None})()
        self.queues: dict[str, Any] = {}
        self.policies = Policies()
        self.limits = SharedLimits(self.policies, "DLQ.")
        self.deleted: list[Any] = []
        self.loop: asyncio.AbstractEventLoop | None = None

    def delete_queue(self, queue: Any) -> None:
        del self.queues[queue.destination]
        self.deleted.append(queue)
        queue.close()


class Subscriber:
    ack_mode = "client"

    def deliver(self, message: Message) -> None:
        """Taken."""


def read_ahead(engine: FakeEngine, destination: str, count: int) -> StreamQueue:
    """:returns: a queue handle holding ``count`` messages read and not handed out."""
    queue = StreamQueue(destination, engine)
    engine.queues[destination] = queue
    queue.take(
        [(f"1-{index}".encode(), {b"m": _payload(destination, index)}) for index in range(count)]
    )
    return queue


STREAM = "p:{q:/queue/r}"


def _payload(destination: str, index: int) -> bytes:
    return encode("other", Message(destination, f"n-{index}", (), b"x"))


def test_giving_back_puts_the_read_ahead_at_the_tail_and_holds_the_reading() -> None:
    """
    Each message read ahead is added again and its old entry ended; the queue
    reads nothing until it is told to resume, or until the hold runs out.
    """
    engine = FakeEngine()
    queue = read_ahead(engine, "/queue/r", 2)
    given = queue.give_back_for(HOLD)
    assert [message.message_id for message in given] == ["n-0", "n-1"]
    assert not queue.pending
    # One script adds each again and ends its old entry, if it is still this node's.
    [(kind, script, _, stream, _, _, group, node, _, _, *given)] = engine.writer.commands
    assert (kind, script, stream, group, node) == (
        "EVALSHA",
        GIVE_BACK_SCRIPT,
        STREAM,
        "nodes",
        "me",
    )
    assert given[0::5] == [b"1-0", b"1-1"] and given[1::5] == [STREAM, STREAM]
    assert given[3::5] == ["", ""]  # no byte count to count them into
    queue.local.add_consumer(Subscriber(), 5, 0)
    assert queue.room() == 0
    queue.resume()
    assert queue.room() == 5
    queue.give_back_for(HOLD)
    engine.clock.advance(HOLD)
    assert queue.room() == 5


def give_back_requested(engine: FakeEngine, control: ControlChannel, request: Any) -> None:
    """Take a give-back request, which answers from a task (it waits for a read under way)."""

    async def main() -> None:
        engine.loop = asyncio.get_running_loop()
        control.requested(json.dumps(request).encode())
        current = asyncio.current_task()
        await asyncio.gather(*(task for task in asyncio.all_tasks() if task is not current))

    asyncio.run(main())


def test_a_give_back_request_is_answered_after_the_give_back() -> None:
    """The answer names what was given back and comes after its writes; a resume needs none."""
    engine = FakeEngine()
    queue = read_ahead(engine, "/queue/q", 1)
    control = ControlChannel(engine)
    request = {"id": "r1", "from": "asker", "op": GIVE_BACK, "destination": "/queue/q"}
    give_back_requested(engine, control, request)
    *writes, (command, channel, answer) = engine.writer.commands
    assert [write[:2] for write in writes] == [("EVALSHA", GIVE_BACK_SCRIPT)]
    assert (command, channel) == ("PUBLISH", "p:ctl:asker")
    assert json.loads(answer) == {"id": "r1", "node": "me", "ahead": ["n-0"]}
    assert queue.room() == 0
    queue.local.add_consumer(Subscriber(), 3, 0)
    assert queue.room() == 0
    control.requested(json.dumps({**request, "op": RESUME}).encode())
    assert queue.room() == 3
    assert len(engine.writer.commands) == 2


def test_a_request_of_an_unknown_kind_is_ignored() -> None:
    engine = FakeEngine()
    control = ControlChannel(engine)
    control.requested(json.dumps({"id": "r", "from": "x", "op": "drop", "destination": "/queue/q"}))
    assert engine.writer.commands == []


def test_resume_is_told_to_every_node_on_the_requests_channel() -> None:
    engine = FakeEngine()
    ControlChannel(engine).tell(RESUME, "/queue/q")
    ((command, channel, request),) = engine.writer.commands
    assert (command, channel) == ("PUBLISH", "p:ctl")
    assert {key: value for key, value in json.loads(request).items() if key != "id"} == {
        "from": "me",
        "op": RESUME,
        "destination": "/queue/q",
    }


def test_a_moved_message_is_new_and_keeps_what_it_carries() -> None:
    old = Message("/queue/a", "n-1", (("k", "v"),), b"body", 5.0, 3, True, 7)
    new = new_message(old, "/queue/b", (("k", "w"),), "n-9")
    assert (new.destination, new.message_id, new.headers, new.body) == (
        "/queue/b",
        "n-9",
        (("k", "w"),),
        b"body",
    )
    assert (new.expires, new.redeliveries, new.persistent, new.priority) == (5.0, 0, True, 7)


def test_an_answer_is_complete_when_no_node_is_missing() -> None:
    assert Acted(3, "a").complete
    assert not Acted(3, "a", ("b",)).complete


def test_a_deleted_notice_drops_an_idle_handle_and_resumes_a_consumed_one() -> None:
    """
    Another node deleted the queue: a handle with no consumer here is dropped
    (what it read was deleted with the stream: nothing is given back); one a
    consumer here uses reads on, as after a purge.
    """
    engine = FakeEngine()
    idle = read_ahead(engine, "/queue/idle", 2)
    idle.give_back_for(HOLD)
    engine.writer.commands.clear()
    consumed = read_ahead(engine, "/queue/used", 0)
    consumed.local.add_consumer(Subscriber(), 4, 0)
    consumed.give_back_for(HOLD)
    control = ControlChannel(engine)
    for destination in ("/queue/idle", "/queue/used"):
        notice = {"id": "r", "from": "asker", "op": DELETED, "destination": destination}
        control.requested(json.dumps(notice).encode())
    assert engine.deleted == [idle]
    assert "/queue/idle" not in engine.queues
    assert not [command for command in engine.writer.commands if command[0] == "XADD"]
    assert consumed.room() == 4


def test_a_give_back_from_the_nodes_own_stream_counts_the_bytes_in_again() -> None:
    """
    Under max-length-bytes, an entry a deciding node moved to this node's own
    stream was counted out of its lane: given back, it is counted in.
    """
    engine = FakeEngine()
    policy = parse_policy("b", {"pattern": "b.>", "max-length-bytes": 100})
    engine.policies.set(policy, announce=False)
    queue = StreamQueue("/queue/b.q", engine)
    engine.queues["/queue/b.q"] = queue
    own = "p:{q:/queue/b.q}:node:me"
    queue.take([(b"1-0", {b"m": _payload("/queue/b.q", 0)})], stream=own)
    queue.take([(b"2-0", {b"m": _payload("/queue/b.q", 1)})])
    queue.give_back_for(HOLD)
    # In the give-back script of each stream: the counter each entry counts into, and its size.
    scripts = [command for command in engine.writer.commands if command[1] == GIVE_BACK_SCRIPT]
    counted = [(script[3], list(script[10:][3::5]), list(script[10:][4::5])) for script in scripts]
    assert sorted(counted) == [
        ("p:{q:/queue/b.q}", [""], [1]),
        (own, ["p:{q:/queue/b.q}:bytes"], [1]),
    ]


def test_what_a_deciding_node_holds_for_no_consumer_waits_and_goes_back_to_its_lane() -> None:
    """
    An entry of lane 9 the deciding node read and no consumer accepts is
    named among what waits, and given back to lane 9, not to the queue's stream.
    """
    engine = FakeEngine()
    engine.lanes = LaneMarks("p")
    queue = StreamQueue("/queue/h", engine)
    engine.queues["/queue/h"] = queue
    message = Message("/queue/h", "h-9", (("priority", "9"),), b"x", priority=9)
    queue._cluster.held.append(("p:{q:/queue/h}:lane:9", b"1-0", encode("other", message)))
    control = ControlChannel(engine)
    request = {"id": "r1", "from": "asker", "op": HELD, "destination": "/queue/h"}
    control.requested(json.dumps(request).encode())
    assert json.loads(engine.writer.commands[-1][2])["ahead"] == ["h-9"]
    engine.writer.commands.clear()
    give_back_requested(engine, control, {**request, "op": GIVE_BACK})
    *writes, (_, _, answer) = engine.writer.commands
    assert json.loads(answer)["ahead"] == ["h-9"]
    # The lane's mark, then one script that adds it to lane 9 again and ends its entry.
    [mark, (kind, script, _, stream, *rest)] = writes
    assert mark[:2] == ("HSET", "p:{q:/queue/h}:mode")
    assert (kind, script, stream) == ("EVALSHA", GIVE_BACK_SCRIPT, "p:{q:/queue/h}:lane:9")
    assert rest[6:8] == [b"1-0", "p:{q:/queue/h}:lane:9"]
    assert queue.undecided == []


def test_what_a_node_read_of_the_returned_stream_goes_back_to_its_tail_not_to_a_lane() -> None:
    """
    A grouped queue's returned stream is read before any lane: an entry of it
    read ahead, or held for no consumer, goes back there (uncounted in any byte
    count), so it still comes before its group's newer messages.
    """
    engine = FakeEngine()
    engine.lanes = LaneMarks("p")
    policy = parse_policy("g", {"pattern": "g.>", "max-length-bytes": 100})
    engine.policies.set(policy, announce=False)
    queue = StreamQueue("/queue/g.q", engine)
    engine.queues["/queue/g.q"] = queue
    returned = "p:{q:/queue/g.q}:returned"
    queue.take([(b"1-0", {b"m": _payload("/queue/g.q", 0)})], stream=returned)
    message = Message("/queue/g.q", "g-9", (("priority", "9"),), b"x", priority=9)
    queue._cluster.held.append((returned, b"2-0", encode("other", message)))
    given = queue.give_back_for(HOLD)
    assert [message.message_id for message in given] == ["n-0", "g-9"]
    scripts = [command for command in engine.writer.commands if command[1] == GIVE_BACK_SCRIPT]
    # Per script: the stream it ends entries of, then per entry its id, target and counter.
    backs = [(s[3], list(s[10:][0::5]), list(s[10:][1::5]), list(s[10:][3::5])) for s in scripts]
    assert backs == [
        (returned, [b"1-0"], [returned], [""]),
        (returned, [b"2-0"], [returned], [""]),
    ]
