"""
Tests for :mod:`stompbroker.security.passwords`: password entries, and reading
password files.

Most entries use tiny scrypt parameters, since the cost is what makes them slow.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stompbroker.security.passwords import (
    DEFAULT_SCRYPT,
    PasswordEntry,
    PasswordFileError,
    ScryptParams,
    read_password_file,
)
from tests.support.passwords import FAST, write_users


def test_entry_verifies_its_password_and_no_other() -> None:
    """An entry accepts the password it was made from, and refuses a near miss."""
    entry = PasswordEntry.create("alice", "wonderland", params=FAST)
    assert entry.verify("wonderland")
    assert not entry.verify("Wonderland")
    assert not entry.verify("")


def test_entry_line_round_trips_with_its_parameters() -> None:
    """
    A formatted entry parses back equal, its scrypt parameters included, so old entries stay
    valid when the defaults rise.
    """
    entry = PasswordEntry.create("bob", "pässwörd", ["a", "b"], ScryptParams(n=32, r=2, p=3))
    line = entry.format()
    assert line.startswith("bob:scrypt$32$2$3$") and line.endswith(":a,b")
    parsed = PasswordEntry.parse(line)
    assert parsed == entry
    assert parsed.verify("pässwörd")


def test_salt_makes_equal_passwords_hash_differently() -> None:
    """Two entries for the same password differ, so a file does not show who shares one."""
    first = PasswordEntry.create("a", "same", params=FAST)
    second = PasswordEntry.create("b", "same", params=FAST)
    assert first.salt != second.salt and first.digest != second.digest


def test_default_parameters_are_the_documented_ones() -> None:
    """New entries default to scrypt N=2**14, r=8, p=1, about 16 MiB a check (docs/security.md)."""
    assert DEFAULT_SCRYPT == ScryptParams(16384, 8, 1)
    assert DEFAULT_SCRYPT.memory() < 17 * 1024 * 1024


GOOD_HASH = PasswordEntry.create("x", "pw", params=FAST).format().split(":")[1]
SALT_AND_HASH = "$".join(GOOD_HASH.split("$")[4:])


@pytest.mark.parametrize(
    "line, reason",
    [
        pytest.param("alice", "expected user:hash:groups", id="one-field"),
        pytest.param(f"alice:{GOOD_HASH}:a:b", "expected user:hash:groups", id="four-fields"),
        pytest.param(f":{GOOD_HASH}:", "user name must be non-empty", id="empty-user"),
        pytest.param(f"alice:bcrypt$16$1$1${SALT_AND_HASH}:", "must be scrypt", id="other-scheme"),
        pytest.param(f"alice:scrypt$16$1${SALT_AND_HASH}:", "must be scrypt", id="missing-param"),
        pytest.param(f"alice:scrypt$x$1$1${SALT_AND_HASH}:", "must be integers", id="bad-integer"),
        pytest.param(f"alice:scrypt$24$1$1${SALT_AND_HASH}:", "power of two", id="n-not-power"),
        pytest.param(f"alice:scrypt$16$0$1${SALT_AND_HASH}:", "r and p must be", id="zero-r"),
        pytest.param(
            f"alice:scrypt$1048576$8$1${SALT_AND_HASH}:", "needs more than", id="too-costly"
        ),
        pytest.param("alice:scrypt$16$1$1$!!$AAAA:", "must be base64", id="bad-base64"),
        pytest.param(
            "alice:scrypt$16$1$1$AAAA$" + "A" * 44 + ":", "salt must have", id="short-salt"
        ),
        pytest.param(f"alice:{GOOD_HASH}:a b", "invalid group name", id="space-in-group"),
    ],
)
def test_invalid_entry_is_refused_by_line_without_quoting_the_hash(
    tmp_path: Path, line: str, reason: str
) -> None:
    """A bad line fails the whole file with its line number; the message never quotes the hash."""
    path = tmp_path / "users.txt"
    path.write_text(f"# users\n{line}\n", encoding="utf-8")
    with pytest.raises(PasswordFileError, match=reason) as caught:
        read_password_file(str(path))
    assert caught.value.line == 2
    assert str(caught.value).startswith(f"{path}:2: ")
    assert SALT_AND_HASH.split("$")[0] not in str(caught.value)


def test_repeated_user_is_refused(tmp_path: Path) -> None:
    """A user listed twice is an error rather than a guess at which line counts."""
    path = write_users(tmp_path / "users.txt", ("alice", "1", ()), ("alice", "2", ()))
    with pytest.raises(PasswordFileError, match="appears twice") as caught:
        read_password_file(str(path))
    assert caught.value.line == 2


def test_comments_blank_lines_and_crlf_are_accepted(tmp_path: Path) -> None:
    """Comments, blank lines, CRLF line ends and a missing groups field are all fine."""
    entry = PasswordEntry.create("alice", "pw", params=FAST)
    text = "# the users\r\n\r\n   \r\n" + entry.format().rsplit(":", 1)[0] + "\r\n"
    path = tmp_path / "users.txt"
    path.write_bytes(text.encode())
    assert read_password_file(str(path)) == {"alice": entry}


def test_missing_or_undecodable_file_is_a_password_file_error(tmp_path: Path) -> None:
    """A file that cannot be read as UTF-8 text gives a PasswordFileError that names it."""
    with pytest.raises(PasswordFileError, match="cannot read it") as caught:
        read_password_file(str(tmp_path / "missing.txt"))
    assert caught.value.line is None
    (tmp_path / "latin1.txt").write_bytes(b"j\xf6rg:x:\n")
    with pytest.raises(PasswordFileError, match="not UTF-8"):
        read_password_file(str(tmp_path / "latin1.txt"))
