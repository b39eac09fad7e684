"""
The ``log_events`` fixture: every event published to Twisted's global log while a
test runs, for tests that check what the broker logs (and what it must not).
The root ``conftest.py`` offers it to the whole suite.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest
from twisted.logger import ILogObserver, globalLogPublisher


@pytest.fixture
def log_events() -> Iterator[list[dict[str, Any]]]:
    """Every log event published while the test runs."""
    events: list[dict[str, Any]] = []
    observer = cast(ILogObserver, events.append)
    globalLogPublisher.addObserver(observer)
    yield events
    globalLogPublisher.removeObserver(observer)
