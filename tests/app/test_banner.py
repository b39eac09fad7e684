"""
Tests of the start-up banner (:mod:`stompbroker.app.banner`): each endpoint as the
URL a client uses, and the lines that say how the broker runs.
"""

from __future__ import annotations

import pytest
from twisted.internet.testing import MemoryReactorClock

from stompbroker.app.banner import banner_lines, endpoint_urls
from tests.support.options import parse


@pytest.mark.parametrize(
    "description, web, urls",
    [
        ("tcp:61613:interface=127.0.0.1", False, ["stomp://127.0.0.1:61613"]),
        ("tcp:61613", False, ["stomp://0.0.0.0:61613"]),
        ("tcp6:port=61613:interface=\\:\\:1", False, ["stomp://[::1]:61613"]),
        ("ssl:61614:privateKey=k.pem:certKey=c.pem", False, ["stomp+ssl://0.0.0.0:61614"]),
        (
            "tcp:15674:interface=127.0.0.1",
            True,
            ["ws://127.0.0.1:15674/ws", "http://127.0.0.1:15674/console"],
        ),
        (
            "ssl:15673:privateKey=k.pem",
            True,
            ["wss://0.0.0.0:15673/ws", "https://0.0.0.0:15673/console"],
        ),
        ("unix:/run/stomp.sock", False, ["unix:/run/stomp.sock"]),
    ],
)
def test_each_endpoint_is_the_url_a_client_uses(
    description: str, web: bool, urls: list[str]
) -> None:
    """A listener is shown as stomp://, ws://.../ws and http://.../console URLs."""
    assert [url for _, url in endpoint_urls(description, web)] == urls


def test_the_banner_says_engine_auth_access_store_and_reactor() -> None:
    """The banner of a broker with a password checker names it, and never its secret."""
    options = parse("--auth", "memory:alice:secret", "--allow-anonymous", "--data-dir", "none")
    lines = banner_lines(options, MemoryReactorClock())
    assert lines[0].endswith(" ready")
    text = "\n".join(lines)
    assert "  STOMP      stomp://127.0.0.1:61613" in text
    assert "  auth       memory; clients without a login let in" in text
    assert "  access     every client may use every destination" in text
    assert "  store      none: every message is in memory only (--data-dir none)" in text
    assert "uvloop not running" in text
    assert "secret" not in text


def test_the_banner_warns_of_anonymous_clients_an_http_application_is_asked_about() -> None:
    """
    ``--auth http`` with ``--allow-anonymous`` and no access file: the application
    decides, and the banner warns that it is asked about clients without a login.
    """
    options = parse(
        "--auth", "http:http://127.0.0.1:9/stomp", "--allow-anonymous", "--data-dir", "none"
    )  # fmt: skip
    text = "\n".join(banner_lines(options, MemoryReactorClock()))
    assert "  access     as the --auth http application decides" in text
    assert "WARNING    clients without a login are let in" in text
    assert 'as user ""' in text
    quiet = parse("--auth", "http:http://127.0.0.1:9/stomp", "--data-dir", "none")
    assert "WARNING" not in "\n".join(banner_lines(quiet, MemoryReactorClock()))


def test_the_banner_masks_the_redis_password() -> None:
    """With the redis engine the banner shows its URL without the password."""
    options = parse("--engine", "redis://:hunter2@127.0.0.1:6379/0")
    text = "\n".join(banner_lines(options, MemoryReactorClock()))
    assert "hunter2" not in text
    assert "  store      in Redis" in text


def test_with_the_redis_engine_the_banner_says_there_is_no_disk_alarm() -> None:
    """A node (a worker) keeps no messages on its disk: --disk-free-limit has nothing to watch."""
    options = parse("--engine", "redis://127.0.0.1:6379/0", "--disk-free-limit", "10%")
    text = "\n".join(banner_lines(options, MemoryReactorClock()))
    assert "(no disk alarm: none on this node's disk)" in text


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        ((), "(SQLite, sync batch, disk alarm under 50M)"),
        (("--disk-free-limit", "5%"), "(SQLite, sync batch, disk alarm under 5%)"),
        (("--disk-free-limit", "0"), "(SQLite, sync batch, no disk alarm)"),
    ],
)
def test_the_banner_says_where_the_disk_alarm_starts(argv: tuple[str, ...], shown: str) -> None:
    """The store's line says the --disk-free-limit the alarm watches, or that it is off."""
    options = parse("--data-dir", "/srv/stomp", *argv)
    (store,) = [line for line in banner_lines(options, MemoryReactorClock()) if "store" in line]
    assert store.endswith(f"/srv/stomp {shown}")
