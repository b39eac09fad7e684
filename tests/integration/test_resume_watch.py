"""
Resumable sessions as an operator watches them, on a real ``twistd`` broker:
a ``stomp.py`` client with a resume token loses its socket (no DISCONNECT),
and ``/stats``, ``/metrics`` and the management API (real ``treq``) show one
detached session and the bytes it holds; it resumes and the figures move; a
short ``--resume-window`` passes and the expired counter moves; an operator
ends a session and its token resumes no more.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import treq
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet import defer
from twisted.trial import unittest

from tests.support.clients import publish
from tests.support.process import BrokerProcess, SharedBroker
from tests.support.resume import cut, resumable, subscribed

WAIT = 5.0
#: The window of the broker the tests share: longer than any test takes.
WINDOW = 120.0
#: The window of the broker on which a session expires.
SHORT_WINDOW = 1.0
#: The options of both brokers but the window: without --auth, loopback callers may manage.
ARGS = ("--data-dir", "none", "--heartbeat", "0,0")


class ResumeWatchTests(SharedBroker, unittest.TestCase):
    """Detached sessions in /stats, /metrics and /api/detached-sessions."""

    timeout = 40
    broker_args = (*ARGS, "--resume-window", str(WINDOW))

    def url(self, path: str, broker: BrokerProcess | None = None) -> str:
        return f"http://127.0.0.1:{(broker or self.broker).http_port}{path}"

    @defer.inlineCallbacks
    def get(self, path: str, broker: BrokerProcess | None = None) -> Any:
        """:returns: the body of a GET, on a connection of its own."""
        response = yield treq.get(self.url(path, broker), persistent=False, timeout=WAIT)
        body = yield treq.content(response)
        self.assertEqual(response.code, 200, body)
        return body

    @defer.inlineCallbacks
    def figures(self, broker: BrokerProcess | None = None) -> Any:
        """:returns: /stats's resumable sessions, and /metrics's samples by name and state."""
        stats = json.loads((yield self.get("/stats", broker)))["resumable_sessions"]
        text = (yield self.get("/metrics", broker)).decode()
        samples = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples[(sample.name, sample.labels.get("state"))] = sample.value
        return stats, samples

    @defer.inlineCallbacks
    def detached(self, broker: BrokerProcess | None = None) -> Any:
        return json.loads((yield self.get("/api/detached-sessions", broker)))

    @defer.inlineCallbacks
    def test_a_dropped_session_is_shown_then_resumed_and_the_figures_move(self) -> Any:
        """One detached session and its buffered bytes show everywhere; a resume moves them."""
        first, inbox = subscribed(self.broker, "/topic/watch", "w")
        token = inbox.connected["resume-token"]
        cut(first)
        publish(self.broker.address, "/topic/watch", [f"w{number}" for number in range(10)])
        stats, samples = yield self.figures()
        self.assertEqual(stats["detached"], 1)
        held = stats["detached_bytes"]
        self.assertGreater(held, 10 * len("w0"))
        self.assertEqual(samples[("stompbroker_resumable_sessions", "detached")], 1)
        self.assertEqual(samples[("stompbroker_resume_buffer_bytes", "detached")], held)
        [row] = yield self.detached()
        self.assertEqual(row["id"], inbox.connected["session"])
        self.assertEqual((row["buffered_bytes"], row["missed"], row["gap"]), (held, 10, False))
        self.assertNotIn(token, json.dumps(row))
        resumed_before = stats["resumed"]

        again, back = resumable(self.broker, token)
        try:
            self.assertEqual(back.connected["resumed"], "true")
            self.assertTrue(back.wait_for(lambda: len(back.messages) == 10, WAIT))
            stats, samples = yield self.figures()
            self.assertEqual((stats["detached"], stats["detached_bytes"]), (0, 0))
            self.assertEqual(stats["resumed"], resumed_before + 1)
            self.assertGreaterEqual(stats["connected"], 1)
            self.assertGreaterEqual(stats["connected_bytes"], held)
            self.assertEqual(samples[("stompbroker_resumes_total", None)], resumed_before + 1)
            self.assertEqual((yield self.detached()), [])
        finally:
            again.disconnect()

    @defer.inlineCallbacks
    def test_a_session_past_its_window_is_counted_expired(self) -> Any:
        """Once --resume-window passes the session is gone from the list and counted expired."""
        workdir = Path(tempfile.mkdtemp(prefix="stompbroker-resume-expiry-"))
        self.addCleanup(shutil.rmtree, workdir, True)
        broker = BrokerProcess(workdir, *ARGS, "--resume-window", str(SHORT_WINDOW))
        try:
            first, inbox = subscribed(broker, "/topic/expire", "e")
            cut(first)
            time.sleep(SHORT_WINDOW + 0.5)
            stats, samples = yield self.figures(broker)
            self.assertEqual((stats["expired"], stats["detached"], stats["refused"]), (1, 0, 0))
            self.assertEqual(samples[("stompbroker_resumable_sessions_expired_total", None)], 1)
            self.assertEqual((yield self.detached(broker)), [])
            again, back = resumable(broker, inbox.connected["resume-token"])
            again.disconnect()
            self.assertEqual(back.connected["resumed"], "false")
            stats, _ = yield self.figures(broker)
            self.assertEqual(stats["refused"], 1)
        finally:
            broker.stop()

    @defer.inlineCallbacks
    def test_a_session_an_operator_ends_resumes_no_more(self) -> Any:
        """DELETE /api/detached-sessions/{id} ends it; its client then gets resumed:false."""
        before, _ = yield self.figures()
        first, inbox = subscribed(self.broker, "/topic/end", "x")
        cut(first)
        session = inbox.connected["session"]
        response = yield treq.delete(
            self.url(f"/api/detached-sessions/{session}"),
            persistent=False,
            timeout=WAIT,
        )
        ended = json.loads((yield treq.content(response)))
        self.assertEqual((response.code, ended["id"]), (200, session))
        again, back = resumable(self.broker, inbox.connected["resume-token"])
        again.disconnect()
        self.assertEqual(back.connected["resumed"], "false")
        stats, _ = yield self.figures()
        self.assertEqual(stats["ended"], before["ended"] + 1)
        self.assertEqual(stats["refused"], before["refused"] + 1)
