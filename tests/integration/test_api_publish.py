"""
The management API's publish on a real broker (``twistd``) with ``--auth http:``,
called with real ``treq``: it takes every destination a SEND takes (``/user/``
and ``/stream/`` too), asks the application about a login whose answer listed no
``rights`` as a SEND is asked, and tells the application the caller's address.
The application is a small twisted.web server that writes down every question.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import treq
from twisted.internet import defer
from twisted.trial import unittest

from tests.support.clients import connect
from tests.support.process import BrokerProcess, free_port, subprocess_env, wait_for_port

WAIT = 5.0

#: The application: users, what each may send, and a file of every question asked.
APPLICATION = """
import json
import sys

from twisted.internet import reactor
from twisted.web.resource import Resource
from twisted.web.server import Site

USERS = {"alice": "wonderland", "bob": "builder", "ops": "listed"}
LISTED = {"ops": {"read": [], "write": ["/queue/#"], "admin": []}}
MAY = {
    ("alice", "send", "/topic/prices"),
    ("alice", "send", "/user/bob/queue/notify"),
    ("alice", "send", "/stream/audit"),
}
asked = open(sys.argv[2], "a")


class Decide(Resource):
    isLeaf = True

    def render_POST(self, request):
        body = json.load(request.content)
        path = request.path.decode().rsplit("/", 1)[-1]
        asked.write(json.dumps([path, body]) + "\\n")
        asked.flush()
        if path == "user":
            answer = {"allow": USERS.get(body["login"]) == body["passcode"]}
            if body["login"] in LISTED:
                answer["rights"] = LISTED[body["login"]]
        elif path == "vhost":
            answer = {"allow": True}
        elif (body["user"], body["action"], body["destination"]) in MAY:
            answer = {"allow": True}
        else:
            answer = {"allow": False, "reason": "not yours"}
        request.setHeader(b"content-type", b"application/json")
        return json.dumps(answer).encode()


reactor.listenTCP(int(sys.argv[1]), Site(Decide()), interface="127.0.0.1")
reactor.run()
"""


class PublishThroughAnApplicationTests(unittest.TestCase):
    """Publishes by users the application decides for, and what it was asked."""

    timeout = 30
    workdir: Path
    application: subprocess.Popen[bytes]
    broker: BrokerProcess

    @classmethod
    def setUpClass(cls) -> None:
        cls.workdir = Path(tempfile.mkdtemp(prefix="stompbroker-api-publish-"))
        script = cls.workdir / "app.py"
        script.write_text(APPLICATION)
        port = free_port()
        cls.application = subprocess.Popen(
            [sys.executable, str(script), str(port), str(cls.workdir / "asked.jsonl")],
            env=subprocess_env(),
        )
        try:
            wait_for_port(port, process=cls.application)
            url = f"http://127.0.0.1:{port}/stomp"
            cls.broker = BrokerProcess(
                cls.workdir / "broker", "--auth", f"http:{url}", "--data-dir", "none"
            )
        except BaseException:
            cls.application.terminate()
            cls.application.wait(timeout=10)
            raise

    @classmethod
    def tearDownClass(cls) -> None:
        cls.broker.stop()
        cls.application.terminate()
        cls.application.wait(timeout=10)
        shutil.rmtree(cls.workdir, ignore_errors=True)

    @defer.inlineCallbacks
    def publish(self, user: str, password: str, destination: str, body: str) -> Any:
        """:returns: (status, JSON answer) of a publish by ``user``."""
        quoted = destination.replace("/", "%2F")
        response = yield treq.post(
            f"http://127.0.0.1:{self.broker.http_port}/api/destinations/{quoted}/publish",
            json={"body": body},
            auth=(user, password),
            persistent=False,
            timeout=WAIT,
        )
        answer = yield treq.json_content(response)
        return response.code, answer

    def asked(self, path: str) -> list[dict[str, Any]]:
        """:returns: the bodies of the questions the application was asked at ``path``."""
        lines = (self.workdir / "asked.jsonl").read_text().splitlines()
        return [body for asked_path, body in map(json.loads, lines) if asked_path == path]

    @defer.inlineCallbacks
    def test_a_login_without_listed_rights_publishes_where_the_application_allows(
        self,
    ) -> Any:
        """alice's answer lists no rights: her publish is asked about, as her SEND would be."""
        code, answer = yield self.publish("alice", "wonderland", "/topic/prices", "1.08")
        self.assertEqual(code, 200, answer)
        self.assertIn(
            {
                "user": "alice",
                "groups": [],
                "destination": "/topic/prices",
                "action": "send",
                "right": "write",
            },
            self.asked("resource"),
        )

    @defer.inlineCallbacks
    def test_a_publish_the_application_refuses_is_403_with_its_reason(self) -> Any:
        """The application's deny is a 403 naming the right, its reason the detail."""
        code, answer = yield self.publish("alice", "wonderland", "/queue/secret", "x")
        self.assertEqual(code, 403)
        self.assertEqual(answer["error"], "access denied: no write right on '/queue/secret'")
        self.assertEqual(answer["detail"], "not yours")

    @defer.inlineCallbacks
    def test_a_publish_to_a_user_reaches_that_users_sessions(self) -> Any:
        """/user/bob/queue/notify is routed as a SEND: bob's /user/queue/notify gets it."""
        connection, inbox = connect(self.broker.address, login="bob", passcode="builder")
        try:
            connection.subscribe("/user/queue/notify", id="0", receipt="s")
            self.assertTrue(inbox.wait_for(lambda: "s" in inbox.receipts))
            code, answer = yield self.publish(
                "alice", "wonderland", "/user/bob/queue/notify", "ding"
            )
            self.assertEqual(code, 200, answer)
            self.assertTrue(inbox.wait_for(lambda: inbox.bodies() == [b"ding"]))
        finally:
            connection.disconnect()

    @defer.inlineCallbacks
    def test_a_publish_to_a_stream_is_appended(self) -> Any:
        """A /stream/ destination, which a SEND may name, takes a publish too."""
        code, answer = yield self.publish("alice", "wonderland", "/stream/audit", "entry")
        self.assertEqual((code, answer["destination"]), (200, "/stream/audit"))

    @defer.inlineCallbacks
    def test_a_login_with_listed_rights_is_not_asked_about_destinations(self) -> Any:
        """A login whose answer listed rights publishes by them, nothing more asked."""
        code, answer = yield self.publish("ops", "listed", "/queue/jobs", "job")
        self.assertEqual(code, 200, answer)
        self.assertNotIn("/queue/jobs", [body["destination"] for body in self.asked("resource")])

    @defer.inlineCallbacks
    def test_api_logins_tell_the_application_the_callers_address(self) -> Any:
        """The login asked for an API call carries ``ip``, as a STOMP login's does."""
        code, _ = yield self.publish("alice", "wonderland", "/topic/prices", "1.09")
        self.assertEqual(code, 200)
        self.assertIn(
            {"login": "alice", "passcode": "wonderland", "ip": "127.0.0.1"}, self.asked("user")
        )

    @defer.inlineCallbacks
    def test_destinations_of_one_connection_are_refused(self) -> Any:
        """A temporary queue belongs to one connection: a publish there is a 400 saying so."""
        code, answer = yield self.publish("alice", "wonderland", "/temp-queue/mine", "x")
        self.assertEqual(code, 400)
        self.assertIn("of one connection", answer["detail"])
