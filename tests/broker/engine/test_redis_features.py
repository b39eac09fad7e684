"""
The redis engine's scheduled and retained messages, without Redis: the job
and value formats the scripts read and write, when a node looks for due jobs,
and how a node's copy of the retained messages follows the notices
(docs/design/cluster.md, "Scheduled delivery" and "Retained messages").
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from twisted.internet.task import Clock

from stompbroker.broker.engine.redis.codec import encode
from stompbroker.broker.engine.redis.control import ControlChannel, pick_waiting
from stompbroker.broker.engine.redis.keys import Keys
from stompbroker.broker.engine.redis.retained import ClusterRetained, order_loaded
from stompbroker.broker.engine.redis.scheduling import (
    POLL_INTERVAL,
    SETTLE,
    ClusterScheduling,
    pack_job,
    unpack_job,
)
from stompbroker.broker.features.schedule_rules import Schedule
from stompbroker.protocol.message import Message
from tests.support.queue_scripts import RecordingWriter


class FakeEngine:
    """What the two parts read of the engine: names, clock, node, writer state."""

    def __init__(self) -> None:
        self.names = Keys("p")
        self.clock = Clock()
        self.node_timeout = 2.0

        class Writer:
            connected = True

        self.writer = Writer()


def message(destination: str, body: bytes = b"x", message_id: str = "n-1") -> Message:
    return Message(destination, message_id, (("k", "v"),), body)


def test_a_job_keeps_its_schedule_and_message_through_the_hash() -> None:
    """What pack_job writes, unpack_job reads back: the state line, then the message."""
    packed = pack_job("node", message("/queue/q", b"line\nbreak"), Schedule(5, 200, -1))
    assert packed.startswith(b"200 -1 0 0 0\n")
    state = unpack_job(packed)
    assert (state.period, state.remaining, state.fired, state.done, state.flying) == (
        200,
        -1,
        0,
        False,
        0,
    )
    assert (state.message.destination, state.message.body) == ("/queue/q", b"line\nbreak")


def test_only_the_latest_delivery_of_a_done_job_is_its_last() -> None:
    """A done job: its latest delivery is the last; an earlier one recovered is not."""
    value = b"0 0 3 1 2\n" + encode("node", message("/topic/t"))
    state = unpack_job(value)
    assert (state.fired, state.done, state.flying) == (3, True, 2)
    assert state.is_last(3) and not state.is_last(2)


def test_a_notice_sets_the_timer_and_a_later_one_keeps_it() -> None:
    """A node looks when the earliest announced job is due, never later than it must."""
    engine = FakeEngine()
    scheduling = ClusterScheduling(engine, lambda entry: None)
    scheduling._running = True
    scheduling.notice(b"500")
    assert [call.getTime() for call in engine.clock.getDelayedCalls()] == [0.5]
    scheduling.notice(b"900")
    assert [call.getTime() for call in engine.clock.getDelayedCalls()] == [0.5]
    scheduling.notice(b"100")
    assert [call.getTime() for call in engine.clock.getDelayedCalls()] == [0.1]


def test_a_malformed_notice_is_ignored() -> None:
    """A notice that is not a number of ms sets no timer."""
    engine = FakeEngine()
    scheduling = ClusterScheduling(engine, lambda entry: None)
    scheduling._running = True
    scheduling.notice(b"soon")
    assert engine.clock.getDelayedCalls() == []


def test_a_stopped_node_looks_no_more() -> None:
    """After stop, no notice sets a timer, and the one set is cancelled."""
    engine = FakeEngine()
    scheduling = ClusterScheduling(engine, lambda entry: None)
    scheduling._running = True
    scheduling.notice(str(int(POLL_INTERVAL * 1000)).encode())
    scheduling.stop()
    scheduling.notice(b"10")
    assert engine.clock.getDelayedCalls() == []


def stored(sequence: int, msg: Message) -> bytes:
    return str(sequence).encode() + b"\n" + encode("node", msg)


def test_the_hash_is_read_oldest_retained_first() -> None:
    """order_loaded sorts by the sequence the SET script gave, and skips the counter."""
    fields = {
        b"#seq": b"7",
        b"topic/b": stored(7, message("/topic/b", b"b")),
        b"topic/a": stored(3, message("/topic/a", b"a")),
    }
    assert [m.body for m in order_loaded(fields)] == [b"a", b"b"]


def notice(action: bytes, msg: Message) -> bytes:
    return action + encode("other", msg)


def test_the_copy_follows_notices_in_their_order() -> None:
    """A set then a remove of one topic leaves nothing; a set of another stays."""
    retained = ClusterRetained(FakeEngine())
    retained.notice(notice(b"s", message("/topic/a", b"1")))
    retained.notice(notice(b"s", message("/topic/b", b"2")))
    retained.notice(notice(b"r", message("/topic/a", b"")))
    assert [m.body for m in retained.copies("/topic/*", None)] == [b"2"]
    assert all(m.headers[-1] == ("retained", "true") for m in retained.copies("/topic/b", None))


def test_a_reading_of_the_hash_older_than_a_notice_is_dropped() -> None:
    """A load sent before a notice arrived would undo it: it is not applied."""
    retained = ClusterRetained(FakeEngine())
    retained.notice(notice(b"s", message("/topic/a", b"new")))
    retained._loaded({b"topic/a": stored(1, message("/topic/a", b"old"))}, changes=0)
    assert [m.body for m in retained.copies("/topic/a", None)] == [b"new"]
    retained._loaded({b"topic/c": stored(1, message("/topic/c", b"c"))}, changes=1)
    assert [m.body for m in retained.copies("/topic/*", None)] == [b"c"]


def test_an_expired_value_is_not_loaded() -> None:
    """A retained message whose expiry passed is left out of the copy."""
    engine: Any = FakeEngine()
    engine.clock.advance(100)
    retained = ClusterRetained(engine)
    expired = Message("/topic/a", "n-1", (), b"gone", 50.0)
    retained._loaded([b"topic/a", stored(1, expired)], changes=0)
    assert retained.copies("/topic/a", None) == []


def test_what_waits_is_what_no_live_node_handed_out() -> None:
    """
    Entries nobody holds, a dead node holds, or a node read ahead wait; those a
    live node handed to a consumer, or a node that did not answer holds, do not.
    """
    entries = [(f"{n}-0".encode(), message("/queue/q", message_id=f"m{n}")) for n in range(5)]
    holders = {b"1-0": "dead", b"2-0": "live", b"3-0": "live", b"4-0": "silent"}
    kept = pick_waiting(entries, holders, {"live": {"m3"}}, {"dead"})
    assert [entry_id for entry_id, _ in kept] == [b"0-0", b"1-0", b"3-0"]


class Recorder:
    """A writer that records the commands it is given."""

    connected = True

    def __init__(self) -> None:
        self.commands: list[tuple[Any, ...]] = []

    def command(self, *args: Any) -> None:
        self.commands.append(args)


def test_a_node_answers_a_request_with_what_it_read_ahead() -> None:
    """The answer goes to the asker's channel, with the ids of the queue's pending messages."""
    engine: Any = FakeEngine()
    engine.ids = type("Ids", (), {"node": "me"})()
    engine.writer = Recorder()
    engine.queues = {}
    control = ControlChannel(engine)
    request = {"id": "r1", "from": "other", "op": "held", "destination": "/queue/none"}
    control.requested(json.dumps(request).encode())
    ((command, channel, answer),) = engine.writer.commands
    assert (command, channel) == ("PUBLISH", "p:ctl:other")
    assert json.loads(answer) == {"id": "r1", "node": "me", "ahead": []}
    control.requested(b"not json")
    control.requested(json.dumps({**request, "from": "me"}).encode())
    assert len(engine.writer.commands) == 1


def claimed_once(pause: float) -> tuple[list[Any], list[tuple[Any, ...]]]:
    """Run one claim that gives one delivery, its answer coming ``pause`` s after it was asked."""
    engine: Any = FakeEngine()
    engine.writer = RecordingWriter()
    fired: list[Any] = []
    scheduling = ClusterScheduling(engine, fired.append)

    class Claiming:
        """A client whose one script is CLAIM, answered ``pause`` s later."""

        async def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> list[Any]:
            engine.clock.advance(pause)
            # As CLAIM leaves a job with no repeat: fired once, done, one in flight.
            job = b"0 0 1 1 1\n" + encode("node", message("/queue/q"))
            return [0, -1, b"n-1", 1, job]

    engine.client = Claiming()
    asyncio.run(scheduling._claim())
    return fired, engine.writer.commands


def test_a_claimed_delivery_is_routed_then_its_lease_ended_in_the_same_pipeline() -> None:
    """The claimer routes what it claimed, then ends the leases with one SETTLE script."""
    fired, commands = claimed_once(0.0)
    assert [(entry.key, entry.fired, entry.finished) for entry in fired] == [("n-1", 1, True)]
    assert commands == [("EVALSHA", SETTLE, 2, "p:{sched}:flying", "p:{sched}:jobs", b"n-1", 1)]


def test_a_claim_answered_past_the_lease_routes_nothing() -> None:
    """A node paused past --node-timeout leaves what it claimed to the next claim (once)."""
    fired, commands = claimed_once(FakeEngine().node_timeout)
    assert fired == [] and commands == []
