"""
Transactions: work held back until COMMIT, thrown away by ABORT (STOMP 1.2, "BEGIN").

A transaction is a list of held actions, in the order the client sent the frames.
The broker checks each frame when it arrives (so a bad SEND or an ACK of an
unknown message is an ERROR at once, not at COMMIT) and holds only the effect:
publishing a message, settling an acknowledgement.  COMMIT runs every held action
in order, in one go, so no other client's frame can come between them; ABORT and
the end of the connection discard them.  A held action may return something to
wait for (the store writes of a persistent SEND); COMMIT hands those back, so
that its RECEIPT waits for them.

Transaction ids belong to a connection; one may be reused once its transaction
has ended.  :class:`Transactions` is the broker's side: it keeps each
connection's :class:`TransactionTable` within the limits of
``max_transactions`` and ``max_transaction_frames``, and pauses a sender whose
COMMIT calls for it (see :mod:`stompbroker.broker.flow.backpressure`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred

from stompbroker.broker.store.journal import all_done
from stompbroker.protocol.errors import DuplicateTransaction, LimitExceeded, UnknownTransaction

if TYPE_CHECKING:
    from stompbroker.broker.clients.connections import ConnectionRegistry
    from stompbroker.broker.flow.backpressure import BackPressure
    from stompbroker.broker.flow.broker_limits import Limits


class Transaction:
    """
    One open transaction: the actions it holds.

    :param transaction_id: the client's ``transaction`` header.
    """

    __slots__ = ("transaction_id", "_held")

    def __init__(self, transaction_id: str) -> None:
        self.transaction_id = transaction_id
        self._held: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []

    def __len__(self) -> int:
        """:returns: how many actions are held."""
        return len(self._held)

    def hold(self, action: Callable[..., Any], *args: Any) -> None:
        """
        Keep ``action(*args)`` for COMMIT.

        :param action: the effect of one frame, already checked; it returns
            ``None``, or something the COMMIT must wait for.
        """
        self._held.append((action, args))

    def run(self) -> list[Any]:
        """
        Perform every held action, in order; the transaction then holds none.

        :returns: what the actions returned other than ``None``, in order.
        """
        held, self._held = self._held, []
        waiting = []
        for action, args in held:
            result = action(*args)
            if result is not None:
                waiting.append(result)
        return waiting


class TransactionTable:
    """The open transactions of one connection."""

    __slots__ = ("_open",)

    def __init__(self) -> None:
        self._open: dict[str, Transaction] = {}

    def __len__(self) -> int:
        """:returns: how many transactions are open."""
        return len(self._open)

    def begin(self, transaction_id: str) -> Transaction:
        """
        Open a transaction.

        :raises DuplicateTransaction: if one with this id is open already.
        """
        if transaction_id in self._open:
            raise DuplicateTransaction(
                "transaction already open",
                f"this connection already has an open transaction {transaction_id!r}",
            )
        transaction = self._open[transaction_id] = Transaction(transaction_id)
        return transaction

    def get(self, transaction_id: str) -> Transaction:
        """
        :returns: the open transaction with this id.
        :raises UnknownTransaction: if there is none.
        """
        transaction = self._open.get(transaction_id)
        if transaction is None:
            raise UnknownTransaction(
                "unknown transaction",
                f"this connection has no open transaction {transaction_id!r}",
            )
        return transaction

    def commit(self, transaction_id: str) -> list[Any]:
        """
        End a transaction by performing what it holds.

        :returns: what its actions gave to wait for, as :meth:`Transaction.run`.
        :raises UnknownTransaction: if it is not open.
        """
        transaction = self.get(transaction_id)
        del self._open[transaction_id]
        return transaction.run()

    def abort(self, transaction_id: str) -> None:
        """
        End a transaction by discarding what it holds.

        :raises UnknownTransaction: if it is not open.
        """
        self.get(transaction_id)
        del self._open[transaction_id]

    def abort_all(self) -> None:
        """Discard every open transaction, as when the connection ends."""
        self._open.clear()


class Transactions:
    """
    The transactions of every connection, within the broker's limits.

    :param registry: the connections, whose states hold their transactions.
    :param limits: ``max_transactions`` and ``max_transaction_frames``.
    :param backpressure: applied to a connection whose COMMIT was just routed.
    """

    def __init__(
        self, registry: ConnectionRegistry, limits: Limits, backpressure: BackPressure
    ) -> None:
        self._registry = registry
        self._limits = limits
        self._backpressure = backpressure

    def _table(self, connection: Any) -> TransactionTable:
        if connection is None:
            raise UnknownTransaction(
                "unknown transaction", "transactions belong to client connections"
            )
        return self._registry.state(connection).transactions

    def begin(self, connection: Any, transaction: str) -> None:
        """
        Open a transaction on a connection.

        :raises DuplicateTransaction: if one of that id is open there already.
        :raises LimitExceeded: if ``max_transactions`` are open there already.
        """
        table = self._table(connection)
        limit = self._limits.max_transactions
        if limit and len(table) >= limit:
            raise LimitExceeded(
                "too many transactions",
                f"a connection may have at most {limit} transactions open (max-transactions)",
            )
        table.begin(transaction)

    def held_in(self, connection: Any, transaction: str) -> Transaction:
        """
        :returns: the open transaction that is to hold one more frame.
        :raises UnknownTransaction: if it is not open.
        :raises LimitExceeded: if it holds ``max_transaction_frames`` already.
        """
        held = self._table(connection).get(transaction)
        limit = self._limits.max_transaction_frames
        if limit and len(held) >= limit:
            raise LimitExceeded(
                "transaction too large",
                f"a transaction may hold at most {limit} SEND, ACK and NACK frames"
                " (max-transaction-frames)",
            )
        return held

    def commit(self, connection: Any, transaction: str) -> Deferred[None] | None:
        """
        Perform, in order and at once, the SENDs, ACKs and NACKs a transaction holds.

        Its persistent messages are filed in the store now, at COMMIT.

        :returns: ``None``, or a Deferred that fires once the persistent messages
            it sent are durable.
        :raises UnknownTransaction: if it is not open.
        """
        waiting = all_done(self._table(connection).commit(transaction))
        if self._backpressure.pending is not None:
            self._backpressure.pause_sender(connection)
        return waiting

    def abort(self, connection: Any, transaction: str) -> None:
        """
        Discard what a transaction holds; messages it acknowledged stay unacknowledged.

        :raises UnknownTransaction: if it is not open.
        """
        self._table(connection).abort(transaction)
