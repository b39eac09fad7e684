"""Fixtures that run the real broker in a subprocess."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.broker_process import BrokerProcess


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker on defaults (bar a short heart-beat offer), shared by a test module."""
    process = BrokerProcess(tmp_path_factory.mktemp("broker"), "--heartbeat", "500,500")
    yield process
    process.stop()
