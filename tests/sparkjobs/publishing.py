"""
A publisher that keeps sending numbered messages to a stream while a Spark
query reads it, for the tests of queries stopped, killed and restarted.
"""

from __future__ import annotations

import threading
import time

from tests.support.clients import connect


def keep_publishing(
    address: tuple[str, int], destination: str, stop: threading.Event
) -> tuple[list[int], threading.Thread]:
    """
    Publish numbered messages, each with a receipt, until ``stop``.

    :returns: the numbers sent (filled in as their receipts come), and the publishing thread.
    """
    sent: list[int] = []

    def run() -> None:
        connection, inbox = connect(address)
        number = 0
        while not stop.is_set():
            connection.send(destination, str(number), receipt=f"r{number}")
            assert inbox.wait_for(lambda n=number: f"r{n}" in inbox.receipts)
            sent.append(number)
            number += 1
            time.sleep(0.05)
        connection.disconnect()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return sent, thread
