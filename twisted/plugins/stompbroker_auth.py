"""
The ``passwd`` strcred plugin: ``--auth passwd:FILE`` for any twistd plugin with ``--auth``.

Only the factory lives here, so that twistd's plugin scan stays cheap; the
checker is :class:`stompbroker.security.checkers.PasswordFileChecker`.
"""

from twisted.cred.credentials import IUsernamePassword
from twisted.cred.strcred import ICheckerFactory
from twisted.plugin import IPlugin
from zope.interface import implementer

_HELP = """
Checks user names and passwords against a password file of salted scrypt
hashes, one user per line:

    user:scrypt$N$r$p$salt$hash:group1,group2

Add or change users with `stompbroker passwd FILE USER [--group G]`. The file
is re-read when it changes, so new users can log in without a restart.
"""


@implementer(ICheckerFactory, IPlugin)
class PasswordFileCheckerFactory:
    """Makes a :class:`stompbroker.security.checkers.PasswordFileChecker` from ``passwd:FILE``."""

    authType = "passwd"
    authHelp = _HELP
    argStringFormat = "The path of a password file made with `stompbroker passwd`."
    credentialInterfaces = (IUsernamePassword,)

    def generateChecker(self, argstring: str) -> object:
        """
        :param argstring: the password file's path.
        :raises ValueError: without a path.
        :raises stompbroker.security.passwords.PasswordFileError: if the file cannot be
            read or is invalid.
        """
        from stompbroker.security.checkers import PasswordFileChecker

        if not argstring:
            raise ValueError("passwd needs a file: --auth passwd:FILE")
        return PasswordFileChecker(argstring)


passwordFileCheckerFactory = PasswordFileCheckerFactory()
