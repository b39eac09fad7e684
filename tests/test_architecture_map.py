"""
docs/architecture.md names every module of ``stompbroker/``, so that the map a
contributor reads first stays true: a module added, moved or removed without
its line there fails this test (ARCHITECTURE.md, "docs/architecture.md names
every module; a test keeps it true").
"""

from __future__ import annotations

import re
from pathlib import Path

import stompbroker

PACKAGE = Path(stompbroker.__file__).parent
MAP = PACKAGE.parent / "docs" / "architecture.md"

#: The section of the map that lists the modules, one table row each.
SECTION = "## Every module"

#: A row of that table: its first cell is a module's path below ``stompbroker/``.
ROW = re.compile(r"^\| `([\w/]+\.py)` \| (.+) \|$")


def modules_on_disk() -> set[str]:
    """:returns: every module of the package, as a path below ``stompbroker/``."""
    return {str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")}


def modules_on_the_map(text: str) -> dict[str, str]:
    """:returns: each module the map's index names, with its line."""
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = ROW.match(line)
        if match:
            rows[match.group(1)] = match.group(2).strip()
    return rows


def test_every_module_has_a_line_on_the_map() -> None:
    """A module of ``stompbroker/`` that docs/architecture.md does not name fails."""
    named = modules_on_the_map(MAP.read_text(encoding="utf-8"))
    assert sorted(modules_on_disk() - set(named)) == []


def test_the_map_names_no_module_that_is_gone() -> None:
    """A line for a module that was moved or removed fails too: the map is not a history."""
    named = modules_on_the_map(MAP.read_text(encoding="utf-8"))
    assert sorted(set(named) - modules_on_disk()) == []


def test_every_line_says_what_its_module_holds() -> None:
    """No row is left empty or as a placeholder."""
    named = modules_on_the_map(MAP.read_text(encoding="utf-8"))
    assert [path for path, line in named.items() if len(line) < 12] == []


def test_the_index_reader_sees_a_row() -> None:
    """The reader takes a table row apart, so a missing module is not hidden by a format slip."""
    text = (
        f"{SECTION}\n\n| module | holds |\n| --- | --- |\n"
        "| `broker/service.py` | the Broker service |\n"
    )
    assert modules_on_the_map(text) == {"broker/service.py": "the Broker service"}
