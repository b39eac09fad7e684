"""``--policy`` and the configuration file's ``[[policy]]`` tables."""

from __future__ import annotations

from pathlib import Path

import pytest
from twisted.python import usage

from stompbroker.app.options import Options


def test_policies_come_from_the_file(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text(
        '[[policy]]\nname = "orders"\npattern = "orders.>"\napply-to = "queues"\n'
        'max-length = 100\noverflow = "reject-publish"\n\n'
        '[[policy]]\nname = "all"\npattern = ">"\nmessage-ttl = 60000\n'
    )
    options = Options()
    options.parseOptions(["--config", str(config)])
    orders, everything = options["policies"]
    assert (orders.name, orders.apply_to, orders.settings.max_length) == ("orders", "queues", 100)
    assert everything.settings.message_ttl == 60000


def test_policies_from_the_command_line() -> None:
    options = Options()
    options.parseOptions(["--policy", "p:pattern=a.*,priority=2,prefetch=5"])
    (policy,) = options["policies"]
    assert policy.priority == 2 and policy.settings.prefetch == 5


def test_a_policy_table_names_its_virtual_host(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text(
        '[vhost.shop]\n\n[[policy]]\nname = "shop-orders"\npattern = "orders.>"\n'
        'vhost = "shop"\nmax-length = 10\n'
    )
    options = Options()
    options.parseOptions(["--config", str(config)])
    (policy,) = options["policies"]
    assert (policy.vhost, policy.settings.max_length) == ("shop", 10)


def test_no_policy_by_default() -> None:
    options = Options()
    options.parseOptions([])
    assert options["policies"] == ()


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--policy", "p"], "NAME:pattern=PATTERN"),
        (["--policy", "p:pattern"], "is not KEY=VALUE"),
        (["--policy", "p:pattern=a,overflow=x"], "overflow"),
        (["--policy", "p:pattern=a", "--policy", "p:pattern=b"], "given twice"),
        (["--policy", "p:pattern=a,vhost=shop"], "'shop' is no virtual host of this broker"),
        (["--vhost", "lab", "--policy", "p:pattern=a,vhost=shop"], "it serves /, lab"),
    ],
)
def test_a_bad_policy_is_a_usage_error(arguments: list[str], said: str) -> None:
    with pytest.raises(usage.UsageError, match=said):
        Options().parseOptions(arguments)


def test_a_policy_table_without_a_name_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text('[[policy]]\npattern = "a"\n')
    with pytest.raises(usage.UsageError, match="needs a name"):
        Options().parseOptions(["--config", str(config)])
