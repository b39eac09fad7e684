"""
The token bucket and the rate limits' value: pure logic, the time given by the test.
"""

from __future__ import annotations

import pytest

from stompbroker.broker.flow.rate_limits import Rate, RateLimits, Rates, TokenBucket


def test_a_bucket_starts_full_and_takes_without_debt() -> None:
    """Up to its burst, what is taken leaves no debt: no wait."""
    bucket = TokenBucket(Rate(10, 20), now=0.0)
    assert bucket.take(20, now=0.0) == 0.0
    assert bucket.level == 0.0


def test_debt_is_paid_at_the_rate() -> None:
    """Five tokens over, at ten a second, is half a second to wait."""
    bucket = TokenBucket(Rate(10, 20), now=0.0)
    assert bucket.take(25, now=0.0) == pytest.approx(0.5)
    assert bucket.take(0, now=0.5) == 0.0


def test_a_bucket_fills_no_higher_than_its_burst() -> None:
    """A long quiet time gives back the burst, not more."""
    bucket = TokenBucket(Rate(10, 20), now=0.0)
    bucket.take(20, now=0.0)
    assert bucket.take(30, now=100.0) == pytest.approx(1.0)


def test_without_a_burst_the_bucket_holds_one_second() -> None:
    """Rate(N) holds N tokens."""
    assert Rate(50).capacity == 50
    bucket = TokenBucket(Rate(50), now=0.0)
    assert bucket.take(51, now=0.0) == pytest.approx(0.02)


def test_admit_takes_a_whole_token_or_nothing() -> None:
    """New connections are let in while a whole token is there, and refusals take nothing."""
    bucket = TokenBucket(Rate(1, 2), now=0.0)
    assert bucket.admit(0.0) and bucket.admit(0.0)
    assert not bucket.admit(0.5)
    assert bucket.admit(1.0)
    assert not bucket.full(1.0)
    assert bucket.full(3.0)


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan"), "5"])
def test_a_rate_must_be_a_positive_number(bad: object) -> None:
    """A rate of nothing, a negative or an infinite one is refused, naming the field."""
    with pytest.raises(ValueError, match="per_second"):
        Rate(bad)  # type: ignore[arg-type]


def test_a_burst_may_not_be_negative() -> None:
    with pytest.raises(ValueError, match="burst"):
        Rate(1, -1)


def test_limits_without_rates_meter_nothing() -> None:
    """The default costs connections nothing: no gate."""
    assert not RateLimits().metered
    assert not RateLimits(connection_rate=Rate(5)).metered
    assert RateLimits(connection=Rates(messages=Rate(5))).metered
    assert RateLimits(per_user={"alice": (Rates(), Rates(bytes=Rate(10)))}).metered


def test_a_login_takes_its_own_rates_from_the_table() -> None:
    """The per-user table replaces both scopes for its logins; anonymous has no user scope."""
    own, user = Rates(messages=Rate(5)), Rates(messages=Rate(50))
    special = (Rates(messages=Rate(500)), Rates())
    limits = RateLimits(connection=own, user=user, per_user={"feed": special})
    assert limits.for_login("alice") == (own, user)
    assert limits.for_login("feed") == special
    assert limits.for_login(None) == (own, Rates())
