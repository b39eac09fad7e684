"""
The engine refuses a Redis that would evict keys when full
(stompbroker.broker.engine.redis.clients.evicting), on what ``INFO memory`` says.
"""

from __future__ import annotations

import pytest

pytest.importorskip("redis")

from stompbroker.broker.engine.redis.clients import evicting  # noqa: E402


@pytest.mark.parametrize(
    "memory",
    [
        {"maxmemory": 0, "maxmemory_policy": "allkeys-lru"},
        {"maxmemory": 104857600, "maxmemory_policy": "noeviction"},
        {b"maxmemory": b"104857600", b"maxmemory_policy": b"noeviction"},
        {},
    ],
)
def test_no_limit_or_noeviction_is_accepted(memory: dict[object, object]) -> None:
    """Without maxmemory nothing is evicted; with noeviction a full Redis refuses writes."""
    assert evicting(memory) is None


@pytest.mark.parametrize("policy", ["allkeys-lru", "volatile-ttl", "allkeys-random"])
def test_an_evicting_policy_with_a_limit_is_refused_in_one_line_that_says_what_to_set(
    policy: str,
) -> None:
    """The refusal names the limit, the policy, and the setting that fixes it."""
    said = evicting({"maxmemory": 104857600, "maxmemory_policy": policy})
    assert said is not None and "\n" not in said
    assert f"maxmemory-policy {policy}" in said and "104857600" in said
    assert "set maxmemory-policy noeviction" in said
