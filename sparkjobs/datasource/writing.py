"""
Sending rows as messages: one SEND per row, each with a receipt, a window of them in flight.

A row's ``body`` column (binary or string) is the body; its ``destination``
column, when there is one and it is not null, the destination (else the
``destination`` option); its ``headers`` column (a map of strings) and every
other non-null column are headers.

Refusals: the broker answers a SEND it refuses (no ``write`` right, a body
over its limit) with an ERROR naming the SEND's receipt and closes the
connection, having handled every frame before it and none after.  So the rows
before the refused one count as sent, the refused row is recorded with the
ERROR's message, and the rows after it are sent again on a new connection.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from attrs import frozen
from pyspark.sql.datasource import WriterCommitMessage

from sparkjobs.datasource.client import StompBrokerError, StompClient
from sparkjobs.datasource.options import WriteOptions

#: Columns with a meaning of their own; any other column becomes a header.
ROLE_COLUMNS = ("body", "destination", "headers")
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


def _pending(row: Any, index: int, default_destination: str | None) -> _Pending | str:
    """:returns: the SEND a row makes, or why it cannot make one."""
    values = row.asDict()
    destination = values.get("destination") or default_destination
    if not destination:
        return "no destination: give option destination or a destination column"
    body = values.get("body")
    if body is None:
        return "no body: the row needs a non-null body column"
    headers = [(name, _text(value)) for name, value in (values.get("headers") or {}).items()]
    headers += [
        (name, _text(value))
        for name, value in values.items()
        if name not in ROLE_COLUMNS and value is not None
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

    def refuse(self, row: int, reason: str) -> None:
        self.refusals += 1
        if len(self.refused) < KEPT_REFUSALS:
            self.refused.append(Refusal(self.partition, row, reason))

    def send(self, pending: _Pending) -> None:
        if self._client is None:
            self._client = StompClient.connect(self.options.connect)
        receipt = f"row-{pending.row}"
        self._waiting[receipt] = pending
        headers = [("destination", pending.destination), ("receipt", receipt), *pending.headers]
        self._client.send("SEND", headers, pending.body)
        while len(self._waiting) >= self.options.window:
            self._settle_one()

    def finish(self) -> None:
        while self._waiting:
            self._settle_one()
        if self._client is not None:
            self._client.close()
            self._client = None

    def _settle_one(self) -> None:
        assert self._client is not None
        try:
            frame = self._client.receive()
        except StompBrokerError as error:
            self._refused(error)
            return
        if frame is None:
            raise TimeoutError(f"no RECEIPT from the broker in {self.options.connect.timeout} s")
        pending = self._waiting.pop(frame.headers.get("receipt-id", ""), None)
        if frame.command == "RECEIPT" and pending is not None:
            self.sent += 1

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
        pending = _pending(row, index, options.destination)
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
