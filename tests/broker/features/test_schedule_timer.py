"""
Scheduled delivery wired into the broker (:mod:`stompbroker.broker.features.schedule_timer` and the
router): held until due on the broker's clock, then routed as if just sent; persistent
ones kept in the store and due at the same time after a restart.  All on ``task.Clock``.
"""

from __future__ import annotations

import pytest

from stompbroker.broker.store.base import ScheduledRecord
from tests.support.broker import EPOCH, World
from tests.support.persistence import PERSISTENT, Setup, send

DELAY = (("AMQ_SCHEDULED_DELAY", "5000"),)


def test_a_delayed_send_to_a_queue_waits_until_due() -> None:
    """AMQ_SCHEDULED_DELAY holds the message for that many ms, then the queue gets it once."""
    world = World()
    reader, producer = world.client(), world.client()
    reader.send_frame("SUBSCRIBE", id="q", destination="/queue/jobs")
    producer.send_frame("SEND", b"later", DELAY, destination="/queue/jobs", receipt="r")
    [receipt] = producer.frames()
    assert receipt.command == "RECEIPT"
    world.clock.advance(4.999)
    assert reader.messages() == []
    world.clock.advance(0.001)
    [message] = reader.messages()
    assert message.body == b"later"
    world.clock.advance(60)
    assert reader.messages() == []


def test_a_fired_message_has_no_scheduling_headers_and_names_its_job() -> None:
    """The MESSAGE drops every scheduling header and carries scheduledJobId, its message-id."""
    world = World()
    reader, producer = world.client(), world.client()
    reader.send_frame("SUBSCRIBE", id="q", destination="/queue/jobs")
    producer.send_frame(
        "SEND",
        b"x",
        (("AMQ_SCHEDULED_DELAY", "10"), ("x-delay", "20"), ("keep", "me")),
        destination="/queue/jobs",
    )
    world.clock.advance(0.02)
    [message] = reader.messages()
    names = [name for name, _ in message.headers]
    assert "AMQ_SCHEDULED_DELAY" not in names and "x-delay" not in names
    assert message.get("keep") == "me"
    assert message.get("scheduledJobId") == message.get("message-id")


def test_x_delay_on_a_topic_reaches_who_subscribes_before_it_fires() -> None:
    """A delayed topic message is routed when due, to the subscriptions there are then."""
    world = World()
    early, producer = world.client(), world.client()
    early.send_frame("SUBSCRIBE", id="t", destination="/topic/news")
    producer.send_frame("SEND", b"n", (("x-delay", "1000"),), destination="/topic/news")
    late = world.client()
    late.send_frame("SUBSCRIBE", id="t", destination="/topic/#")
    assert early.messages() == [] and late.messages() == []
    world.clock.advance(1)
    assert [m.body for m in early.messages()] == [b"n"]
    assert [m.body for m in late.messages()] == [b"n"]


def test_amq_scheduled_time_is_absolute() -> None:
    """AMQ_SCHEDULED_TIME is due at that many ms since the epoch on the broker's clock."""
    world = World()
    reader, producer = world.client(), world.client()
    reader.send_frame("SUBSCRIBE", id="q", destination="/queue/jobs")
    at = (("AMQ_SCHEDULED_TIME", str(int(EPOCH * 1000) + 3000)),)
    producer.send_frame("SEND", b"at", at, destination="/queue/jobs")
    world.clock.advance(2.9)
    assert reader.messages() == []
    world.clock.advance(0.1)
    assert [m.body for m in reader.messages()] == [b"at"]


def test_period_and_repeat_deliver_again_each_with_its_own_id() -> None:
    """REPEAT:2 with PERIOD:1000 is three deliveries a second apart; repeats get new ids."""
    world = World()
    reader, producer = world.client(), world.client()
    reader.send_frame("SUBSCRIBE", id="q", destination="/queue/tick")
    producer.send_frame(
        "SEND",
        b"t",
        (("AMQ_SCHEDULED_PERIOD", "1000"), ("AMQ_SCHEDULED_REPEAT", "2")),
        destination="/queue/tick",
    )
    fired = []
    for _ in range(5):
        world.clock.advance(1)
        fired.extend(reader.messages())
    assert len(fired) == 3
    assert len({m.get("message-id") for m in fired}) == 3
    assert {m.get("scheduledJobId") for m in fired} == {fired[0].get("message-id")}
    assert len(world.broker.router.scheduling or ()) == 0


@pytest.mark.parametrize(
    "headers, command_message",
    [
        ((("AMQ_SCHEDULED_DELAY", "soon"),), "invalid AMQ_SCHEDULED_DELAY header"),
        ((("x-delay", "1.5"),), "invalid x-delay header"),
        ((("AMQ_SCHEDULED_REPEAT", "3"),), "AMQ_SCHEDULED_REPEAT without AMQ_SCHEDULED_PERIOD"),
        ((("AMQ_SCHEDULED_REPEAT", "-2"), ("AMQ_SCHEDULED_PERIOD", "5")), "invalid"),
        ((("AMQ_SCHEDULED_CRON", "* * * * *"),), "AMQ_SCHEDULED_CRON is not supported"),
    ],
)
def test_a_bad_scheduling_header_is_an_error_and_nothing_is_sent(
    headers: tuple[tuple[str, str], ...], command_message: str
) -> None:
    """A bad value is an ERROR naming the header; nothing is scheduled or routed."""
    world = World()
    producer = world.client()
    producer.send_frame("SEND", b"x", headers, destination="/queue/jobs", receipt="r")
    [error] = producer.frames()
    assert error.command == "ERROR"
    assert command_message in (error.get("message") or "")
    world.clock.advance(3600)
    assert world.broker.engine.depth("/queue/jobs") == 0
    assert len(world.broker.router.scheduling or ()) == 0


def test_a_delay_of_zero_routes_at_once() -> None:
    """AMQ_SCHEDULED_DELAY:0 (or less) is no delay: the message is routed as it comes."""
    world = World()
    producer = world.client()
    producer.send_frame("SEND", b"x", (("AMQ_SCHEDULED_DELAY", "0"),), destination="/queue/q")
    assert world.broker.engine.depth("/queue/q") == 1


def test_a_transacted_scheduled_send_is_scheduled_at_commit_and_not_after_abort() -> None:
    """In a transaction the delay counts from COMMIT; an aborted one never fires."""
    world = World()
    reader, producer = world.client(), world.client()
    reader.send_frame("SUBSCRIBE", id="q", destination="/queue/jobs")
    producer.send_frame("BEGIN", transaction="t1")
    producer.send_frame("SEND", b"kept", DELAY, destination="/queue/jobs", transaction="t1")
    producer.send_frame("BEGIN", transaction="t2")
    producer.send_frame("SEND", b"gone", DELAY, destination="/queue/jobs", transaction="t2")
    world.clock.advance(10)
    producer.send_frame("COMMIT", transaction="t1")
    producer.send_frame("ABORT", transaction="t2")
    world.clock.advance(4.9)
    assert reader.messages() == []
    world.clock.advance(0.1)
    assert [m.body for m in reader.messages()] == [b"kept"]
    world.clock.advance(60)
    assert reader.messages() == []


def test_a_scheduled_send_to_a_temporary_queue_reaches_the_senders_queue() -> None:
    """A delayed SEND to /temp-queue/x lands, when due, in the sender's own temporary queue."""
    world = World()
    client = world.client()
    client.send_frame("SUBSCRIBE", id="r", destination="/temp-queue/x")
    client.send_frame("SEND", b"self", (("x-delay", "500"),), destination="/temp-queue/x")
    assert client.frames() == []
    world.clock.advance(0.5)
    [message] = client.messages()
    assert message.body == b"self"


def test_a_plain_send_never_reaches_the_scheduler() -> None:
    """Without a scheduling header a SEND is routed at once and nothing is scheduled."""
    world = World()
    producer = world.client()
    producer.send_frame("SEND", b"x", destination="/queue/q", priority="7")
    assert world.broker.engine.depth("/queue/q") == 1
    assert len(world.broker.router.scheduling or ()) == 0
    assert not any(call.active() for call in world.clock.getDelayedCalls())


def test_stopping_the_broker_cancels_the_timer() -> None:
    """The one scheduling timer goes when the broker stops, so no timer outlives it."""
    world = World()
    world.broker.startService()
    producer = world.client()
    producer.send_frame("SEND", b"x", DELAY, destination="/queue/q")
    armed = [call for call in world.clock.getDelayedCalls() if call.active()]
    assert armed
    world.broker.stopService()
    assert not any(call.active() for call in armed)


# -- persistent scheduled messages ------------------------------------------------------


def test_a_persistent_scheduled_message_is_kept_and_the_receipt_waits(setup: Setup) -> None:
    """It is filed among the scheduled, not in its queue, and send() waits for the filing."""
    broker = setup.broker()
    [waiting] = send(broker, "/queue/jobs", b"s", headers=PERSISTENT + DELAY)
    assert waiting is not None
    setup.settle()
    state = setup.stored()
    assert [(r.destination, r.due, r.body) for r in state.scheduled] == [
        ("/queue/jobs", int(setup.clock.seconds() * 1000) + 5000, b"s")
    ]
    assert state.queues == {}


def test_a_persistent_scheduled_message_is_due_at_the_same_time_after_a_restart(
    setup: Setup,
) -> None:
    """After a crash 2 s into a 5 s delay, it fires 3 s after the restart, then leaves the store."""
    broker = setup.broker()
    send(broker, "/queue/jobs", b"s", headers=PERSISTENT + DELAY)
    setup.clock.advance(2)
    broker = setup.restart()
    setup.clock.advance(2.9)
    assert broker.engine.depth("/queue/jobs") == 0
    setup.clock.advance(0.1)
    assert [m.body for m in broker.engine.queues["/queue/jobs"].pending] == [b"s"]
    setup.settle()
    state = setup.stored()
    assert state.scheduled == ()
    assert [m.body for m in state.queues["/queue/jobs"]] == [b"s"]


def test_one_due_while_the_broker_was_down_fires_at_once(setup: Setup) -> None:
    """A persistent message whose time passed while the broker was down is sent at start."""
    broker = setup.broker()
    send(broker, "/queue/jobs", b"s", headers=PERSISTENT + DELAY)
    broker = setup.restart(down=60)
    setup.clock.advance(0)
    assert broker.engine.depth("/queue/jobs") == 1


def test_a_repeating_persistent_message_keeps_its_progress(setup: Setup) -> None:
    """After each delivery the store holds the next due time and what remains."""
    broker = setup.broker()
    start = int(setup.clock.seconds() * 1000)
    message_id = broker.publish(
        "/queue/tick",
        b"t",
        PERSISTENT + (("AMQ_SCHEDULED_PERIOD", "1000"), ("AMQ_SCHEDULED_REPEAT", "2")),
    ).message_id
    setup.settle()
    setup.clock.advance(1)
    setup.settle()
    [record] = setup.stored().scheduled
    assert record == ScheduledRecord(
        message_id,
        "/queue/tick",
        record.headers,
        b"t",
        start + 2000,
        1000,
        0,
        2,
    )
    setup.clock.advance(1)
    setup.settle()
    assert setup.stored().scheduled == ()
    assert broker.engine.depth("/queue/tick") == 3


def test_a_time_to_live_counts_from_the_delivery() -> None:
    """expiration counts from when the message fires, not from the SEND that scheduled it."""
    world = World()
    producer = world.client()
    producer.send_frame("SEND", b"x", DELAY + (("expiration", "1000"),), destination="/queue/ttl")
    world.clock.advance(5)
    [waiting] = world.broker.engine.queues["/queue/ttl"].pending
    assert waiting.expires == world.clock.seconds() + 1
