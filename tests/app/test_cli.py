"""
Tests for the ``stompbroker`` command (:mod:`stompbroker.app.cli`): ``passwd`` writes
password files that the ``passwd`` checker accepts.

The command runs in-process through :func:`stompbroker.app.cli.main` with its streams
passed in, and once as a real process to show that ``--stdin`` reads a pipe.
``--cost 16`` keeps hashing cheap where cost is not what is tested.
"""

from __future__ import annotations

import io
import stat
from pathlib import Path

import pytest
from twisted.cred.credentials import UsernamePassword
from twisted.internet.defer import maybeDeferred

import stompbroker
from stompbroker.app import admin, cli
from stompbroker.security.checkers import PasswordFileChecker
from stompbroker.security.passwords import read_password_file
from tests.support.process import run_python

CHEAP = ["--cost", "16"]


class Terminal(io.StringIO):
    """Standard input that says it is a terminal, as an interactive shell's is."""

    def isatty(self) -> bool:
        return True


def run(*argv: str, stdin: str | io.StringIO = "") -> tuple[int, str, str]:
    """:returns: the exit status, standard output and standard error of one command."""
    stdout, stderr = io.StringIO(), io.StringIO()
    source = stdin if isinstance(stdin, io.StringIO) else io.StringIO(stdin)
    status = cli.main(list(argv), source, stdout, stderr)
    return status, stdout.getvalue(), stderr.getvalue()


def accepts(path: Path, user: str, password: str) -> bool:
    """:returns: whether the ``passwd`` checker lets ``user`` in with ``password``."""
    checker = PasswordFileChecker(str(path), run_blocking=maybeDeferred)
    result = checker.requestAvatarId(UsernamePassword(user, password))
    results: list[object] = []
    result.addBoth(results.append)
    return results == [user]


def test_passwd_creates_a_private_file_the_checker_accepts(tmp_path: Path) -> None:
    """``passwd --stdin`` makes an owner-only file whose entry logs the user in, with groups."""
    path = tmp_path / "users.txt"
    status, out, err = run(
        "passwd",
        str(path),
        "alice",
        "--group",
        "traders",
        "--group",
        "ops",
        "--stdin",
        *CHEAP,
        stdin="wonderland\n",
    )
    assert (status, err) == (0, "")
    assert out == f"set the password of alice (traders, ops) in {path}\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert accepts(path, "alice", "wonderland")
    assert not accepts(path, "alice", "wonderland\n")
    assert PasswordFileChecker(str(path)).groups_of("alice") == {"traders", "ops"}


def test_passwd_uses_the_default_cost_unless_told(tmp_path: Path) -> None:
    """Without ``--cost`` the entry records the default scrypt parameters; with it, the chosen N."""
    path = tmp_path / "users.txt"
    run("passwd", str(path), "alice", "--stdin", stdin="a\n")
    run("passwd", str(path), "bob", "--stdin", "--cost", "1024", stdin="b\n")
    entries = read_password_file(str(path))
    assert (entries["alice"].params.n, entries["bob"].params.n) == (16384, 1024)
    assert accepts(path, "alice", "a") and accepts(path, "bob", "b")


def test_passwd_replaces_in_place_and_keeps_everything_else(tmp_path: Path) -> None:
    """A new password rewrites only that user's line; comments, order, mode and groups stay."""
    path = tmp_path / "users.txt"
    run("passwd", str(path), "alice", "--group", "ops", "--stdin", *CHEAP, stdin="one\n")
    run("passwd", str(path), "bob", "--stdin", *CHEAP, stdin="two\n")
    path.write_text("# our users\n" + path.read_text(encoding="utf-8"), encoding="utf-8")
    path.chmod(0o640)
    status, out, _ = run("passwd", str(path), "alice", "--stdin", *CHEAP, stdin="three\n")
    assert status == 0 and "(ops)" in out
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# our users"
    assert [line.split(":")[0] for line in lines[1:]] == ["alice", "bob"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert accepts(path, "alice", "three") and not accepts(path, "alice", "one")
    assert accepts(path, "bob", "two")


def test_group_option_replaces_the_groups(tmp_path: Path) -> None:
    """``--group`` on an existing user sets exactly the groups given."""
    path = tmp_path / "users.txt"
    run("passwd", str(path), "alice", "--group", "a", "--stdin", *CHEAP, stdin="pw\n")
    run("passwd", str(path), "alice", "--group", "b", "--stdin", *CHEAP, stdin="pw\n")
    assert read_password_file(str(path))["alice"].groups == ("b",)


def test_passwd_asks_twice_on_the_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``--stdin`` getpass asks twice; two different answers change nothing."""
    path = tmp_path / "users.txt"
    answers = iter(["secret", "secret", "secret", "typo"])
    prompts: list[str] = []

    def fake_getpass(prompt: str) -> str:
        prompts.append(prompt)
        return next(answers)

    monkeypatch.setattr(cli.getpass, "getpass", fake_getpass)
    assert run("passwd", str(path), "alice", *CHEAP, stdin=Terminal())[0] == 0
    assert prompts == ["Password for alice: ", "Again: "]
    before = path.read_text(encoding="utf-8")
    status, _, err = run("passwd", str(path), "alice", *CHEAP, stdin=Terminal())
    assert (status, err) == (1, "stompbroker passwd: the passwords differ; nothing was changed\n")
    assert path.read_text(encoding="utf-8") == before


@pytest.mark.parametrize(
    "arguments, stdin, message",
    [
        pytest.param(["a:b"], "pw\n", "user name must be non-empty", id="colon-in-user"),
        pytest.param(
            ["alice", "--group", "a,b"], "pw\n", "invalid group name", id="comma-in-group"
        ),
        pytest.param(["alice"], "\n", "the password is empty", id="empty-password"),
        pytest.param(["alice"], "", "the password is empty", id="no-input"),
        pytest.param(["alice", "--cost", "1000"], "pw\n", "power of two", id="bad-cost"),
    ],
)
def test_passwd_refuses_what_the_file_cannot_hold(
    tmp_path: Path, arguments: list[str], stdin: str, message: str
) -> None:
    """Bad names, an empty password or a bad cost exit with status 1 and leave no file."""
    path = tmp_path / "users.txt"
    status, _, err = run("passwd", str(path), *arguments, "--stdin", stdin=stdin)
    assert status == 1 and message in err
    assert not path.exists()


def test_passwd_refuses_to_edit_an_invalid_file(tmp_path: Path) -> None:
    """An existing file with a bad line is reported with its line and left untouched."""
    path = tmp_path / "users.txt"
    path.write_text("# users\nnot an entry\n", encoding="utf-8")
    status, _, err = run("passwd", str(path), "alice", "--stdin", *CHEAP, stdin="pw\n")
    assert status == 1 and f"{path}:2: expected user:hash:groups" in err
    assert path.read_text(encoding="utf-8") == "# users\nnot an entry\n"


def test_passwd_delete_removes_a_user(tmp_path: Path) -> None:
    """``--delete`` removes one user; removing an absent user, or from no file, fails."""
    path = tmp_path / "users.txt"
    run("passwd", str(path), "alice", "--stdin", *CHEAP, stdin="a\n")
    run("passwd", str(path), "bob", "--stdin", *CHEAP, stdin="b\n")
    assert run("passwd", str(path), "alice", "--delete") == (0, f"removed alice from {path}\n", "")
    assert list(read_password_file(str(path))) == ["bob"]
    status, _, err = run("passwd", str(path), "alice", "--delete")
    assert status == 1 and "has no user 'alice'" in err
    status, _, err = run("passwd", str(tmp_path / "none.txt"), "bob", "--delete")
    assert status == 1 and "cannot read it" in err


def test_unwritable_directory_is_reported(tmp_path: Path) -> None:
    """A file that cannot be written is an error message, not a traceback."""
    path = tmp_path / "missing-directory" / "users.txt"
    status, _, err = run("passwd", str(path), "alice", "--stdin", *CHEAP, stdin="pw\n")
    assert status == 1 and f"cannot write {path}" in err


def test_bad_arguments_exit_with_usage() -> None:
    """A missing argument is argparse's usage error, status 2."""
    with pytest.raises(SystemExit) as caught:
        run("passwd")
    assert caught.value.code == 2


def test_version_is_printed_not_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """``stompbroker --version`` answers with the version and status 0, as ``twistd --version``."""
    with pytest.raises(SystemExit) as caught:
        run("--version")
    assert caught.value.code == 0
    assert capsys.readouterr().out == f"stompbroker {stompbroker.__version__}\n"


@pytest.mark.integration
def test_command_reads_the_password_from_a_pipe(tmp_path: Path) -> None:
    """As a real process, ``stompbroker passwd --stdin`` reads the password from a pipe."""
    path = tmp_path / "users.txt"
    command = ["-m", "stompbroker.app.cli", "passwd", str(path), "carol", "--stdin", *CHEAP]
    completed = run_python(*command, input="piped secret\n")
    assert (completed.returncode, completed.stderr) == (0, "")
    assert accepts(path, "carol", "piped secret")


def test_passwd_reads_standard_input_when_it_is_not_a_terminal(tmp_path: Path) -> None:
    """Without --stdin, a password piped in (no terminal) is read as --stdin would."""
    path = tmp_path / "users.txt"
    assert run("passwd", str(path), "dave", *CHEAP, stdin="piped\n")[0] == 0
    assert accepts(path, "dave", "piped")


@pytest.mark.parametrize(
    "given, expected",
    [
        ("127.0.0.1:15674", "http://127.0.0.1:15674"),
        ("http://127.0.0.1:15674/", "http://127.0.0.1:15674"),
        ("HTTPS://broker.example:443", "HTTPS://broker.example:443"),
    ],
)
def test_url_without_a_scheme_means_http(given: str, expected: str) -> None:
    """--url HOST:PORT is taken as http://HOST:PORT; a trailing slash goes."""
    assert admin.base_url(given) == expected


def test_url_of_another_scheme_is_refused_in_one_line() -> None:
    """--url ftp://... is a usage error: exit status 2 and one line, before any connection."""
    status, _, err = run("queues", "--url", "ftp://127.0.0.1:15674")
    assert status == 2
    assert err == (
        "stompbroker queues: --url takes http://HOST:PORT or https://HOST:PORT,"
        " got 'ftp://127.0.0.1:15674'\n"
    )
