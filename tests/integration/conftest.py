"""
Every test here is marked ``integration`` (:mod:`tests.support.tiers`), and may
share ``broker``: one real broker on defaults (bar a short heart-beat offer) per
test module; and ``start``, which starts brokers of a test's own on a data directory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.process import BrokerStarter, module_broker

broker = module_broker("broker", "--heartbeat", "500,500")


@pytest.fixture
def start(tmp_path: Path) -> BrokerStarter:
    """Starts brokers on a data directory, each start logging in a directory of its own."""
    return BrokerStarter(tmp_path)
