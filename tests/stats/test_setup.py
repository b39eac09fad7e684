"""
The listeners and settings in force (:mod:`stompbroker.stats.setup`): each
listener's URL from its endpoint description, and nothing secret in the settings.
"""

from __future__ import annotations

import pytest

from stompbroker.app.options import Options
from stompbroker.app.tap import running_setup
from stompbroker.stats.setup import Listener, RunningSetup, listener, redact_url


@pytest.mark.parametrize(
    ("kind", "endpoint", "url"),
    [
        ("stomp", "tcp:61613:interface=127.0.0.1", "stomp://127.0.0.1:61613"),
        ("stomp", "tcp:port=61613", "stomp://0.0.0.0:61613"),
        ("stomp", "ssl:61612:privateKey=key.pem:certKey=c.pem", "stomp+ssl://0.0.0.0:61612"),
        ("stomp", "mtls:61611:privateKey=k.pem:caCerts=ca.pem", "stomp+ssl://0.0.0.0:61611"),
        ("stomp", r"tcp6:61613:interface=\:\:1", "stomp://[::1]:61613"),
        ("http", "tcp:15674:interface=127.0.0.1", "http://127.0.0.1:15674/"),
        ("http", "ssl:15673:privateKey=key.pem", "https://0.0.0.0:15673/"),
        ("stomp", "unix:/run/stompbroker.sock", None),
    ],
)
def test_a_listener_has_the_url_a_client_reaches_it_at(
    kind: str, endpoint: str, url: str | None
) -> None:
    """Each endpoint type with a port gets its scheme, host and port; a UNIX socket no URL."""
    assert listener(kind, endpoint) == Listener(kind, endpoint, url)


def test_a_url_loses_its_password_and_keeps_the_rest() -> None:
    """redact_url hides the password of user:password@, and leaves URLs without one alone."""
    assert redact_url("redis://:hunter2@db:6379/0") == "redis://:***@db:6379/0"
    assert redact_url("rediss://app:hunter2@db/1?x=y") == "rediss://app:***@db/1?x=y"
    assert redact_url("redis://db:6379/0") == "redis://db:6379/0"
    assert redact_url("memory") == "memory"


def test_settings_are_text_sorted_by_name() -> None:
    """A tuple shows as its items joined by commas, None as none, booleans as JSON does."""
    setup = RunningSetup.of(
        [("stomp", "tcp:1")], [("b", (1, 2)), ("a", None), ("c", True), ("d", 2.5)]
    )
    assert setup.to_dict() == {
        "listeners": [{"kind": "stomp", "endpoint": "tcp:1", "url": "stomp://0.0.0.0:1"}],
        "configuration": {"a": "none", "b": "1,2", "c": "true", "d": "2.5"},
        "configuration_units": {},
    }


def test_policies_show_by_name_nothing_as_none_and_units_are_given() -> None:
    """
    The configuration is a table of names and values, never a Python repr: policies by
    name, an empty list as none; the byte and time settings carry their units.
    """
    options = Options()
    options.parseOptions(["--policy", "limited:pattern=limited.>,max-length=100"])
    document = running_setup(options).to_dict()
    configuration = document["configuration"]
    assert configuration["policies"] == "limited"
    assert configuration["allowed-origin"] == "none"
    assert not any("(" in value for value in configuration.values())
    units = document["configuration_units"]
    assert (units["memory-high"], units["connect-timeout"], units["ttl"]) == ("bytes", "s", "ms")


def test_the_running_setup_of_twistd_options_shows_no_secret() -> None:
    """
    From the command line: the listeners, the limits, the kinds of login --auth takes;
    never --auth's passwords, nor the engine URL's.
    """
    options = Options()
    options.parseOptions(
        [
            "--auth",
            "memory:admin:s3cret-pass",
            "--engine",
            "redis://:r3dis-pass@127.0.0.1:6379/0",
            "--port",
            "61613",
            "--max-connections",
            "77",
        ]
    )
    setup = running_setup(options)
    document = setup.to_dict()
    assert document["listeners"] == [
        {
            "kind": "stomp",
            "endpoint": "tcp:61613:interface=127.0.0.1",
            "url": "stomp://127.0.0.1:61613",
        },
        {
            "kind": "http",
            "endpoint": "tcp:15674:interface=127.0.0.1",
            "url": "http://127.0.0.1:15674/",
        },
    ]
    configuration = document["configuration"]
    assert configuration["max-connections"] == "77"
    assert configuration["auth"] == "password"
    assert configuration["engine"] == "redis://:***@127.0.0.1:6379/0"
    assert "s3cret-pass" not in repr(setup) and "r3dis-pass" not in repr(setup)
