"""``--webhook`` and ``--webhook-secret-file`` (:mod:`stompbroker.app.webhook_options`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from twisted.python import usage

from stompbroker.app.options import Options

URL = "https://app.example.com/stompbroker/events"


def parse(*argv: str) -> Options:
    options = Options()
    options.parseOptions(list(argv))
    return options


def test_the_secret_is_read_from_its_files_first_line(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("0123456789abcdef-secret\nignored\n")
    options = parse("--webhook", URL, "--webhook-secret-file", str(secret))
    assert options["webhook"] == URL
    assert options["webhook-secret"] == b"0123456789abcdef-secret"
    assert parse()["webhook-secret"] is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--webhook", URL), "--webhook needs --webhook-secret-file"),
        (("--webhook", "ftp://x/y", "--webhook-secret-file", "{good}"), "http:// or https://"),
        (("--webhook", "/events", "--webhook-secret-file", "{good}"), "http:// or https://"),
        (("--webhook", URL, "--webhook-secret-file", "{short}"), "at least 16 bytes"),
        (("--webhook", URL, "--webhook-secret-file", "{missing}"), "cannot read"),
        (("--webhook-secret-file", "{good}"), "needs --webhook URL"),
    ],
)
def test_a_webhook_that_could_not_be_trusted_is_refused_saying_why(
    tmp_path: Path, argv: tuple[str, ...], message: str
) -> None:
    (tmp_path / "good").write_text("0123456789abcdef-secret\n")
    (tmp_path / "short").write_text("short\n")
    files = {name: str(tmp_path / name) for name in ("good", "short", "missing")}
    with pytest.raises(usage.UsageError, match=message):
        parse(*(word.format(**files) for word in argv))
