"""The priority lanes of a shared queue: their names, and what the read script answers."""

from __future__ import annotations

from stompbroker.broker.engine.redis.lanes import (
    LANE_ORDER,
    LaneMarks,
    lane_stream,
    lane_streams,
    mode_key,
    parse_read,
)
from tests.support.queue_scripts import RecordingWriter

STREAM = "p:q:/queue/a"


def test_the_default_priority_lane_is_the_queues_own_stream() -> None:
    """A queue that only ever had priority-4 messages keeps its one stream (docs/cluster.md)."""
    assert lane_stream("p", STREAM, "/queue/a", 4) == STREAM
    assert lane_stream("p", STREAM, "/queue/a", 9) == "p:qp:9:/queue/a"


def test_lanes_are_listed_highest_priority_first() -> None:
    """The read script is given the lanes highest first, so it takes from them in that order."""
    lanes = lane_streams("p", STREAM, "/queue/a")
    assert LANE_ORDER == (9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
    assert lanes[0] == "p:qp:9:/queue/a"
    assert lanes[5] == STREAM
    assert lanes[-1] == "p:qp:0:/queue/a"


def test_the_first_message_of_another_priority_marks_the_queue_once() -> None:
    """The mode hash is set before the first lane entry, and only once per node and queue."""
    writer = RecordingWriter()
    marks = LaneMarks("p")
    assert marks.stream(writer, "/queue/a", STREAM, 4) == STREAM
    assert writer.commands == []
    assert marks.stream(writer, "/queue/a", STREAM, 7) == "p:qp:7:/queue/a"
    assert marks.stream(writer, "/queue/a", STREAM, 2) == "p:qp:2:/queue/a"
    assert writer.commands == [("HSET", mode_key("p", "/queue/a"), "p", "1")]


def test_a_read_reply_gives_entries_with_their_lanes_in_order() -> None:
    """Entries come back as (lane, id, fields), in the order the script read them."""
    lanes = lane_streams("p", STREAM, "/queue/a")
    reply = [1, [1, b"1-0", b"nine", b"", b"", 6, b"2-0", b"four", b"n1/3", b"0-5"]]
    assert parse_read(reply, lanes) == (
        [
            ("p:qp:9:/queue/a", b"1-0", {b"m": b"nine"}),
            (STREAM, b"2-0", {b"m": b"four", b"o": b"n1/3", b"i": b"0-5"}),
        ],
        [],
    )


def test_an_empty_read_gives_each_lanes_newest_id_for_the_wait() -> None:
    """With nothing to read, the script's answer is what the blocking XREAD waits after."""
    lanes = lane_streams("p", STREAM, "/queue/a")
    newest = [b"0-0"] * 10
    assert parse_read([0, newest], lanes) == ([], newest)
