"""
Test configuration shared by the whole suite: the Hypothesis profile, ``clock``
(a ``task.Clock`` at :data:`~tests.support.broker.EPOCH`) and ``broker`` (a real
broker on it, without sockets; the integration tests' ``broker`` is a process),
and the fixtures of :mod:`tests.support` that tests in more than one package use
(``spark``, ``page``, ``log_events``, and ``setup``: a broker on a store of each kind),
and the plugins that sort the tests into the quick and the integration tier
(:mod:`tests.support.tiers`) and spread them over pytest-xdist's workers
(:mod:`tests.support.distribution`).

Hypothesis runs derandomized, so that a failure on CI is a failure on every
machine, and without deadlines or the slow-generation health check, which only
measure how busy the machine is.
"""

import pytest
from hypothesis import HealthCheck, settings
from twisted.internet.task import Clock

from stompbroker.broker.service import Broker
from tests.support.broker import EPOCH

pytest_plugins = [
    "tests.support.spark",
    "tests.support.browser",
    "tests.support.logs",
    "tests.support.persistence",
    "tests.support.tiers",
    "tests.support.distribution",
]

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
def clock() -> Clock:
    """A ``task.Clock`` at :data:`~tests.support.broker.EPOCH`, a plausible Unix time."""
    clock = Clock()
    clock.advance(EPOCH)
    return clock


@pytest.fixture
def broker(clock: Clock) -> Broker:
    """A broker on defaults and ``clock``, not started."""
    return Broker(clock)
