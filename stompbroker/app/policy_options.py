"""
``--policy NAME:pattern=PATTERN,KEY=VALUE,...``: the per-destination policies
the broker starts with (docs/policies.md); the configuration file's
``[[policy]]`` tables become these options.

:class:`PolicyOptions` is a mixin of :class:`stompbroker.app.options.Options`;
``policies`` holds the parsed :class:`~stompbroker.broker.features.policies.Policy`
values, which :func:`stompbroker.app.tap.makeService` gives the broker.
"""

from __future__ import annotations

from twisted.python import usage

from stompbroker.broker.features.policies import DEFAULT_VHOST, BadPolicy, Policy, parse_policy

__all__ = ["PolicyOptions", "parse_policy_option"]


def parse_policy_option(spec: str) -> Policy:
    """
    :param spec: ``NAME:KEY=VALUE[,KEY=VALUE]``.
    :raises usage.UsageError: saying what is wrong.
    """
    name, colon, rest = spec.partition(":")
    if not colon or not rest:
        raise usage.UsageError(f"--policy takes NAME:pattern=PATTERN[,KEY=VALUE], got {spec!r}")
    values = {}
    for part in rest.split(","):
        key, equals, value = part.partition("=")
        if not equals:
            raise usage.UsageError(f"--policy {name}: {part!r} is not KEY=VALUE")
        values[key.strip()] = value.strip()
    try:
        return parse_policy(name, values)
    except BadPolicy as error:
        raise usage.UsageError(f"--policy {error}") from None


class PolicyOptions(usage.Options):
    """``--policy``, repeatable; ``policies`` holds the result."""

    def opt_policy(self, spec: str) -> None:
        """A per-destination policy, as NAME:pattern=PATTERN[,KEY=VALUE], KEY one of priority, apply-to, vhost, max-length, max-length-bytes, overflow, message-ttl, expires, max-redeliveries, redelivery-delay, dead-letter, prefetch, slow-consumer, slow-consumer-buffer (repeatable; the configuration file's [[policy]] tables; docs/policies.md)."""  # noqa: E501
        self.setdefault("policy", []).append(spec)

    def check_policies(self) -> None:
        """
        Read ``--policy`` into ``policies``.

        :raises usage.UsageError: for a bad policy, two of one name, or one of a
            virtual host that is not configured (read ``--vhost`` first).
        """
        policies = [parse_policy_option(spec) for spec in self.get("policy", [])]
        names = [policy.name for policy in policies]
        for name in names:
            if names.count(name) > 1:
                raise usage.UsageError(f"--policy {name} is given twice")
        hosts = self.get("virtual-hosts")
        served = sorted(hosts.hosts) if hosts is not None else []
        for policy in policies:
            if policy.vhost != DEFAULT_VHOST and policy.vhost not in served:
                raise usage.UsageError(
                    f"--policy {policy.name}: vhost {policy.vhost!r} is no virtual host of this"
                    f" broker; it serves {', '.join([DEFAULT_VHOST, *served])}"
                )
        self["policies"] = tuple(policies)
