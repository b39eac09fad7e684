"""Tests of how a message's expiry is read from its headers and the broker-wide TTL."""

from __future__ import annotations

import pytest

from stompbroker.broker.routing.expiry import expiry_time, is_expired
from stompbroker.protocol.errors import MalformedFrame

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    "expires, expiration, ttl, expected",
    [
        (None, None, 0, 0.0),
        (None, None, 5000, NOW + 5),
        ("1700000060000", None, 0, NOW + 60),
        ("1700000060000", None, 5000, NOW + 60),
        ("0", None, 0, 0.0),
        ("0", None, 5000, NOW + 5),
        (None, "1500", 0, NOW + 1.5),
        (None, "0", 0, NOW),
        ("1700000060000", "1000", 0, NOW + 1),
        ("1700000000500", "9000", 0, NOW + 0.5),
    ],
    ids=[
        "none",
        "ttl-default",
        "expires-absolute-ms",
        "expires-beats-ttl",
        "expires-zero-is-never",
        "expires-zero-gets-ttl",
        "expiration-relative-ms",
        "expiration-zero-is-now",
        "earlier-of-both-expiration",
        "earlier-of-both-expires",
    ],
)
def test_expiry_time(
    expires: str | None, expiration: str | None, ttl: int, expected: float
) -> None:
    """
    expires is absolute ms (ActiveMQ), expiration relative ms (RabbitMQ); the earlier counts; --ttl
    fills in.
    """
    assert expiry_time(expires, expiration, NOW, ttl) == pytest.approx(expected)


@pytest.mark.parametrize("header", ["expires", "expiration"])
@pytest.mark.parametrize("value", ["-5", "soon", "1.5", "", "١٢"])
def test_invalid_expiry_header_is_an_error(header: str, value: str) -> None:
    """An expiry header that is not a non-negative integer of ms is refused, naming the header."""
    arguments = {"expires": None, "expiration": None, header: value}
    with pytest.raises(MalformedFrame) as caught:
        expiry_time(arguments["expires"], arguments["expiration"], NOW, 0)
    assert caught.value.message == f"invalid {header} header"


def test_a_message_is_expired_from_its_expiry_on() -> None:
    """A message is expired once the clock reaches its expiry; 0 means never."""
    assert not is_expired(10.0, 9.999)
    assert is_expired(10.0, 10.0)
    assert not is_expired(0.0, 1e12)
