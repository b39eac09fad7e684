"""The ``--engine`` value (stompbroker.broker.engine.redis.url): parsing, and the masked form."""

from __future__ import annotations

from pathlib import Path

import pytest

from stompbroker.broker.engine.redis.url import EngineURL, EngineURLError, parse_engine


def test_memory_is_no_url() -> None:
    """``--engine memory`` selects the in-process engine."""
    assert parse_engine("memory") is None


def test_a_plain_url_gives_host_port_and_database() -> None:
    """redis://HOST:PORT/DB is read into its parts, with the default prefix."""
    assert parse_engine("redis://cache.example:6380/3") == EngineURL(
        tls=False, host="cache.example", port=6380, db=3
    )


def test_defaults_are_port_6379_and_database_0() -> None:
    """A URL without port or database uses Redis' defaults."""
    url = parse_engine("rediss://cache.example")
    assert url is not None and (url.tls, url.port, url.db) == (True, 6379, 0)


def test_the_password_in_the_url_is_masked_everywhere_it_is_shown() -> None:
    """Neither the masked URL, str() nor repr() shows the password."""
    url = parse_engine("redis://admin:s3cret@cache.example:6379/1")
    assert url is not None and url.password == "s3cret" and url.username == "admin"
    for shown in (url.masked, str(url), repr(url)):
        assert "s3cret" not in shown
    assert url.masked == "redis://admin:***@cache.example:6379/1"


def test_a_password_file_is_read_and_overrides_the_url(tmp_path: Path) -> None:
    """The password comes from ``?password_file=`` or --engine-password-file, first line only."""
    secret = tmp_path / "secret"
    secret.write_text("from-file\nignored\n")
    url = parse_engine(f"redis://:inline@h/0?password_file={secret}")
    assert url is not None and url.password == "from-file"
    url = parse_engine("redis://h/0", password_file=str(secret))
    assert url is not None and url.password == "from-file"


@pytest.mark.parametrize(
    "text",
    [
        "http://h/0",
        "redis:///0",
        "redis://h/zero",
        "redis://h/0?colour=blue",
        "redis://h/0?prefix=a:b",
        "redis://h/0?password_file=/nonexistent/secret",
    ],
)
def test_unusable_values_are_refused(text: str) -> None:
    """Values that name no usable engine are refused with a message."""
    with pytest.raises(EngineURLError):
        parse_engine(text)


def test_a_refused_url_does_not_repeat_its_password() -> None:
    """The error for a wrong scheme masks the password of the URL it quotes."""
    with pytest.raises(EngineURLError) as raised:
        parse_engine("http://user:s3cret@h/0")
    assert "s3cret" not in str(raised.value)


def test_a_sentinel_url_gives_the_sentinels_the_master_and_the_database() -> None:
    """Several Sentinels (26379 by default), the primary's name, then the database."""
    url = parse_engine("redis+sentinel://:pw@s1:26380,s2,[::1]:26381/mymaster/2?prefix=x")
    assert url is not None
    assert url.sentinels == (("s1", 26380), ("s2", 26379), ("::1", 26381))
    assert (url.master, url.db, url.password, url.prefix, url.tls) == (
        "mymaster",
        2,
        "pw",
        "x",
        False,
    )
    assert url.masked == "redis+sentinel://:***@s1:26380,s2:26379,[::1]:26381/mymaster/2"
    assert "pw" not in repr(url)
    tls = parse_engine("rediss+sentinel://s1/mymaster")
    assert tls is not None and tls.tls and tls.db == 0 and tls.master == "mymaster"


def test_the_sentinels_password_comes_from_a_file(tmp_path: Path) -> None:
    """``?sentinel_password_file=`` or --engine-sentinel-password-file, never shown."""
    secret = tmp_path / "sentinel"
    secret.write_text("s3nt\n")
    url = parse_engine(f"redis+sentinel://s1/m/0?sentinel_password_file={secret}")
    assert url is not None and url.sentinel_password == "s3nt" and url.password is None
    url = parse_engine("redis+sentinel://s1/m/0", sentinel_password_file=str(secret))
    assert url is not None and url.sentinel_password == "s3nt"
    assert "s3nt" not in repr(url) and "s3nt" not in url.masked


@pytest.mark.parametrize(
    "text",
    [
        "redis+sentinel://s1",
        "redis+sentinel://s1/",
        "redis+sentinel://s1/m/zero",
        "redis+sentinel://s1,/m/0",
        "redis+sentinel://s1:port/m/0",
        "redis://h1,h2/0",
        "redis://h/0?sentinel_password_file=/etc/hostname",
    ],
)
def test_unusable_sentinel_values_are_refused(text: str) -> None:
    """A Sentinel URL without its master, a bad host list, or Sentinel options without Sentinel."""
    with pytest.raises(EngineURLError):
        parse_engine(text)
