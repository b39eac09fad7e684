"""
The example in docs/embedding.md runs, and a real client receives what it publishes.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.clients import connect
from tests.support.process import ROOT, free_port, subprocess_env, wait_for_port


def example_code() -> str:
    text = (ROOT / "docs" / "embedding.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    [example] = [block for block in blocks if "task.react" in block]
    return example


@pytest.mark.integration
def test_embedding_example_publishes_to_subscribers(tmp_path: Path) -> None:
    """The documented embedding example serves STOMP clients and publishes from Python code."""
    script = tmp_path / "ticker.py"
    script.write_text(example_code())
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(script), str(port)],
        cwd=tmp_path,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port(port, process=process)
        connection, inbox = connect(("127.0.0.1", port))
        connection.subscribe("/topic/ticks", id="t")
        assert inbox.wait_for(lambda: len(inbox.messages) >= 2, timeout=10)
        first = inbox.messages[0]
        assert first.body.startswith(b"tick ")
        assert first.headers["tick"] == first.body.split()[1].decode()
        assert first.headers["content-type"] == "text/plain;charset=utf-8"
        connection.disconnect()
    finally:
        process.terminate()
        process.wait(timeout=10)
