"""
The management API of a real broker (``twistd``, with ``--auth`` and an access
file), called with real ``treq``; the other side of each operation is a
``stomp.py`` client.  Every refused call shows its JSON error and that nothing
changed.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import treq
from twisted.internet import defer, task
from twisted.trial import unittest

from tests.support.clients import connect
from tests.support.management import ADMIN, READER, managed_broker
from tests.support.process import BrokerProcess

WAIT = 5.0


class ManagementApiTests(unittest.TestCase):
    """Each call of the API against one broker, as an operator's script makes it."""

    timeout = 30
    broker: BrokerProcess
    workdir: str

    @classmethod
    def setUpClass(cls) -> None:
        cls.workdir = tempfile.mkdtemp(prefix="stompbroker-api-")
        cls.broker = managed_broker(Path(cls.workdir))

    @classmethod
    def tearDownClass(cls) -> None:
        cls.broker.stop()
        shutil.rmtree(cls.workdir, ignore_errors=True)

    @defer.inlineCallbacks
    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        auth: tuple[str, str] | None = ADMIN,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """:returns: (status, JSON answer) of one call, on a connection of its own."""
        headers = dict(headers or {})
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        response = yield treq.request(
            method,
            f"http://127.0.0.1:{self.broker.http_port}/api/{path}",
            data=data,
            auth=auth,
            headers=headers,
            persistent=False,
            timeout=WAIT,
        )
        content = yield treq.content(response)
        return response.code, json.loads(content)

    def send(self, destination: str, *bodies: str) -> None:
        """Send persistent messages with stomp.py, and wait until the broker has them."""
        connection, inbox = connect(self.broker.address)
        try:
            for number, body in enumerate(bodies):
                headers = {"persistent": "true"}
                if number == len(bodies) - 1:
                    headers["receipt"] = "last"
                connection.send(destination, body, headers=headers)
            self.assertTrue(inbox.wait_for(lambda: "last" in inbox.receipts, WAIT))
        finally:
            connection.disconnect()

    @defer.inlineCallbacks
    def depth(self, destination: str) -> Any:
        code, rows = yield self.call("GET", "destinations")
        return {row["destination"]: row["depth"] for row in rows}.get(destination, 0)

    @defer.inlineCallbacks
    def test_fill_browse_purge_and_a_reader_cannot_purge(self) -> Any:
        """Depth shows in the list; browse peeks; a reader's purge is refused, an admin's works."""
        self.send("/queue/fill", "one", "two", "three")
        self.assertEqual((yield self.depth("/queue/fill")), 3)
        code, messages = yield self.call("GET", "destinations/%2Fqueue%2Ffill/messages?count=2")
        self.assertEqual(code, 200)
        self.assertEqual([message["body"] for message in messages], ["one", "two"])
        self.assertTrue(messages[0]["persistent"])
        code, error = yield self.call(
            "DELETE", "destinations/%2Fqueue%2Ffill/messages", auth=READER
        )
        self.assertEqual(code, 403)
        self.assertIn("admin", error["detail"])
        self.assertEqual((yield self.depth("/queue/fill")), 3)
        code, answer = yield self.call("DELETE", "destinations/%2Fqueue%2Ffill/messages")
        self.assertEqual((code, answer["purged"]), (200, 3))
        self.assertEqual((yield self.depth("/queue/fill")), 0)

    @defer.inlineCallbacks
    def test_close_a_connection_sends_the_client_an_operator_error(self) -> Any:
        """
        GET /api/connections/{id} shows one connection with its messages and bytes each way;
        DELETE ends it with ERROR "closed by an operator".
        """
        connection, inbox = connect(self.broker.address)
        connection.subscribe("/queue/detail", id="d")
        connection.send("/queue/detail", "to myself", headers={"receipt": "sent"})
        self.assertTrue(inbox.wait_for(lambda: inbox.messages and "sent" in inbox.receipts, WAIT))
        code, rows = yield self.call("GET", "connections")
        self.assertEqual(code, 200)
        [row] = [row for row in rows if row["version"] == "1.2"]
        code, detail = yield self.call("GET", f"connections/{row['id']}", auth=READER)
        self.assertEqual(code, 200)
        self.assertEqual((detail["messages_in"], detail["messages_out"]), (1, 1))
        self.assertEqual([sub["destination"] for sub in detail["subscriptions"]], ["/queue/detail"])
        self.assertGreater(detail["bytes_in"], len("to myself"))
        self.assertTrue(detail["connected_since"].endswith("Z"))
        code, closed = yield self.call("DELETE", f"connections/{row['id']}?reason=maintenance")
        self.assertEqual(code, 200)
        self.assertTrue(inbox.wait_for(lambda: inbox.errors, WAIT))
        error = inbox.errors[0]
        self.assertEqual(error.headers["message"], "closed by an operator")
        self.assertIn(b"maintenance", error.body)
        self.assertTrue(inbox.wait_for(lambda: inbox.disconnected, WAIT))
        connection.disconnect()
        code, error = yield self.call("DELETE", f"connections/{row['id']}")
        self.assertEqual(code, 404)

    @defer.inlineCallbacks
    def test_dead_letters_go_back_to_their_queue(self) -> Any:
        """A NACKed message (requeue:false) lands in the DLQ; retry sends it back to its queue."""
        self.send("/queue/work", "poison")
        connection, inbox = connect(self.broker.address)
        connection.subscribe("/queue/work", "1", ack="client-individual")
        self.assertTrue(inbox.wait_for(lambda: inbox.messages, WAIT))
        ack_id = inbox.messages[0].headers["ack"]
        connection.nack(ack_id, receipt="nacked", requeue="false")
        self.assertTrue(inbox.wait_for(lambda: "nacked" in inbox.receipts, WAIT))
        connection.disconnect()
        yield task.deferLater(_reactor(), 0.2, lambda: None)
        self.assertEqual((yield self.depth("/queue/DLQ.work")), 1)
        code, answer = yield self.call("POST", "destinations/%2Fqueue%2FDLQ.work/retry", {})
        self.assertEqual((code, answer["retried"], answer["left"]), (200, 1, 0))
        self.assertEqual((yield self.depth("/queue/DLQ.work")), 0)
        code, [message] = yield self.call("GET", "destinations/%2Fqueue%2Fwork/messages")
        self.assertEqual(message["body"], "poison")
        self.assertNotIn("original-destination", message["headers"])

    @defer.inlineCallbacks
    def test_publish_and_move(self) -> Any:
        """A message published through the API can be moved to another queue."""
        code, answer = yield self.call(
            "POST", "destinations/%2Fqueue%2Fa/publish", {"body": "hi", "headers": {"k": "v"}}
        )
        self.assertEqual(code, 200)
        code, answer = yield self.call("POST", "destinations/%2Fqueue%2Fa/move", {"to": "/queue/b"})
        self.assertEqual((code, answer["moved"]), (200, 1))
        code, [message] = yield self.call("GET", "destinations/%2Fqueue%2Fb/messages")
        self.assertEqual((message["body"], message["headers"]["k"]), ("hi", "v"))

    @defer.inlineCallbacks
    def test_refused_calls_say_why_and_change_nothing(self) -> Any:
        """No credentials, wrong ones, another origin, a form POST: each refused, the queue kept."""
        self.send("/queue/kept", "x")
        purge = "destinations/%2Fqueue%2Fkept/messages"
        code, error = yield self.call("DELETE", purge, auth=None)
        self.assertEqual((code, error["error"]), (401, "credentials required"))
        started = time.monotonic()
        code, error = yield self.call("DELETE", purge, auth=("admin", "wrong"))
        self.assertEqual((code, error["error"]), (401, "login failed"))
        self.assertGreaterEqual(time.monotonic() - started, 0.9)
        code, error = yield self.call("DELETE", purge, headers={"Origin": "http://evil.test"})
        self.assertEqual(code, 403)
        self.assertIn("evil.test", error["detail"])
        code, error = yield self.call(
            "POST",
            "destinations/%2Fqueue%2Fkept/move",
            None,
            headers={"Content-Type": "text/plain"},
        )
        self.assertEqual(code, 415)
        code, error = yield self.call("GET", "destinations/%2Fqueue%2Fkept/messages?count=-1")
        self.assertEqual(code, 400)
        self.assertIn("count", error["detail"])
        self.assertEqual((yield self.depth("/queue/kept")), 1)

    @defer.inlineCallbacks
    def test_overview_and_nodes(self) -> Any:
        """The overview is the /stats document; nodes lists this broker."""
        code, overview = yield self.call("GET", "overview", auth=READER)
        self.assertEqual(code, 200)
        self.assertIn("broker", overview)
        code, [node] = yield self.call("GET", "nodes", auth=READER)
        self.assertEqual((node["here"], node["engine"]), (True, "local"))


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor
