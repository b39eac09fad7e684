"""
Test configuration shared by the whole suite: the Hypothesis profile, and the
fixtures of :mod:`tests.support` that tests in more than one package use
(``spark``, ``page``, ``log_events``).

Hypothesis runs derandomized, so that a failure on CI is a failure on every
machine, and without deadlines or the slow-generation health check, which only
measure how busy the machine is.
"""

from hypothesis import HealthCheck, settings

pytest_plugins = ["tests.support.spark", "tests.support.browser", "tests.support.logs"]

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
