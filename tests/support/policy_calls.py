"""
The management API's policy calls on a broker process, for the tests of
policies across nodes.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from tests.support.process import BrokerProcess

__all__ = ["WAIT", "call", "eventually", "names"]

#: Seconds a test waits for what its nodes owe it.
WAIT = 10.0


def call(process: BrokerProcess, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """:returns: the status and JSON answer of an API call on ``process``."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{process.http_port}/api/{path}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=WAIT) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def names(process: BrokerProcess) -> list[str]:
    """:returns: the names of the policies ``process`` lists."""
    status, answer = call(process, "GET", "policies")
    assert status == 200, answer
    return [policy["name"] for policy in answer]


def eventually(condition: Callable[[], bool]) -> None:
    """Wait until ``condition()`` holds, at most :data:`WAIT` seconds."""
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "not within the wait"
        time.sleep(0.05)
