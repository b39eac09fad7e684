"""
Tests of :mod:`stompbroker.security.file_watch`, which tells the readers of the
password file and of token key files when to read them again.
"""

from __future__ import annotations

import os
from pathlib import Path

from stompbroker.security.file_watch import FileWatch, file_stamp


def watched(tmp_path: Path) -> tuple[Path, FileWatch, int]:
    """:returns: a file just written, a watch of it, and its modification time in ns."""
    path = tmp_path / "keys"
    path.write_text("one")
    stamp = file_stamp(str(path))
    assert stamp is not None
    return path, FileWatch(str(path)), stamp[1]


def test_an_untouched_file_has_not_changed(tmp_path: Path) -> None:
    """Looking again at a file nobody wrote to finds no change."""
    _, watch, _ = watched(tmp_path)
    assert not watch.changed()
    assert watch.present


def test_a_rewrite_is_a_change_seen_once(tmp_path: Path) -> None:
    """A new modification time counts as one change: the next look finds none."""
    path, watch, modified = watched(tmp_path)
    path.write_text("two")
    os.utime(path, ns=(modified + 10**9, modified + 10**9))
    assert watch.changed()
    assert not watch.changed()


def test_a_replaced_file_is_a_change_even_with_the_same_time_and_size(tmp_path: Path) -> None:
    """A file renamed over the old one (a new inode) counts, whatever its time and size."""
    path, watch, modified = watched(tmp_path)
    # Made while the old file exists, so on another inode.
    replacement = tmp_path / "new"
    replacement.write_text("two")
    os.utime(replacement, ns=(modified, modified))
    os.replace(replacement, path)
    assert watch.changed()


def test_a_vanished_file_counts_once_and_again_when_it_comes_back(tmp_path: Path) -> None:
    """Removing the file is one change (no longer present); putting it back is another."""
    path, watch, _ = watched(tmp_path)
    path.unlink()
    assert watch.changed() and not watch.present
    assert not watch.changed()
    path.write_text("one")
    assert watch.changed() and watch.present
