"""
The ``uvloop`` reactor for twistd: ``twistd -r uvloop stompbroker``.

Only the name lives here, so that twistd's plugin scan stays cheap and does
not import uvloop; :mod:`stompbroker.app.uvloop_reactor` installs it.
"""

from twisted.application.reactors import Reactor

uvloop = Reactor(
    "uvloop",
    "stompbroker.app.uvloop_reactor",
    "Twisted's asyncio reactor on a uvloop event loop (needs uvloop installed).",
)
