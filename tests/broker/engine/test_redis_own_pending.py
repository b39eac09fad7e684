"""This node's pending lists in a queue's streams (stompbroker.broker.engine.redis.own_pending)."""

from __future__ import annotations

import asyncio
from typing import Any

from redis.exceptions import ResponseError

from stompbroker.broker.engine.redis.keys import Keys
from stompbroker.broker.engine.redis.own_pending import (
    RECONCILE_PAGE,
    pending_count,
    pending_pages,
)

ME = "node-a"


class FakeIds:
    node = ME


class FakeClient:
    """Pending lists per stream; a stream missing from them has no group (NOGROUP)."""

    def __init__(self, pending: dict[str, list[bytes]]) -> None:
        self.pending = pending
        self.reads: list[tuple[str, Any]] = []

    def _lists(self, stream: str) -> list[bytes]:
        if stream not in self.pending:
            raise ResponseError("NOGROUP No such key or consumer group")
        return self.pending[stream]

    async def xpending(self, stream: str, group: str) -> dict[str, Any]:
        ids = self._lists(stream)
        return {
            "consumers": [
                {"name": ME.encode(), "pending": len(ids)},
                {"name": b"node-b", "pending": 7},
            ]
        }

    async def xreadgroup(
        self, group: str, consumer: str, streams: dict[str, Any], count: int
    ) -> list[Any]:
        ((stream, start),) = streams.items()
        self.reads.append((stream, start))
        ids = [i for i in self._lists(stream) if start == "0" or i > start]
        page = [(i, {b"m": b"x"}) for i in ids[:count]]
        return [[stream.encode(), page]] if page else []


class FakeEngine:
    def __init__(self, client: FakeClient) -> None:
        self.client = client
        self.unretried = client
        self.names = Keys("sb")
        self.ids = FakeIds()


def pages(engine: FakeEngine, stream: str) -> list[list[Any]]:
    async def collect() -> list[list[Any]]:
        return [page async for page in pending_pages(engine, stream)]

    return asyncio.run(collect())


def test_the_count_sums_this_nodes_entries_over_the_streams_that_have_a_group() -> None:
    """Another node's entries do not count, nor does a lane nobody has read (no group)."""
    engine = FakeEngine(FakeClient({"q": [b"1-0", b"2-0"], "q:lane9": [b"1-0"]}))
    count = asyncio.run(pending_count(engine, ["q", "q:lane9", "q:lane8"]))
    assert count == 3


def test_a_pending_list_is_read_page_by_page_from_the_last_id() -> None:
    """A full page asks for the next from its last id; a short page is the last."""
    ids = [f"{n:06d}-0".encode() for n in range(RECONCILE_PAGE + 3)]
    client = FakeClient({"q": ids})
    read = pages(FakeEngine(client), "q")
    assert [len(page) for page in read] == [RECONCILE_PAGE, 3]
    assert [entry_id for page in read for entry_id, _ in page] == ids
    assert client.reads == [("q", "0"), ("q", ids[RECONCILE_PAGE - 1])]


def test_a_stream_without_a_group_or_entries_gives_no_page() -> None:
    """NOGROUP (a lane never read) and an empty list give nothing, without an error."""
    engine = FakeEngine(FakeClient({"q": []}))
    assert pages(engine, "q") == []
    assert pages(engine, "q:lane9") == []
