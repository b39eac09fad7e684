"""
The ``stompbroker`` management subcommands, run as a subprocess against a real
broker: tables by default, ``--json`` for scripts, credentials from options, the
environment or a file, and exit codes that say what happened.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.clients import connect
from tests.support.management import managed_broker
from tests.support.process import BrokerProcess, free_port, subprocess_env


@pytest.fixture(scope="module")
def managed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = managed_broker(tmp_path_factory.mktemp("cli"))
    yield process
    process.stop()


def cli(
    broker: BrokerProcess | None, *args: str, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run ``stompbroker ARGS`` with ``--url`` of the broker (credentials ``admin`` by default)."""
    environment = subprocess_env()
    environment.update(STOMPBROKER_USER="admin", STOMPBROKER_PASSWORD="secret")
    environment.update(env or {})
    url = f"http://127.0.0.1:{broker.http_port if broker else free_port()}"
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from stompbroker.app.cli import main; raise SystemExit(main())",
            *args,
            "--url",
            url,
        ],
        env=environment,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


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
