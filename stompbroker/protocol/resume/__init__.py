"""
Resumable sessions: a client that loses its connection takes its session up
again, on this node or another, without losing the topic messages it missed.

- :mod:`.part`: the session's part: CONNECT's ``resume-token``, CONNECTED's
  answer, detaching a dropped session and taking it up again.
- :mod:`.cluster`: asking the cluster's directory where a presented token's
  session is, and taking up a session another node kept.
- :mod:`.registry`: the bookkeeping every listener shares: tokens, the resume
  window, the :class:`~stompbroker.protocol.resume.resume_book.ResumeBook`.
- :mod:`.buffer`: the bounded buffer of a session's latest and missed frames.
- :mod:`.records`: what the nodes of a cluster tell each other to resume a
  session on any node: the record filed under a token's hash, the handover.

User documentation: ``docs/resume.md``.
"""
