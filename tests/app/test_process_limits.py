"""
Tests of :func:`stompbroker.app.process_limits.raise_descriptor_limit`, on a stand-in for the
process's ``RLIMIT_NOFILE`` so that the test process keeps its own limits.
"""

from __future__ import annotations

import resource
from typing import Any

import pytest

from stompbroker.app.process_limits import SPARE_DESCRIPTORS, raise_descriptor_limit


class FakeLimit:
    """The soft and hard limits of open files, as ``resource`` would report and set them."""

    def __init__(self, soft: int, hard: int) -> None:
        self.soft = soft
        self.hard = hard

    def getrlimit(self, which: int) -> tuple[int, int]:
        assert which == resource.RLIMIT_NOFILE
        return (self.soft, self.hard)

    def setrlimit(self, which: int, limits: tuple[int, int]) -> None:
        assert which == resource.RLIMIT_NOFILE
        self.soft, self.hard = limits


@pytest.fixture
def limit(monkeypatch: pytest.MonkeyPatch) -> Any:
    fake = FakeLimit(1024, 4096)
    monkeypatch.setattr(resource, "getrlimit", fake.getrlimit)
    monkeypatch.setattr(resource, "setrlimit", fake.setrlimit)
    return fake


def test_soft_limit_rises_to_fit_the_connections_and_spares(limit: FakeLimit) -> None:
    """--max-connections N raises the soft limit to N plus the spare descriptors, no further."""
    assert raise_descriptor_limit(1000) == 1000 + SPARE_DESCRIPTORS
    assert (limit.soft, limit.hard) == (1000 + SPARE_DESCRIPTORS, 4096)


def test_no_connection_limit_takes_the_hard_limit(limit: FakeLimit) -> None:
    """--max-connections 0 (no limit) lets the process open as many files as the hard limit."""
    assert raise_descriptor_limit(0) == 4096
    assert limit.soft == 4096


def test_soft_limit_never_falls(limit: FakeLimit) -> None:
    """A soft limit already above what the connections need is left as it is."""
    assert raise_descriptor_limit(10) == 1024
    assert limit.soft == 1024


def test_too_low_hard_limit_stops_at_it(limit: FakeLimit) -> None:
    """The soft limit cannot pass the hard one: it stops there, and fewer connections fit."""
    limit.hard = 1100
    assert raise_descriptor_limit(1000) == 1100
    assert limit.soft == 1100
