"""
The redis engine's duplicate detection (:mod:`stompbroker.broker.engine.redis.duplicates`)
without Redis: the script a SEND with an id becomes, what the node does with
its answer, the script sent whole when Redis lacks it, and the messages the
node routes itself once the script found their id new.  The script itself
runs on a real ``redis-server`` in ``test_redis_duplicates_script.py``.
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import NoScriptError
from twisted.internet.defer import Deferred, fail, succeed

from stompbroker.broker.engine.redis.duplicates import (
    DEDUP_CHECK_ADD,
    DEDUP_CHECK_ADD_SHA,
    ClusterDuplicates,
)
from stompbroker.broker.engine.redis.keys import Keys
from stompbroker.broker.features.duplicate_ids import DEFAULT_WINDOW_IDS, DEFAULT_WINDOW_MS
from stompbroker.broker.features.policies import Policies, parse_policy
from stompbroker.broker.flow.traffic import Traffic
from stompbroker.protocol.errors import LimitExceeded
from stompbroker.protocol.message import Message

NAMES = Keys("p")
WINDOW = NAMES.duplicates("/queue/q")


class Writer:
    """Records commands; a waited one answers with the next of :attr:`replies`."""

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.waited: list[tuple[tuple[Any, ...], bool]] = []
        self.sent: list[tuple[Any, ...]] = []

    def command(self, *args: Any) -> None:
        self.sent.append(args)

    def command_waited(self, *args: Any, replicated: bool = False) -> Deferred[Any]:
        self.waited.append((args, replicated))
        reply = self.replies.pop(0)
        return fail(reply) if isinstance(reply, Exception) else succeed(reply)


class Publishing:
    """What the script writes for a message (as told), and what was published."""

    def __init__(self, appends: tuple[list[str], str, bytes, bytes] | None) -> None:
        self.appends = appends
        self.asked: list[Message] = []
        self.published: list[Message] = []

    def appends_once(self, message: Message) -> tuple[list[str], str, bytes, bytes] | None:
        self.asked.append(message)
        return self.appends

    def published_once(self, message: Message) -> None:
        self.published.append(message)


class Routes:
    """A route that records what it routes, and answers as told."""

    def __init__(self, answer: Deferred[None] | None = None) -> None:
        self.answer = answer
        self.routed: list[Message] = []

    def __call__(self, message: Message) -> Deferred[None] | None:
        self.routed.append(message)
        return self.answer


def duplicates(
    writer: Writer, publishing: Publishing, policies: Policies | None = None
) -> tuple[ClusterDuplicates, Traffic]:
    traffic = Traffic()
    made = ClusterDuplicates(
        lambda: writer,
        publishing,
        NAMES,
        policies or Policies(),
        traffic,
    )
    return made, traffic


def message() -> Message:
    return Message("/queue/q", "n1-1", (("duplicate-id", "order-1"),), b"body")


QUEUED = (["p:q:/queue/q"], "", b"", b"entry")
ARGS = (2, WINDOW, "p:q:/queue/q", "order-1", DEFAULT_WINDOW_MS, DEFAULT_WINDOW_IDS, b"entry")


def test_a_new_id_is_one_script_that_adds_the_message_then_the_node_counts_it() -> None:
    writer, publishing, route = Writer(1), Publishing(QUEUED), Routes()
    made, traffic = duplicates(writer, publishing)
    sent = message()
    decided = made.route_once("order-1", sent, True, route, True)
    assert decided is not None
    assert writer.waited == [(("EVALSHA", DEDUP_CHECK_ADD, *ARGS, "", b""), True)]
    assert writer.waited[0][0][1].sha == DEDUP_CHECK_ADD_SHA  # the writer sends the SHA
    assert publishing.published == [sent]
    assert route.routed == []
    assert "/queue/q" not in traffic.destinations


def test_a_repeat_is_counted_and_goes_nowhere() -> None:
    writer, publishing, route = Writer(0), Publishing(QUEUED), Routes()
    made, traffic = duplicates(writer, publishing)
    made.route_once("order-1", message(), False, route, True)
    assert [replicated for _, replicated in writer.waited] == [False]
    assert publishing.published == [] and route.routed == []
    assert traffic.destinations["/queue/q"].messages_duplicate == 1


def test_a_script_redis_lacks_is_sent_whole() -> None:
    writer, publishing = Writer(NoScriptError("No matching script"), 1), Publishing(QUEUED)
    made, _ = duplicates(writer, publishing)
    sent = message()
    made.route_once("order-1", sent, True, Routes(), True)
    assert [args[:2] for args, _ in writer.waited] == [
        ("EVALSHA", DEDUP_CHECK_ADD),
        ("EVAL", str(DEDUP_CHECK_ADD)),
    ]
    assert writer.waited[0][0][2:] == writer.waited[1][0][2:]
    assert writer.waited[1][1] is True
    assert publishing.published == [sent]


def test_what_the_script_cannot_add_is_routed_once_its_id_is_new() -> None:
    """A queue a policy limits (appends_once: None), or a route that is not the plain one."""
    for appends, plain in ((None, True), (QUEUED, False)):
        writer, publishing, route = Writer(1, 0), Publishing(appends), Routes()
        made, traffic = duplicates(writer, publishing)
        made.route_once("order-1", message(), False, route, plain)
        made.route_once("order-1", message(), False, route, plain)
        assert [args[2:4] for args, _ in writer.waited] == [(1, WINDOW), (1, WINDOW)]
        assert len(route.routed) == 1
        assert publishing.published == []
        assert len(publishing.asked) == (2 if plain else 0)
        assert traffic.destinations["/queue/q"].messages_duplicate == 1


def test_a_routing_that_fails_takes_the_id_out_again() -> None:
    refused: Deferred[None] = fail(LimitExceeded("queue full", "max-length 1"))
    writer, route = Writer(1), Routes(refused)
    made, _ = duplicates(writer, Publishing(None))
    decided = made.route_once("order-1", message(), False, route, True)
    assert decided is not None
    failures: list[Any] = []
    decided.addErrback(failures.append)
    assert failures[0].check(LimitExceeded)
    assert writer.sent == [("ZREM", WINDOW, "order-1")]


def test_a_destination_whose_window_keeps_no_id_is_routed_as_any_send() -> None:
    policies = Policies()
    policies.set(parse_policy("off", {"pattern": "q", "duplicate-window-ids": 0}), announce=False)
    writer, route = Writer(), Routes()
    made, _ = duplicates(writer, Publishing(QUEUED), policies)
    made.route_once("order-1", message(), False, route, True)
    made.route_once("order-1", message(), False, route, True)
    assert writer.waited == [] and len(route.routed) == 2
