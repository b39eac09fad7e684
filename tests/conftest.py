"""
Test configuration shared by the whole suite: the Hypothesis profile, and a fixture
that collects log events.

Hypothesis runs derandomized, so that a failure on CI is a failure on every
machine, and without deadlines or the slow-generation health check, which only
measure how busy the machine is.
"""

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from twisted.logger import globalLogPublisher

# Data generation is judged slow by wall-clock time, which on a shared two-core
# machine measures the neighbours, not the strategy: that check would only flake.
settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=200,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci")


@pytest.fixture
def logged() -> Iterator[list[Any]]:
    """Every log event while the test runs."""
    events: list[Any] = []
    globalLogPublisher.addObserver(events.append)
    yield events
    globalLogPublisher.removeObserver(events.append)
