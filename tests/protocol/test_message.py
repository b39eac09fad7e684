"""The message the broker carries: what it tells the broker of the bytes sessions cached on it."""

from __future__ import annotations

import pytest
from attrs import evolve
from hypothesis import given
from hypothesis import strategies as st

from stompbroker.protocol.encoder import encode, message_tail
from stompbroker.protocol.frames import Frame
from stompbroker.protocol.message import NO_TAILS, Message
from stompbroker.protocol.parser import FrameParser
from tests import strategies

#: Header lines of any text but LF: colons (none, one, several), CR, backslashes, non-ASCII.
header_lines = st.lists(strategies.text(forbidden="\n"), min_size=1, max_size=12)


def split_at_first_colons(text: str) -> tuple[tuple[str, str], ...]:
    """What held lines read as: split at each LF, each line at its first colon (none: no value)."""
    return tuple((line.partition(":")[0], line.partition(":")[2]) for line in text.split("\n"))


def test_tail_sizes_are_added_per_escaping_style() -> None:
    """Each cached tail's length is added under its style, to what the counts already hold."""
    message = Message("/topic/a", "m-1", (("note", "a\\b"),), b"body")
    sizes = {"1.2": 1000}
    message.add_tail_sizes(sizes)
    assert sizes == {"1.2": 1000}, "nothing is encoded yet"
    message_tail(message, "1.2")
    message_tail(message, "1.0")
    message.add_tail_sizes(sizes)
    assert sizes == {
        "1.2": 1000 + len(message_tail(message, "1.2")),
        "1.1": len(message_tail(message, "1.1")),
        "1.0": len(message_tail(message, "1.0")),
    }
    assert sizes["1.0"] != sizes["1.1"], "1.0 does not escape the backslash"


def test_plain_lines_read_as_pairs_and_survive_a_copy() -> None:
    """
    A message made from a SEND's plain header lines reads them as pairs, in order, the same after
    a copy; a copy given other headers reads those.
    """
    message = Message("/queue/a", "m-1", "seq:1\nnote:caf\u00e9\nempty:".encode(), b"")
    copy = evolve(message, redeliveries=1)
    pairs = (("seq", "1"), ("note", "caf\u00e9"), ("empty", ""))
    assert message.headers == pairs
    assert copy.headers == pairs
    assert evolve(copy, headers=(("other", "x"),)).headers == (("other", "x"),)


@given(header_lines)
def test_held_lines_read_as_each_line_split_at_its_first_colon(lines: list[str]) -> None:
    """
    Any held lines, one or many, read as the pairs that splitting each line at its first colon
    gives: an empty name or value, a colon in a value, a line without a colon, CR and backslash
    kept as they are; repeats kept in order.
    """
    text = "\n".join(lines)
    message = Message("/queue/a", "m-1", text.encode(), b"")
    assert message.headers == split_at_first_colons(text)
    assert message.headers is message.headers, "made once, then kept"


#: Headers a SEND carries without escapes: no colon, LF, CR or backslash in a name or value.
plain_headers = st.lists(
    st.tuples(strategies.text(forbidden=":\n\r\\"), strategies.text(forbidden=":\n\r\\"))
    | st.sampled_from([("x", "1"), ("x", "2"), ("", ""), ("empty", "")]),
    min_size=1,
    max_size=8,
)


@given(plain_headers)
def test_the_lines_a_send_keeps_read_as_the_parser_decoded_them(
    headers: list[tuple[str, str]],
) -> None:
    """
    The header lines the parser keeps of a SEND as they came (LF, no escape) read as the very
    pairs the parser decoded, repeats and empty names or values included: STOMP 1.2's decoding
    of such lines is splitting them.
    """
    parser = FrameParser()
    parser.version = "1.2"
    [parsed] = parser.receive_data(encode(Frame("SEND", tuple(headers)), "1.2"))
    assert parsed.raw is not None
    assert Message("/queue/a", "m-1", parsed.raw, b"").headers == parsed.headers == tuple(headers)


def test_a_message_shares_the_empty_tail_cache_until_it_is_encoded() -> None:
    """
    A message not encoded yet holds the shared NO_TAILS, which nothing may write to; its first
    tail gives it a dict of its own, and NO_TAILS stays empty.
    """
    first = Message("/queue/a", "m-1", b"seq:1", b"x")
    second = Message("/queue/a", "m-2", (("n", "a:b"),), b"y")
    assert first.wire is NO_TAILS and second.wire is NO_TAILS
    for write in (
        lambda: NO_TAILS.__setitem__("1.2", b""),
        lambda: NO_TAILS.update({"1.2": b""}),
        lambda: NO_TAILS.setdefault("1.2", b""),
    ):
        with pytest.raises(TypeError, match="shared"):
            write()
    message_tail(first, "1.2")
    message_tail(second, "1.0")
    message_tail(second, "1.2")
    assert set(first.wire) == {"1.1", "1.2"}
    assert set(second.wire) == {"1.0", "1.1", "1.2"}
    assert NO_TAILS == {}
