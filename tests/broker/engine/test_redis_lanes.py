"""The priority lanes of a shared queue: their names, and what the read script answers."""

from __future__ import annotations

from stompbroker.broker.engine.redis.keys import lane_stream, lane_streams, mode_key
from stompbroker.broker.engine.redis.lanes import LANE_ORDER, LaneMarks, parse_read
from tests.support.queue_scripts import RecordingWriter

STREAM = "p:{q:/queue/a}"


def test_the_default_priority_lane_is_the_queues_own_stream() -> None:
    """A queue that only ever had priority-4 messages keeps its one stream (docs/cluster.md)."""
    assert lane_stream("p", "/queue/a", 4) == STREAM
    assert lane_stream("p", "/queue/a", 9) == "p:{q:/queue/a}:lane:9"


def test_lanes_are_listed_highest_priority_first() -> None:
    """The read script is given the lanes highest first, so it takes from them in that order."""
    lanes = lane_streams("p", "/queue/a")
    assert LANE_ORDER == (9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
    assert lanes[0] == "p:{q:/queue/a}:lane:9"
    assert lanes[5] == STREAM
    assert lanes[-1] == "p:{q:/queue/a}:lane:0"


def test_the_first_message_of_another_priority_marks_the_queue_once() -> None:
    """The mode hash is set before the first lane entry, and only once per node and queue."""
    writer = RecordingWriter()
    marks = LaneMarks("p")
    assert marks.stream(writer, "/queue/a", STREAM, 4) == STREAM
    assert writer.commands == []
    assert marks.stream(writer, "/queue/a", STREAM, 7) == "p:{q:/queue/a}:lane:7"
    assert marks.stream(writer, "/queue/a", STREAM, 2) == "p:{q:/queue/a}:lane:2"
    assert writer.commands == [("HSET", mode_key("p", "/queue/a"), "p", "1")]


def test_a_read_reply_gives_entries_with_their_lanes_in_order() -> None:
    """Entries come back as (lane, id, fields), in the order the script read them."""
    lanes = lane_streams("p", "/queue/a")
    reply = [1, [1, b"1-0", b"nine", b"", b"", 6, b"2-0", b"four", b"n1/3", b"0-5"]]
    assert parse_read(reply, lanes) == (
        [
            ("p:{q:/queue/a}:lane:9", b"1-0", {b"m": b"nine"}),
            (STREAM, b"2-0", {b"m": b"four", b"o": b"n1/3", b"i": b"0-5"}),
        ],
        [],
    )


def test_an_empty_read_gives_each_lanes_newest_id_for_the_wait() -> None:
    """With nothing to read, the script's answer is what the blocking XREAD waits after."""
    lanes = lane_streams("p", "/queue/a")
    newest = [b"0-0"] * 10
    assert parse_read([0, newest], lanes) == ([], newest)
