"""
The management API: ``/api/`` on the web port, JSON in and out.

=====================================================  ======  =============================
path                                                   method  what
=====================================================  ======  =============================
``/api/whoami``                                        GET     who the credentials sign in as
``/api/overview``                                      GET     ``/stats``, listeners, settings
``/api/history?since=TS``                              GET     the last hour's figures
``/api/vhosts``                                        GET     the virtual hosts, with counts
``/api/connections``                                   GET     every client connection
``/api/connections/{id}``                              GET     one, with its subscriptions
``/api/connections/{id}?reason=...``                   DELETE  close it (an operator ERROR)
``/api/detached-sessions``                             GET     resumable sessions away
``/api/detached-sessions/{id}``                        GET     one of them
``/api/detached-sessions/{id}``                        DELETE  end it for good
``/api/destinations``                                  GET     queues, durables, topics
``/api/destinations/{destination}``                    GET     one, with its consumers
``/api/destinations/{destination}``                    DELETE  delete a queue or durable
``/api/destinations/{destination}/messages?count=N``   GET     browse the first N waiting
``/api/destinations/{destination}/subscribers``        GET     who subscribes (presence)
``/api/destinations/{destination}/members``            GET     its members: users (presence)
``/api/destinations/{destination}/messages``           DELETE  purge what waits
``/api/destinations/{destination}/move``               POST    ``{"to", "count", "copy"}``
``/api/destinations/{destination}/retry``              POST    ``{"count"}``: DLQ back home
``/api/destinations/{destination}/publish``            POST    ``{"body", "headers"}``
``/api/nodes``                                         GET     the broker processes
``/api/publish``, ``/api/users/{login}/...``           ...     an application's backend's
                                                               calls (:mod:`.api_backend`)
=====================================================  ======  =============================

The lists (connections, detached sessions, destinations, policies) sort,
filter and page as RabbitMQ's do: ``?page=&page_size=&name=&sort=&sort_reverse=``
(:mod:`stompbroker.web.api_paging`).  ``/api/overview?brief=true`` leaves out
the lists of destinations and connections, and counts them instead.
The destination is one path segment, percent-encoded (``%2Fqueue%2Forders``).
With virtual hosts, ``?vhost=NAME`` names the virtual host of the destination
calls (the default host without it) and filters the lists; every destination
is shown as its virtual host's clients name it, with a ``vhost`` field
(:mod:`stompbroker.web.api_hosts`).
Who may call what is :mod:`stompbroker.web.api_guard`'s; the operations are
:class:`~stompbroker.broker.management.operations.Management`'s.  docs/management.md
documents every call with a ``curl`` line.  Errors are JSON objects with
``error`` and ``detail``; a refused call changes nothing.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
from twisted.internet.defer import Deferred, maybeDeferred
from twisted.python.failure import Failure
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request

from stompbroker import __version__
from stompbroker.broker.features.policies import BadPolicy, parse_policy
from stompbroker.broker.management.detached_sessions import UnknownSession
from stompbroker.broker.management.operations import (
    InUse,
    InvalidRequest,
    Management,
    UnknownConnection,
    UnknownDestination,
)
from stompbroker.broker.management.queue_operations import (
    MAX_MOVE,
    check_publish_target,
    check_target,
)
from stompbroker.broker.management.records import ConnectionInfo, DestinationInfo
from stompbroker.broker.routing.virtual_hosts import DEFAULT_HOST
from stompbroker.logs import logger
from stompbroker.stats.documents import disk_document, memory_document, stats_document
from stompbroker.stats.sampling_services import LiveStats
from stompbroker.stats.setup import RunningSetup
from stompbroker.web.api_backend import BackendCalls
from stompbroker.web.api_bodies import (
    MAX_BODY,
    action_answer,
    browse_answer,
    count_of,
    delete_answer,
    json_body,
    message_document,
    publish_fields,
    query,
    record_document,
    record_documents,
)
from stompbroker.web.api_guard import ADMIN, EVERYTHING, READ, WRITE, ApiError, ApiGuard
from stompbroker.web.api_hosts import ApiHosts
from stompbroker.web.api_paging import ListQuery, list_answer

__all__ = ["MAX_BODY", "ManagementApi", "message_document"]

log = logger("stompbroker.web.api")

#: How many messages a browse shows without ``?count=``.
DEFAULT_BROWSE = 10

#: The status and error of each refusal of the operations.
_STATUS: dict[type[BaseException], tuple[int, str]] = {
    UnknownConnection: (404, "unknown connection"),
    UnknownSession: (404, "unknown session"),
    UnknownDestination: (404, "unknown destination"),
    InUse: (409, "destination in use"),
    InvalidRequest: (400, "bad request"),
}


def _operator(identity: Any, request: Request) -> str:
    """:returns: who calls, as the broker's log names them: ``alice at 10.0.0.5``."""
    address = request.getClientAddress()
    return f"{identity.name or 'anonymous'} at {getattr(address, 'host', address)}"


class ManagementApi(Resource):
    """
    ``/api/``: every call of the management API (see the module notes).

    :param management: the broker's :class:`~stompbroker.broker.management.operations.Management`.
    :param guard: who may call what, from where.
    :param live: the broker's live statistics, for the overview and rates;
        ``None`` leaves them out.
    :param setup: the listeners and settings in force, for the overview;
        ``None`` leaves them out.
    """

    isLeaf = True

    def __init__(
        self,
        management: Management,
        guard: ApiGuard,
        live: LiveStats | None = None,
        setup: RunningSetup | None = None,
    ) -> None:
        super().__init__()
        self.management = management
        self.guard = guard
        self.live = live
        self.setup = setup
        self.hosts = ApiHosts(getattr(management.broker, "virtual_hosts", None))
        self.backend = BackendCalls(management, guard, self.hosts)

    def render(self, request: Request) -> Any:
        request.setHeader(b"content-type", b"application/json")
        request.setHeader(b"cache-control", b"no-store")
        request.setHeader(b"x-content-type-options", b"nosniff")
        if request.method == b"OPTIONS":
            return self.guard.preflight(request)
        finished: list[bool] = []
        request.notifyFinish().addBoth(lambda _: finished.append(True))
        answer = maybeDeferred(self._answer, request)
        answer.addCallbacks(
            self._done,
            self._failed,
            callbackArgs=(request, finished),
            errbackArgs=(request, finished),
        )
        return NOT_DONE_YET

    def _answer(self, request: Request) -> Any:
        self.guard.check_origin(request)
        return self.guard.identify(request).addCallback(self._dispatch, request)

    def _done(self, document: Any, request: Request, finished: list[bool]) -> None:
        if not finished:
            request.write(json.dumps(document, indent=1).encode("utf-8"))
            request.finish()

    def _failed(self, failure: Failure, request: Request, finished: list[bool]) -> None:
        error = failure.value
        status = _STATUS.get(type(error)) if error is not None else None
        if status is not None:
            error = ApiError(*status, str(error))
        if not isinstance(error, ApiError):
            log.failure("management API call failed", failure)
            error = ApiError(500, "internal error", "the broker's log says more")
        if finished:
            return
        request.setResponseCode(error.code)
        if error.code == 401:
            self.guard.challenge(request)
        request.write(json.dumps(error.document()).encode("utf-8"))
        request.finish()

    # -- dispatch ---------------------------------------------------------------------

    def _dispatch(self, identity: Any, request: Request) -> Any:
        path = [segment.decode("utf-8", "replace") for segment in request.postpath or ()]
        if path and path[-1] == "" and len(path) > 1:
            path.pop()
        method = request.method.decode("ascii", "replace")
        top = path[0] if path else ""
        if top == "whoami" and len(path) == 1:
            self._allow(method, ("GET",))
            return self._whoami(identity)
        if top in ("overview", "nodes", "connections", "history", "vhosts"):
            need = ADMIN if method == "DELETE" else READ
            one_connection = top == "connections" and len(path) == 2
            self._allow(method, ("DELETE", "GET") if one_connection else ("GET",))
            self.guard.require(identity, need)
            if top == "overview":
                return self._overview(query(request, "brief") == "true")
            if top == "history":
                return self._history(query(request, "since"))
            if top == "vhosts":
                return self._vhosts()
            if top == "nodes":
                return maybeDeferred(self.management.nodes).addCallback(record_documents)
            if len(path) == 1:
                wanted = self._list_query(request)
                vhost = self._vhost_filter(request)
                infos = [
                    info
                    for info in self.management.connections()
                    if vhost is None or info.vhost == vhost
                ]
                return list_answer(
                    infos,
                    wanted,
                    "id",
                    _CONNECTION_FIELDS,
                    _record_value,
                    record_document,
                )
            if len(path) == 2:
                if method == "DELETE":
                    reason = query(request, "reason") or ""
                    return record_document(
                        self.management.close_connection(
                            path[1], reason, operator=_operator(identity, request)
                        )
                    )
                return record_document(self.management.connection(path[1]))
        if top == "detached-sessions" and len(path) in (1, 2):
            self._allow(method, ("DELETE", "GET") if len(path) == 2 else ("GET",))
            self.guard.require(identity, ADMIN if method == "DELETE" else READ)
            detached = self.management.detached
            if len(path) == 1:
                wanted = self._list_query(request)
                return list_answer(record_documents(detached.list()), wanted, "id")
            if method == "DELETE":
                return record_document(detached.end(path[1], operator=_operator(identity, request)))
            return record_document(detached.get(path[1]))
        if top == "policies" and len(path) in (1, 2):
            self._allow(method, ("GET", "PUT", "DELETE") if len(path) == 2 else ("GET",))
            self.guard.require(identity, READ if method == "GET" else ADMIN)
            return self._policy_call(identity, request, method, path[1:])
        if top == "publish" and len(path) == 1:
            self._allow(method, ("POST",))
            return self.backend.publish_batch(identity, request, _operator(identity, request))
        if top == "users" and len(path) == 3:
            operator = _operator(identity, request)
            return self.backend.user(identity, request, method, path[1], path[2], operator)
        if top == "destinations":
            if len(path) == 1:
                self._allow(method, ("GET",))
                return self._destinations(
                    identity, self._vhost_filter(request), self._list_query(request)
                )
            if len(path) in (2, 3):
                return self._destination(identity, request, method, path[1], path[2:])
        raise ApiError(404, "no such call", f"the management API has no /api/{'/'.join(path)}")

    @staticmethod
    def _allow(method: str, allowed: tuple[str, ...]) -> None:
        if method not in allowed:
            raise ApiError(405, "method not allowed", f"this path takes {', '.join(allowed)}")

    def _whoami(self, identity: Any) -> dict[str, Any]:
        """
        Who the credentials sign in as, and their broker-wide rights: what the
        pages' sign-in checks, needing no right at all.
        """
        return {
            "user": identity.name,
            "auth": self.guard.portal is not None,
            "rights": {
                right: self.guard.allows(identity, right, EVERYTHING)
                for right in (READ, WRITE, ADMIN)
            },
        }

    @staticmethod
    def _list_query(request: Request) -> ListQuery:
        return ListQuery.parse(lambda name: query(request, name))

    def _overview(self, brief: bool = False) -> dict[str, Any]:
        """
        ``/stats`` with the memory and disk alarms and the setup; ``brief`` leaves
        out the lists of destinations and connections (counted in ``object_totals``),
        which a broker of 10 000 of each would make megabytes long.
        """
        server = f"stompbroker/{__version__}"
        document: dict[str, Any]
        if self.live is None:
            document = {"server": server, "connections": len(self.management.connections())}
        else:
            document = stats_document(self.live.model, self.live.latest, server, lists=not brief)
        document["memory"] = memory_document(self.management.memory_alarm())
        document["disk"] = disk_document(self.management.disk_alarm())
        if self.setup is not None:
            document.update(self.setup.to_dict())
        return document

    def _history(self, since: str | None) -> dict[str, Any]:
        """The last hour's figures (:mod:`stompbroker.stats.history`), after ``since`` if given."""
        if self.live is None:
            raise ApiError(404, "no history", "this broker keeps no statistics")
        try:
            after = None if since is None else float(since)
        except ValueError:
            raise ApiError(
                400, "bad request", f"since must be epoch seconds, not {since!r}"
            ) from None
        return self.live.history.to_dict(after)

    def _vhosts(self) -> list[dict[str, Any]]:
        """
        Every virtual host, the default one (``/``) first, with its connections,
        destinations and messages waiting, as RabbitMQ's ``/api/vhosts`` counts them.
        """
        aliases: dict[str, list[str]] = {DEFAULT_HOST: []}
        if self.hosts.hosts is not None:
            for host in self.hosts.hosts.hosts.values():
                aliases[host.name] = list(host.aliases)
        rows: dict[str, dict[str, Any]] = {
            name: {
                "name": name,
                "aliases": names,
                "connections": 0,
                "destinations": 0,
                "messages": 0,
            }
            for name, names in aliases.items()
        }
        broker = self.management.broker
        for connection in broker.connections:
            row = rows.get(broker.host_name(connection) or DEFAULT_HOST)
            if row is not None:
                row["connections"] += 1
        for info in self.management.destinations():
            row = rows.get(self.hosts.outward(info.destination)[0])
            if row is not None:
                row["destinations"] += 1
                row["messages"] += info.depth or 0
        return list(rows.values())

    def _vhost_filter(self, request: Request) -> str | None:
        """:returns: the virtual host ``?vhost=`` names (``/``: the default), ``None`` for all."""
        name = query(request, "vhost")
        if name is None:
            return None
        host = self.hosts.named(name)
        return host.name if host is not None else DEFAULT_HOST

    def _destinations(self, identity: Any, vhost: str | None, wanted: ListQuery) -> Any:
        """
        The destinations ``identity`` may read, filtered, sorted and paged on light
        rows (the record, its virtual host and name): only the rows answered become
        JSON, so a page of 10 000 destinations costs a page.
        """
        rates = self._rates()
        hosts = self.hosts
        rows = []
        for info in self.management.destinations():
            host, name = hosts.outward(info.destination)
            if vhost is not None and host != vhost:
                continue
            pattern = hosts.outward(info.pattern)[1] if info.pattern is not None else None
            if not self.guard.allows(identity, READ, pattern or name, hosts.access(host)):
                continue
            rows.append((info, host, name))

        def value(row: tuple[Any, str, str], field: str) -> Any:
            info, host, name = row
            if field == "destination":
                return name
            if field == "vhost":
                return host
            if field == "policy":
                return self._policy_name(info.destination)
            if field in _NO_RATES:
                return rates.get(info.destination, _NO_RATES)[field]
            return getattr(info, field, None)

        def document(row: tuple[Any, str, str]) -> dict[str, Any]:
            info = row[0]
            answered = self._outward(info)
            del answered["subscribers"]
            answered["policy"] = self._policy_name(info.destination)
            answered.update(rates.get(info.destination, _NO_RATES))
            return answered

        return list_answer(rows, wanted, "destination", _DESTINATION_FIELDS, value, document)

    def _outward(self, info: Any) -> dict[str, Any]:
        """:returns: a destination record as JSON, named as its virtual host's clients name it."""
        row: dict[str, Any] = record_document(info)
        row["vhost"], row["destination"] = self.hosts.outward(info.destination)
        if info.pattern is not None:
            row["pattern"] = self.hosts.outward(info.pattern)[1]
        return row

    def _rates(self) -> dict[str, dict[str, float]]:
        latest = self.live.latest if self.live is not None else None
        if latest is None:
            return {}
        seconds = latest.broker.interval_s or 1.0
        return {
            name: {
                "producers": record.producers,
                "messages_in_per_second": record.messages_in / seconds,
                "messages_delivered_per_second": record.messages_delivered / seconds,
            }
            for name, record in latest.by_destination().items()
        }

    def _destination(
        self, identity: Any, request: Request, method: str, name: str, rest: list[str]
    ) -> Any:
        action = rest[0] if rest else ""
        allowed = {
            "": ("GET", "DELETE"),
            "messages": ("GET", "DELETE"),
            "subscribers": ("GET",),
            "members": ("GET",),
            "move": ("POST",),
            "retry": ("POST",),
            "publish": ("POST",),
        }.get(action)
        if allowed is None:
            raise ApiError(404, "no such call", f"destinations have no /{action}")
        self._allow(method, allowed)
        host = self.hosts.named(query(request, "vhost"))
        vhost = host.name if host is not None else DEFAULT_HOST
        access, named = self.hosts.access(vhost), self.hosts.refused_in(vhost)
        management = self.management
        queues = management.queues
        if action == "publish":
            return self._publish(identity, request, name, host)
        internal = self.hosts.inward(host, name)
        # The rights of a durable subscription are those of its topic pattern.
        pattern = name
        if name.startswith("durable:"):
            pattern = self._outward(management.destination(internal))["pattern"] or name
        need = READ if method == "GET" else ADMIN
        self.guard.require(identity, need, pattern, access, named)
        operator = _operator(identity, request)
        if action == "":
            if method == "GET":
                document = self._outward(management.destination(internal))
                document["policy"] = self._policy_name(internal)
                document.update(self._rates().get(internal, _NO_RATES))
                return document
            deleted: Deferred[Any] = maybeDeferred(queues.delete, internal, operator=operator)
            return deleted.addCallback(delete_answer, {"destination": name, "vhost": vhost})
        if action == "subscribers":
            return [record_document(entry) for entry in management.subscribers(internal)]
        if action == "members":
            return [record_document(member) for member in management.members(internal)]
        if action == "messages":
            if method == "GET":
                count = count_of(query(request, "count"), DEFAULT_BROWSE)
                browsed: Deferred[Any] = maybeDeferred(queues.browse, internal, count)
                return browsed.addCallback(browse_answer, request)
            purged: Deferred[Any] = maybeDeferred(queues.purge, internal, operator=operator)
            return purged.addCallback(
                action_answer, {"destination": name, "vhost": vhost}, "purged"
            )
        body = json_body(request, {"to", "count", "copy"} if action == "move" else {"count"})
        # Without a count, all that waits.
        count = count_of(body.get("count"), MAX_MOVE, MAX_MOVE)
        if action == "move":
            to = body.get("to")
            if not isinstance(to, str):
                raise ApiError(400, "bad request", 'move needs "to": a destination')
            copy = body.get("copy", False)
            if not isinstance(copy, bool):
                raise ApiError(400, "bad request", '"copy" must be true or false')
            check_target(to)
            self.guard.require(identity, WRITE, to, access, named)
            moved: Deferred[Any] = maybeDeferred(
                queues.move, internal, self.hosts.inward(host, to), count, copy, operator=operator
            )
            shown = {"destination": name, "vhost": vhost, "to": to, "copy": copy}
            return moved.addCallback(action_answer, shown, "moved")

        def retry(targets: set[str]) -> Any:
            # A dead letter goes back to where it was sent, in its own virtual host.
            for target in sorted(targets):
                target_host, target_name = self.hosts.outward(target)
                self.guard.require(
                    identity,
                    WRITE,
                    target_name,
                    self.hosts.access(target_host),
                    self.hosts.refused_in(target_host),
                )
            return queues.retry(internal, count, operator=operator, targets=targets)

        targets: Deferred[Any] = maybeDeferred(queues.retry_targets, internal, count)
        retried = targets.addCallback(retry)
        return retried.addCallback(action_answer, {"destination": name, "vhost": vhost}, "retried")

    def _policy_name(self, destination: str) -> str | None:
        """:returns: the name of the policy in force on ``destination``, or ``None``."""
        policy = self.management.broker.policies.policy_for(destination)
        return None if policy is None else policy.name

    def _policy_call(self, identity: Any, request: Request, method: str, rest: list[str]) -> Any:
        """``GET /api/policies``, ``GET|PUT|DELETE /api/policies/{name}`` (docs/policies.md)."""
        policies = self.management.broker.policies
        # ?vhost= filters the list, and names the virtual host of one policy.
        vhost = self._vhost_filter(request)
        if not rest:
            rows = [
                policy.as_dict()
                for policy in policies.listed()
                if vhost is None or policy.vhost == vhost
            ]
            return list_answer(rows, self._list_query(request), "name")
        name = rest[0]
        operator = _operator(identity, request)
        if method == "PUT":
            body = json_body(request, {"pattern", "priority", "apply-to", "vhost", "definition"})
            definition = body.pop("definition", {})
            if not isinstance(definition, dict):
                raise ApiError(400, "bad request", '"definition" must be an object')
            body["vhost"] = self.hosts.policy_host(body.get("vhost"), vhost)
            try:
                policy = parse_policy(name, {**body, **definition})
            except BadPolicy as error:
                raise ApiError(400, "bad request", str(error)) from None
            policies.set(policy)
            log.info(
                "{operator} set policy {name}: {policy}",
                operator=operator,
                name=name,
                policy=json.dumps(policy.as_dict(), sort_keys=True),
            )
            return policy.as_dict()
        found = policies.get(name)
        if found is None or (vhost is not None and found.vhost != vhost):
            where = "" if vhost is None else f" in virtual host {vhost!r}"
            raise ApiError(404, "unknown policy", f"no policy is named {name!r}{where}")
        if method == "DELETE":
            policies.remove(name)
            log.info("{operator} cleared policy {name}", operator=operator, name=name)
            return {"name": name, "cleared": True}
        return found.as_dict()

    def _publish(self, identity: Any, request: Request, name: str, host: Any) -> Deferred[Any]:
        body = json_body(request, {"body", "body_encoding", "headers"})
        check_publish_target(name)
        vhost = host.name if host is not None else DEFAULT_HOST
        internal = self.hosts.inward(host, name)
        payload, headers = publish_fields(body)
        # The application behind --auth http may have to be asked first, as for a SEND.
        allowed = self.guard.ask(
            identity, WRITE, name, self.hosts.access(vhost), self.hosts.refused_in(vhost)
        )
        return allowed.addCallback(self._published, internal, payload, headers, name, vhost)

    def _published(
        self, _: None, internal: str, payload: bytes, headers: Any, name: str, vhost: str
    ) -> dict[str, Any]:
        message = self.management.publish(internal, payload, headers)
        return {"destination": name, "vhost": vhost, "message_id": message.message_id}


_NO_RATES = {"producers": 0, "messages_in_per_second": 0.0, "messages_delivered_per_second": 0.0}
#: The fields a list of connections or destinations sorts on.
_CONNECTION_FIELDS = frozenset(attrs.fields_dict(ConnectionInfo))
_DESTINATION_FIELDS = frozenset(
    {*attrs.fields_dict(DestinationInfo), "vhost", "policy", *_NO_RATES} - {"subscribers"}
)


def _record_value(record: Any, field: str) -> Any:
    return getattr(record, field, None)
