"""
Every test here is marked ``integration``, and may share ``broker``: one real
broker on defaults (bar a short heart-beat offer) per test module.
"""

from __future__ import annotations

import pytest

from tests.support.process import module_broker

broker = module_broker("broker", "--heartbeat", "500,500")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
