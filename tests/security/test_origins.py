"""
``--allowed-origin`` patterns (:mod:`stompbroker.security.origins`): what a
pattern may be, what it matches, and the broker's own origin.
"""

from __future__ import annotations

import pytest

from stompbroker.security.origins import AllowedOrigins, is_same_origin, parse_origin_pattern


def allowed(*patterns: str) -> AllowedOrigins:
    """:returns: the origins ``--allowed-origin`` gives for each pattern."""
    return AllowedOrigins(tuple(map(parse_origin_pattern, patterns)))


@pytest.mark.parametrize(
    ("origin", "matched"),
    [
        ("https://app.example.com", True),
        ("https://a.b.example.com", True),
        ("https://example.com", True),
        ("HTTPS://App.Example.COM", True),
        ("http://app.example.com", False),
        ("https://example.com.evil.test", False),
        ("https://evil.test", False),
        ("http://localhost:3000", True),
        ("http://localhost:3001", False),
    ],
)
def test_a_pattern_matches_its_origin_and_subdomains(origin: str, matched: bool) -> None:
    """``*.`` stands for any subdomain and the host itself; scheme and port must match."""
    assert allowed("https://*.example.com", "http://localhost:3000").matches(origin) is matched


def test_a_star_allows_every_origin_and_none_is_unset() -> None:
    """``*`` matches every origin; without a pattern nothing matches and none is configured."""
    assert allowed("*").matches("https://anything.test")
    assert not AllowedOrigins().configured and not AllowedOrigins().matches("https://a.test")


@pytest.mark.parametrize(
    "pattern",
    ["example.com", "https://a.*.com", "ftp://example.com", "https://x.test/", "https://*", ""],
)
def test_a_pattern_that_is_no_origin_is_refused_saying_why(pattern: str) -> None:
    """A host alone, a path, another scheme or a wildcard inside the host: a ValueError."""
    with pytest.raises(ValueError, match="not an origin pattern"):
        parse_origin_pattern(pattern)


def test_the_brokers_own_origin_is_its_host_and_port() -> None:
    """A page the broker served names the Host the browser asked for, port and all."""
    assert is_same_origin("http://broker.test:15674", "Broker.test:15674")
    assert not is_same_origin("http://broker.test:15675", "broker.test:15674")
