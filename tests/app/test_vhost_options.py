"""``--vhost``, ``--vhost-unknown`` and the configuration file's ``[vhost.NAME]`` tables."""

from __future__ import annotations

from pathlib import Path

import pytest
from twisted.python import usage

from stompbroker.app.config_file import ConfigError, load
from stompbroker.app.options import Options


def parse(*arguments: str) -> Options:
    options = Options()
    options.parseOptions([*arguments, "--data-dir", "none"])
    return options


def test_no_virtual_hosts_by_default() -> None:
    assert parse()["virtual-hosts"] is None


def test_a_vhost_and_its_aliases() -> None:
    hosts = parse("--vhost", "shop:aliases=shop.example.com|shop", "--vhost", "lab")[
        "virtual-hosts"
    ]
    assert hosts.select("shop.example.com").name == "shop"
    assert hosts.select("lab").name == "lab"
    assert hosts.select("localhost") is None


def test_refusing_unknown_hosts() -> None:
    hosts = parse("--vhost", "lab", "--vhost-unknown", "refuse")["virtual-hosts"]
    assert hosts.refuse_unknown


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--vhost", "lab:colour=red"], "the keys are aliases"),
        (["--vhost", "a/b"], "letters, digits"),
        (["--vhost", "lab", "--vhost", "lab"], "named twice"),
        (["--vhost-unknown", "maybe"], "--vhost-unknown must be default or refuse"),
        (["--vhost", "lab:access=x.toml"], "access rules need --auth"),
    ],
)
def test_bad_vhosts_are_refused(arguments: list[str], message: str) -> None:
    with pytest.raises(usage.UsageError, match=message):
        parse(*arguments)


def test_the_configuration_file(tmp_path: Path) -> None:
    path = tmp_path / "broker.toml"
    path.write_text(
        '[connections]\nvhost-unknown = "refuse"\n\n'
        '[vhost.shop]\naliases = ["shop.example.com"]\n\n[vhost.lab]\n'
    )
    hosts = parse("--config", str(path))["virtual-hosts"]
    assert sorted(hosts.hosts) == ["lab", "shop"]
    assert hosts.select("shop.example.com").name == "shop"
    assert hosts.refuse_unknown


def test_a_bad_vhost_table_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "broker.toml"
    path.write_text('[vhost.shop]\naliases = "one"\n')
    with pytest.raises(ConfigError, match=r"broker.toml:2: \[vhost.shop\] aliases takes a list"):
        load(str(path))
