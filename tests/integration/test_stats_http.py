"""
The live statistics of the real broker: ``/stats`` and ``/metrics`` fetched with
real ``treq`` over its web port, and the STOMP destinations (``/queue/monitor``,
``/topic/stompbroker.stats``) read with ``stomp.py``.

These are ``twisted.trial`` test cases, which pytest runs: trial spins the reactor
for each test until its Deferred fires, or fails it after :attr:`timeout` seconds.
One broker (``twistd``, a subprocess: :class:`tests.support.process.SharedBroker`)
serves the whole class.
"""

from __future__ import annotations

import json
from typing import Any

import treq
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet import defer
from twisted.trial import unittest

from tests.support.clients import connect, publish
from tests.support.process import SharedBroker

#: Seconds between two live snapshots of the broker under test.
MONITOR_INTERVAL = 0.3
#: Bounded waits, in seconds.
WAIT = 5.0


class LiveStatsTests(SharedBroker, unittest.TestCase):
    """The broker's live statistics, as an operator's tools see them."""

    timeout = 20
    broker_args = (
        *("--data-dir", "none", "--heartbeat", "0,0"),
        *("--monitor-interval", str(MONITOR_INTERVAL)),
    )

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.broker.http_port}{path}"

    @defer.inlineCallbacks
    def fetch(self, path: str) -> Any:
        """GET a page of the web port, on a connection of its own; :returns: (response, body)."""
        response = yield treq.get(self.url(path), persistent=False, timeout=WAIT)
        body = yield treq.content(response)
        return response, body

    def send(self, destination: str, count: int) -> None:
        """Send ``count`` messages with stomp.py, and wait until the broker has them all."""
        publish(self.broker.address, destination, [b"payload"] * count)

    def receive(self, destination: str, count: int) -> list[Any]:
        """Subscribe with stomp.py until ``count`` messages have come; :returns: them."""
        connection, inbox = connect(self.broker.address)
        try:
            connection.subscribe(destination, id="watch")
            self.assertTrue(inbox.wait_for(lambda: len(inbox.messages) >= count, WAIT))
        finally:
            connection.disconnect()
        return inbox.messages[:count]

    @defer.inlineCallbacks
    def test_stats_page_shows_the_traffic(self) -> Any:
        """/stats is JSON with the messages sent so far, the queue's depth and the connections."""
        self.send("/queue/http.jobs", 5)
        response, body = yield self.fetch("/stats")
        self.assertEqual(response.code, 200)
        self.assertEqual(response.headers.getRawHeaders("content-type"), ["application/json"])
        stats = json.loads(body)
        jobs = stats["destinations"]["/queue/http.jobs"]
        self.assertEqual((jobs["messages_in"], jobs["bytes_in"], jobs["depth"]), (5, 35, 5))
        self.assertGreaterEqual(stats["broker"]["connections_opened"], 1)
        self.assertTrue(stats["server"].startswith("stompbroker/"))

    @defer.inlineCallbacks
    def test_metrics_page_is_prometheus_text(self) -> Any:
        """
        /metrics parses as the Prometheus exposition format, with the broker's counters and the
        process's.
        """
        self.send("/topic/http.news", 3)
        response, body = yield self.fetch("/metrics")
        self.assertEqual(response.code, 200)
        samples = {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(body.decode("utf-8"))
            for sample in family.samples
        }
        news = (("destination", "/topic/http.news"),)
        self.assertEqual(samples["stompbroker_destination_messages_in_total", news], 3)
        self.assertGreater(samples["stompbroker_uptime_seconds", ()], 0)
        self.assertGreater(samples["process_resident_memory_bytes", ()], 0)

    def test_monitor_queue_answers_in_stompservers_format(self) -> None:
        """
        A subscriber of /queue/monitor gets status messages listing each queue as stompserver did.
        """
        self.send("/queue/monitored", 2)
        [message] = self.receive("/queue/monitor", 1)
        status = message.body.decode("utf-8")
        self.assertIn("Queue: /queue/monitored\nsize: 2\ndequeued: 0\nenqueued: 2\n\n", status)
        self.assertEqual(message.headers["destination"], "/queue/monitor")

    def test_stats_topic_publishes_snapshots_to_subscribers(self) -> None:
        """A subscriber of /topic/stompbroker.stats gets a JSON snapshot each interval."""
        message = self.receive("/topic/stompbroker.stats", 2)[-1]
        snapshot = json.loads(message.body)
        self.assertEqual(message.headers["content-type"], "application/json")
        self.assertLess(abs(snapshot["interval_s"] - MONITOR_INTERVAL), 0.25)
        self.assertGreaterEqual(snapshot["broker"]["connections"], 1)
        # The feed is not the traffic it shows: the subscriber does not see itself.
        self.assertNotIn(
            "/topic/stompbroker.stats", [d["destination"] for d in snapshot["destinations"]]
        )
