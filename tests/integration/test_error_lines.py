"""
The mistakes newcomers make get one clear line and an exit status, never a
traceback nor the whole ``--help`` (issue 30's list, each as a real process).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.process import (
    CHILD_TIMEOUT,
    BrokerProcess,
    broker_arguments,
    free_port,
    subprocess_env,
    twistd_command,
)


def twistd(
    tmp_path: Path, *args: str, reactor: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """:returns: ``twistd -n stompbroker ARGS`` run to its end, its output and errors apart."""
    return subprocess.run(
        [*twistd_command(), *broker_arguments(free_port(), None, reactor, *args)],
        cwd=tmp_path,
        env=env or subprocess_env(),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
    )


def command(*args: str, stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    """:returns: ``stompbroker ARGS`` run to its end with nothing on standard input."""
    return subprocess.run(
        [sys.executable, "-m", "stompbroker.app.cli", *args],
        env=subprocess_env(),
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
    )


def one_line(completed: subprocess.CompletedProcess[str]) -> str:
    """:returns: the one line on standard error, checking that nothing shows a traceback."""
    assert "Traceback" not in completed.stdout + completed.stderr
    lines = completed.stderr.splitlines()
    assert len(lines) == 1, completed.stderr
    return lines[0]


@pytest.fixture(scope="module")
def web_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker with a web port, for the management commands."""
    with BrokerProcess(tmp_path_factory.mktemp("errors")) as process:
        yield process


def test_the_redis_engine_without_redis_says_what_to_install(tmp_path: Path) -> None:
    """--engine redis://... without redis-py installed names the extra to install."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['redis'] = None\n")
    env = subprocess_env()
    env["PYTHONPATH"] = f"{tmp_path}:{env['PYTHONPATH']}"
    completed = twistd(tmp_path, "--engine", "redis://127.0.0.1:6379/0", env=env)
    assert completed.returncode == 1
    assert one_line(completed) == (
        "twistd stompbroker: --engine redis://... needs the redis package:"
        " pip install redis (or 'stompbroker[redis]' from PyPI, '.[redis]' in a checkout)"
    )


def test_workers_with_redis_unreachable_stop_without_a_traceback(tmp_path: Path) -> None:
    """--workers 2 with nothing at the Redis URL: the reason, once, and exit status 1."""
    completed = twistd(
        tmp_path,
        "--engine",
        f"redis://127.0.0.1:{free_port()}/0",
        "--workers",
        "2",
        reactor="asyncio",
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 1
    assert "Traceback" not in output and "ReactorNotRunning" not in output
    assert output.count("stompbroker cannot start: worker") == 1
    assert "cannot reach Redis" in output


@pytest.mark.parametrize(
    ("reactor", "said"),
    [
        pytest.param(None, "start twistd with -r uvloop", id="not-asyncio"),
        pytest.param("uvloop", "cannot reach Redis", id="redis-unreachable"),
    ],
)
def test_a_redis_engine_that_cannot_start_says_so_once(
    tmp_path: Path, reactor: str | None, said: str
) -> None:
    """The reason a node cannot start is in its output once, with exit status 1."""
    completed = twistd(tmp_path, "--engine", f"redis://127.0.0.1:{free_port()}/0", reactor=reactor)
    assert completed.returncode == 1
    assert "Traceback" not in completed.stdout + completed.stderr
    assert (completed.stdout + completed.stderr).count(said) == 1


@pytest.mark.parametrize(
    "args, line",
    [
        pytest.param(
            ["--max-connections", "abc"],
            "twistd stompbroker: --max-connections takes a whole number, got 'abc'",
            id="max-connections",
        ),
        pytest.param(
            ["--auth", "passwd:missing-file"],
            "twistd stompbroker: --auth passwd: missing-file: cannot read it:"
            " No such file or directory",
            id="auth-missing-file",
        ),
        pytest.param(
            ["--listen", "tcp:abc"],
            "twistd stompbroker: --listen tcp:abc: 'abc' is not a number",
            id="listen-port-not-a-number",
        ),
        pytest.param(
            ["--listen", "foo:1"],
            "twistd stompbroker: --listen foo:1: Unknown endpoint type: 'foo'",
            id="listen-unknown-type",
        ),
        pytest.param(
            ["--listen", "tcp:0:backlg=5"],
            "twistd stompbroker: --listen tcp:0:backlg=5: no such argument 'backlg'",
            id="listen-unknown-argument",
        ),
        pytest.param(
            ["--policy", "o:pattern=x,apply-to=queues,max-length=5,overflow=bogus"],
            "twistd stompbroker: --policy policy o: overflow must be one of drop-head,"
            " reject-publish, dead-letter, got 'bogus'",
            id="policy-overflow",
        ),
        pytest.param(
            ["--memory-high", "40"],
            "twistd stompbroker: --memory-high 40 is 40 bytes, below 1M: give a unit (K, M, G)"
            " or a share of memory such as 40%, or 0 to turn it off",
            id="memory-high-without-unit",
        ),
    ],
)
def test_a_bad_option_is_one_line_not_the_help(tmp_path: Path, args: list[str], line: str) -> None:
    """A refused option is one line on standard error, exit status 1, and no --help."""
    completed = twistd(tmp_path, *args)
    assert completed.returncode == 1
    assert one_line(completed) == line
    assert completed.stdout == ""


def test_a_tls_listener_without_its_files_is_one_line(tmp_path: Path) -> None:
    """An ssl: endpoint whose certificate is missing: the file named, no traceback."""
    listen = "ssl:0:privateKey=key.pem:certKey=cert.pem"
    completed = twistd(tmp_path, "--listen", listen)
    assert completed.returncode == 1
    assert one_line(completed) == (
        f"twistd stompbroker: --listen {listen}:"
        f" No such file or directory ({tmp_path / 'cert.pem'})"
    )


def test_config_check_builds_the_listeners_as_the_start_does(tmp_path: Path) -> None:
    """config check refuses the endpoint the start would refuse, not "would start"."""
    config = tmp_path / "tls.toml"
    config.write_text("[listeners]\nlisten = ['ssl:61612:privateKey=k.pem:certKey=c.pem']\n")
    refused = subprocess.run(
        [sys.executable, "-m", "stompbroker.app.cli", "config", "check", str(config)],
        cwd=tmp_path,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
    )
    assert refused.returncode == 1
    assert one_line(refused) == (
        f"stompbroker config: {config}:2: [listeners] listen"
        " ssl:61612:privateKey=k.pem:certKey=c.pem:"
        f" No such file or directory ({tmp_path / 'c.pem'})"
    )


def test_a_stats_directory_that_cannot_be_written_stops_the_start(tmp_path: Path) -> None:
    """--stats-dir /proc/x is refused at start, as --data-dir is, not every 10 s after."""
    completed = twistd(tmp_path, "--stats-dir", "/proc/x", "--data-dir", "none")
    output = completed.stdout + completed.stderr
    assert completed.returncode == 1
    assert "Traceback" not in output
    assert "cannot use /proc/x as the stats directory" in output


def test_queues_on_the_stomp_port_says_it_is_not_the_web_port(web_broker: BrokerProcess) -> None:
    """--url at the STOMP port: one line saying which port to use, exit status 3."""
    completed = command("queues", "--url", f"http://127.0.0.1:{web_broker.port}")
    assert completed.returncode == 3
    assert "not its STOMP port" in one_line(completed)


def test_a_url_without_a_scheme_means_http(web_broker: BrokerProcess) -> None:
    """--url 127.0.0.1:PORT is taken as http://127.0.0.1:PORT."""
    completed = command("nodes", "--url", f"127.0.0.1:{web_broker.http_port}")
    assert (completed.returncode, completed.stderr) == (0, "")
    assert "local" in completed.stdout


def test_https_on_a_plain_http_port_says_so(web_broker: BrokerProcess) -> None:
    """--url https:// on the plain web port: no TLS answer, said in one line, status 3."""
    url = f"https://127.0.0.1:{web_broker.http_port}"
    completed = command("nodes", "--url", url)
    assert completed.returncode == 3
    assert one_line(completed) == (
        f"stompbroker nodes: {url} does not answer TLS within 5 s: is it a plain http:// port?"
    )


def test_passwd_without_a_terminal_reads_standard_input(tmp_path: Path) -> None:
    """passwd with nothing on standard input says so in one line; a piped password is taken."""
    users = str(tmp_path / "users.txt")
    empty = command("passwd", users, "bob", "--cost", "16")
    assert empty.returncode == 1
    assert one_line(empty) == "stompbroker passwd: the password is empty; nothing was changed"
    piped = subprocess.run(
        [sys.executable, "-m", "stompbroker.app.cli", "passwd", users, "bob", "--cost", "16"],
        env=subprocess_env(),
        input="secret\n",
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
    )
    assert (piped.returncode, piped.stderr) == (0, "")
    assert Path(users).read_text().startswith("bob:")


def test_config_check_says_where_the_mistake_is(tmp_path: Path) -> None:
    """config check: exit 0 for a valid file, 1 and one line with the line number otherwise."""
    good = tmp_path / "good.toml"
    good.write_text("[connections]\nmax-connections = 10\n")
    checked = command("config", "check", str(good))
    assert (checked.returncode, checked.stderr) == (0, "")
    bad = tmp_path / "bad.toml"
    bad.write_text("[connections]\nmax-connections = 'many'\n")
    refused = command("config", "check", str(bad))
    assert refused.returncode == 1
    assert one_line(refused) == (
        f"stompbroker config: {bad}:2: [connections] max-connections takes a whole number,"
        " got 'many'"
    )


def test_twistd_refuses_a_bad_file_in_one_line(tmp_path: Path) -> None:
    """twistd stompbroker --config with a mistake: the file's line, exit status 1."""
    bad = tmp_path / "bad.toml"
    bad.write_text("[listeners]\nhttp = ['none']\n\n[connections]\nmax-conections = 1\n")
    completed = twistd(tmp_path, "--config", str(bad))
    assert completed.returncode == 1
    assert one_line(completed) == (
        f"twistd stompbroker: {bad}:5: [connections] max-conections is not a setting"
        " (did you mean max-connections?)"
    )
