"""Tests of transactions as held work: commit runs it in order, abort discards it."""

from __future__ import annotations

import pytest

from stompbroker.broker.clients.transactions import TransactionTable
from stompbroker.protocol.errors import DuplicateTransaction, UnknownTransaction


def test_commit_runs_held_actions_in_order_once() -> None:
    """STOMP 1.2, "COMMIT": what a transaction holds happens at COMMIT, in the order it was sent."""
    table = TransactionTable()
    done: list[int] = []
    transaction = table.begin("tx")
    for n in range(3):
        transaction.hold(done.append, n)
    assert done == []
    table.commit("tx")
    assert done == [0, 1, 2]
    assert len(table) == 0
    transaction.run()
    assert done == [0, 1, 2]


def test_abort_discards_held_actions() -> None:
    """STOMP 1.2, "ABORT": nothing a transaction holds happens after ABORT."""
    table = TransactionTable()
    done: list[int] = []
    table.begin("tx").hold(done.append, 1)
    table.abort("tx")
    assert done == []
    with pytest.raises(UnknownTransaction):
        table.commit("tx")


def test_begin_of_an_open_transaction_is_an_error() -> None:
    """A BEGIN reusing the id of an open transaction is refused."""
    table = TransactionTable()
    table.begin("tx")
    with pytest.raises(DuplicateTransaction) as caught:
        table.begin("tx")
    assert caught.value.message == "transaction already open"


def test_an_ended_transaction_id_may_be_reused() -> None:
    """Once a transaction has ended its id names no transaction, and BEGIN may use it again."""
    table = TransactionTable()
    table.begin("tx")
    table.commit("tx")
    assert table.begin("tx").transaction_id == "tx"


@pytest.mark.parametrize("operation", ["get", "commit", "abort"])
def test_unknown_transaction_is_an_error(operation: str) -> None:
    """Naming a transaction that is not open is refused with 'unknown transaction'."""
    with pytest.raises(UnknownTransaction) as caught:
        getattr(TransactionTable(), operation)("nope")
    assert caught.value.message == "unknown transaction"


def test_abort_all_ends_every_transaction() -> None:
    """When a connection ends, every open transaction is discarded."""
    table = TransactionTable()
    done: list[int] = []
    table.begin("a").hold(done.append, 1)
    table.begin("b").hold(done.append, 2)
    table.abort_all()
    assert len(table) == 0
    assert done == []
