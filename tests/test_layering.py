"""
The layering rules of ARCHITECTURE.md: the protocol layer is sans-I/O, and the
broker imports no layer above it.

Nothing under ``stompbroker/protocol/`` may import Twisted or Autobahn, so that
the parser, encoder and session run (and are tested) without a reactor.  The
check reads the source with :mod:`ast` instead of importing it, so it sees every
import, including those inside functions or behind ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import stompbroker.broker
import stompbroker.protocol

FORBIDDEN = ("twisted", "autobahn")
PROTOCOL_DIRECTORY = Path(stompbroker.protocol.__file__).parent
#: What the broker layer may not import: the layers above it.
BROKER_FORBIDDEN = (
    "stompbroker.transport",
    "stompbroker.web",
    "stompbroker.stats",
    "stompbroker.app",
)
BROKER_DIRECTORY = Path(stompbroker.broker.__file__).parent


def forbidden_imports(
    source: str, filename: str = "<source>", forbidden: tuple[str, ...] = FORBIDDEN
) -> list[str]:
    """
    :param forbidden: packages (dotted, e.g. ``stompbroker.web``) that may not be imported.
    :returns: ``"line: module"`` for each import of a forbidden package in ``source``.
    """
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # ``from stompbroker import web`` imports stompbroker.web: the module is
            # forbidden, or one of the names it imports as a submodule is.
            named = [f"{node.module}.{alias.name}" for alias in node.names]
            modules = [next((m for m in [node.module, *named] if _is_in(m, forbidden)), "")]
        else:
            continue
        for module in modules:
            if _is_in(module, forbidden):
                found.append((node.lineno, module))
    return [f"{line}: {module}" for line, module in sorted(found)]


def _is_in(module: str, packages: tuple[str, ...]) -> bool:
    """:returns: whether ``module`` is one of ``packages`` or inside one."""
    return any(module == name or module.startswith(name + ".") for name in packages)


def test_protocol_layer_imports_neither_twisted_nor_autobahn() -> None:
    """
    No module under stompbroker/protocol/ imports twisted or autobahn (ARCHITECTURE.md, Layers).
    """
    modules = sorted(PROTOCOL_DIRECTORY.rglob("*.py"))
    assert modules, f"no modules found under {PROTOCOL_DIRECTORY}"
    violations = {
        str(path.relative_to(PROTOCOL_DIRECTORY)): imports
        for path in modules
        if (imports := forbidden_imports(path.read_text(encoding="utf-8"), str(path)))
    }
    assert violations == {}


def test_broker_layer_imports_no_layer_above_it() -> None:
    """
    No module under stompbroker/broker/ imports transport/, web/, stats/ or app/
    (ARCHITECTURE.md, Layers): the statistics read the broker, not the other way round.
    """
    violations = {
        str(path.relative_to(BROKER_DIRECTORY)): imports
        for path in sorted(BROKER_DIRECTORY.rglob("*.py"))
        if (
            imports := forbidden_imports(
                path.read_text(encoding="utf-8"), str(path), BROKER_FORBIDDEN
            )
        )
    }
    assert violations == {}


def test_import_check_sees_every_form_of_import() -> None:
    """
    The check catches plain, dotted, from- and nested imports and submodules a from-import
    names, and lets look-alike names through.
    """
    source = (
        "import os, twisted.internet\n"
        "from autobahn.twisted import websocket\n"
        "def f():\n"
        "    from twisted import logger\n"
        "import twistedish\n"
        "from . import frames\n"
        "from stompbroker import web, protocol\n"
        "from stompbroker.stats import schema\n"
    )
    assert forbidden_imports(source) == [
        "1: twisted.internet",
        "2: autobahn.twisted",
        "4: twisted",
    ]
    assert forbidden_imports(source, forbidden=BROKER_FORBIDDEN) == [
        "7: stompbroker.web",
        "8: stompbroker.stats",
    ]
