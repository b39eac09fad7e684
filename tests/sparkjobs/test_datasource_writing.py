"""
The writer's rows and refusals without Spark or sockets: rows are ``pyspark.sql.Row``
values, and the broker is a :class:`ScriptedBroker` behind a fake transport that
answers each SEND as the real one does (a RECEIPT, or an ERROR naming the
SEND's receipt and the end of the connection) and can hold its answers back
until a SEND meets the closed connection, as a socket whose peer has closed does.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from attrs import define, field
from pyspark.sql import Row

from sparkjobs.datasource import writing
from sparkjobs.datasource.client import (
    ConnectSettings,
    FrameDecoder,
    StompClient,
    StompConnectionError,
    encode,
)
from sparkjobs.datasource.options import WriteOptions
from sparkjobs.datasource.writing import _pending, write_rows

SETTINGS = ConnectSettings("stomp://127.0.0.1:61613", timeout=1.0)


@define
class ScriptedBroker:
    """
    What the fake connections share: the messages routed, and how each connection ends.

    :ivar forbidden: destinations whose SENDs are refused.
    :ivar news_at_once: whether answers can be read before the next SEND (a
        broker whose bytes arrive in time); else only once a SEND fails.
    :ivar lose_errors: connections whose ERROR (and every answer not yet read)
        is lost with the connection, as a reset would lose them.
    """

    forbidden: set[str]
    news_at_once: bool = True
    lose_errors: int = 0
    routed: list[bytes] = field(factory=list)
    connections: int = 0
    failed_sends: int = 0


@define
class FakeTransport:
    broker: ScriptedBroker
    _decoder: FrameDecoder = field(factory=FrameDecoder)
    _out: bytearray = field(factory=bytearray)
    _closed: bool = False
    _lost: bool = False

    def send(self, data: bytes) -> None:
        if self._closed:
            self.broker.failed_sends += 1
            raise BrokenPipeError(32, "Broken pipe")
        for frame in self._decoder.feed(data):
            self._handle(frame.command, frame.headers, frame.body)

    def _handle(self, command: str, headers: dict[str, str], body: bytes) -> None:
        if command == "CONNECT":
            self._out += encode("CONNECTED", [("version", "1.2")])
        elif headers["destination"] in self.broker.forbidden:
            refusal = [("message", "access denied"), ("receipt-id", headers["receipt"])]
            self._out += encode("ERROR", refusal)
            self._closed = True
            if self.broker.lose_errors:
                self.broker.lose_errors -= 1
                self._lost = True
        else:
            self.broker.routed.append(body)
            self._out += encode("RECEIPT", [("receipt-id", headers["receipt"])])

    def receive(self, timeout: float) -> bytes:
        if self._lost:
            raise ConnectionResetError(104, "Connection reset by peer")
        if self._out:
            data, self._out = bytes(self._out), bytearray()
            return data
        if self._closed:
            return b""
        raise TimeoutError

    def readable(self) -> bool:
        if not self.broker.news_at_once and self._closed:
            return False
        return bool(self._out) or self._closed

    def close(self) -> None:
        self._closed = True


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedBroker]:
    scripted = ScriptedBroker(forbidden={"/queue/forbidden"})

    def connect(settings: ConnectSettings) -> StompClient:
        scripted.connections += 1
        client = StompClient(FakeTransport(scripted), settings.timeout)
        client.send("CONNECT", [("accept-version", "1.2")])
        assert client.receive() is not None
        return client

    monkeypatch.setattr(writing.StompClient, "connect", staticmethod(connect))
    yield scripted


def options(**changes: object) -> WriteOptions:
    values: dict[str, object] = {
        "connect": SETTINGS,
        "destination": None,
        "window": 100,
        "fail_on_refused": False,
    }
    values.update(changes)
    return WriteOptions(**values)  # type: ignore[arg-type]


def every_tenth_forbidden(count: int) -> list[Row]:
    return [
        Row(body=f"row {index}", destination="/queue/forbidden" if index % 10 == 9 else "/queue/ok")
        for index in range(count)
    ]


def allowed_bodies(count: int) -> list[bytes]:
    return [f"row {index}".encode() for index in range(count) if index % 10 != 9]


@pytest.mark.parametrize("news_at_once", [True, False], ids=["read-in-time", "after-broken-pipe"])
def test_refusals_are_read_as_refusals_and_every_other_row_goes_once(
    broker: ScriptedBroker, news_at_once: bool
) -> None:
    """2 000 rows, every tenth refused, 100 in flight: 1 800 routed once each, 200 refused."""
    broker.news_at_once = news_at_once
    report = write_rows(options(), iter(every_tenth_forbidden(2000)), 0)
    assert (report.sent, report.refusals) == (1800, 200)
    assert broker.routed == allowed_bodies(2000)
    assert report.refused[0] == writing.Refusal(0, 9, "access denied")
    assert broker.connections == 200
    assert (broker.failed_sends > 0) == (not news_at_once)


def test_an_error_lost_with_its_connection_sends_the_unconfirmed_rows_again(
    broker: ScriptedBroker,
) -> None:
    """A reset that loses the ERROR: the rows are sent again, at least once, none lost."""
    broker.news_at_once = False
    broker.lose_errors = 1
    report = write_rows(options(window=5), iter(every_tenth_forbidden(30)), 0)
    assert report.refusals == 3
    assert set(broker.routed) == set(allowed_bodies(30))
    assert report.sent == len(allowed_bodies(30))


def test_a_broker_that_keeps_losing_the_connection_fails_the_task(
    broker: ScriptedBroker,
) -> None:
    """Losses in a row with no RECEIPT between them end the task: Spark retries it."""
    broker.news_at_once = False
    broker.lose_errors = writing.MOST_LOSSES + 1
    rows = [Row(body="x", destination="/queue/forbidden")]
    with pytest.raises(StompConnectionError, match="closed the connection 4 times in a row"):
        write_rows(options(), iter(rows), 0)


def test_transport_headers_of_a_read_row_are_not_sent() -> None:
    """A row as the reader makes it: only its own headers go, to the option's destination."""
    read = Row(
        offset=7,
        timestamp=1.5,
        destination="/stream/source",
        headers={
            "content-length": "2",
            "message-id": "m-1",
            "destination": "/stream/source",
            "subscription": "s",
            "ack": "a",
            "x-stream-offset": "7",
            "Content-Length": "9",
            "kind": "audit",
        },
        body=b"changed body",
    )
    pending = _pending(read, 0, options(destination="/stream/copy"))
    assert not isinstance(pending, str)
    assert (pending.destination, pending.headers, pending.body) == (
        "/stream/copy",
        (("kind", "audit"),),
        b"changed body",
    )


def test_the_destination_column_serves_when_no_option_names_one() -> None:
    """Without the option, each row's destination column; offset and timestamp stay out."""
    pending = _pending(Row(offset=1, destination="/queue/a", body="x", region="eu"), 0, options())
    assert not isinstance(pending, str)
    assert (pending.destination, pending.headers) == ("/queue/a", (("region", "eu"),))


def test_header_columns_name_the_columns_that_become_headers() -> None:
    """headerColumns: those columns alone, the read's own among them if named."""
    row = Row(offset=3, timestamp=None, body="x", region="eu", shard=2)
    pending = _pending(row, 0, options(destination="/queue/a", header_columns=("offset", "shard")))
    assert not isinstance(pending, str)
    assert pending.headers == (("offset", "3"), ("shard", "2"))
