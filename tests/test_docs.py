"""
Every code block of the docs marked runnable runs, and does what it says; every
relative link of the docs leads to a page and a heading that exist.

How a block is marked, and what the marker's words mean, is in
:mod:`tests.support.docblocks`; a block that cannot run in a test (it needs a
real host, Java, a certificate, a password typed in) stays unmarked.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.docblocks import Block, MarkerError, own_web_port, read_blocks, substitute
from tests.support.process import ROOT, BrokerProcess, free_port, subprocess_env, wait_for_port

#: The pages a user reads: the README and docs/.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Longest a block may run, in seconds.
BLOCK_TIMEOUT = 30.0
#: Longest a serving block may take to stop once told to, in seconds.
STOP_TIMEOUT = 10.0


class BlockFailed(AssertionError):
    """A runnable block exited with an error, timed out, or did not do what its marker says."""


def all_blocks() -> list[Block]:
    """:returns: the runnable blocks of every page, in page order."""
    return [block for page in PAGES for block in read_blocks(page, page.read_text())]


def block_env() -> dict[str, str]:
    """:returns: a block's environment: this checkout's code, this interpreter first on PATH."""
    env = subprocess_env()
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def command(block: Block, workdir: Path, code: str) -> list[str]:
    """:returns: the argv that runs ``code`` (``block``'s, ports substituted) from ``workdir``."""
    if block.kind == "python":
        script = workdir / "example.py"
        script.write_text(code)
        return [sys.executable, str(script)]
    script = workdir / "example.sh"
    script.write_text(code)
    return ["bash", "-e", "-o", "pipefail", str(script)]


def check_output(block: Block, output: str) -> None:
    """:raises BlockFailed: when the block's ``expect`` text is not in ``output``."""
    expected = block.options.get("expect")
    if expected is not None and expected not in output:
        raise BlockFailed(f"{block.name}: {expected!r} is not in its output:\n{output}")


def run_to_end(block: Block, code: str, workdir: Path) -> str:
    """
    Run a block that ends by itself.

    :returns: its output (stdout and stderr).
    :raises BlockFailed: when it fails, times out, or lacks its expected output.
    """
    try:
        done = subprocess.run(
            command(block, workdir, code),
            cwd=workdir,
            env=block_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=BLOCK_TIMEOUT,
        )
    except subprocess.TimeoutExpired as timeout:
        raise BlockFailed(f"{block.name}: still running after {BLOCK_TIMEOUT} s") from timeout
    if done.returncode != 0:
        raise BlockFailed(f"{block.name}: exited with {done.returncode}:\n{done.stdout}")
    check_output(block, done.stdout)
    return done.stdout


def run_until_stopped(block: Block, code: str, workdir: Path, ports: list[int]) -> str:
    """
    Run a block that serves until stopped: wait for its ports and its ``until``
    text, then stop it with SIGINT (Ctrl-C), and SIGKILL if it lingers.

    :returns: its output.
    :raises BlockFailed: when it exits first, or never gets there.
    """
    log_path = workdir / "output.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command(block, workdir, code),
            cwd=workdir,
            env=block_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + BLOCK_TIMEOUT
        for port in ports:
            try:
                wait_for_port(port, max(deadline - time.monotonic(), 0.1), process)
            except Exception as failure:
                raise BlockFailed(
                    f"{block.name}: never listened on {port}:\n{log_path.read_text()}"
                ) from failure
        until = block.options.get("until")
        while until is not None and until not in log_path.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                raise BlockFailed(f"{block.name}: never printed {until!r}:\n{log_path.read_text()}")
            time.sleep(0.05)
        if process.poll() is not None:
            output = log_path.read_text()
            raise BlockFailed(f"{block.name}: exited with {process.returncode}:\n{output}")
    finally:
        stop(process, signal.SIGINT if block.kind == "python" else signal.SIGTERM)
    output = log_path.read_text(errors="replace")
    check_output(block, output)
    return output


def stop(process: subprocess.Popen[bytes], how: signal.Signals) -> None:
    """
    Stop a block's process group (its own session) by its id: with ``how``
    (Ctrl-C's SIGINT for a Python program; SIGTERM for a shell, whose background
    jobs ignore SIGINT), then SIGKILL if it lingers.
    """
    if process.poll() is None:
        os.killpg(process.pid, how)
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=STOP_TIMEOUT)


def run_page(block: Block, code: str, workdir: Path) -> None:
    """
    Open an HTML block in headless Chromium as a ``file:`` URL, as a reader who saved
    it opens it (its WebSocket then sends ``Origin: null``), and wait for its
    ``expect`` text.

    :raises BlockFailed: when the text never appears; JavaScript errors fail the test too.
    """
    from tests.support.browser import chromium_page, require_chromium

    require_chromium()
    page_path = workdir / "app.html"
    page_path.write_text(code)
    expected = block.options.get("expect")
    if expected is None:
        raise MarkerError(f"{block.name}: a browser block needs expect=TEXT")
    with chromium_page() as page:
        page.goto(page_path.as_uri())
        try:
            page.wait_for_function(
                "text => document.body.innerText.includes(text)", arg=expected, timeout=15_000
            )
        except Exception as failure:
            raise BlockFailed(f"{block.name}: {expected!r} never appeared") from failure


def run_block(block: Block, workdir: Path, ports: dict[int, int]) -> None:
    """
    Run one block with its documented ports replaced by ``ports`` (more free ones
    for the ports it serves on).

    :raises BlockFailed: when it does not do what its marker says.
    """
    ports = dict(ports)
    for port in block.serves():
        ports[port] = free_port()
    code = substitute(block.code, ports)
    if block.kind == "shell":
        code = own_web_port(code, free_port())
    if block.kind == "html":
        run_page(block, code, workdir)
    elif block.serves() or "until" in block.options:
        run_until_stopped(block, code, workdir, [ports[port] for port in block.serves()])
    else:
        run_to_end(block, code, workdir)


@pytest.fixture(scope="module")
def docs_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """The broker the ``broker`` blocks talk to, on defaults, as the README starts it."""
    with BrokerProcess(tmp_path_factory.mktemp("docs-broker"), reactor="uvloop") as broker:
        yield broker


@pytest.fixture(scope="module")
def docs_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, int]]:
    """Two redis-engine nodes on one redis-server: the ports the ``cluster`` blocks use."""
    from tests.support.redis import RedisServer, started_nodes

    server = RedisServer(tmp_path_factory.mktemp("docs-redis"))
    try:
        with started_nodes(tmp_path_factory, server, "ab") as (first, second):
            yield {61613: first.port, 61614: second.port, 6379: server.port}
    finally:
        server.stop()


@pytest.mark.integration
@pytest.mark.parametrize("block", all_blocks(), ids=lambda block: block.name)
def test_runnable_block(block: Block, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The block runs to its end (or serves) without an error, and prints what it promises."""
    ports: dict[int, int] = {}
    if "broker" in block.flags:
        broker: BrokerProcess = request.getfixturevalue("docs_broker")
        ports = {61613: broker.port, 15674: broker.http_port}
    if "cluster" in block.flags:
        ports = request.getfixturevalue("docs_cluster")
    run_block(block, tmp_path, ports)


@pytest.mark.integration
def test_a_failing_block_fails(tmp_path: Path) -> None:
    """The runner reports a block that exits with an error, with its output."""
    text = '<!-- runnable -->\n```python\nprint("partial")\nraise SystemExit(3)\n```\n'
    [block] = read_blocks(tmp_path / "page.md", text)
    with pytest.raises(BlockFailed, match=r"exited with 3:\npartial"):
        run_block(block, tmp_path, {})


@pytest.mark.integration
def test_a_block_without_its_expected_output_fails(tmp_path: Path) -> None:
    """A block that exits 0 but does not print its ``expect`` text fails."""
    text = '<!-- runnable: expect="all done" -->\n```sh\necho half done\n```\n'
    [block] = read_blocks(tmp_path / "page.md", text)
    with pytest.raises(BlockFailed, match="'all done' is not in its output"):
        run_block(block, tmp_path, {})


@pytest.mark.integration
def test_a_serving_block_that_never_listens_fails(tmp_path: Path) -> None:
    """A block marked ``serves`` that exits before it listens fails."""
    text = "<!-- runnable: serves=61613 -->\n```python\nprint('no listener on 61613')\n```\n"
    [block] = read_blocks(tmp_path / "page.md", text)
    with pytest.raises(BlockFailed, match="never listened"):
        run_block(block, tmp_path, {})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<!-- runnable -->\nplain text\n", "must be followed by a ``` fence"),
        ("<!-- runnable -->\n```toml\na = 1\n```\n", "cannot run a block of 'toml'"),
        ("<!-- runnable: quickly -->\n```sh\ntrue\n```\n", "unknown word 'quickly'"),
        ("<!-- runnable -->\n```sh\ntrue\n", "never closed"),
    ],
)
def test_a_marker_that_marks_nothing_runnable_is_an_error(
    tmp_path: Path, text: str, message: str
) -> None:
    """A marker the runner cannot honour is reported with the page and line, never skipped."""
    with pytest.raises(MarkerError, match=message):
        list(read_blocks(tmp_path / "page.md", text))


def test_a_broker_a_block_starts_leaves_the_default_web_port_alone() -> None:
    """A block's twistd serves the web on a free port: a running broker's 15674 is no bar."""
    code = (
        "twistd -n stompbroker --port 40001 --stats-stream /stream/s\n"
        "twistd -n stompbroker --http none\n"
        "twistd -n -r uvloop stompbroker --port 1 \\\n       --http tcp:2\n"
    )
    assert own_web_port(code, 40002) == (
        "twistd -n stompbroker --http tcp:40002:interface=127.0.0.1 --port 40001 --stats-stream"
        " /stream/s\ntwistd -n stompbroker --http none\n"
        "twistd -n -r uvloop stompbroker --port 1 \\\n       --http tcp:2\n"
    )


def test_documented_ports_are_replaced_as_whole_numbers() -> None:
    """61613 in an address is replaced; a longer number that contains it is not."""
    code = 'connect(("127.0.0.1", 61613)); url = "http://127.0.0.1:15674/api"; n = 1616130\n'
    assert substitute(code, {61613: 40001, 15674: 40002}) == (
        'connect(("127.0.0.1", 40001)); url = "http://127.0.0.1:40002/api"; n = 1616130\n'
    )


def test_the_getting_started_page_has_runnable_examples() -> None:
    """The examples a newcomer copies first are the ones most worth running."""
    page = ROOT / "docs" / "getting-started.md"
    kinds = {block.kind for block in read_blocks(page, page.read_text())}
    assert {"python", "shell", "html"} <= kinds


LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """:returns: the anchors GitHub gives the headings of ``page``."""
    found = set()
    in_code = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            heading = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", heading).replace(" ", "-"))
    return found


#: Developers' documents: no runnable blocks, but their links are checked too.
DESIGN_PAGES = sorted((ROOT / "docs" / "design").glob("*.md"))


@pytest.mark.parametrize(
    "page",
    [*PAGES, *DESIGN_PAGES, ROOT / "benchmarks" / "JOURNAL.md"],
    ids=lambda page: str(page.relative_to(ROOT)),
)
def test_relative_links_lead_somewhere(page: Path) -> None:
    """Every relative link of a page names a file that exists, and a heading that it has."""
    broken = []
    for match in LINK.finditer(page.read_text()):
        target = match.group("target")
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(target)
    assert broken == []


#: The contributor's map, the one page of docs/ written for developers (the
#: README's "Contributing" section is the other place developers start from).
DEVELOPER_PAGES = {"architecture.md", "README.md"}
#: Headings of sections that belong to developers, not to a user's page.
DEVELOPER_HEADINGS = re.compile(r"^#+ (Tests|Proof|Measured|Prior art)\b", re.MULTILINE)


@pytest.mark.parametrize(
    "page",
    [page for page in PAGES if page.name not in DEVELOPER_PAGES],
    ids=lambda page: page.name,
)
def test_a_user_page_names_no_test_and_keeps_no_lab_journal(page: Path) -> None:
    """Test files, proofs and measurements go to tests/README.md and benchmarks/JOURNAL.md."""
    text = page.read_text()
    assert re.findall(r"\btests/[\w/]+\.py", text) == []
    assert DEVELOPER_HEADINGS.findall(text) == []
