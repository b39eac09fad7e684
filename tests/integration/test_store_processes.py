"""
The SQLite store in real processes, with its real writer thread: a directory
another process holds, a reactor stopped with writes pending, a data directory
even root may not write, and SIGKILL at a random moment while writes flow.

The children are :mod:`tests.integration.store_children`.  The moments of the
kills come from a seed, printed with a failure's output and named in its
message, and fixed by ``STOMPBROKER_TEST_SEED`` (:mod:`tests.support.seeds`).
"""

from __future__ import annotations

import ctypes
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from twisted.internet import task

from stompbroker.broker.store.base import StoreLocked, StoreUnavailable
from tests.integration.store_children import STOP_MESSAGES
from tests.support.process import ROOT, run_python, sigkill, subprocess_env
from tests.support.seeds import chosen_seed
from tests.support.store import (
    ids_by_queue,
    open_sqlite,
    recover_from,
    result_of,
    sqlite_store,
)

#: Rounds of writing and SIGKILL on one data directory.
CRASH_ROUNDS = 2
#: Longest wait for a child process to be ready, or to end.
CHILD_TIMEOUT = 20.0
#: Python's arguments that run a store child.
CHILD_MODULE = ("-m", "tests.integration.store_children")


def drop_file_permission_override() -> None:
    """
    In a child about to exec, drop root's power to write where permissions forbid.

    Removing ``CAP_DAC_OVERRIDE`` (and its relatives) from the bounding set means
    the program exec'd next does not get them, so a read-only directory is
    read-only even to root.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    pr_capbset_drop = 24
    for capability in (1, 2, 3):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER
        if libc.prctl(pr_capbset_drop, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def child_command(*arguments: str) -> list[str]:
    """:returns: the argv that runs a store child with ``arguments``."""
    return [sys.executable, *CHILD_MODULE, *arguments]


def run_child(*arguments: str, **options: Any) -> subprocess.CompletedProcess[str]:
    """
    Run a store child to its end, within :data:`CHILD_TIMEOUT`.

    :param options: more arguments for :func:`subprocess.run`.
    :returns: the finished child, with its output as text.
    """
    return run_python(*CHILD_MODULE, *arguments, cwd=ROOT, timeout=CHILD_TIMEOUT, **options)


def test_a_read_only_data_directory_is_unavailable(tmp_path: Path) -> None:
    """A data directory the broker may not write stops open() with StoreUnavailable."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    data_dir.chmod(0o555)
    try:
        if os.geteuid() != 0:
            with pytest.raises(StoreUnavailable, match="the broker's user can write"):
                sqlite_store(data_dir).open()
        else:
            child = run_child("open", str(data_dir), preexec_fn=drop_file_permission_override)
            assert child.stdout.startswith("StoreUnavailable:"), child.stdout + child.stderr
            assert "the broker's user can write" in child.stdout
    finally:
        data_dir.chmod(0o755)


def test_another_process_holding_the_directory_locks_it_until_it_dies(tmp_path: Path) -> None:
    """A directory open in another process is refused, and free once that process is killed."""
    holder = subprocess.Popen(
        child_command("hold", str(tmp_path)),
        cwd=ROOT,
        env=subprocess_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        in_use = f"in use by another broker \\(process {holder.pid}\\)"
        with pytest.raises(StoreLocked, match=in_use):
            sqlite_store(tmp_path).open()
    finally:
        sigkill(holder)
    result_of(open_sqlite(tmp_path, task.Clock()).close())


def test_stopping_the_reactor_commits_pending_writes_and_ends_the_thread(tmp_path: Path) -> None:
    """At reactor shutdown a store commits what is pending and lets the process end."""
    child = run_child("stop", str(tmp_path))
    assert child.returncode == 0, child.stderr
    assert ids_by_queue(recover_from(tmp_path)) == {
        "/queue/orders": [f"m-{index}" for index in range(STOP_MESSAGES)]
    }


# -- crash ------------------------------------------------------------------------


def wait_for_ready(child: subprocess.Popen, log: Path) -> None:
    """Wait until the crash child has recovered its store and started writing, or fail."""
    deadline = time.monotonic() + CHILD_TIMEOUT
    while time.monotonic() < deadline:
        if log.exists() and log.read_text().startswith("ready"):
            return
        if child.poll() is not None:
            raise AssertionError(f"crash child exited with {child.returncode}")
        time.sleep(0.02)
    raise AssertionError(f"crash child not ready after {CHILD_TIMEOUT} s")


def acknowledged(log: Path) -> list[list[str]]:
    """
    :returns: the child's complete log lines, split; a line cut short by the kill
        is not complete and does not count.
    """
    text = log.read_text()
    complete = text[: text.rfind("\n") + 1]
    return [line.split() for line in complete.splitlines()]


def removal_issued(message_id: str) -> bool:
    """:returns: whether the crash child removes this message once its add is acknowledged."""
    return int(message_id.rsplit("-", 1)[1]) % 3 == 0


@pytest.mark.parametrize("sync", ["batch", "always"])
def test_every_acknowledged_write_survives_sigkill(sync: str, tmp_path: Path) -> None:
    """
    Killing the writing process at a random moment loses no acknowledged write.

    Issue 5, "The rule": what the store acknowledged is on disk.  A child adds,
    removes and marks messages on the real writer thread, logging each operation
    whose Deferred fired; it is SIGKILLed at a random moment, twice on one
    directory, and a fresh store must then hold every logged add that was not
    logged as removed, none that was, and the logged marks, in the order added.
    (A message whose removal was asked for but not acknowledged may be either.)
    """
    seed = chosen_seed()
    context = f"(seed {seed})"
    chance = random.Random(seed)
    data_dir = tmp_path / "data"
    added: dict[str, list[str]] = {}
    removed: set[tuple[str, str]] = set()
    marked: set[tuple[str, str]] = set()
    for round_number in range(CRASH_ROUNDS):
        log = tmp_path / f"round-{round_number}.log"
        child = subprocess.Popen(
            child_command("crash", str(data_dir), sync, str(round_number), str(log)),
            cwd=ROOT,
            env=subprocess_env(),
        )
        try:
            wait_for_ready(child, log)
            time.sleep(chance.uniform(0.05, 0.4))
        finally:
            sigkill(child)
        lines = acknowledged(log)
        assert not [line for line in lines if line[0] == "error"], f"{lines} {context}"
        assert any(line[0] == "added" for line in lines), f"round {round_number} {context}"
        for kind, *fields in lines[1:]:
            if kind == "added":
                added.setdefault(fields[0], []).append(fields[1])
            elif kind == "removed":
                removed.add((fields[0], fields[1]))
            elif kind == "marked":
                marked.add((fields[0], fields[1]))
    recovered = recover_from(data_dir).queues
    for queue, message_ids in added.items():
        held = {message.message_id: message for message in recovered.get(queue, ())}
        for message_id in message_ids:
            key = (queue, message_id)
            if key in removed:
                assert message_id not in held, f"{queue} {message_id} came back {context}"
            elif removal_issued(message_id):
                continue  # the kill may have come between the remove and its acknowledgement
            else:
                assert message_id in held, f"{queue} {message_id} was lost {context}"
                if key in marked:
                    assert held[message_id].delivered, f"{queue} {message_id} unmarked {context}"
    for queue, messages in recovered.items():
        order = [tuple(map(int, message.message_id.split("-"))) for message in messages]
        assert order == sorted(order), f"{queue} out of order {context}"
