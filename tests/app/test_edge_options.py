"""
``--rate-limit-...``, ``--max-connection-rate`` and ``--trusted-proxy``: parsed
into one ``RateLimits`` and one ``TrustedProxies``, bad values refused by name.
"""

from __future__ import annotations

import ipaddress

import pytest
from twisted.internet.testing import MemoryReactorClock
from twisted.python import usage

from stompbroker.app.tap import makeService
from stompbroker.broker.flow.rate_limits import Rate, RateLimits, Rates
from tests.support.options import parse


def test_by_default_there_are_no_limits_and_no_trusted_proxies() -> None:
    options = parse()
    assert options["rate-limits"] == RateLimits()
    assert not options["trusted-proxies"]


def test_rates_with_and_without_bursts() -> None:
    options = parse(
        "--rate-limit-messages", "100/500",
        "--rate-limit-bytes", "1M",
        "--rate-limit-over-time", "30",
        "--max-connection-rate", "5/20",
    )  # fmt: skip
    assert options["rate-limits"] == RateLimits(
        connection=Rates(messages=Rate(100, 500), bytes=Rate(1024**2)),
        over_time=30.0,
        connection_rate=Rate(5, 20),
    )


def test_user_rates_need_auth() -> None:
    """Without --auth there are no logins to count a user's connections by."""
    with pytest.raises(usage.UsageError, match="need --auth"):
        parse("--rate-limit-user-messages", "10")
    options = parse("--auth", "memory:alice:pw", "--rate-limit-user-bytes", "64K/1M")
    assert options["rate-limits"].user == Rates(bytes=Rate(64 * 1024, 1024**2))


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--rate-limit-messages", "0"),
        ("--rate-limit-messages", "fast"),
        ("--rate-limit-messages", "10/-1"),
        ("--rate-limit-bytes", "lots"),
        ("--max-connection-rate", "5/x"),
    ],
)
def test_bad_rates_are_refused_by_name(option: str, value: str) -> None:
    with pytest.raises(usage.UsageError, match=option + " takes N or N/BURST"):
        parse(option, value)


def test_trusted_proxies_are_repeatable_blocks() -> None:
    options = parse("--trusted-proxy", "10.0.0.0/8", "--trusted-proxy", "::1")
    assert options["trusted-proxies"].trusts(ipaddress.ip_address("10.1.2.3"))
    assert options["trusted-proxies"].trusts(ipaddress.ip_address("::1"))
    assert not options["trusted-proxies"].trusts(ipaddress.ip_address("192.0.2.1"))


def test_a_bad_trusted_proxy_is_refused() -> None:
    with pytest.raises(usage.UsageError, match="--trusted-proxy: not an address"):
        parse("--trusted-proxy", "balancer.example")


def test_allowed_origins_are_repeatable_patterns() -> None:
    """--allowed-origin takes origins and *. subdomain patterns, repeatable."""
    options = parse(
        "--allowed-origin", "https://*.example.com", "--allowed-origin", "http://localhost:3000"
    )  # fmt: skip
    allowed = options["allowed-origins"]
    assert allowed.matches("https://chat.example.com")
    assert allowed.matches("http://localhost:3000")
    assert not allowed.matches("https://evil.test")
    assert not parse()["allowed-origins"].configured


def test_a_bad_allowed_origin_is_refused() -> None:
    """A host without a scheme is no origin: a usage error naming the option."""
    with pytest.raises(usage.UsageError, match="--allowed-origin: 'example.com' is not an origin"):
        parse("--allowed-origin", "example.com")


def test_the_broker_gets_the_rate_limits() -> None:
    options = parse("--rate-limit-messages", "100", "--data-dir", "none")
    service = makeService(options, reactor=MemoryReactorClock())
    assert service.broker.rates.limits.connection == Rates(messages=Rate(100))


def test_a_login_may_have_rates_of_its_own() -> None:
    """``--rate-limit-login`` replaces, for one login, the broker-wide rates it names."""
    options = parse(
        "--auth", "memory:alice:pw",
        "--rate-limit-messages", "10",
        "--rate-limit-login", "feed:messages=500/1000,user-bytes=1M",
        "--rate-limit-login", "a:b:bytes=4K",
    )  # fmt: skip
    limits = options["rate-limits"]
    assert limits.per_user == {
        "feed": (Rates(messages=Rate(500, 1000)), Rates(bytes=Rate(1024**2))),
        "a:b": (Rates(messages=Rate(10), bytes=Rate(4096)), Rates()),
    }
    assert limits.metered


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("feed", "takes LOGIN:KEY=RATE"),
        ("feed:speed=5", "'speed' is not a key"),
        ("feed:messages=5,messages=6", "messages is given twice"),
        ("feed:messages=none", "feed: messages: --rate-limit-messages takes N or N/BURST"),
    ],
)
def test_bad_login_rates_are_refused(value: str, expected: str) -> None:
    """A malformed --rate-limit-login is refused with what is wrong."""
    with pytest.raises(usage.UsageError, match=expected):
        parse("--auth", "memory:alice:pw", "--rate-limit-login", value)


def test_login_rates_need_auth_and_one_entry_per_login() -> None:
    """Without --auth there is no login; two entries for one login would contradict each other."""
    with pytest.raises(usage.UsageError, match="needs --auth"):
        parse("--rate-limit-login", "feed:messages=5")
    with pytest.raises(usage.UsageError, match="feed is given twice"):
        parse(
            "--auth", "memory:alice:pw",
            "--rate-limit-login", "feed:messages=5",
            "--rate-limit-login", "feed:bytes=5",
        )  # fmt: skip
