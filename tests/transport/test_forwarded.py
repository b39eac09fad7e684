"""
The client's address from ``Forwarded`` (RFC 7239) and ``X-Forwarded-For``,
believed from trusted proxies only.
"""

from __future__ import annotations

from typing import Any

import pytest

from stompbroker.transport.forwarded import TrustedProxies, client_address, parse_networks

PROXIES = TrustedProxies(parse_networks(["10.0.0.0/8", "2001:db8:1::/48"]))


def address(
    peer: str, forwarded: list[str] | None = None, forwarded_for: list[str] | None = None
) -> tuple[str, int]:
    return client_address(peer, 5000, forwarded or [], forwarded_for or [], PROXIES)


def test_headers_are_ignored_without_trusted_proxies() -> None:
    """By default nobody is trusted: the peer stays the client."""
    nobody = TrustedProxies()
    assert client_address("10.0.0.1", 5, [], ["192.0.2.7"], nobody) == ("10.0.0.1", 5)


def test_headers_from_an_untrusted_peer_are_ignored() -> None:
    """A client cannot name itself another address by sending the header directly."""
    assert address("192.0.2.99", forwarded_for=["198.51.100.1"]) == ("192.0.2.99", 5000)


def test_a_trusted_proxy_names_the_client() -> None:
    """X-Forwarded-For from a trusted proxy: the client, port unknown (0)."""
    assert address("10.0.0.1", forwarded_for=["192.0.2.7"]) == ("192.0.2.7", 0)


def test_forwarded_carries_the_port() -> None:
    """RFC 7239 section 6: a quoted node with its port."""
    assert address("10.0.0.1", forwarded=['for="192.0.2.7:4711";proto=http']) == (
        "192.0.2.7",
        4711,
    )


def test_forwarded_ipv6_in_brackets() -> None:
    """RFC 7239 section 6: IPv6 nodes are bracketed and quoted."""
    assert address("10.0.0.1", forwarded=['For="[2001:db8:cafe::17]:4711"']) == (
        "2001:db8:cafe::17",
        4711,
    )


def test_forwarded_wins_over_x_forwarded_for() -> None:
    """The standard header is read when both are there."""
    assert address("10.0.0.1", ["for=192.0.2.1"], ["192.0.2.2"]) == ("192.0.2.1", 0)


def test_trusted_hops_are_skipped_from_the_right() -> None:
    """Several proxies: the first untrusted address from the right is the client."""
    hops = ["203.0.113.9, 192.0.2.7, 10.1.1.1"]
    assert address("10.0.0.1", forwarded_for=hops) == ("192.0.2.7", 0)


def test_repeated_header_lines_make_one_list() -> None:
    """RFC 7230 section 3.2.2: lines of one header are one comma-separated list, in order."""
    lines = ["for=198.51.100.4", 'for=192.0.2.7;by="[2001:db8:1::1]", for=10.2.2.2']
    assert address("10.0.0.1", forwarded=lines) == ("192.0.2.7", 0)


def test_a_chain_of_trusted_proxies_gives_the_leftmost() -> None:
    """Every hop trusted: the leftmost is the best that is known."""
    assert address("10.0.0.1", forwarded_for=["10.3.3.3, 10.2.2.2"]) == ("10.3.3.3", 0)


def test_an_ipv6_proxy_is_trusted_by_its_block() -> None:
    assert address("2001:db8:1::5", forwarded_for=["192.0.2.7"]) == ("192.0.2.7", 0)


@pytest.mark.parametrize(
    ("forwarded", "forwarded_for"),
    [
        ([], ["not-an-address"]),
        ([], ["192.0.2.7, "]),
        ([], ["192.0.2.7:99999"]),
        (["for=unknown"], []),
        (["for=_hidden"], []),
        (["proto=https"], []),
        (['for="192.0.2.7'], []),
        (["for=192.0.2.7;;"], []),
        (['for="[2001:db8::1"'], []),
    ],
)
def test_a_malformed_header_is_ignored_with_a_log_line(
    forwarded: list[str], forwarded_for: list[str], log_events: list[dict[str, Any]]
) -> None:
    """A header that names no usable address leaves the peer, and says why in the log."""
    assert address("10.0.0.1", forwarded, forwarded_for) == ("10.0.0.1", 5000)
    [event] = [e for e in log_events if "ignored the" in e.get("log_format", "")]
    assert event["proxy"] == "10.0.0.1"


def test_networks_must_be_addresses_or_blocks() -> None:
    with pytest.raises(ValueError, match="not an address or CIDR block: 'proxy'"):
        parse_networks(["10.0.0.0/8", "proxy"])
