"""
Sending rows as messages: one SEND per row, each with a receipt, a window of them in flight.

A row's ``body`` column (binary or string) is the body; the ``destination``
option, else the row's ``destination`` column, the destination (as Spark's Kafka
sink: the option overrides the column, so rows read from one destination and
written with the option go where the option says); its ``headers`` column (a
map of strings) and every other non-null column are headers, but for the
columns a read adds that are no header (``offset``, ``timestamp``) unless the
``headerColumns`` option names them.  Headers that belong to the transport
(``content-length``, ``message-id``, ``destination``, ``subscription``, ``ack``,
``receipt``, ``x-stream-*``, ...) are never taken from the ``headers`` map: a row
read from a stream carries them, and a stale ``content-length`` would cut a
changed body.

Refusals: the broker answers a SEND it refuses (no ``write`` right, a body
over its limit) with an ERROR naming the SEND's receipt and closes the
connection, having handled every frame before it and none after.  So the rows
before the refused one count as sent, the refused row is recorded with the
ERROR's message, and the rows after it are sent again on a new connection.
The writer reads what the broker said before each SEND, so that the ERROR is
read before a SEND meets the closed connection; a connection that ends without
an ERROR all the same (its last bytes lost with it) is opened again and the
rows not yet confirmed are sent again (at least once), a few times in a row at
most.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from attrs import frozen
from pyspark.sql.datasource import WriterCommitMessage

from sparkjobs.datasource.client import StompBrokerError, StompClient, StompConnectionError
from sparkjobs.datasource.options import WriteOptions

#: Columns with a meaning of their own; any other column becomes a header.
ROLE_COLUMNS = ("body", "destination", "headers")
#: Columns a read adds that are no header: left out unless ``headerColumns`` names them.
READ_COLUMNS = ("offset", "timestamp")
#: Headers of the transport, which a ``headers`` map never sets on a SEND.
TRANSPORT_HEADERS = frozenset(
    {
        "content-length",
        "message-id",
        "destination",
        "subscription",
        "ack",
        "receipt",
        "receipt-id",
        "transaction",
    }
)
#: Headers a stream read adds (``x-stream-offset``, ``x-stream-timestamp``).
STREAM_HEADER_PREFIX = "x-stream-"
#: Connections lost in a row, with no RECEIPT between, before the write gives up.
MOST_LOSSES = 3
#: How many refusals a report keeps word for word (the count is always whole).
KEPT_REFUSALS = 20


class RowsRefused(Exception):
    """The broker refused rows of a write (``onRefused`` is ``fail``)."""


@frozen
class Refusal:
    """:ivar partition: the Spark partition; :ivar row: the row's place in it; :ivar reason: why."""

    partition: int
    row: int
    reason: str


class WriteReport(WriterCommitMessage):
    """
    What one task sent.

    :ivar sent: rows confirmed by a RECEIPT (or handled before a refused one).
    :ivar refusals: rows refused.
    :ivar refused: the first :data:`KEPT_REFUSALS` of them.
    """

    def __init__(self, sent: int, refusals: int, refused: list[Refusal]) -> None:
        self.sent = sent
        self.refusals = refusals
        self.refused = refused


@frozen
class _Pending:
    row: int
    destination: str
    headers: tuple[tuple[str, str], ...]
    body: bytes


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _transported(name: str) -> bool:
    lowered = name.lower()
    return lowered in TRANSPORT_HEADERS or lowered.startswith(STREAM_HEADER_PREFIX)


def _pending(row: Any, index: int, options: WriteOptions) -> _Pending | str:
    """:returns: the SEND a row makes, or why it cannot make one."""
    values = row.asDict()
    destination = options.destination or values.get("destination")
    if not destination:
        return "no destination: give option destination or a destination column"
    body = values.get("body")
    if body is None:
        return "no body: the row needs a non-null body column"
    headers = [
        (name, _text(value))
        for name, value in (values.get("headers") or {}).items()
        if not _transported(name)
    ]
    named = options.header_columns
    headers += [
        (name, _text(value))
        for name, value in values.items()
        if value is not None
        and name not in ROLE_COLUMNS
        and (name in named if named else name not in READ_COLUMNS)
    ]
    data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    return _Pending(index, destination, tuple(headers), data)


class _Sender:
    """One task's connection, the SENDs awaiting a RECEIPT, and what came of them."""

    def __init__(self, options: WriteOptions, partition: int) -> None:
        self.options = options
        self.partition = partition
        self.sent = 0
        self.refused: list[Refusal] = []
        self.refusals = 0
        self._waiting: OrderedDict[str, _Pending] = OrderedDict()
        self._client: StompClient | None = None
        self._losses = 0

    def refuse(self, row: int, reason: str) -> None:
        self.refusals += 1
        if len(self.refused) < KEPT_REFUSALS:
            self.refused.append(Refusal(self.partition, row, reason))

    def send(self, pending: _Pending) -> None:
        while self._client is not None and self._waiting and self._client.has_news():
            self._settle_one()
        if self._client is None:
            self._client = StompClient.connect(self.options.connect)
        receipt = f"row-{pending.row}"
        self._waiting[receipt] = pending
        headers = [("destination", pending.destination), ("receipt", receipt), *pending.headers]
        try:
            self._client.send("SEND", headers, pending.body)
        except StompConnectionError:
            self._read_to_the_end()
        while len(self._waiting) >= self.options.window:
            self._settle_one()

    def finish(self) -> None:
        while self._waiting:
            self._settle_one()
        if self._client is not None:
            self._client.close()
            self._client = None

    def _settle_one(self) -> None:
        if self._client is None:
            self._send_again()
            return
        try:
            frame = self._client.receive()
        except StompBrokerError as error:
            self._refused(error)
            return
        except StompConnectionError:
            self._lost()
            return
        if frame is None:
            raise TimeoutError(f"no RECEIPT from the broker in {self.options.connect.timeout} s")
        pending = self._waiting.pop(frame.headers.get("receipt-id", ""), None)
        if frame.command == "RECEIPT" and pending is not None:
            self.sent += 1
            self._losses = 0

    def _read_to_the_end(self) -> None:
        """
        A SEND met a closed connection: read what the broker said before it
        closed (the RECEIPTs, and the ERROR that closed it) until it is settled.
        """
        client = self._client
        while self._client is client and self._waiting:
            self._settle_one()

    def _lost(self) -> None:
        """The connection ended without an ERROR: send what it did not confirm again."""
        assert self._client is not None
        self._client.close()
        self._client = None
        self._losses += 1
        if self._losses > MOST_LOSSES:
            raise StompConnectionError(
                f"the broker closed the connection {self._losses} times in a row"
                f" with {len(self._waiting)} rows unconfirmed"
            )
        self._send_again()

    def _send_again(self) -> None:
        waiting = [pending for _, pending in self._waiting.items()]
        self._waiting.clear()
        for pending in waiting:
            self.send(pending)

    def _refused(self, error: StompBrokerError) -> None:
        """Settle the rows before the refused one, record it, and send the rest again."""
        assert self._client is not None
        self._client.close()
        self._client = None
        waiting = list(self._waiting.items())
        self._waiting.clear()
        refused_at = next(
            (index for index, (receipt, _) in enumerate(waiting) if receipt == error.receipt_id),
            0,
        )
        self.sent += refused_at
        self.refuse(waiting[refused_at][1].row, str(error))
        for _, pending in waiting[refused_at + 1 :]:
            self.send(pending)


def write_rows(options: WriteOptions, rows: Iterator[Any], partition: int) -> WriteReport:
    """
    Send every row, and wait for each one's RECEIPT or refusal.

    :param partition: the task's partition id, to name refused rows.
    :returns: what was sent and refused.
    :raises StompConnectionError: when the broker is unreachable or drops the
        connection without an ERROR (Spark then retries the task: rows may be sent twice).
    """
    sender = _Sender(options, partition)
    for index, row in enumerate(rows):
        pending = _pending(row, index, options)
        if isinstance(pending, str):
            sender.refuse(index, pending)
        else:
            sender.send(pending)
    sender.finish()
    return WriteReport(sender.sent, sender.refusals, sender.refused)


def summarize(messages: list[Any], fail: bool) -> tuple[int, int, list[Refusal]]:
    """
    :param messages: the tasks' :class:`WriteReport` (``None`` for a task that failed).
    :returns: rows sent, rows refused, the refusals kept.
    :raises RowsRefused: when rows were refused and ``fail``.
    """
    reports = [message for message in messages if isinstance(message, WriteReport)]
    sent = sum(report.sent for report in reports)
    kept = [refusal for report in reports for refusal in report.refused]
    refused = sum(report.refusals for report in reports)
    if refused and fail:
        shown = "; ".join(
            f"partition {r.partition} row {r.row}: {r.reason}" for r in kept[:KEPT_REFUSALS]
        )
        raise RowsRefused(f"the broker refused {refused} of {sent + refused} rows: {shown}")
    return sent, refused, kept
