"""
The redis engine's resume directory, without a server
(stompbroker.broker.engine.redis.resumes): what a record and a handover look
like in Redis, and what a node does with a handover request and a reply
(a recording writer, ``task.Clock`` for the wait's bound).  The Lua script and
the pub/sub path run against a real server in
tests/integration/test_resume_cluster.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from twisted.internet.task import Clock

from stompbroker.broker.engine.redis.keys import Keys
from stompbroker.broker.engine.redis.resumes import (
    RedisResumeDirectory,
    decode_handover,
    decode_record,
    encode_handover,
    encode_record,
)
from stompbroker.broker.routing.ids import Ids
from stompbroker.protocol.resume.resume_book import Detached, ResumeBook
from stompbroker.protocol.resume.session_records import Handover, SessionRecord, token_key


class Writer:
    connected = True

    def __init__(self) -> None:
        self.commands: list[tuple[Any, ...]] = []

    def command(self, *args: Any) -> None:
        self.commands.append(args)


class Engine:
    """What the directory reads of the redis engine."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.names = Keys("p")
        self.ids = Ids("me")
        self.node_timeout = 10.0
        self.writer = Writer()
        self.loop = None


def directory() -> tuple[RedisResumeDirectory, Engine, ResumeBook]:
    clock = Clock()
    engine = Engine(clock)
    book = ResumeBook(clock, window=30)
    return RedisResumeDirectory(engine, book), engine, book


def test_a_record_round_trips_through_json_the_script_can_read() -> None:
    """Login and version are plain JSON fields: the Lua script checks them with cjson."""
    record = SessionRecord("ann", "1.2", ({"id": "t", "destination": "/topic/é"},))
    text = encode_record(record)
    assert json.loads(text)["login"] == "ann" and json.loads(text)["version"] == "1.2"
    assert decode_record(text.encode()) == record


def test_a_handover_round_trips_with_its_frames_byte_for_byte() -> None:
    """Frames may hold any bytes, newlines and NULs included."""
    handover = Handover(({"id": "s"},), (b"MESSAGE\n\n\x00", b"\n\x00binary\xff"), True)
    assert decode_handover(encode_handover(handover)) == handover
    assert decode_handover(encode_handover(None)) is None


def test_a_handover_whose_frames_do_not_add_up_is_refused() -> None:
    """A truncated payload is an error, not a shorter handover."""
    payload = encode_handover(Handover((), (b"abcdef",), False))
    with pytest.raises(ValueError):
        decode_handover(payload[:-2])


def test_records_go_to_this_nodes_hash_whose_expiry_each_tick_renews() -> None:
    """One HSET per filing, one HDEL per drop; each tick keeps the hash a window more."""
    resumes, engine, book = directory()
    assert book.directory is resumes
    resumes.file("k", SessionRecord("", "1.2", ()))
    resumes.drop("k")
    resumes.tick()
    assert engine.writer.commands == [
        ("HSET", "p:resume:me", "k", encode_record(SessionRecord("", "1.2", ()))),
        ("HDEL", "p:resume:me", "k"),
        ("SADD", "p:resume:nodes", "me"),
        ("PEXPIRE", "p:resume:me", 31_000),
    ]


def test_a_request_is_answered_with_the_handover_in_a_key_and_a_notice() -> None:
    """The keeping node stores the handover (SET PX) before telling the asker (PUBLISH)."""
    resumes, engine, book = directory()
    buffer = book.new_buffer()
    buffer.append(b"MESSAGE\nsubscription:t\nmessage-id:x-1\n\nm\x00")
    released: list[bool] = []
    book.detach(Detached("tok", "", "1.2", [{"id": "t"}], buffer, lambda: released.append(True)))
    engine.writer.commands.clear()
    request = {"id": "other-1", "from": "other", "key": token_key("tok"), "last": None}
    resumes.received(b"?" + json.dumps(request).encode())
    assert released == [True]
    drop, (set_, key, payload, px, ttl), publish = engine.writer.commands
    assert (set_, key, px) == ("SET", "p:resume:handover:other-1", "PX")
    assert decode_handover(payload) == Handover(({"id": "t"},), (buffer.frames[0],), False)
    assert drop == ("HDEL", "p:resume:me", token_key("tok"))
    assert publish == ("PUBLISH", "p:resume:to:other", b"!other-1")


def test_a_request_for_a_session_no_longer_kept_is_answered_unknown() -> None:
    """The asker hears at once that nothing comes, rather than wait for its timeout."""
    resumes, engine, _ = directory()
    request = {"id": "o-1", "from": "o", "key": "nope", "last": ["t", "x-1"]}
    resumes.received(b"?" + json.dumps(request).encode())
    assert decode_handover(engine.writer.commands[0][2]) is None


def test_a_handover_not_answered_in_time_fires_with_none() -> None:
    """The wait is bounded (HANDOVER_TIMEOUT): then the resume goes on with a gap."""
    resumes, engine, _ = directory()
    answer = resumes.hand_over("other", "k", ("t", "x-1"))
    [(publish, channel, payload)] = engine.writer.commands
    assert (publish, channel) == ("PUBLISH", "p:resume:to:other")
    assert json.loads(payload[1:]) == {"id": "me-1", "from": "me", "key": "k", "last": ["t", "x-1"]}
    got: list[Any] = []
    answer.addCallback(got.append)
    engine.clock.advance(resumes.timeout)
    assert got == [None]


def test_a_message_not_understood_is_logged_and_ignored() -> None:
    """Garbage on the resume channel does not stop the listener."""
    resumes, engine, _ = directory()
    resumes.received(b"?not json")
    resumes.received(b"!unknown-request")
    assert engine.writer.commands == []


def test_a_handover_whose_client_went_is_forgotten_with_its_timer() -> None:
    """Cancelled (the resuming client went): no timer left, and a late reply is ignored."""
    resumes, engine, _ = directory()
    answer = resumes.hand_over("other", "k", None)
    answer.addErrback(lambda failure: None)
    answer.cancel()
    assert engine.clock.getDelayedCalls() == []
    resumes.received(b"!me-1")
