"""
The layering rule of ARCHITECTURE.md: the protocol layer is sans-I/O.

Nothing under ``stompbroker/protocol/`` may import Twisted or Autobahn, so that
the parser, encoder and session run (and are tested) without a reactor.  The
check reads the source with :mod:`ast` instead of importing it, so it sees every
import, including those inside functions or behind ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import stompbroker.protocol

FORBIDDEN = ("twisted", "autobahn")
PROTOCOL_DIRECTORY = Path(stompbroker.protocol.__file__).parent


def forbidden_imports(source: str, filename: str = "<source>") -> list[str]:
    """
    :returns: ``"line: module"`` for each import of a forbidden package in ``source``.
    """
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        else:
            continue
        for module in modules:
            if module.split(".")[0] in FORBIDDEN:
                found.append((node.lineno, module))
    return [f"{line}: {module}" for line, module in sorted(found)]


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


def test_import_check_sees_every_form_of_import() -> None:
    """
    The check catches plain, dotted, from- and nested imports, and lets look-alike names
    through.
    """
    source = (
        "import os, twisted.internet\n"
        "from autobahn.twisted import websocket\n"
        "def f():\n"
        "    from twisted import logger\n"
        "import twistedish\n"
        "from . import frames\n"
    )
    assert forbidden_imports(source) == [
        "1: twisted.internet",
        "2: autobahn.twisted",
        "4: twisted",
    ]
