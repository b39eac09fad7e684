"""
Tests of the configuration file (:mod:`stompbroker.app.config_file`): ``--config
FILE`` sets what the command line sets, the command line overrides it, and a
mistake is refused with the file, the line and the reason.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stompbroker.app.config_file import LOGIN_SECTIONS, SECTIONS, ConfigError
from stompbroker.app.options import Options
from stompbroker.broker.flow.disk_alarm import DiskFreeLimit
from stompbroker.broker.flow.rate_limits import Rate, Rates
from tests.support.options import parse

DOCS = Path(__file__).parents[2] / "docs" / "configuration.md"


def write(tmp_path: Path, text: str) -> str:
    """:returns: the path of a configuration file holding ``text``."""
    path = tmp_path / "broker.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def refusal(tmp_path: Path, text: str, *argv: str) -> str:
    """:returns: the message of the ConfigError that ``text`` (and ``argv``) get."""
    with pytest.raises(ConfigError) as caught:
        parse("--config", write(tmp_path, text), *argv)
    return str(caught.value)


def test_the_file_sets_values_flags_and_lists(tmp_path: Path) -> None:
    """A value, a flag and a repeatable option each come through as the command line's."""
    path = write(
        tmp_path,
        """
[listeners]
listen = ["tcp:7001:interface=127.0.0.1", "tcp:7002:interface=127.0.0.1"]
http = ["none"]

[connections]
max-connections = 5
heartbeat = "0,0"

[delivery]
persistent-queues = true

[flow]
memory-high = "1G"

[store]
disk-free-limit = "10%"
""",
    )
    options = parse("--config", path)
    assert options["listen"] == ["tcp:7001:interface=127.0.0.1", "tcp:7002:interface=127.0.0.1"]
    assert options["http"] == []
    assert options["max-connections"] == 5
    assert options["heartbeat"] == (0, 0)
    assert options["persistent-queues"]
    assert options["memory-high"] == 1024**3
    assert options["disk-free-limit"] == DiskFreeLimit(share=0.1)


def test_the_command_line_overrides_the_file(tmp_path: Path) -> None:
    """A value on the command line wins, and --port replaces the file's listen list."""
    path = write(
        tmp_path,
        '[connections]\nmax-connections = 5\n[listeners]\nlisten = ["tcp:7001"]\n',
    )
    options = parse("--max-connections", "9", "--config", path, "--port", "7000")
    assert options["max-connections"] == 9
    assert options["listen"] == ["tcp:7000:interface=127.0.0.1"]


def test_a_false_flag_sets_nothing(tmp_path: Path) -> None:
    """``persistent-queues = false`` leaves the flag off."""
    assert not parse("--config", write(tmp_path, "[delivery]\npersistent-queues = false\n"))[
        "persistent-queues"
    ]


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param(
            "[connections]\n\nmax-conections = 5\n",
            ":3: [connections] max-conections is not a setting (did you mean max-connections?)",
            id="unknown-key",
        ),
        pytest.param(
            "[listeners]\nmax-connections = 5\n",
            ":2: [listeners] max-connections: max-connections belongs in [connections]",
            id="key-in-another-section",
        ),
        pytest.param(
            "[limitz]\nx = 1\n",
            ":1: [limitz] is not a section; the sections are listeners,",
            id="unknown-section",
        ),
        pytest.param(
            "max-connections = 5\n",
            ":1: max-connections belongs in the section [connections]",
            id="key-outside-a-section",
        ),
        pytest.param(
            "# limits\n[connections]\nmax-connections = 'abc'\n",
            ":3: [connections] max-connections takes a whole number, got 'abc'",
            id="bad-number",
        ),
        pytest.param(
            "[connections]\nmax-connections = -1\n",
            ":2: [connections] max-connections must be 0 or more, got '-1'",
            id="out-of-range",
        ),
        pytest.param(
            "[flow]\nslow-consumer = 'pause'\n",
            ":2: [flow] slow-consumer must be one of block, drop-oldest, disconnect, got 'pause'",
            id="checked-after-parsing",
        ),
        pytest.param(
            "[store]\ndisk-free-limit = '100%'\n",
            ":2: [store] disk-free-limit takes bytes (with K, M, G or T) or a share of the data"
            " directory's filesystem below 100%, such as 5%, got '100%'",
            id="disk-free-limit",
        ),
        pytest.param(
            "[connections]\nmax-connections = true\n",
            ":2: [connections] max-connections takes a string or a number, got True",
            id="bool-for-a-value",
        ),
        pytest.param(
            "[delivery]\npersistent-queues = 'yes'\n",
            ":2: [delivery] persistent-queues takes true or false, got 'yes'",
            id="string-for-a-flag",
        ),
        pytest.param(
            "[listeners]\nlisten = []\n",
            ":2: [listeners] listen takes a list of strings, got []",
            id="empty-list",
        ),
        pytest.param(
            "[connections]\nmax-connections = \n",
            ":2: not valid TOML: Invalid value (column 19)",
            id="not-toml",
        ),
    ],
)
def test_a_mistake_is_refused_with_the_line_and_the_reason(
    tmp_path: Path, text: str, expected: str
) -> None:
    """Each mistake names the file, its line and what is wrong, in one line."""
    message = refusal(tmp_path, text)
    assert message.startswith(str(tmp_path / "broker.toml") + expected[: expected.index(" ")])
    assert expected in message
    assert "\n" not in message


def test_a_check_across_options_names_the_files_line(tmp_path: Path) -> None:
    """A value refused only beside another (memory-low above memory-high) names its line."""
    message = refusal(tmp_path, "[flow]\nmemory-high = '1G'\nmemory-low = '2G'\n")
    assert message.endswith("broker.toml:3: [flow] memory-low must be below --memory-high")


def test_a_missing_file_is_said_in_one_line(tmp_path: Path) -> None:
    """A file that cannot be read is named with the reason."""
    with pytest.raises(ConfigError, match=r"missing\.toml: cannot read it: No such file"):
        parse("--config", str(tmp_path / "missing.toml"))


def test_the_file_may_be_named_once(tmp_path: Path) -> None:
    """Two --config files are refused rather than merged in a surprising order."""
    path = write(tmp_path, "")
    with pytest.raises(Exception, match="--config is given twice"):
        parse("--config", path, "--config", path)


def test_every_option_has_one_place_in_the_file() -> None:
    """Each option of twistd stompbroker but --port, --config and --version is one key."""
    names = {name.rstrip("=") for name in Options().longOpt}
    names -= {"port", "config", "version", "help", "help-auth", "help-auth-type"}
    keys = [key for section in SECTIONS.values() for key in section.keys]
    keys += [tables.option for tables in LOGIN_SECTIONS.values()]
    keys.append("vhost")  # the [vhost.NAME] tables
    keys += ["policy"]  # the [[policy]] tables
    assert sorted(keys) == sorted(set(keys))
    assert set(keys) == names


def example() -> str:
    """:returns: the complete example file of docs/configuration.md."""
    text = DOCS.read_text(encoding="utf-8")
    [block] = re.findall(r"<!-- example -->\s*```toml\n(.*?)```", text, re.DOTALL)
    return block


def test_the_documented_example_is_valid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/configuration.md's complete example loads, and sets what it says."""
    (tmp_path / "users.txt").write_text("", encoding="utf-8")
    (tmp_path / "access.toml").write_text("", encoding="utf-8")
    path = write(tmp_path, example())
    monkeypatch.chdir(tmp_path)
    options = parse("--config", path)
    assert options["listen"] == ["tcp:61613:interface=127.0.0.1"]
    assert options["http"] == ["tcp:15674:interface=127.0.0.1"]
    assert options["max-connections"] == 10000
    assert options["data-dir"] == "/var/lib/stompbroker"
    assert options["access-control"] is not None
    assert len(options["credCheckers"]) == 1


def test_a_login_gets_rates_of_its_own_from_its_table(tmp_path: Path) -> None:
    """``[rate-limit.user.LOGIN]`` replaces the broker-wide rates that it names for that login."""
    path = write(
        tmp_path,
        """
[security]
auth = ["memory:alice:pw:feed:pw"]

[flow]
rate-limit-messages = "10"
rate-limit-user-bytes = "1M"

[rate-limit.user.feed]
messages = "1000/5000"
user-bytes = "64M"

[rate-limit.user."alice.smith"]
bytes = 2048
""",
    )
    limits = parse("--config", path)["rate-limits"]
    assert limits.for_login("feed") == (
        Rates(messages=Rate(1000, 5000)),
        Rates(bytes=Rate(64 * 1024**2)),
    )
    assert limits.for_login("alice.smith") == (
        Rates(messages=Rate(10), bytes=Rate(2048)),
        Rates(bytes=Rate(1024**2)),
    )
    assert limits.for_login("bob") == (Rates(messages=Rate(10)), Rates(bytes=Rate(1024**2)))


_TABLE = "[rate-limit.user.alice]\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (_TABLE + "message = 5\n", ":4: [rate-limit.user.alice] message is not a setting"),
        (_TABLE + "messages = true\n", ":4: [rate-limit.user.alice] messages takes a string"),
        (
            _TABLE + "messages = 'fast'\n",
            ":3: [rate-limit.user.alice] alice: messages: --rate-limit-messages takes N or N/BURST",
        ),
        (
            "[rate-limit.group.traders]\nmessages = 5\n",
            ": [rate-limit] holds only [rate-limit.user.LOGIN] tables",
        ),
        ("[rate-limit.user]\nalice = 5\n", ":4: [rate-limit.user.alice] must be a table"),
    ],
)
def test_a_mistake_in_a_logins_table_is_refused_with_its_line(
    tmp_path: Path, text: str, expected: str
) -> None:
    """A mistake in a ``[rate-limit.user.LOGIN]`` table names the file, its line and the reason."""
    message = refusal(tmp_path, '[security]\nauth = ["memory:alice:pw"]\n' + text)
    assert expected in message, message
