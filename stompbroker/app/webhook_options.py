"""
The options of the webhooks: ``--webhook URL`` and ``--webhook-secret-file
FILE`` (docs/backend.md, "Webhooks").

:class:`WebhookOptions` is a mixin of :class:`stompbroker.app.options.Options`
(twistd gathers ``optParameters`` along the class hierarchy); it checks both
and reads the secret into ``webhook-secret``, which
:func:`stompbroker.app.tap.makeService` gives the broker's webhooks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from twisted.python import usage

__all__ = ["WebhookOptions"]

#: The fewest bytes a secret may have: a guessable one signs nothing.
MIN_SECRET = 16


class WebhookOptions(usage.Options):
    """``--webhook`` and ``--webhook-secret-file``; see the module notes."""

    optParameters: list[Any] = [
        [
            "webhook",
            None,
            None,
            "POST presence events (a destination occupied or vacated, a member added or"
            " removed) to this http(s) URL, in signed batches, retried (needs"
            " --webhook-secret-file).",
        ],
        [
            "webhook-secret-file",
            None,
            None,
            "A file whose first line is the secret the webhooks are signed with"
            " (HMAC-SHA256 of the body, header X-Stompbroker-Signature).",
        ],
    ]

    def check_webhook(self) -> None:
        """
        Check ``--webhook`` and read its secret into ``webhook-secret``.

        :raises usage.UsageError: saying what is wrong.
        """
        url, secret_file = self["webhook"], self["webhook-secret-file"]
        self["webhook-secret"] = None
        if url is None:
            if secret_file is not None:
                raise usage.UsageError("--webhook-secret-file needs --webhook URL")
            return
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise usage.UsageError(f"--webhook takes an http:// or https:// URL, got {url!r}")
        if secret_file is None:
            raise usage.UsageError(
                "--webhook needs --webhook-secret-file: the application must be able to"
                " tell the broker's posts from forgeries"
            )
        try:
            text = Path(secret_file).read_text(encoding="utf-8")
        except OSError as error:
            raise usage.UsageError(
                f"--webhook-secret-file: cannot read {secret_file!r}: {error.strerror}"
            ) from None
        secret = (text.splitlines() or [""])[0].encode()
        if len(secret) < MIN_SECRET:
            raise usage.UsageError(
                f"--webhook-secret-file: the secret must have at least {MIN_SECRET} bytes"
                f" on its first line, not {len(secret)}"
            )
        self["webhook-secret"] = secret
