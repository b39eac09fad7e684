"""Fixtures of the security tests: a password file of two users, and the log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from twisted.logger import globalLogPublisher

from tests.security.helpers import write_users


@pytest.fixture
def users_file(tmp_path: Path) -> Path:
    """alice (groups traders and ops) and bob (no groups), with cheap hashes."""
    return write_users(
        tmp_path / "users.txt", ("alice", "wonderland", ("traders", "ops")), ("bob", "builder", ())
    )


@pytest.fixture
def log_events() -> Iterator[list[dict[str, Any]]]:
    """Every log event published while the test runs."""
    events: list[dict[str, Any]] = []
    globalLogPublisher.addObserver(events.append)
    yield events
    globalLogPublisher.removeObserver(events.append)
