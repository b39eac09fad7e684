"""
docs/architecture.md names every module of ``stompbroker/``, so that the map a
contributor reads first stays true: a module added, moved or removed without
its line there fails this test (ARCHITECTURE.md, "docs/architecture.md names
every module; a test keeps it true").  Its picture of the layers and of one
SEND's path is checked the same way: the layers in the order the layering tests
enforce, and every class, function and method the path names found in the package.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

from zope.interface.interface import InterfaceClass

import stompbroker
from tests.support.layers import LAYERS

PACKAGE = Path(stompbroker.__file__).parent
MAP = PACKAGE.parent / "docs" / "architecture.md"

#: The section of the map that lists the modules, one table row each.
SECTION = "## Every module"

#: A row of that table: its first cell is a module's path below ``stompbroker/``.
ROW = re.compile(r"^\| `([\w/]+\.py)` \| (.+) \|$")

#: The section that leads the page: the layers, and one SEND's path.
PICTURE = "## The map: the layers, and one SEND to its MESSAGEs"

#: A dotted name below ``stompbroker/`` in the picture: a module, then its members.
DOTTED = re.compile(
    r"\b(?:interfaces|logs|protocol|broker|security|transport|stats|web|app)(?:\.\w+)+"
)

#: A ``Class.member`` the picture names short, after naming the class in full.
SHORT = re.compile(r"(?<![\w.])([A-Z]\w+)\.(\w+)\b")

#: A layer's line in the picture of the layers: its package, first on the line.
LAYER_LINE = re.compile(r"^  (\w+)/ ", re.MULTILINE)


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


def picture_blocks(text: str) -> list[str]:
    """:returns: the code blocks of the section that leads the map, in order."""
    section = text.split(PICTURE, 1)[1].split("\n## ", 1)[0]
    return section.split("```")[1::2]


def member(owner: Any, name: str) -> Any:
    """:returns: ``owner``'s member ``name``: an attribute, or an interface's method."""
    if isinstance(owner, InterfaceClass):
        return owner[name]
    return getattr(owner, name)


def resolve(dotted: str) -> Any:
    """
    :param dotted: a name below ``stompbroker``: a module, then attributes.
    :returns: what it names.
    :raises ModuleNotFoundError: when no prefix of it is a module.
    :raises AttributeError: (or ``KeyError`` for an interface) when a member is missing.
    """
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        try:
            found = importlib.import_module("stompbroker." + ".".join(parts[:end]))
        except ModuleNotFoundError:
            continue
        for name in parts[end:]:
            found = member(found, name)
        return found
    raise ModuleNotFoundError(dotted)


def unresolved(picture: str) -> list[str]:
    """:returns: the names in ``picture`` that are not in the package, each with why."""
    missing = []
    classes: dict[str, Any] = {}
    for dotted in DOTTED.findall(picture):
        try:
            found = resolve(dotted)
        except (ImportError, AttributeError, KeyError) as error:
            missing.append(f"{dotted}: {error!r}")
            continue
        parts = dotted.split(".")
        for end in range(2, len(parts)):
            owner = resolve(".".join(parts[:end]))
            if isinstance(owner, type | InterfaceClass):
                classes[parts[end - 1]] = owner
        classes[parts[-1]] = found
    for owner, name in SHORT.findall(picture):
        if owner not in classes:
            missing.append(f"{owner}.{name}: {owner} is not named in full in the picture")
        elif not hasattr(classes[owner], name):
            missing.append(f"{owner}.{name}: no such member")
    return missing


def test_the_picture_shows_the_layers_in_their_order() -> None:
    """The layers in the picture, top to bottom, are the layering tests' stack, highest first."""
    layers_block = picture_blocks(MAP.read_text(encoding="utf-8"))[0]
    assert tuple(LAYER_LINE.findall(layers_block)) == tuple(reversed(LAYERS))


def test_every_name_on_the_path_of_a_send_is_in_the_package() -> None:
    """Each module, class, function and method the picture names exists, for a newcomer to open."""
    path_block = picture_blocks(MAP.read_text(encoding="utf-8"))[1]
    assert DOTTED.findall(path_block)
    assert unresolved(path_block) == []


def test_a_name_that_is_gone_is_reported() -> None:
    """A renamed module, a missing method, or a class named only short is caught."""
    picture = (
        "protocol.session.StompSession.receive_data\n"
        "protocol.publishing.read_send\n"
        "transport.tcp.StompProtocol.write\n"
        "interfaces.IBroker.publish_everywhere\n"
        "WorkerQueue.dispatch\n"
        "StompSession.receive_data StompSession.gone\n"
    )
    assert [line.split(":")[0] for line in unresolved(picture)] == [
        "protocol.publishing.read_send",
        "transport.tcp.StompProtocol.write",
        "interfaces.IBroker.publish_everywhere",
        "WorkerQueue.dispatch",
        "StompSession.gone",
    ]
