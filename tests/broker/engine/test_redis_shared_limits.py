"""
The redis engine's limits on shared queue streams (:mod:`.shared_limits`):
which policies apply, the commands they add, and the ERROR of a full queue.
No Redis: a writer that records commands and answers as told.
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.defer import Deferred, succeed

from stompbroker.broker.engine.redis.codec import decode, encode
from stompbroker.broker.engine.redis.keys import Keys, byte_counter
from stompbroker.broker.engine.redis.shared_bytes import ADD_SIZED
from stompbroker.broker.engine.redis.shared_limits import (
    ADD_DEAD_LETTERING,
    ADD_UNLESS_FULL,
    SharedLimits,
)
from stompbroker.broker.features.policies import Policies, parse_policy
from stompbroker.broker.flow.traffic import Traffic
from stompbroker.broker.queueing.delivery import DeliveryCounters
from stompbroker.broker.routing.ids import Ids
from stompbroker.protocol.errors import LimitExceeded
from stompbroker.protocol.message import Message


class Writer:
    """Records commands; a waited one answers with :attr:`reply`."""

    def __init__(self, reply: Any = b"1-0") -> None:
        self.reply = reply
        self.sent: list[tuple[Any, ...]] = []
        self.waited: list[tuple[tuple[Any, ...], bool]] = []

    def command(self, *args: Any) -> None:
        self.sent.append(args)

    def command_waited(self, *args: Any, replicated: bool = False) -> Deferred[Any]:
        self.waited.append((args, replicated))
        return succeed(self.reply)


class QueueNames:
    """Records the queues the cluster's set of names is told of."""

    def __init__(self) -> None:
        self.named: list[str] = []

    def met(self, destination: str) -> None:
        self.named.append(destination)


class Engine:
    """What :meth:`SharedLimit.add` uses of the redis engine."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        self.names = Keys("p")
        self.ids = Ids("n1")
        self.counters = DeliveryCounters()
        self.traffic = Traffic()
        self.queue_names = QueueNames()


def limits(**definition: Any) -> SharedLimits:
    policies = Policies()
    policies.set(parse_policy("cap", {"pattern": "cap.>", **definition}), announce=False)
    return SharedLimits(policies, "DLQ.")


def message(expires: float = 0.0) -> Message:
    return Message("/queue/cap.a", "m-1", (("k", "v"),), b"body", expires)


def test_a_queue_no_policy_limits_has_no_limit() -> None:
    found = limits(prefetch=3)
    assert found.of("/queue/cap.a") is None
    assert found.of("/queue/other") is None


def test_message_ttl_gives_the_sooner_expiry() -> None:
    limit = limits(**{"message-ttl": 2000}).of("/queue/cap.a")
    assert limit is not None and limit.max_length is None
    fresh = message()
    limit.stamp(fresh, 100.0)
    assert fresh.expires == 102.0
    sooner = message(expires=101.0)
    limit.stamp(sooner, 100.0)
    assert sooner.expires == 101.0
    writer = Writer()
    assert limit.add(Engine(writer), fresh, "s", b"p", waited=False) is None
    assert writer.sent == [("XADD", "s", "*", "m", b"p")]


@pytest.mark.parametrize("waited", [True, False])
def test_dead_letter_overflow_moves_the_head_in_one_script(waited: bool) -> None:
    limit = limits(**{"max-length": 2, "overflow": "dead-letter"}).of("/queue/cap.a")
    assert limit is not None and limit.dead_letter == "/queue/DLQ.cap.a"
    engine = Engine(Writer(reply=1))
    added = limit.add(engine, message(), "s", b"p", waited=waited)
    assert (added is not None) == waited
    [(args, replicated)] = engine.writer.waited
    assert replicated == waited
    assert args == (
        "EVALSHA",
        ADD_DEAD_LETTERING,
        3,
        "s",
        engine.names.queue("/queue/DLQ.cap.a"),
        byte_counter(engine.names.queue("/queue/DLQ.cap.a")),
        2,
        b"p",
        "/queue/DLQ.cap.a",
        "n1-1",
        "maxlen",
    )
    assert engine.queue_names.named == ["/queue/DLQ.cap.a"]
    assert engine.counters.dead_lettered == 1


def test_a_dead_letter_queue_drops_its_overflow() -> None:
    limit = limits(**{"max-length": 2, "overflow": "dead-letter"}).of("/queue/DLQ.cap.a")
    assert limit is None
    policies = Policies()
    policies.set(
        parse_policy("dlq", {"pattern": "DLQ.>", "max-length": 2, "overflow": "dead-letter"}),
        announce=False,
    )
    limit = SharedLimits(policies, "DLQ.").of("/queue/DLQ.cap.a")
    assert limit is not None and limit.dead_letter is None
    writer = Writer()
    limit.add(Engine(writer), message(), "s", b"p", waited=False)
    assert writer.sent == [("XADD", "s", "MAXLEN", 2, "*", "m", b"p")]


def test_a_marked_entry_decodes_as_the_dead_letter() -> None:
    original = Message(
        "/queue/cap.a", "m-1", (("k", "v"), ("dead-letter-reason", "old")), b"body", 5.0, 2, True
    )
    marked = b'D["/queue/DLQ.cap.a","n1-7","maxlen"]\n' + encode("n2", original)
    origin, copy = decode(marked)
    assert origin == "n2"
    assert (copy.destination, copy.message_id, copy.body) == ("/queue/DLQ.cap.a", "n1-7", b"body")
    assert copy.expires == 0.0 and copy.redeliveries == 0 and copy.persistent
    assert copy.headers == (
        ("k", "v"),
        ("original-destination", "/queue/cap.a"),
        ("original-message-id", "m-1"),
        ("dead-letter-reason", "maxlen"),
    )


def test_drop_head_trims_exactly_as_it_adds() -> None:
    limit = limits(**{"max-length": 2}).of("/queue/cap.a")
    assert limit is not None
    writer = Writer()
    assert limit.add(Engine(writer), message(), "s", b"p", waited=False) is None
    assert writer.sent == [("XADD", "s", "MAXLEN", 2, "*", "m", b"p")]
    results: list[Any] = []
    waited = limit.add(Engine(writer), message(), "s", b"p", waited=True)
    assert waited is not None
    waited.addCallback(results.append)
    assert results == [None]
    assert writer.waited == [(("XADD", "s", "MAXLEN", 2, "*", "m", b"p"), True)]


@pytest.mark.parametrize("waited", [True, False])
def test_reject_publish_checks_and_adds_in_one_script(waited: bool) -> None:
    limit = limits(**{"max-length": 2, "overflow": "reject-publish"}).of("/queue/cap.a")
    assert limit is not None
    writer = Writer()
    results: list[Any] = []
    added = limit.add(Engine(writer), message(), "s", b"p", waited=waited)
    assert added is not None
    added.addCallback(results.append)
    assert results == [None]
    assert writer.waited == [(("EVALSHA", ADD_UNLESS_FULL, 1, "s", 2, b"p"), waited)]


def test_a_full_queue_refuses_with_the_limit_and_the_policy() -> None:
    limit = limits(**{"max-length": 2, "overflow": "reject-publish"}).of("/queue/cap.a")
    assert limit is not None
    failures: list[Any] = []
    added = limit.add(Engine(Writer(reply=0)), message(), "s", b"p", waited=True)
    assert added is not None
    added.addErrback(failures.append)
    error = failures[0].value
    assert isinstance(error, LimitExceeded)
    assert error.message == "queue /queue/cap.a is full"
    assert "max-length 2 reached (policy cap)" in error.detail


def test_a_policy_change_applies_at_once() -> None:
    policies = Policies()
    found = SharedLimits(policies, "DLQ.")
    assert found.of("/queue/cap.a") is None
    policies.set(parse_policy("cap", {"pattern": "cap.>", "max-length": 5}), announce=False)
    limit = found.of("/queue/cap.a")
    assert limit is not None and limit.max_length == 5
    policies.remove("cap", announce=False)
    assert found.of("/queue/cap.a") is None


def test_a_dead_letter_into_a_rejecting_queue_is_added_over_the_limit_and_counted() -> None:
    """
    ``reject-publish`` refuses SENDs only: a dead letter is added as one node's
    queue takes it, through the byte-counting script with ``keep`` under a byte
    limit, as a plain ``XADD`` under a length limit alone.
    """
    sized = limits(**{"max-length-bytes": 10, "overflow": "reject-publish"}).of("/queue/cap.a")
    assert sized is not None
    writer = Writer(reply=[1, 0])
    stream = "p:{q:/queue/cap.a}"
    sized.enqueue(Engine(writer), message(), stream, b"p")
    [(args, replicated)] = writer.waited
    assert args[:5] == ("EVALSHA", ADD_SIZED, 5, stream, byte_counter(stream))
    assert args[10] == "keep"
    assert not replicated
    counted = limits(**{"max-length": 2, "overflow": "reject-publish"}).of("/queue/cap.a")
    assert counted is not None
    writer = Writer()
    counted.enqueue(Engine(writer), message(), "s", b"p")
    assert writer.sent == [("XADD", "s", "*", "m", b"p")] and not writer.waited


def test_a_dead_letter_into_a_dropping_queue_pushes_the_oldest_out_as_a_send_does() -> None:
    limit = limits(**{"max-length": 2}).of("/queue/cap.a")
    assert limit is not None
    writer = Writer()
    limit.enqueue(Engine(writer), message(), "s", b"p")
    assert writer.sent == [("XADD", "s", "MAXLEN", 2, "*", "m", b"p")]
