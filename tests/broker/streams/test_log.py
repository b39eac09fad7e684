"""
The stream model without a reactor (:mod:`stompbroker.broker.streams`): offsets,
retention by bytes and age in segments, the bounded cache, the start values of
``x-stream-offset``, and a reader's replay followed by the live tail with no gap
and no duplicate, paced by its consumer's window.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from stompbroker.broker.streams.backends import MemoryStreamBackend
from stompbroker.broker.streams.entries import StreamEntry
from stompbroker.broker.streams.log import StreamLog
from stompbroker.broker.streams.offsets import (
    OFFSET_HEADER,
    TIMESTAMP_HEADER,
    StreamLimits,
    StreamStart,
    parse_start,
)
from stompbroker.broker.streams.reader import StreamReader
from stompbroker.broker.streams.registry import Streams
from stompbroker.protocol.errors import InvalidStreamOffset
from stompbroker.protocol.message import Message
from tests.support.broker import EPOCH, Inbox

BODY = b"x" * 100


def message(body: bytes = BODY, number: int = 0) -> Message:
    return Message("/stream/s", f"m-{number}", (), body)


class SlowBackend(MemoryStreamBackend):
    """A memory backend whose reads wait until the test lets them go, and are counted."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[int, int, Deferred[list[StreamEntry]]]] = []

    def read(self, destination: str, offset: int, limit: int) -> Deferred[list[StreamEntry]]:
        waiting: Deferred[list[StreamEntry]] = Deferred()
        self.reads.append((offset, limit, waiting))
        return waiting

    def answer(self) -> None:
        """Answer every read waiting, as the memory backend would."""
        reads, self.reads = self.reads, []
        for offset, limit, waiting in reads:
            super().read("/stream/s", offset, limit).addCallback(waiting.callback)


def world(limits: StreamLimits | None = None, backend: Any = None) -> tuple[Clock, StreamLog, Any]:
    clock = Clock()
    clock.advance(EPOCH)
    backend = backend if backend is not None else MemoryStreamBackend()
    stream = StreamLog("/stream/s", clock, limits or StreamLimits(), backend)
    return clock, stream, backend


def offsets_of(inbox: Inbox) -> list[int]:
    return [int(dict(received.headers)[OFFSET_HEADER]) for received in inbox.received]


def reading(
    stream: StreamLog, clock: Clock, position: int, ack: str = "client-individual", window: int = 10
) -> tuple[StreamReader, Inbox, Any]:
    reader = StreamReader(stream, clock, position)
    inbox = Inbox("/stream/s", ack)
    consumer = reader.add_consumer(inbox, window, -1)
    return reader, inbox, consumer


def acknowledge_all(reader: StreamReader, consumer: Any) -> None:
    for message_id in list(consumer.unacked):
        reader.acknowledge(consumer, consumer.settle(message_id))


# -- offsets and retention ------------------------------------------------------------


def test_offsets_start_at_zero_grow_by_one_and_are_stamped_on_the_message() -> None:
    """Each append takes the next offset, and the message readers get carries it."""
    _, stream, backend = world()
    for number in range(3):
        stream.append(message(number=number))
    entries = backend.read("/stream/s", 0, 10).result
    assert [entry.offset for entry in entries] == [0, 1, 2]
    assert [dict(entry.message.headers)[OFFSET_HEADER] for entry in entries] == ["0", "1", "2"]
    assert (stream.first_offset, stream.last_offset, stream.next_offset) == (0, 2, 3)


def test_a_log_restored_at_an_offset_goes_on_from_there() -> None:
    """After a restart the next offset is the one the store kept, even for an emptied stream."""
    clock = Clock()
    stream = StreamLog("/stream/s", clock, StreamLimits(), MemoryStreamBackend(), next_offset=41)
    stream.append(message())
    assert (stream.first_offset, stream.last_offset, stream.next_offset) == (41, 41, 42)


def test_retention_by_bytes_drops_whole_segments_from_the_head() -> None:
    """Over max_bytes, the oldest segments go (the store's too); at most a segment over is kept."""
    limits = StreamLimits(max_age=0, max_bytes=8000)
    _, stream, backend = world(limits)
    for number in range(200):
        stream.append(message(number=number))
    assert stream.size <= limits.max_bytes + limits.segment_bytes
    assert stream.size > limits.max_bytes - limits.segment_bytes
    assert stream.first_offset > 0 and stream.next_offset == 200
    assert backend.read("/stream/s", 0, 1).result[0].offset == stream.first_offset


def test_retention_by_age_drops_old_segments_even_without_appends() -> None:
    """Segments whose newest entry is older than max_age go when the registry sweeps."""
    clock = Clock()
    clock.advance(EPOCH)
    backend = MemoryStreamBackend()
    streams = Streams(clock, StreamLimits(max_age=80), backend)
    streams.append(message(number=0))
    clock.advance(50)
    streams.append(message(number=1))
    clock.advance(40)
    streams.sweep()
    stream = streams.logs["/stream/s"]
    assert (stream.first_offset, stream.next_offset) == (1, 2)
    clock.advance(60)
    assert (stream.first_offset, stream.last_offset, stream.next_offset) == (2, None, 2)
    assert backend.held("/stream/s") == 0


def test_the_cache_holds_at_most_cache_bytes_of_the_newest_entries() -> None:
    """The in-memory cache stays within its bytes, holding the newest entries."""
    _, stream, _ = world(StreamLimits(cache_bytes=1000))
    for number in range(100):
        stream.append(message(number=number))
    # Each entry is its body, its x-stream-offset and x-stream-timestamp headers:
    # 151 to 153 bytes here.
    assert stream.cached == 6
    assert stream.cache_start == 100 - stream.cached
    assert stream.read(stream.cache_start, 100) == stream.read(94, 100)
    assert not isinstance(stream.read(94, 100), Deferred)
    assert isinstance(stream.read(93, 100), Deferred)


# -- where a subscription starts ---------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, StreamStart("next")),
        ("first", StreamStart("first")),
        ("last", StreamStart("last")),
        ("next", StreamStart("next")),
        ("offset=0", StreamStart("offset", 0)),
        ("offset=12", StreamStart("offset", 12)),
        ("timestamp=1700000000", StreamStart("timestamp", 1700000000)),
        ("timestamp=1700000000.5", StreamStart("timestamp", 1700000000.5)),
    ],
)
def test_the_values_of_x_stream_offset_are_read(value: str | None, expected: StreamStart) -> None:
    """RabbitMQ's five forms are read, and no header means next."""
    assert parse_start(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "",
        "FIRST",
        "offset=",
        "offset=-1",
        "offset=x",
        "offset=99999999999999999999",
        "timestamp=",
        "timestamp=soon",
        "timestamp=-5",
        "timestamp=inf",
        "12",
        "start",
    ],
)
def test_a_bad_x_stream_offset_is_refused(value: str) -> None:
    """Anything else is InvalidStreamOffset, whose detail lists the values allowed."""
    with pytest.raises(InvalidStreamOffset) as refused:
        parse_start(value)
    assert "first, last, next, offset=N" in refused.value.detail


def test_each_start_value_finds_its_offset() -> None:
    """first, last, next, offset=N (clamped to what is kept) and timestamp=S find their place."""
    clock, stream, _ = world(StreamLimits(max_age=0, max_bytes=10**6))
    for number in range(5):
        stream.append(message(number=number))
        clock.advance(10)
    assert stream.start(StreamStart("first")) == (0, 0.0)
    assert stream.start(StreamStart("last")) == (4, 0.0)
    assert stream.start(StreamStart("next")) == (5, 0.0)
    assert stream.start(StreamStart("offset", 3)) == (3, 0.0)
    assert stream.start(StreamStart("offset", 99)) == (5, 0.0)
    position, since = stream.start(StreamStart("timestamp", EPOCH + 25))
    assert position <= 3 and since == EPOCH + 25


def test_a_timestamp_start_delivers_only_what_was_appended_since() -> None:
    """A reader started at a time gets exactly the entries appended at or after it."""
    clock, stream, _ = world()
    for number in range(5):
        stream.append(message(number=number))
        clock.advance(10)
    position, since = stream.start(StreamStart("timestamp", EPOCH + 25))
    reader = StreamReader(stream, clock, position, since)
    inbox = Inbox("/stream/s", "auto")
    reader.add_consumer(inbox, 100, -1)
    assert offsets_of(inbox) == [3, 4]


# -- readers -------------------------------------------------------------------------------


def test_replay_then_live_tail_has_no_gap_and_no_duplicate() -> None:
    """A reader from 0 with a small window, acknowledging as it goes while appends continue,
    sees every offset exactly once, in order."""
    clock, stream, _ = world(StreamLimits(cache_bytes=500))
    for number in range(30):
        stream.append(message(number=number))
    reader, inbox, consumer = reading(stream, clock, 0, window=4)
    number = 30
    for _ in range(40):
        acknowledge_all(reader, consumer)
        stream.append(message(number=number))
        number += 1
    acknowledge_all(reader, consumer)
    acknowledge_all(reader, consumer)
    assert offsets_of(inbox) == list(range(number))


def test_a_slow_reader_holds_one_window_and_reads_the_store_in_pages() -> None:
    """Behind the cache, a reader holds at most its window and has one page read in flight."""
    backend = SlowBackend()
    clock, stream, _ = world(StreamLimits(cache_bytes=300), backend)
    for number in range(50):
        stream.append(message(number=number))
    reader, inbox, consumer = reading(stream, clock, 0, window=5)
    assert len(backend.reads) == 1 and backend.reads[0][:2] == (0, 5)
    reader.pump()
    assert len(backend.reads) == 1
    backend.answer()
    assert offsets_of(inbox) == [0, 1, 2, 3, 4]
    assert not backend.reads
    acknowledge_all(reader, consumer)
    assert backend.reads[0][:2] == (5, 5)
    assert stream.readers == set()


def test_a_full_window_leaves_the_tail_and_catches_up_after_the_ack() -> None:
    """Live entries that find the window full are read later from the log, none lost."""
    clock, stream, _ = world()
    reader, inbox, consumer = reading(stream, clock, 0, window=2)
    assert stream.readers == {reader}
    for number in range(5):
        stream.append(message(number=number))
    assert offsets_of(inbox) == [0, 1] and stream.readers == set()
    acknowledge_all(reader, consumer)
    acknowledge_all(reader, consumer)
    acknowledge_all(reader, consumer)
    assert offsets_of(inbox) == [0, 1, 2, 3, 4] and stream.readers == {reader}


def test_an_auto_reader_replays_a_window_per_reactor_turn() -> None:
    """An auto reader hands over a window's worth, then goes on in the next turn."""
    clock, stream, _ = world()
    for number in range(25):
        stream.append(message(number=number))
    reader, inbox, consumer = reading(stream, clock, 0, ack="auto", window=10)
    assert len(inbox.received) == 10 and len(clock.getDelayedCalls()) == 1
    clock.advance(0)
    stream.append(message(number=25))
    assert offsets_of(inbox) == list(range(26))


def test_a_paused_reader_waits_and_goes_on_when_dispatched() -> None:
    """While its socket is behind a reader delivers nothing; dispatch resumes from its place."""
    clock, stream, _ = world()
    reader, inbox, consumer = reading(stream, clock, 0, ack="auto")
    consumer.paused = True
    stream.append(message(number=0))
    assert inbox.received == []
    consumer.paused = False
    reader.dispatch()
    stream.append(message(number=1))
    assert offsets_of(inbox) == [0, 1]


def test_many_readers_read_the_same_stream_each_at_its_own_pace() -> None:
    """Readers do not consume: each gets every entry, however the others go."""
    clock, stream, _ = world()
    fast, fast_inbox, _ = reading(stream, clock, 0, ack="auto")
    slow, slow_inbox, slow_consumer = reading(stream, clock, 0, window=1)
    for number in range(3):
        stream.append(message(number=number))
    assert offsets_of(fast_inbox) == [0, 1, 2] and offsets_of(slow_inbox) == [0]
    acknowledge_all(slow, slow_consumer)
    acknowledge_all(slow, slow_consumer)
    assert offsets_of(slow_inbox) == [0, 1, 2]


def test_a_reader_behind_retention_goes_on_from_the_oldest_kept() -> None:
    """Entries trimmed before a reader got to them are skipped, not waited for."""
    clock, stream, _ = world(StreamLimits(max_age=0, max_bytes=2000))
    reader, inbox, consumer = reading(stream, clock, 0, window=1)
    for number in range(100):
        stream.append(message(number=number))
    acknowledge_all(reader, consumer)
    assert offsets_of(inbox)[1] == stream.first_offset


def test_a_removed_reader_leaves_the_tail() -> None:
    """After UNSUBSCRIBE nothing more is delivered and the log forgets the reader."""
    clock, stream, _ = world()
    reader, inbox, consumer = reading(stream, clock, 0, ack="auto")
    reader.remove_consumer(consumer)
    stream.append(message())
    assert inbox.received == [] and stream.readers == set()


class Positioned(Inbox):
    """An inbox that asks where its reader starts, as a resumable session's subscription does."""

    def __init__(self) -> None:
        super().__init__("/stream/s", "auto")
        self.told: list[int] = []

    def stream_position(self, offset: int) -> None:
        self.told.append(offset)


@pytest.mark.parametrize(("start", "told"), [("next", [3]), ("last", [2]), ("first", [0])])
def test_a_reader_tells_its_subscriber_where_it_starts(start: str, told: list[int]) -> None:
    """The offset a reader starts at is told before any delivery: a resume goes on from it."""
    clock, stream, _ = world()
    for number in range(3):
        stream.append(message(number=number))
    position, since = stream.start(StreamStart(start))
    inbox = Positioned()
    StreamReader(stream, clock, position, since).add_consumer(inbox, 10, -1)
    assert inbox.told == told


def test_a_reader_waiting_for_its_start_tells_it_once_found_and_a_timestamp_never() -> None:
    """A remote engine's next or last is told at start_at; a timestamp start names itself."""
    clock, stream, _ = world()
    waiting = StreamReader(stream, clock, 0)
    waiting.wait()
    inbox = Positioned()
    waiting.add_consumer(inbox, 10, -1)
    assert inbox.told == []
    waiting.start_at(7)
    assert inbox.told == [7]
    timed = Positioned()
    StreamReader(stream, clock, 0, EPOCH).add_consumer(timed, 10, -1)
    assert timed.told == []


def test_streams_read_pages_from_an_offset_for_other_code() -> None:
    """Streams.read gives a page at an offset (the resume work's replay), [] at the end."""
    clock = Clock()
    streams = Streams(clock, StreamLimits(), MemoryStreamBackend())
    for number in range(5):
        streams.append(message(number=number))
    page = streams.read("/stream/s", 2, 2).result
    assert [entry.offset for entry in page] == [2, 3]
    assert streams.read("/stream/s", 5, 2).result == []
    assert streams.read("/stream/none", 0, 2).result == []


def test_a_mirror_reader_reads_the_backend_then_what_the_server_handed_out() -> None:
    """A log that mirrors a remote stream (sparse offsets, entries arriving while a reader
    is still reading the backend) gives the reader every entry once, in order."""
    backend = SlowBackend()
    clock = Clock()
    stream = StreamLog("/stream/s", clock, StreamLimits(), backend, complete=False)

    def remote(number: int) -> StreamEntry:
        offset = 1000 + (number << 20)
        kept = Message("/stream/s", f"m-{number}", ((OFFSET_HEADER, str(offset)),), BODY)
        return StreamEntry(offset, EPOCH, kept, len(BODY))

    for number in range(40):
        MemoryStreamBackend.append(backend, "/stream/s", remote(number))
    reader, inbox, consumer = reading(stream, clock, 0, window=4)
    for number in range(40, 80):
        entry = remote(number)
        MemoryStreamBackend.append(backend, "/stream/s", entry)
        stream.add_entry(entry)
    for _ in range(30):
        backend.answer()
        acknowledge_all(reader, consumer)
    assert [received.message_id for received in inbox.received] == [
        f"m-{number}" for number in range(80)
    ]
    assert stream.readers == {reader} and stream.segments == deque()


def test_an_offset_header_a_sender_wrote_is_replaced_by_the_real_one() -> None:
    """A SEND's own x-stream-offset (or -timestamp) cannot pass for the stream's: readers
    see only the real ones."""
    _, stream, backend = world()
    headers = (("a", "1"), (OFFSET_HEADER, "999"), (TIMESTAMP_HEADER, "1"))
    stream.append(Message("/stream/s", "m", headers, b"x"))
    [entry] = backend.read("/stream/s", 0, 1).result
    assert entry.message.headers == (
        ("a", "1"),
        (OFFSET_HEADER, "0"),
        (TIMESTAMP_HEADER, "1700000000.000"),
    )
