"""
The strcred plugins for any twistd plugin with ``--auth``: ``passwd:FILE``,
``jwt:...`` (OAuth 2 bearer tokens), ``cert`` (TLS client certificates) and
``http:URL`` (the application decides, over HTTP).

Only the factories live here, so that twistd's plugin scan stays cheap; the
checkers are :class:`stompbroker.security.checkers.PasswordFileChecker`,
:class:`stompbroker.security.tokens.TokenChecker`,
:class:`stompbroker.security.certificates.CertificateChecker` and
:class:`stompbroker.security.http_auth.HttpChecker`.
"""

from twisted.cred.credentials import IUsernamePassword
from twisted.cred.strcred import ICheckerFactory
from twisted.plugin import IPlugin
from zope.interface import implementer

from stompbroker.security.credentials import IBearerToken, ICertificate

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


# -- jwt and cert: checkers of the credentials in stompbroker.security.credentials

_JWT_HELP = """
Checks OAuth 2 bearer tokens (JWTs), sent as CONNECT's passcode with any login
or none, or in a WebSocket's Authorization: Bearer header. The signature is
checked with a key file, the audience and issuer with the options; the token's
scopes (PREFIX.read:PATTERN, PREFIX.write:PATTERN, PREFIX.admin) are its rights,
and the connection ends when it expires unless the client sends a new one to
/control/credentials. See docs/security.md.
"""


@implementer(ICheckerFactory, IPlugin)
class TokenCheckerFactory:
    """Makes a :class:`stompbroker.security.tokens.TokenChecker` from ``jwt:OPTIONS``."""

    authType = "jwt"
    authHelp = _JWT_HELP
    argStringFormat = (
        "key=FILE (PEM), jwks=FILE or secret=FILE (HS256), then audience=AUD, and"
        " optionally issuer=ISS, prefix=SCOPE_PREFIX, algorithms=RS256,...,"
        " leeway=SECONDS; colon-separated: jwt:key=k.pem:audience=stompbroker"
    )

    credentialInterfaces = (IUsernamePassword, IBearerToken)

    def generateChecker(self, argstring: str) -> object:
        """
        :raises ValueError: for bad options, or a key file that cannot be used.
        """
        from stompbroker.security.tokens import make_checker

        return make_checker(argstring)


@implementer(ICheckerFactory, IPlugin)
class CertificateCheckerFactory:
    """Makes a :class:`stompbroker.security.certificates.CertificateChecker` from ``cert``."""

    authType = "cert"
    authHelp = """
Logs in a client that sends CONNECT without login and passcode by the TLS
client certificate its listener verified (--listen mtls:...:caCerts=ca.pem),
as its subject's common name, or with cert:name=dn its distinguished name.
"""
    argStringFormat = "Nothing, name=cn (the default) or name=dn."
    credentialInterfaces = (ICertificate,)

    def generateChecker(self, argstring: str) -> object:
        """:raises ValueError: for an option other than name=cn or name=dn."""
        from stompbroker.security.certificates import make_checker

        return make_checker(argstring)


tokenCheckerFactory = TokenCheckerFactory()
certificateCheckerFactory = CertificateCheckerFactory()


@implementer(ICheckerFactory, IPlugin)
class HttpCheckerFactory:
    """Makes a :class:`stompbroker.security.http_auth.HttpChecker` from ``http:URL:...``."""

    authType = "http"
    authHelp = """
Asks the application over HTTP: each CONNECT's login and passcode (or bearer
token, also on renewal) are POSTed as JSON to URL/user, and, unless its answer
lists the user's rights, each new SUBSCRIBE and each destination's first SEND
to URL/resource. Answers are cached; an endpoint that times out or fails
refuses with an ERROR. See docs/security.md.
"""
    argStringFormat = (
        "The application's URL, then colon-separated options: user_path=PATH (user),"
        " resource_path=PATH (resource), timeout=SECONDS (5), cache=SECONDS (60),"
        " cache_size=N (100000); http:http://127.0.0.1:8000/stomp:timeout=2"
    )
    credentialInterfaces = (IUsernamePassword, IBearerToken)

    def generateChecker(self, argstring: str) -> object:
        """:raises ValueError: for a bad URL or option."""
        from stompbroker.security.http_auth import make_checker

        return make_checker(argstring)


httpCheckerFactory = HttpCheckerFactory()
