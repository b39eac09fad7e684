"""
Fixtures of the security tests: a password file of two users.  The clock (at the
tokens' :data:`~tests.support.tokens.NOW`) and the log (``log_events``) are the
root conftest's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.passwords import write_users


@pytest.fixture
def users_file(tmp_path: Path) -> Path:
    """alice (groups traders and ops) and bob (no groups), with cheap hashes."""
    return write_users(
        tmp_path / "users.txt", ("alice", "wonderland", ("traders", "ops")), ("bob", "builder", ())
    )
