"""
The redis engine's limits on shared queue streams (:mod:`.shared_limits`):
which policies apply, the commands they add, and the ERROR of a full queue.
No Redis: a writer that records commands and answers as told.
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.defer import Deferred, succeed

from stompbroker.broker.engine.redis.shared_limits import ADD_UNLESS_FULL, SharedLimits
from stompbroker.broker.features.policies import Policies, parse_policy
from stompbroker.protocol.errors import LimitExceeded


class Writer:
    """Records commands; a waited one answers with :attr:`reply`."""

    def __init__(self, reply: Any = b"1-0") -> None:
        self.reply = reply
        self.sent: list[tuple[Any, ...]] = []
        self.waited: list[tuple[tuple[Any, ...], bool]] = []

    def command(self, *args: Any) -> None:
        self.sent.append(args)

    def command_waited(self, *args: Any, replicated: bool = False) -> Deferred[Any]:
        self.waited.append((args, replicated))
        return succeed(self.reply)


def limits(**definition: Any) -> SharedLimits:
    policies = Policies()
    policies.set(parse_policy("cap", {"pattern": "cap.>", **definition}), announce=False)
    return SharedLimits(policies)


def test_a_queue_no_policy_limits_has_no_limit() -> None:
    found = limits(prefetch=3)
    assert found.of("/queue/cap.a") is None
    assert found.of("/queue/other") is None


def test_dead_letter_overflow_is_not_applied_to_shared_streams() -> None:
    assert limits(**{"max-length": 2, "overflow": "dead-letter"}).of("/queue/cap.a") is None


def test_drop_head_trims_exactly_as_it_adds() -> None:
    limit = limits(**{"max-length": 2}).of("/queue/cap.a")
    assert limit is not None
    writer = Writer()
    assert limit.add(writer, "/queue/cap.a", "s", b"p", waited=False) is None
    assert writer.sent == [("XADD", "s", "MAXLEN", 2, "*", "m", b"p")]
    results: list[Any] = []
    waited = limit.add(writer, "/queue/cap.a", "s", b"p", waited=True)
    assert waited is not None
    waited.addCallback(results.append)
    assert results == [None]
    assert writer.waited == [(("XADD", "s", "MAXLEN", 2, "*", "m", b"p"), True)]


@pytest.mark.parametrize("waited", [True, False])
def test_reject_publish_checks_and_adds_in_one_script(waited: bool) -> None:
    limit = limits(**{"max-length": 2, "overflow": "reject-publish"}).of("/queue/cap.a")
    assert limit is not None
    writer = Writer()
    results: list[Any] = []
    added = limit.add(writer, "/queue/cap.a", "s", b"p", waited=waited)
    assert added is not None
    added.addCallback(results.append)
    assert results == [None]
    assert writer.waited == [(("EVAL", ADD_UNLESS_FULL, 1, "s", 2, b"p"), waited)]


def test_a_full_queue_refuses_with_the_limit_and_the_policy() -> None:
    limit = limits(**{"max-length": 2, "overflow": "reject-publish"}).of("/queue/cap.a")
    assert limit is not None
    failures: list[Any] = []
    added = limit.add(Writer(reply=0), "/queue/cap.a", "s", b"p", waited=True)
    assert added is not None
    added.addErrback(failures.append)
    error = failures[0].value
    assert isinstance(error, LimitExceeded)
    assert error.message == "queue /queue/cap.a is full"
    assert "max-length 2 reached (policy cap)" in error.detail


def test_a_policy_change_applies_at_once() -> None:
    policies = Policies()
    found = SharedLimits(policies)
    assert found.of("/queue/cap.a") is None
    policies.set(parse_policy("cap", {"pattern": "cap.>", "max-length": 5}), announce=False)
    limit = found.of("/queue/cap.a")
    assert limit is not None and limit.max_length == 5
    policies.remove("cap", announce=False)
    assert found.of("/queue/cap.a") is None
