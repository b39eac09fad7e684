"""
Fixtures of the security tests: a password file of two users, and a clock at the
tokens' :data:`~tests.support.tokens.NOW`. The log is the root conftest's ``log_events``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from twisted.internet.task import Clock

from tests.support.passwords import write_users
from tests.support.tokens import NOW


@pytest.fixture
def users_file(tmp_path: Path) -> Path:
    """alice (groups traders and ops) and bob (no groups), with cheap hashes."""
    return write_users(
        tmp_path / "users.txt", ("alice", "wonderland", ("traders", "ops")), ("bob", "builder", ())
    )


@pytest.fixture
def clock() -> Clock:
    """The clock token checkers and sessions read, at :data:`~tests.support.tokens.NOW`."""
    clock = Clock()
    clock.advance(NOW)
    return clock
