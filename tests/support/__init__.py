"""
Helpers that more than one test module uses, so that none of them keeps a copy.

- :mod:`tests.support.process`: the real broker as a child process (the launcher
  that the benchmarks use too), twistd and Python children that run to their end,
  and fixtures that share one broker among the tests of a module or class;
- :mod:`tests.support.clients`: ``stomp.py`` connections with the headers a test
  needs, a listener that records what arrives, a raw socket client, and the
  marker that proves nothing more is on its way;
- :mod:`tests.support.store`: messages for the message store, a synchronous
  writer, Deferred results, and the ways a test damages a store on disk;
- :mod:`tests.support.broker`: the real broker on a ``task.Clock`` with fake
  connections and recording subscribers, and a real session on it driven frame
  by frame;
- :mod:`tests.support.tcp`: a client of the TCP adapter over a string transport;
- :mod:`tests.support.layers`: the package's layers in their order;
- :mod:`tests.support.websocket`: RFC 6455 by hand (frames, handshakes), a
  client of the WebSocket adapter over a string transport, and a blocking one
  on a real socket;
- :mod:`tests.support.seeds`: the seed of a test that draws random numbers,
  logged and fixed on request;
- :mod:`tests.support.wildcards`: a reference model of the wildcard rules;
- :mod:`tests.support.web`: a GET of the web resources through ``StubTreq``;
- :mod:`tests.support.options`: twistd's options parsed from a command line;
- :mod:`tests.support.parsing`: the frame parser fed bytes cut every way;
- :mod:`tests.support.passwords`: password files with cheap hashes, a checker
  that hashes synchronously, and trial's Deferred assertions;
- :mod:`tests.support.tokens`: keys, key sets and JWTs made as an identity
  provider makes them, good and bad;
- :mod:`tests.support.certificates`: a small certificate authority and the
  certificates it issues, for client-certificate logins;
- :mod:`tests.support.spark`, :mod:`tests.support.browser` and
  :mod:`tests.support.logs`: the ``spark``, ``page`` and ``log_events`` fixtures,
  which the root ``conftest.py`` offers to every test.

What it may import: ``stompbroker``, ``benchmarks`` and the test dependencies;
never a test module (``tests/*/test_*.py``) nor a ``conftest.py``, so that every
test module can import it.  The session pair with a recording broker, its fake
transport and recording access rules are :mod:`tests.support.session`.
"""
