"""
The ``stompbroker`` management subcommands, run as a subprocess against a real
broker: tables by default, ``--json`` for scripts, credentials from options, the
environment or a file, and exit codes that say what happened.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stompbroker.app import admin
from tests.support import tokens
from tests.support.clients import connect
from tests.support.management import cli, managed_broker
from tests.support.process import BrokerProcess
from tests.support.resume import cut, subscribed


@pytest.fixture(scope="module")
def managed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = managed_broker(tmp_path_factory.mktemp("cli"))
    yield process
    process.stop()


def test_publish_queues_browse_purge(managed: BrokerProcess) -> None:
    """publish fills a queue, queues shows its depth, browse its messages, purge empties it."""
    assert cli(managed, "publish", "/queue/cli", "first").returncode == 0
    published = cli(managed, "publish", "/queue/cli", "-", "--header", "k=v", stdin="second")
    assert published.returncode == 0 and published.stdout.startswith("published ")
    table = cli(managed, "queues")
    assert table.returncode == 0
    assert table.stdout.splitlines()[0].split()[:3] == ["destination", "kind", "depth"]
    [row] = [line.split() for line in table.stdout.splitlines() if line.startswith("/queue/cli")]
    assert row[1:3] == ["queue", "2"]
    browsed = cli(managed, "browse", "/queue/cli", "--json")
    assert [message["body"] for message in json.loads(browsed.stdout)] == ["first", "second"]
    assert "k: v" in cli(managed, "browse", "/queue/cli").stdout
    purged = cli(managed, "purge", "/queue/cli")
    assert (purged.returncode, purged.stdout.strip()) == (0, "purged 2 messages")


def test_close_and_connections(managed: BrokerProcess) -> None:
    """connections --json lists a client; close ends it."""
    connection, inbox = connect(managed.address)
    try:
        rows = json.loads(cli(managed, "connections", "--json").stdout)
        ident = rows[-1]["id"]
        closed = cli(managed, "close", ident, "--reason", "cli test")
        assert closed.returncode == 0 and ident in closed.stdout
        assert inbox.wait_for(lambda: inbox.errors, 5.0)
    finally:
        connection.disconnect()


def test_detached_lists_a_dropped_session_and_end_session_ends_it(managed: BrokerProcess) -> None:
    """detached shows a session whose socket was cut; end-session ends it; it is listed no more."""
    first, inbox = subscribed(managed, "/topic/cli-detached", "d")
    cut(first)
    session = inbox.connected["session"]
    table = cli(managed, "detached")
    assert table.returncode == 0
    assert table.stdout.splitlines()[0].split()[:3] == ["id", "login", "version"]
    [row] = [line.split() for line in table.stdout.splitlines() if line.startswith(session)]
    assert row[2:4] == ["1.2", "1"]
    ended = cli(managed, "end-session", session)
    assert (ended.returncode, ended.stdout.strip()) == (0, f"ended {session} (anonymous)")
    assert session not in cli(managed, "detached").stdout
    again = cli(managed, "end-session", session)
    assert again.returncode == 1 and "404 unknown session" in again.stderr


def test_dlq_retry_of_a_queue_that_is_not_a_dead_letter_queue_is_refused(
    managed: BrokerProcess,
) -> None:
    """The API's refusal is printed and the exit status is 1; the queue keeps its message."""
    cli(managed, "publish", "/queue/plain", "x")
    refused = cli(managed, "dlq-retry", "/queue/plain")
    assert refused.returncode == 1
    assert "400 bad request" in refused.stderr and "not a dead-letter queue" in refused.stderr
    assert json.loads(cli(managed, "browse", "/queue/plain", "--json").stdout)[0]["body"] == "x"


def test_exit_codes_and_credentials(managed: BrokerProcess, tmp_path: Path) -> None:
    """Exit 1 when refused, 2 for usage, 3 when unreachable; a password file works."""
    missing = cli(managed, "purge", "/queue/never")
    assert missing.returncode == 1 and "404" in missing.stderr
    wrong = cli(managed, "queues", env={"STOMPBROKER_PASSWORD": "wrong"})
    assert wrong.returncode == 1 and "login failed" in wrong.stderr
    reader = cli(managed, "purge", "/queue/plain", "--user", "reader", "--password", "secret")
    assert reader.returncode == 1 and "admin" in reader.stderr
    assert cli(managed, "purge").returncode == 2
    unreachable = cli(None, "queues")
    assert unreachable.returncode == 3 and "cannot reach" in unreachable.stderr
    secret = tmp_path / "password"
    secret.write_text("secret\n")
    from_file = cli(
        managed, "nodes", "--password-file", str(secret), env={"STOMPBROKER_PASSWORD": ""}
    )
    assert from_file.returncode == 0 and "local" in from_file.stdout


def test_every_subcommand_prints_json_with_json(managed: BrokerProcess) -> None:
    """Each subcommand, given --json, prints the API's answer as JSON and exits 0."""
    connection, inbox = connect(managed.address)
    try:
        cli(managed, "publish", "/queue/json", "a")
        cli(managed, "publish", "/queue/json", "b")
        ident = json.loads(cli(managed, "connections", "--json").stdout)[-1]["id"]
        dropped, dropped_inbox = subscribed(managed, "/topic/cli-json", "j")
        cut(dropped)
        session = dropped_inbox.connected["session"]
        runs = {
            "overview": ["overview"],
            "nodes": ["nodes"],
            "connections": ["connections"],
            "queues": ["queues"],
            "publish": ["publish", "/queue/json", "c"],
            "browse": ["browse", "/queue/json"],
            "move": ["move", "/queue/json", "/queue/json.moved", "--count", "1"],
            "dlq-retry": ["dlq-retry", "/queue/DLQ.json"],
            "purge": ["purge", "/queue/json"],
            "delete": ["delete", "/queue/json.moved"],
            "close": ["close", ident],
            "detached": ["detached"],
            "end-session": ["end-session", session],
            "set-policy": ["set-policy", "json-cap", "json.>", "--max-length", "5"],
            "policies": ["policies"],
            "clear-policy": ["clear-policy", "json-cap"],
        }
        cli(
            managed,
            "publish",
            "/queue/DLQ.json",
            "dead",
            "--header",
            "original-destination=/queue/json",
        )
        answers = {}
        for name, args in runs.items():
            run = cli(managed, *args, "--json")
            assert run.returncode == 0, (name, run.stderr)
            answers[name] = json.loads(run.stdout)
        assert set(answers) == set(admin.COMMANDS)
        assert answers["move"]["moved"] == 1 and answers["purge"]["purged"] == 3
        assert answers["dlq-retry"]["retried"] == 1 and answers["delete"]["discarded"] == 1
        assert answers["close"]["id"] == ident
        assert session in [row["id"] for row in answers["detached"]]
        assert answers["end-session"]["id"] == session
        assert inbox.wait_for(lambda: inbox.errors, 5.0)
    finally:
        connection.disconnect()


@pytest.fixture(scope="module")
def token_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker whose only logins are HS256 tokens."""
    workdir = tmp_path_factory.mktemp("cli-tokens")
    process = BrokerProcess(workdir, "--auth", tokens.hs256_auth(workdir), "--data-dir", "none")
    yield process
    process.stop()


def test_a_bearer_token_from_a_file_or_the_environment(
    token_broker: BrokerProcess, tmp_path: Path
) -> None:
    """A token from --token-file or $STOMPBROKER_TOKEN logs in with its scopes; bad ones exit 1."""
    now = time.time()
    admin_token = tokens.make_token(
        now, tokens.SECRET, "HS256", scope="stompbroker.admin stompbroker.read stompbroker.write"
    )
    reader_token = tokens.make_token(now, tokens.SECRET, "HS256", scope="stompbroker.read")
    token_file = tmp_path / "token"
    token_file.write_text(admin_token + "\n")
    no_password = {"STOMPBROKER_USER": "", "STOMPBROKER_PASSWORD": ""}
    published = cli(
        token_broker, "publish", "/queue/t", "x", "--token-file", str(token_file), env=no_password
    )
    assert published.returncode == 0, published.stderr
    as_reader = dict(no_password, STOMPBROKER_TOKEN=reader_token)
    refused = cli(token_broker, "purge", "/queue/t", env=as_reader)
    assert refused.returncode == 1 and "no admin right" in refused.stderr
    expired = tokens.make_token(now, tokens.SECRET, "HS256", exp=int(now) - 60)
    lapsed = cli(token_broker, "purge", "/queue/t", "--token", expired, env=no_password)
    assert lapsed.returncode == 1 and "token expired" in lapsed.stderr
    browsed = cli(token_broker, "browse", "/queue/t", "--json", env=as_reader)
    assert [message["body"] for message in json.loads(browsed.stdout)] == ["x"]


def test_each_subcommands_help_says_what_its_exit_status_means() -> None:
    """--help of a management subcommand ends with the meaning of each exit status."""
    for command in admin.COMMANDS:
        shown = cli(None, command, "--help")
        assert shown.returncode == 0
        assert "exit status: 0 done; 1 the broker refused" in " ".join(shown.stdout.split())


@pytest.fixture(scope="module")
def hosts_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker serving the virtual host ``shop`` beside the default one."""
    process = managed_broker(tmp_path_factory.mktemp("cli-vhosts"), "--vhost", "shop")
    yield process
    process.stop()


def test_policies_and_queues_take_the_virtual_host(hosts_broker: BrokerProcess) -> None:
    """
    ``set-policy --vhost shop`` sets a policy of ``shop``: ``policies`` shows it with a
    vhost column, ``--vhost /`` leaves it out, and it is in force on shop's queue only.
    """
    for vhost in ("shop", "/"):
        assert cli(hosts_broker, "publish", "/queue/capped", "x", "--vhost", vhost).returncode == 0
    set_policy = cli(
        hosts_broker, "set-policy", "cap", "capped", "--max-length", "9", "--vhost", "shop"
    )
    assert set_policy.returncode == 0, set_policy.stderr
    listed = cli(hosts_broker, "policies").stdout.splitlines()
    assert listed[0].split()[:2] == ["vhost", "name"]
    assert listed[1].split()[:3] == ["shop", "cap", "capped"]
    assert cli(hosts_broker, "policies", "--vhost", "/", "--json").stdout.strip() == "[]"
    rows = json.loads(cli(hosts_broker, "queues", "--json").stdout)
    policies = sorted(
        (row["vhost"], row["policy"]) for row in rows if row["destination"] == "/queue/capped"
    )
    assert policies == [("/", None), ("shop", "cap")]
    refused = cli(hosts_broker, "clear-policy", "cap", "--vhost", "/")
    assert refused.returncode == 1 and "unknown policy" in refused.stderr
    assert cli(hosts_broker, "clear-policy", "cap", "--vhost", "shop").returncode == 0
