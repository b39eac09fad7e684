"""Tests of the broker-unique names one broker gives out."""

from __future__ import annotations

from stompbroker.broker.routing.ids import Ids


def test_each_kind_of_name_counts_on_its_own_under_the_node_token() -> None:
    """Message ids, session ids and reply queue names each count from 1, with the node token."""
    ids = Ids("n0")
    assert [ids.new_message_id(), ids.new_message_id()] == ["n0-1", "n0-2"]
    assert ids.new_session_id() == "session-n0-1"
    assert ids.new_reply_queue() == "/reply-queue/tmp-n0-1"


def test_two_brokers_get_different_node_tokens() -> None:
    """A random token per broker keeps the names of two brokers (or two runs) apart."""
    assert Ids().node != Ids().node
    assert len(Ids().node) == 8
