"""
Webhooks (:mod:`stompbroker.broker.features.webhooks`) on a ``task.Clock``
with a recording ``post``: batches, signatures, order, retries with back-off,
the age past which a batch is dropped; and what presence reports to them.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock

from stompbroker.broker.features.presence import Presence, Present
from stompbroker.broker.features.webhooks import (
    BATCH_DELAY,
    MAX_AGE,
    RETRY_DELAYS,
    SIGNATURE_HEADER,
    Webhooks,
    signature,
)
from stompbroker.interfaces import ConnectionDescription
from tests.support.broker import FakeConnection, Inbox

SECRET = b"s3cret-of-sixteen-bytes"


class Application:
    """The application's server: answers each post with the next status given."""

    def __init__(self, *statuses: int | None) -> None:
        self.statuses = list(statuses)
        self.posts: list[tuple[bytes, dict[str, str]]] = []

    def post(self, body: bytes, headers: dict[str, str]) -> Deferred[int]:
        self.posts.append((body, headers))
        status = self.statuses.pop(0) if self.statuses else 200
        if status is None:
            return fail(ConnectionRefusedError("connection refused"))
        return succeed(status)

    def events(self, index: int = -1) -> list[tuple[str, str]]:
        body = json.loads(self.posts[index][0])
        return [(event["name"], event["destination"]) for event in body["events"]]


def hooks(app: Application) -> tuple[Webhooks, Clock]:
    clock = Clock()
    clock.advance(1000)
    return Webhooks(app.post, SECRET, clock), clock


def test_the_events_of_a_moment_go_in_one_signed_batch() -> None:
    app = Application()
    webhooks, clock = hooks(app)
    webhooks.occupied("/topic/room")
    webhooks.member_added("/topic/room", {"id": "alice"})
    assert app.posts == []
    clock.advance(BATCH_DELAY)
    [(body, headers)] = app.posts
    assert json.loads(body)["time_ms"] == 1000_050
    assert app.events() == [
        ("destination_occupied", "/topic/room"),
        ("member_added", "/topic/room"),
    ]
    expected = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    assert headers[SIGNATURE_HEADER] == expected == signature(SECRET, body)
    assert headers["Content-Type"] == "application/json"
    assert webhooks.figures.events == 2 and webhooks.figures.delivered == 1


def test_a_failed_batch_is_retried_with_back_off_and_the_next_waits_its_turn() -> None:
    app = Application(500, None, 200, 200)
    webhooks, clock = hooks(app)
    webhooks.occupied("/topic/a")
    clock.advance(BATCH_DELAY)
    webhooks.vacated("/topic/a")
    clock.advance(BATCH_DELAY)
    assert len(app.posts) == 1  # the second waits behind the first
    clock.advance(RETRY_DELAYS[0])
    assert len(app.posts) == 2  # the first again: refused this time
    clock.advance(RETRY_DELAYS[1] - 0.01)
    assert len(app.posts) == 2
    clock.advance(0.01)
    assert [app.events(n) for n in range(len(app.posts))] == [
        [("destination_occupied", "/topic/a")],
        [("destination_occupied", "/topic/a")],
        [("destination_occupied", "/topic/a")],
        [("destination_vacated", "/topic/a")],
    ]
    assert webhooks.figures.retried == 2 and webhooks.figures.delivered == 2


def test_a_batch_undelivered_for_too_long_is_dropped_and_the_next_goes() -> None:
    app = Application(*([503] * 1000))
    webhooks, clock = hooks(app)
    webhooks.occupied("/topic/a")
    clock.advance(BATCH_DELAY)
    webhooks.vacated("/topic/a")
    for _ in range(40):
        clock.advance(RETRY_DELAYS[-1])
    assert webhooks.figures.dropped == 2
    assert clock.seconds() - 1000 >= 2 * MAX_AGE
    assert {event for n in range(len(app.posts)) for event in app.events(n)} == {
        ("destination_occupied", "/topic/a"),
        ("destination_vacated", "/topic/a"),
    }
    app.statuses = []
    webhooks.occupied("/topic/b")
    clock.advance(BATCH_DELAY)
    assert app.events() == [("destination_occupied", "/topic/b")]


# -- what presence reports -------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.told: list[tuple[Any, ...]] = []

    def occupied(self, destination: str) -> None:
        self.told.append(("occupied", destination))

    def vacated(self, destination: str) -> None:
        self.told.append(("vacated", destination))

    def member_added(self, destination: str, member: dict[str, Any]) -> None:
        self.told.append(("added", destination, member["id"]))

    def member_removed(self, destination: str, member: dict[str, Any]) -> None:
        self.told.append(("removed", destination, member["id"]))


def subscriber(session: str, login: str | None, sid: str = "s") -> Inbox:
    connection = FakeConnection(session)
    connection.describe = lambda: ConnectionDescription(  # type: ignore[method-assign]
        session=session, address="a", user=login
    )
    return Inbox("/topic/room", "auto", subscription_id=sid, connection=connection)


def test_presence_reports_this_nodes_changes_once_per_destination_and_member() -> None:
    clock = Clock()
    numbers = itertools.count()
    presence = Presence("here", clock, lambda: f"p-{next(numbers)}")
    recorder = Recorder()
    presence.webhooks = recorder
    tab1, tab2 = subscriber("c1", "alice"), subscriber("c2", "alice")
    presence.join(tab1)
    presence.join(tab2)  # alice's second tab: nothing
    # Another node's subscriber: that node reports it, not this one.
    presence.apply_join(Present("/topic/room", "there", "c9", "s", "bob", 3.0))
    presence.leave(tab1)
    presence.leave(tab2)
    assert recorder.told == [
        ("occupied", "/topic/room"),
        ("added", "/topic/room", "alice"),
        ("removed", "/topic/room", "alice"),
    ]
    # Bob leaves on his node (which reports the room vacated): an anonymous
    # connection here is then the room's first subscriber, and a member of its own.
    presence.apply_leave(Present("/topic/room", "there", "c9", "s", "bob", 3.0))
    anonymous = subscriber("c3", None)
    presence.join(anonymous)
    presence.leave(anonymous)
    assert recorder.told[3:] == [
        ("occupied", "/topic/room"),
        ("added", "/topic/room", "c3"),
        ("removed", "/topic/room", "c3"),
        ("vacated", "/topic/room"),
    ]
