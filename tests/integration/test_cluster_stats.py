"""
Cluster-wide statistics on the redis engine: two ``twistd`` nodes on a real
``redis-server``; ``/stats``, ``/metrics`` and ``/api/destinations`` fetched
with real ``treq`` from a node show the whole cluster and each node
(docs/cluster.md).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import treq
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from tests.support.clients import connect
from tests.support.process import BrokerProcess
from tests.support.redis import NODE_TIMEOUT, RedisServer

#: Bounded waits, in seconds (the nodes exchange figures every second).
WAIT = 10.0


class ClusterStatsTests(unittest.TestCase):
    """What a node's statistics say of a cluster of two."""

    timeout = 60
    workdir: str
    server: RedisServer
    nodes: list[BrokerProcess]

    @classmethod
    def setUpClass(cls) -> None:
        cls.workdir = tempfile.mkdtemp(prefix="stompbroker-cluster-stats-")
        root = Path(cls.workdir)
        (root / "redis").mkdir()
        cls.server = RedisServer(root / "redis")
        cls.nodes = [
            BrokerProcess(
                root / name,
                "--engine",
                cls.server.url,
                "--node-timeout",
                NODE_TIMEOUT,
                "--heartbeat",
                "0,0",
                reactor="uvloop",
            )
            for name in "ab"
        ]

    @classmethod
    def tearDownClass(cls) -> None:
        for process in cls.nodes:
            process.stop()
        cls.server.stop()
        shutil.rmtree(cls.workdir, ignore_errors=True)

    @defer.inlineCallbacks
    def fetch(self, process: BrokerProcess, path: str) -> Any:
        """:returns: the body of a GET on a node's web port."""
        response = yield treq.get(
            f"http://127.0.0.1:{process.http_port}{path}", persistent=False, timeout=WAIT
        )
        body = yield treq.content(response)
        self.assertEqual(response.code, 200, body)
        return body

    @defer.inlineCallbacks
    def until(self, process: BrokerProcess, path: str, holds: Callable[[Any], bool]) -> Any:
        """:returns: the first JSON answer of ``path`` for which ``holds`` is true (bounded)."""
        deadline = time.monotonic() + WAIT
        while True:
            answer = json.loads((yield self.fetch(process, path)))
            if holds(answer) or time.monotonic() > deadline:
                return answer
            yield task.deferLater(reactor, 0.2, lambda: None)

    @defer.inlineCallbacks
    def test_a_queue_fed_on_one_node_and_consumed_on_the_other(self) -> Any:
        """
        Node A's /stats and /api/destinations give the cluster's depth, in-flight
        and consumers of a queue whose producer is on A and consumer on B.
        """
        a, b = self.nodes
        queue = f"/queue/stats.{uuid.uuid4().hex[:8]}"
        consumer, inbox = connect(b.address)
        consumer.subscribe(queue, id="s", ack="client", headers={"prefetch-count": 5})
        producer, sent = connect(a.address)
        for n in range(19):
            producer.send(queue, str(n))
        producer.send(queue, "last", receipt="sent")
        self.assertTrue(sent.wait_for(lambda: "sent" in sent.receipts))
        self.assertTrue(inbox.wait_for(lambda: len(inbox.messages) == 5))

        def settled(stats: Any) -> bool:
            state = stats["destinations"].get(queue, {})
            return (state.get("depth"), state.get("in_flight")) == (15, 5)

        stats = yield self.until(a, "/stats", settled)
        state = stats["destinations"][queue]
        self.assertEqual(
            (state["messages_in"], state["depth"], state["in_flight"], state["consumers"]),
            (20, 15, 5, 1),
        )
        self.assertEqual(len(stats["nodes"]), 2)
        self.assertEqual([node["here"] for node in stats["nodes"]], [True, False])
        self.assertEqual(stats["nodes"][0]["node"], stats["node"])
        # Nothing lapsed: no node dropped an acknowledgement, and B's count reached A.
        self.assertEqual([node["foreign_acks"] for node in stats["nodes"]], [0, 0])
        self.assertGreaterEqual(stats["broker"]["connections"], 2)
        listed = yield self.until(
            a,
            "/api/destinations",
            lambda answer: any(
                entry["destination"] == queue and entry["depth"] == 15 for entry in answer
            ),
        )
        entry = next(entry for entry in listed if entry["destination"] == queue)
        self.assertEqual((entry["depth"], entry["in_flight"], entry["consumers"]), (15, 5, 1))
        consumer.disconnect()
        producer.disconnect()

    @defer.inlineCallbacks
    def test_a_topic_message_counts_in_once_and_delivered_where_delivered(self) -> Any:
        """
        A topic message published on A and delivered on B counts in once and
        delivered once in the cluster's figures, and in each node's own.
        """
        a, b = self.nodes
        topic = f"/topic/stats.{uuid.uuid4().hex[:8]}"
        subscriber, inbox = connect(b.address)
        subscriber.subscribe(topic, id="t", receipt="subscribed")
        self.assertTrue(inbox.wait_for(lambda: "subscribed" in inbox.receipts))
        publisher, sent = connect(a.address)
        for n in range(9):
            publisher.send(topic, str(n))
        publisher.send(topic, "last", receipt="sent")
        self.assertTrue(sent.wait_for(lambda: "sent" in sent.receipts))
        self.assertTrue(inbox.wait_for(lambda: len(inbox.messages) == 10))

        def counted(stats: Any) -> bool:
            state = stats["destinations"].get(topic, {})
            return (state.get("messages_in"), state.get("messages_delivered")) == (10, 10)

        for process in (a, b):
            stats = yield self.until(process, "/stats", counted)
            state = stats["destinations"][topic]
            self.assertEqual((state["messages_in"], state["messages_delivered"]), (10, 10))
        subscriber.disconnect()
        publisher.disconnect()

    @defer.inlineCallbacks
    def test_metrics_label_each_node(self) -> Any:
        """/metrics on one node has each node's own figures, labelled by node."""
        a, _ = self.nodes
        deadline = time.monotonic() + WAIT
        while True:
            body = yield self.fetch(a, "/metrics")
            families = {
                family.name: family for family in text_string_to_metric_families(body.decode())
            }
            nodes = {
                sample.labels["node"] for sample in families["stompbroker_node_connections"].samples
            }
            if len(nodes) == 2 or time.monotonic() > deadline:
                break
            yield task.deferLater(reactor, 0.2, lambda: None)
        self.assertEqual(len(nodes), 2)
        self.assertIn("stompbroker_node_messages_in", families)
        dropped = families["stompbroker_node_foreign_acks"].samples
        self.assertEqual({sample.labels["node"] for sample in dropped}, nodes)
        self.assertEqual([sample.value for sample in dropped], [0.0, 0.0])
