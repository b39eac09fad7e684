"""
Whether a file the broker reads its secrets from has changed since it was last read.

The password file (:class:`~stompbroker.security.checkers.PasswordFileChecker`)
and a token key file (:class:`~stompbroker.security.token_keys.KeyFile`) are
re-read when they change, so that users and keys are added or rotated without a
restart.  Both ask here, on every login, rather than being told by a signal: a
``stat`` costs microseconds next to a login, and an edited or replaced file
(a new inode) is noticed at the next login.
"""

from __future__ import annotations

import os

__all__ = ["FileWatch", "file_stamp"]


def file_stamp(path: str) -> tuple[int, int, int] | None:
    """
    :returns: what tells that the file changed: its inode (a file replaced by a
        rename), modification time and size; ``None`` if it cannot be looked at.
    """
    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_ino, status.st_mtime_ns, status.st_size)


class FileWatch:
    """
    Tells whether one file changed since the last look.

    :param path: the file; its stamp now is the first one compared against.
    """

    __slots__ = ("path", "_stamp")

    def __init__(self, path: str) -> None:
        self.path = path
        self._stamp = file_stamp(path)

    def changed(self) -> bool:
        """
        :returns: whether the file's stamp differs from the last look's (a file
            that vanished counts once, and again when it comes back); the new
            stamp is remembered.
        """
        stamp = file_stamp(self.path)
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        return True

    @property
    def present(self) -> bool:
        """Whether the file could be looked at, at the last look."""
        return self._stamp is not None
