"""The message the broker carries: what it tells the broker of the bytes sessions cached on it."""

from __future__ import annotations

import pytest
from attrs import evolve

from stompbroker.protocol.encoder import message_tail
from stompbroker.protocol.message import NO_TAILS, Message


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
