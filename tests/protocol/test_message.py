"""The message the broker carries: what it tells the broker of the bytes sessions cached on it."""

from __future__ import annotations

from stompbroker.protocol.encoder import message_tail
from stompbroker.protocol.message import Message


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
