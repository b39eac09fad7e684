"""
Producers that pipeline persistent SENDs on the real broker (``twistd -n stompbroker
--data-dir ...``), driven by ``stomp.py``: the session reads on while the store writes
(issue 17), every RECEIPT comes back in order, and what was acknowledged by a RECEIPT
survives a SIGKILL.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.clients import WAIT, connect
from tests.support.process import BrokerStarter

#: SENDs a producer writes before it reads anything back.
COUNT = 300


def test_pipelined_persistent_sends_get_every_receipt_in_order_and_survive_sigkill(
    tmp_path: Path, start: BrokerStarter
) -> None:
    """
    A producer sends COUNT persistent SENDs to a queue and a stream without waiting, a receipt
    on every other one: the receipts come back in the order sent; the broker is then killed,
    and after the restart every message is there, in order.
    """
    data = tmp_path / "data"
    broker = start(data)
    try:
        producer, events = connect(broker.address)
        expected = []
        for index in range(COUNT):
            destination = "/queue/piped" if index % 3 else "/stream/piped"
            headers = {"persistent": "true"}
            if index % 2 == 0:
                headers["receipt"] = f"r-{index}"
                expected.append(f"r-{index}")
            producer.send(destination, f"{index}", headers=headers)
        producer.send("/queue/piped", "last", headers={"persistent": "true"}, receipt="r-last")
        expected.append("r-last")
        assert events.wait_for(lambda: len(events.receipts) == len(expected), WAIT * 2)
        assert events.receipts == expected
        assert events.errors == []
    finally:
        broker.kill()
    broker = start(data)
    try:
        consumer, inbox = connect(broker.address)
        consumer.subscribe("/queue/piped", id="q", ack="auto")
        consumer.subscribe(
            "/stream/piped", id="s", ack="auto", headers={"x-stream-offset": "first"}
        )
        queue = [str(i).encode() for i in range(COUNT) if i % 3] + [b"last"]
        stream = [str(i).encode() for i in range(COUNT) if not i % 3]
        assert inbox.wait_for(lambda: len(inbox.messages) == len(queue) + len(stream), WAIT * 2)

        def bodies(subscription: str) -> list[bytes]:
            return [m.body for m in inbox.messages if m.headers["subscription"] == subscription]

        assert bodies("q") == queue
        assert bodies("s") == stream
        consumer.disconnect()
    finally:
        broker.stop()


def test_a_transaction_commits_after_the_pipelined_sends_before_it(
    tmp_path: Path, start: BrokerStarter
) -> None:
    """
    BEGIN and COMMIT wait for every earlier write: a consumer sees the pipelined messages before
    the transaction's, and every RECEIPT, DISCONNECT's last, arrives in frame order.
    """
    broker = start(tmp_path / "data")
    try:
        consumer, inbox = connect(broker.address)
        consumer.subscribe("/queue/tx", id="q", ack="auto")
        producer, events = connect(broker.address)
        for index in range(50):
            producer.send("/queue/tx", f"plain-{index}", headers={"persistent": "true"})
        producer.begin("t")
        producer.send("/queue/tx", "in-tx", headers={"persistent": "true", "transaction": "t"})
        producer.commit("t", headers={"receipt": "committed"})
        producer.disconnect(receipt="bye")
        assert events.wait_for(lambda: events.receipts == ["committed", "bye"])
        assert inbox.wait_for(lambda: len(inbox.messages) == 51)
        assert inbox.bodies() == [f"plain-{i}".encode() for i in range(50)] + [b"in-tx"]
        consumer.disconnect()
    finally:
        broker.stop()
