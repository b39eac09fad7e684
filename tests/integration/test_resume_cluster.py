"""
Resumable sessions on the redis engine (docs/cluster.md): a real ``redis-server``
and two ``twistd`` nodes.  A session resumes on the node that kept it, whatever
node the messages were published on; another node does not know its token and
answers resumed:false.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.support.clients import publish
from tests.support.process import BrokerProcess
from tests.support.redis import RedisServer, redis_server, started_nodes  # noqa: F401
from tests.support.resume import cut, resumable, subscribed


@pytest.fixture(scope="module")
def pair(
    redis_server: RedisServer,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[list[BrokerProcess]]:
    """Two nodes, A and B, on one Redis server."""
    with started_nodes(tmp_path_factory, redis_server, "ab") as started:
        yield started


def test_a_session_resumes_on_its_node_with_what_another_node_published(
    pair: list[BrokerProcess],
) -> None:
    """Messages published on B while the client of A was away come back on A, in order."""
    a, b = pair
    first, inbox = subscribed(a, "/topic/cluster-resume", "c")
    cut(first)
    publish(b.address, "/topic/cluster-resume", [f"m{n}" for n in range(20)])
    again, back = resumable(a, inbox.connected["resume-token"])
    try:
        assert back.connected["resumed"] == "true"
        assert back.wait_for(lambda: len(back.messages) == 20)
        time.sleep(0.2)
        assert [body.decode() for body in back.bodies()] == [f"m{n}" for n in range(20)]
    finally:
        again.disconnect()


def test_another_node_answers_a_token_it_does_not_keep_with_a_fresh_session(
    pair: list[BrokerProcess],
) -> None:
    """Sessions are kept by the node they were on: B starts the client afresh (docs/cluster.md)."""
    a, b = pair
    first, inbox = resumable(a)
    cut(first)
    again, back = resumable(b, inbox.connected["resume-token"])
    try:
        assert back.connected["resumed"] == "false"
        assert back.connected["resume-token"]
    finally:
        again.disconnect()
